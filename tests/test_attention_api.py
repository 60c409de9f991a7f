"""ptxgen.attention's argument checks (CPU tensors: every check before the device one), the torch operator's fake
implementation, and ``ptxgen build --kind attention``'s exit statuses. No GPU needed."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError  # noqa: E402


def t(*shape, dtype=torch.bfloat16):
    return torch.zeros(*shape, dtype=dtype)


@pytest.mark.parametrize("args,err,words", [
    ((t(1, 2, 8, 64, dtype=torch.float32), t(1, 2, 8, 64), t(1, 2, 8, 64)), DTypeError, "bfloat16 or float16"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64, dtype=torch.float16), t(1, 2, 8, 64)), DTypeError, "share one dtype"),
    ((t(2, 8, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "4 dimensions"),
    ((t(1, 2, 8, 96), t(1, 2, 8, 96), t(1, 2, 8, 96)), ArgumentError, "head_dim 96"),
    ((t(1, 6, 8, 64), t(1, 4, 8, 64), t(1, 4, 8, 64)), ArgumentError, "must divide"),
    ((t(1, 2, 8, 64), t(2, 2, 8, 64), t(2, 2, 8, 64)), ArgumentError, "batch"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64), t(1, 2, 9, 64)), ArgumentError, "same shape"),
    ((t(1, 2, 0, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "at least 1"),
    ((t(1, 2, 8, 128)[..., ::2], t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "contiguous"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "CUDA device"),
])
def test_argument_errors_name_the_rule(args, err, words):
    with pytest.raises(err) as e:
        ptxgen.attention(*args)
    assert words in str(e.value)


def test_out_and_scale_checks():
    q = t(1, 2, 8, 64)
    with pytest.raises(ArgumentError, match="shape"):
        ptxgen.attention(q, q, q, out=t(1, 2, 8, 32))
    with pytest.raises(DTypeError):
        ptxgen.attention(q, q, q, out=t(1, 2, 8, 64, dtype=torch.float16))
    with pytest.raises(ArgumentError, match="finite"):
        ptxgen.attention(q, q, q, scale=float("nan"))


def test_gqa_and_bshd_views_pass_the_checks_until_the_device():
    """GQA (8 q heads over 2 kv heads) and (B, S, H, D) storage seen as (B, H, S, D) are legal: only the device check
    stops them on a CPU tensor."""
    base = t(3, 2, 100, 8, 64)
    q = base[0].transpose(1, 2)
    kv = t(2, 100, 2, 64).transpose(1, 2)
    with pytest.raises(ArgumentError, match="CUDA device"):
        ptxgen.attention(q, kv, kv, causal=True)


def test_head_dim_256_reaches_the_device_check():
    """D 256 passes every argument check (GQA 4 here); on CPU tensors only the device check stops it. 96 and 512
    are refused naming the head dims the kernel is built for."""
    q, kv = t(1, 8, 7, 256), t(1, 2, 7, 256)
    with pytest.raises(ArgumentError, match="CUDA device"):
        ptxgen.attention(q, kv, kv, causal=True)
    for d in (96, 512):
        with pytest.raises(ArgumentError, match=f"head_dim {d}: the kernel is built for 64, 128, 256"):
            ptxgen.attention(t(1, 2, 8, d), t(1, 2, 8, d), t(1, 2, 8, d))


def test_head_dim_256_call_plan_on_meta_tensors():
    """ptxgen.plan's attention door (meta tensors stand for CUDA ones) takes D 256 to the default tile's kernel."""
    from ptxgen.api.callplan import Path

    meta = dict(device="meta", dtype=torch.bfloat16)
    q, kv = torch.empty(2, 8, 1000, 256, **meta), torch.empty(2, 2, 1000, 256, **meta)
    p = ptxgen.api.plan("attention", q, kv, kv, causal=True, device="h100")
    assert p.path is Path.HOT and p.kernel == "ptxgen_attn_sm90a_bf16_d256_128x64_s2_causal_overlap", p
    assert "64 keys a block" in p.why


def test_torch_op_fake_for_compile():
    ptxgen.register_torch_ops()
    q = torch.empty(2, 4, 100, 64, dtype=torch.bfloat16, device="meta")
    k = torch.empty(2, 1, 300, 64, dtype=torch.bfloat16, device="meta")
    o = torch.ops.ptxgen.attention(q, k, k, True, 0.2)
    assert o.shape == q.shape and o.dtype == q.dtype


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", "build", *args], capture_output=True, text=True)


def test_cli_builds_attention(tmp_path):
    r = _cli("--kind", "attention", "--head-dim", "64", "--bm", "128", "--bn", "128", "--causal", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "SASS:" in r.stdout and "local 0 B" in r.stdout
    (d,) = tmp_path.iterdir()
    assert {p.name for p in d.iterdir()} == {"kernel.cu", "kernel.ptx", "plan.json"}


def test_cli_builds_head_dim_256(tmp_path):
    """The issue's command: D 256, BM 128, BN 64 builds and passes the gate (four 64-column TMA boxes a row of Q, K
    and V: 12 UTMALDG); without --bn the CLI takes 64 at D 256."""
    r = _cli("--kind", "attention", "--head-dim", "256", "--bm", "128", "--bn", "64", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    import json

    rep = json.loads(r.stdout)
    assert rep["problems"] == [] and "local 0 B" in rep["sass"] and "12 TMA loads" in rep["sass"]
    assert rep["plan"]["pv"].startswith("wgmma.mma_async.sync.aligned.m64n256k16")
    assert [c[1] for c in rep["plan"]["v"]["copies"]] == [0, 64, 128, 192]
    r = _cli("--kind", "attention", "--head-dim", "256", "--schedule", "overlap", "--out", str(tmp_path))
    assert r.returncode == 0 and "_d256_128x64_s2_" in r.stdout, r.stderr


@pytest.mark.parametrize("args,words", [
    (("--bn", "128"), "--bn=128 is illegal: a consumer thread needs about 256 registers"),
    (("--bm", "192", "--bn", "64"), "--bm=192 is illegal"),
    (("--bn", "64", "--stages", "3"), "--stages=3 is illegal"),
    (("--bn", "192", "--arch", "sm_100a"), "tensor-memory columns"),
])
def test_cli_illegal_head_dim_256_tiles_exit_2_with_the_rule(args, words, tmp_path):
    r = _cli("--kind", "attention", "--head-dim", "256", *args, "--out", str(tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert words in r.stderr and "Traceback" not in r.stderr
    assert not any(tmp_path.iterdir())  # refused before any compile or file


@pytest.mark.parametrize("args", [
    ("--head-dim", "80"), ("--head-dim", "64", "--bm", "256"), ("--head-dim", "128", "--bm", "192"),
    ("--head-dim", "64", "--arch", "sm_100a", "--bm", "64"), ("--head-dim", "64", "--dtype", "e4m3"), ("--bm", "128"),
    ("--head-dim", "64", "--bm", "64", "--schedule", "pingpong"),
])
def test_cli_illegal_combinations_exit_2(args, tmp_path):
    r = _cli("--kind", "attention", *args, "--out", str(tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "error" in r.stderr


def test_cli_builds_the_tcgen05_form(tmp_path):
    r = _cli("--kind", "attention", "--head-dim", "128", "--bn", "128", "--arch", "sm_100a", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "UTCHMMA" in r.stdout and "local 0 B" in r.stdout


def test_cli_kind_gemm_keeps_the_gemm_flags():
    r = _cli("--kind", "gemm", "--bm", "128")  # gemm's required flags still required
    assert r.returncode == 2 and "--bn" in r.stderr


class _FakeDriver:
    def __init__(self):
        self.encoded, self.launches = [], []

    def encode(self, args):
        self.encoded.append(args)
        return bytes([len(self.encoded)]) * 128

    def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.launches.append((func, (gx, gy, gz), (bx, by, bz), smem, stream))
        return 0


def test_prepared_launch_reencodes_only_changed_pointers():
    """The hot path: the first call encodes three maps; the same pointers again encode none; a new q pointer
    encodes one; O and LSE pointers and the integers land in the parameter block."""
    from ptxgen.attention.args import AttentionProblem
    from ptxgen.attention.launch import PreparedAttention
    from ptxgen.attention.plan import plan_attention
    from ptxgen.attention.spec import AttentionSpec
    from ptxgen.isa.types import DType

    b, s, h, hk, d = 2, 300, 8, 2, 64
    base = t(b, s, h, d)
    q = base.transpose(1, 2)  # (B, S, H, D) storage
    k, v = t(b, hk, s, d), t(b, hk, s, d)
    out, lse = torch.empty_like(q), torch.zeros(b, h, s, dtype=torch.float32)
    spec = AttentionSpec(d, 128, 128, True)
    drv = _FakeDriver()
    prep = PreparedAttention(spec, plan_attention(spec), 7, AttentionProblem(b, h, hk, s, s, d, DType.BF16), q, k, v, out,
                             0.125, drv)
    assert prep.run(q, k, v, out, lse, 0) == 0 and len(drv.encoded) == 3
    qa = drv.encoded[0]
    assert qa.rank == 4 and qa.global_dims == (d, s, h, b) and qa.global_address == q.data_ptr()
    assert qa.global_strides == (h * d * 2, d * 2, s * h * d * 2) and qa.box == (64, 128, 1, 1)
    assert drv.encoded[1].global_dims == (d, s, hk, b)
    prep.run(q, k, v, out, lse, 0)
    assert len(drv.encoded) == 3
    q2 = q.clone()
    prep.run(q2, k, v, out, None, 5)
    assert len(drv.encoded) == 4 and drv.encoded[3].global_address == q2.data_ptr()
    vals = prep.block.read_back()
    assert vals[3] == out.data_ptr() and vals[4] == 0 and vals[5:10] == [s, s, h, h // hk, b]
    assert vals[10:13] == [out.stride(0), out.stride(1), out.stride(2)]
    assert abs(vals[13] - 0.125 * 1.4426950408889634) < 1e-6
    assert drv.launches[-1] == (7, (3, h, b), (384, 1, 1), prep.smem, 5)


def test_short_causal_calls_walk_the_tiles_in_ping_pong():
    """Causal calls of at most CAUSAL_WALK_KEYS keys at D 64 and 128 take ping-pong 128 x 128 with the persistent walk
    (runs/2026-12-06-h100-few-wave-d256 run 5: 1.08-1.41x the one-CTA-per-tile default at 512-4096 keys); longer ones,
    non-causal ones and D 256 keep their defaults; a schedule asked for is kept (control)."""
    from ptxgen.attention.args import AttentionProblem
    from ptxgen.attention.launch import CAUSAL_WALK_KEYS, choose_spec
    from ptxgen.author import DType

    def spec(d, sk, causal, sched=None):
        return choose_spec(AttentionProblem(2, 8, 8, sk, sk, d, DType.BF16), causal, sched)

    for d in (64, 128):
        for sk in (1, 512, 2048, CAUSAL_WALK_KEYS):
            s = spec(d, sk, True)
            tile = (128, 128, 2) if d == 128 else ((128, 128, 3) if sk <= 1024 else (128, 192, 2))  # CAUSAL_D64_TILES
            assert (s.bm, s.bn, s.stages, s.schedule, s.persistent) == (*tile, "pingpong", True)
        assert not spec(d, CAUSAL_WALK_KEYS + 1, True).persistent
        assert (spec(d, 2048, False).bm, spec(d, 2048, False).persistent) == ((192 if d == 64 else 128), True)
        assert spec(d, 512, True, "overlap").schedule == "overlap" and not spec(d, 512, True, "overlap").persistent
    assert not spec(256, 512, True).persistent


def test_short_d64_non_causal_calls_take_the_carried_ping_pong_walk():
    """D 64 non-causal calls of at most D64_PINGPONG_KEYS keys take ping-pong 128 x 128, two stages, with the walk, O
    staged and the next tile's first S carried (runs/2026-12-06-h100-pairs-sanitizer-training run 3: 0.99 of cuDNN at
    512 and 1024 keys against 0.91 / 0.95 for the overlap 192 x 128 walk, whose BM pads 512 rows to 576); longer calls,
    causal ones and an overlap schedule asked for keep theirs (controls)."""
    from ptxgen.attention.args import AttentionProblem
    from ptxgen.attention.launch import D64_PINGPONG_KEYS, choose_spec
    from ptxgen.author import DType

    def spec(sk, causal=False, sched=None):
        return choose_spec(AttentionProblem(2, 8, 8, sk, sk, 64, DType.BF16), causal, sched)

    for sk in (1, 300, 512, D64_PINGPONG_KEYS):
        s = spec(sk)
        assert (s.bm, s.bn, s.stages, s.schedule, s.persistent, s.q_buffers, s.o_staging, s.carry) == \
            (128, 128, 2, "pingpong", True, 2, True, True), sk
    longer = spec(D64_PINGPONG_KEYS + 1)
    assert (longer.bm, longer.schedule, longer.carry) == (192, "overlap", False)
    assert (spec(512, True).stages, spec(512, True).carry) == (3, False)  # causal: CAUSAL_D64_TILES, nothing carried
    asked = spec(512, sched="overlap")
    assert (asked.bm, asked.schedule, asked.o_staging, asked.carry) == (192, "overlap", False, False)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_default_choice_is_a_legal_spec_for_every_length(head_dim, dtype):
    """The chooser's tile and schedule build a legal spec at every sequence length and both masks; an explicit tile
    or schedule replaces the default; an illegal one is refused naming its flag."""
    from ptxgen.attention.args import AttentionProblem
    from ptxgen.attention.launch import choose_spec
    from ptxgen.author import DType, SpecError

    for sk in (1, 7, 1000, 4095, 4096, 16384):
        p = AttentionProblem(2, 8, 8, 1000, sk, head_dim, DType(dtype))
        for causal in (False, True):
            s = choose_spec(p, causal)
            assert (s.head_dim, s.causal) == (head_dim, causal)
    p = AttentionProblem(1, 4, 4, 100, 100, head_dim, DType(dtype))
    for sched in ("serial", "overlap", "pingpong"):  # a schedule alone takes a default tile it allows
        assert choose_spec(p, True, sched).schedule == sched
    s = choose_spec(p, False, "serial", (64, 64, 3))
    assert (s.bm, s.bn, s.stages, s.schedule) == (64, 64, 3, "serial")
    with pytest.raises(SpecError, match="^--schedule="):
        choose_spec(p, False, "pingpong", (192, 64, 2))  # ping-pong alternates exactly two warpgroups
