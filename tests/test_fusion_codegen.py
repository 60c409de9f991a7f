"""The fused epilogue chain in the spec, the ABI, the launcher and the kernels (codegen tier: NVRTC, no GPU)."""

import re
import subprocess
import sys

import pytest

from ptxgen.derive.store.chainspec import parse_chain
from ptxgen.derive.store.fusion import plan_chain
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.emit.views.chain import chain_view
from ptxgen.emit.cexpr import wgmma_fragment_col
from ptxgen.emit.render import kernel_view, render_kernel
from ptxgen.isa.types import Arch, DType, Epilogue, SpecError
from ptxgen.runtime.launch.launch import Problem, ProblemError, gemm_args

BASE = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent")


def spec(**kw) -> TileSpec:
    return make_spec(**{**BASE, **kw})


def test_plain_specs_are_unchanged():
    s = spec()
    assert s.fuse is None and "fuse" not in s.to_json() and "--fuse" not in s.cli_args() and "_f" not in s.kernel_name[-8:]
    assert kernel_view(plan_kernel(s)).chain is None and "ChainArgs" not in render_kernel(plan_kernel(s))


def test_fuse_field_round_trips_and_names_the_kernel():
    s = spec(fuse="residual,gelu,bias=col:f32")
    assert s.fuse.token == "bias=col:f32,act=gelu_tanh,residual"
    assert make_spec(**s.to_json()) == s and s.kernel_name.endswith("_fbcf32gelutr")
    assert TileSpec.from_json(s.to_json()).fuse == s.fuse
    assert spec(fuse="bias=col").kernel_name != spec(fuse="bias=row").kernel_name


@pytest.mark.parametrize("kw, field", [
    (dict(fuse="scale=row"), "--fuse"),  # FP8 scaling with a bf16 output
    (dict(out_dtype="e4m3"), "--out-dtype"),  # FP8 output without a chain
    (dict(out_dtype="e4m3", fuse="bias=col"), "--out-dtype"),  # ... or without its scale
    (dict(out_dtype="e4m3", fuse="scale=row", epilogue="tma", bn=64), "--bn"),  # FP8 TMA store: 128-column chunks
    (dict(out_dtype="e4m3", fuse="scale=row", epilogue="tma", arch="sm_100a"), "--fuse"),
    (dict(dtype="s8", acc="s32", out_dtype="s32", fuse="bias=col"), "--fuse"),
])
def test_illegal_chains_are_refused_naming_the_flag(kw, field):
    with pytest.raises(SpecError) as e:
        spec(**kw)
    assert e.value.field == field


def test_cli_refuses_a_bad_chain_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "ptxgen", "explain", "--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128",
                        "--arch", "sm_90a", "--fuse", "bias=col,act=tanh"], capture_output=True, text=True)
    assert r.returncode == 2 and "--fuse" in r.stderr and "Traceback" not in r.stderr


def test_abi_params_follow_the_chain_and_the_launcher_needs_them():
    s = spec(fuse="c,bias=row,scale=tensor", out_dtype="e4m3")
    plan = plan_kernel(s)
    names = [p.name for p in plan.abi.params]
    assert names[-8:] == ["ldd", "alpha", "beta", "C", "ldc", "BIAS", "SCALE", "AMAX"]
    p = Problem(100, 96, 64, 64, 64, 96)
    with pytest.raises(ProblemError, match="alpha"):
        gemm_args(plan, 0, 0, 0, p, encode=lambda a: bytes(128))
    extra = dict(alpha=0.5, beta=2.0, C=0x1000, ldc=96, BIAS=0x2000, SCALE=0x3000, AMAX=0x4000)
    args = gemm_args(plan, 0, 0, 0, p, encode=lambda a: bytes(128), extra=extra).read_back()
    assert args[-8:] == [96, 0.5, 2.0, 0x1000, 96, 0x2000, 0x3000, 0x4000]


def _c_eval(expr: str, **env) -> int:
    """Evaluate a rendered C integer expression over non-negative ints (C / and % agree with Python's // and %)."""
    py = expr.replace("/", "//").replace("!=", "!=").replace("&&", " and ")
    return int(eval(py, {}, env))  # noqa: S307 - our own rendered expressions


def _rendered_rows_cols_problems(plan, v) -> list:
    col_expr = wgmma_fragment_col("i", "lane")
    op = plan.chain.operands()[0]
    bad = []
    for warp in range(4):
        for lane in range(32):
            row0 = _c_eval(v.frag.row_expr, wg_tid=32 * warp + lane, lane=lane)
            by_reg = {}
            for ld in plan.loads(op, warp, lane):
                for k, regs in enumerate(ld.targets):
                    for r in regs:
                        by_reg[r] = (ld.row, None if ld.col is None else ld.col + k)
            for i in range(0, plan.bn // 2, v.frag.group_regs):
                col = _c_eval(col_expr, i=i, lane=lane)
                for first, row in ((i, row0), (i + v.frag.hi_pair, row0 + v.frag.row_half)):
                    for j in (first, first + 1):  # chain_pair gets registers first, first + 1: columns col, col + 1 of row
                        want_row, want_col = by_reg.get(j, (-1, -1))
                        if want_row not in (None, row) or want_col not in (None, col + j - first):
                            bad.append((warp, lane, j))
    return bad


@pytest.mark.parametrize("tok", ["c", "bias=col", "bias=row,scale=row"])
def test_rendered_wgmma_rows_and_columns_are_the_plans(tok):
    """The C the chain pass uses for a thread's rows and columns gives, for every (warp, lane, register), the
    coordinates of the plan's loads (which the L1 model checks against the wgmma fragment); controls must fail."""
    from dataclasses import replace

    plan = plan_chain(parse_chain(tok), Arch.SM90A, 128, 64, DType.E4M3 if "scale" in tok else DType.BF16, Epilogue.DIRECT)
    v = chain_view(plan)
    assert _rendered_rows_cols_problems(plan, v) == []
    assert _rendered_rows_cols_problems(plan, replace(v, frag=replace(v.frag, hi_pair=1)))  # the second row's pair starting one register early
    if tok != "bias=col":  # a column bias does not depend on the row
        assert _rendered_rows_cols_problems(plan, replace(v, frag=replace(v.frag, row_expr="(wg_tid / 32) * 16 + lane % 8")))


def _compile(s: TileSpec):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, s.arch.value)
    return c, check_sass(s, c.cubin)


@pytest.mark.parametrize("kw", [
    dict(fuse="c,bias=col:bf16,gelu_erf,residual"),
    dict(fuse="bias=col,relu,scale=row", out_dtype="e4m3"),
], ids=["wgmma-all", "wgmma-fp8-row"])
def test_wgmma_chain_compiles_without_local_memory(kw):
    s = spec(**kw)
    c, rep = _compile(s)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    if s.out_dtype is DType.E4M3:
        assert "cvt.rn.satfinite.e4m3x2.f32" in c.ptx and re.search(r"(atom|red)\.global\.max\.u32", c.ptx)
        assert "shfl.sync.bfly.b32" in c.ptx


@pytest.mark.slow
@pytest.mark.parametrize("kw", [
    dict(fuse="bias=row:f32,silu", epilogue="tma"),
    dict(fuse="c,scale=tensor", out_dtype="e4m3", consumers="pingpong", stages=5),
    dict(arch="sm_100a", fuse="c,bias=col:f32,gelu,residual", bn=256),
    dict(arch="sm_100a", fuse="bias=row,scale=row", out_dtype="e4m3"),
    dict(arch="sm_100a", fuse="bias=col,gelu", epilogue="tma"),
    dict(arch="sm_100a", bm=64, bn=48, fuse="c,residual,scale=tensor", out_dtype="e4m3"),
], ids=["wgmma-tma-silu", "wgmma-pingpong-fp8", "tcgen05-all", "tcgen05-fp8-row", "tcgen05-tma", "tcgen05-m64-fp8"])
def test_more_chains_compile_without_local_memory(kw):
    """tcgen05: L2 only (no Blackwell GPU has run these)."""
    s = spec(**kw)
    c, rep = _compile(s)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "ChainArgs" in render_kernel(plan_kernel(s))


# ---- ptxgen.api.fused.gemm up to the launch, on a simulated 9.0 device ----------------------------------
class _Arr:
    """A device array as the API sees it: __cuda_array_interface__ v3 and a DLPack device (CUDA 0)."""

    _next = [0x7F0000000000]

    def __init__(self, shape, dtype="bfloat16", strides=None):
        size = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1}[dtype]
        self._next[0] += 1 << 24
        self.ptr = self._next[0]
        self.dtype = dtype
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": {"bfloat16": "<f2", "float16": "<f2", "float32": "<f4", "float8_e4m3fn": "|u1"}[dtype],
            "data": (self.ptr, False), "version": 3, "stream": None,
            "strides": None if strides is None else tuple(x * size for x in strides)}

    def __dlpack_device__(self):
        return (2, 0)


@pytest.fixture
def simulated(monkeypatch):
    from ptxgen.api.launch import streams
    from ptxgen.runtime.launch.gpu import Device

    launches = []

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            self.name = name

        def max_active_clusters(self, size, block):
            return 132 // size

        def launch(self, grid, block, args, stream=0):
            launches.append((self.name, grid, block, args.read_back(), stream))

    dev = Device(0, "simulated H200", (9, 0), None, None, 132)
    monkeypatch.setattr(streams, "require_gpu", lambda index=None: dev)
    monkeypatch.setattr(streams, "ensure_current", lambda d: None)
    monkeypatch.setattr("ptxgen.runtime.launch.gpu.Kernel", FakeKernel)
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", lambda args: bytes(128))
    return launches


def test_fused_gemm_marshals_the_chain_arguments(simulated):
    import ptxgen.api.fused

    m, n, k = 100, 72, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    out, c, res = _Arr((m, n), strides=(n, 1)), _Arr((m, n), strides=(80, 1)), _Arr((m, n), strides=(n, 1))
    bias = _Arr((n,), "float32")
    plain = spec(bn=64, stages=3, schedule="tile")
    got = ptxgen.api.fused.gemm(a, b, out, bias=bias, activation="gelu_erf", c=c, alpha=0.5, beta=2.0, residual=res, spec=plain,
                            stream=7)
    assert got is out
    ((name, grid, block, args, stream),) = simulated
    assert name.endswith("_fcbcf32geluer") and stream == 7 and grid == (1 * 2, 1, 1)
    assert args[2:] == [out.ptr, m, n, k, n, 0.5, 2.0, c.ptr, 80, bias.ptr, res.ptr, n]
    with pytest.raises(ptxgen.api.fused.ArgumentError, match="bias"):
        ptxgen.api.fused.gemm(a, b, out, bias=_Arr((m,), "float32"), spec=plain)  # a column bias is N long
    with pytest.raises(ptxgen.api.fused.DTypeError, match="residual"):
        ptxgen.api.fused.gemm(a, b, out, residual=_Arr((m, n), "float16", strides=(n, 1)), spec=plain)
    with pytest.raises(ptxgen.api.fused.ArgumentError, match="even"):
        ptxgen.api.fused.gemm(a, b, out, c=_Arr((m, n), strides=(73, 1)), beta=1.0, spec=plain)


def test_fused_gemm_fp8_output_takes_scale_and_amax(simulated):
    import ptxgen.api.fused

    m, n, k = 100, 64, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    q, scale, amax = _Arr((m, n), "float8_e4m3fn", strides=(n, 1)), _Arr((m,), "float32"), _Arr((m,), "float32")
    tuned = spec(bn=64, stages=3, schedule="tile", epilogue="tma")  # FP8 output falls back to the direct epilogue
    got, am = ptxgen.api.fused.gemm(a, b, q, scale=scale, amax=amax, out_dtype="e4m3", spec=tuned)
    assert got is q and am is amax
    ((name, grid, block, args, stream),) = simulated
    assert "_tmastore" not in name and name.endswith("_fsr")
    assert args[-4:] == [n, 1.0, scale.ptr, amax.ptr]
    with pytest.raises(ptxgen.api.fused.ArgumentError, match="scale"):
        ptxgen.api.fused.gemm(a, b, q, out_dtype="e4m3", spec=tuned)


def test_ptxgen_gemm_takes_the_chain_keywords(simulated):
    """ptxgen.gemm(..., bias=, activation=) picks its spec as without them, adds the chain, and launches once."""
    import ptxgen

    m, n, k = 100, 72, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    out, bias = _Arr((m, n), strides=(n, 1)), _Arr((n,), "float32")
    assert ptxgen.gemm(a, b, out, bias=bias, activation="relu") is out
    ((name, grid, block, args, stream),) = simulated
    assert name.endswith("_fbcf32relu") and args[-2:] == [1.0, bias.ptr]


def test_ptxgen_gemm_with_a_chain_keeps_a_split_k_pick(simulated, monkeypatch):
    """A decode shape whose pick splits K (runtime.choose's split-k rule: 16 x 4096 x 4096): the fused kernel is the pick
    with the chain, its split kept (the last split to arrive at a tile runs the chain once, on the whole sum:
    derive.store.splitk), one launch with the stream's workspace as W."""
    import ptxgen
    from ptxgen.api import fused
    from ptxgen.api.select import select_choice

    from ptxgen.api.launch import launchplan

    monkeypatch.setattr(fused, "_KERNELS", {})  # loaded afresh on the simulated device (the kernel may be another test's)
    asked = []
    monkeypatch.setattr(launchplan, "streamk_workspace",  # the stream's workspace (no driver here to zero its counters)
                        lambda drv, index, stream, nbytes, like, ensure: asked.append(nbytes) or (0x5000_0000, None))
    m, n, k = 16, 4096, 4096
    pick, _, _ = select_choice("bf16", "sm_90a", m, n, k, allow_swap=False)
    assert pick.split_k > 1  # the premise (control: the spec gemm picks without a chain splits K)
    a, out, bias = _Arr((m, k), strides=(k, 1)), _Arr((m, n), strides=(n, 1)), _Arr((n,), "float32")
    b = _Arr((n, k), strides=(k, 1))  # last: 32 MB, more than the fake arrays' 16 MB spacing
    assert ptxgen.gemm(a, b, out, bias=bias, activation="relu") is out
    ((name, grid, block, args, stream),) = simulated
    split = make_spec(**{**pick.to_json(), "fuse": "bias=col:f32,relu"})
    assert name == split.kernel_name and name.endswith("_fbcf32relu_sk%d" % pick.split_k) and grid[2] == pick.split_k
    names = [q.name for q in plan_kernel(split).abi.params]
    assert dict(zip(names, args))["W"] == 0x5000_0000 and len(asked) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("m", [16, 5])
def test_fused_split_pick_gemm_matches_float64(gpu, m):
    """On the H100/H200: ptxgen.gemm with a bias and relu on decode shapes whose plain pick splits K (16 and 5 x 4096 x
    4096): the fused split-K kernel (the chain run once by the last split to arrive) within 1e-2 of float64 (bf16
    output), the same bits on a repeated call."""
    import ptxgen
    from ptxgen.api.select import select_choice

    torch = pytest.importorskip("torch")
    n, k = 4096, 4096
    assert select_choice("bf16", gpu.arch.value, m, n, k, allow_swap=False)[0].split_k > 1  # the premise
    g = torch.Generator(device="cuda").manual_seed(m)
    a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    b = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    bias = torch.randn(n, device="cuda", generator=g)
    out = ptxgen.gemm(a, b, bias=bias, activation="relu")
    again = ptxgen.gemm(a, b, bias=bias, activation="relu")
    torch.cuda.synchronize()
    ref = torch.relu(a.double() @ b.double().t() + bias.double())
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    assert float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)) < 1e-2
    assert torch.equal(out.view(torch.int16), again.view(torch.int16))


def test_beta_zero_ignores_c(simulated):
    """As torch.addmm: with beta = 0 the kernel does not read C at all."""
    import ptxgen

    m, n, k = 100, 72, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    out, c = _Arr((m, n), strides=(n, 1)), _Arr((m, n), strides=(n, 1))
    ptxgen.gemm(a, b, out, c=c, activation="silu")
    ((name, grid, block, args, stream),) = simulated
    assert name.endswith("_fsilu") and c.ptr not in args


def _eval_act(expr: str, y):
    """The rendered activation (C) evaluated in float64 numpy: fmaf, tanh_approx, ex2_approx, rcp_approx exact."""
    import numpy as np

    py = re.sub(r"(\d\.?)f\b", r"\1", expr)
    env = {"fmaf": lambda a, b, c: a * b + c, "tanh_approx": np.tanh, "ex2_approx": np.exp2, "rcp_approx": lambda x: 1.0 / x,
           "fmaxf": np.maximum, "y": y}
    with np.errstate(over="ignore"):
        return eval(py, {"__builtins__": {}}, env)


@pytest.mark.parametrize("form", ["shipped", "sigmoid"])
def test_rendered_gelu_tanh_is_torchs_formula(form):
    """The cheaper forms of gelu_tanh (h + h tanh(y (k0 + k0 k1 y^2)), and y sigmoid(2u) that tools/exp_fused.py
    measures) are the reference's 0.5 y (1 + tanh(k0 (y + k1 y^3))) (ptxgen/model/numerics/chainref.py), rewritten; a constant
    off by 1% must fail."""
    import numpy as np

    from ptxgen.emit.views.chain import activation_c_expr, gelu_tanh_sigmoid_c_expr
    from ptxgen.isa.epiops import Activation
    from ptxgen.model.numerics import chainref

    y = np.linspace(-30.0, 30.0, 200001)
    expr = activation_c_expr(Activation.GELU_TANH) if form == "shipped" else gelu_tanh_sigmoid_c_expr()
    ref = chainref.activation(y, "gelu_tanh")
    assert np.abs(_eval_act(expr, y) - ref).max() < 1e-12
    for c in set(re.findall(r"\d+\.\d{6,}", expr)):  # control: each derived constant matters
        bad = expr.replace(c, repr(float(c) * 1.01))
        assert np.abs(_eval_act(bad, y) - ref).max() > 1e-4, c


BIAS_LOAD_ORDER = {"start": r"L{32}H+W+", "late": r"H+WL{32}W", "after": r"H+WWL{32}"}


def _mma_wait_load_sequence(s: TileSpec, mode: str) -> str:
    """The kernel's SASS as one letter per HGMMA (H), WARPGROUP.DEPBAR (W) and global load (L), in order."""
    from dataclasses import replace as dreplace

    import ptxgen.emit.render as render_mod
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    orig = render_mod.chain_view
    try:
        render_mod.chain_view = lambda plan, *rest: None if plan is None else dreplace(orig(plan, *rest), bias_prefetch=mode)
        src = render_mod.render_kernel(plan_kernel(s))
    finally:
        render_mod.chain_view = orig
    sass = run_tool("cuobjdump", ["--dump-sass"], compile_cuda(src, s.kernel_name, s.arch.value).cubin)
    ops = [w for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)
           for w in [ln.split()[1] if not ln.split()[1].startswith("@") else ln.split()[2]]]
    return "".join("H" if o.startswith("HGMMA") else "W" if o.startswith("WARPGROUP.DEPBAR") else "L" if o.startswith("LDG") else ""
                   for o in ops)


@pytest.mark.parametrize("mode", sorted(BIAS_LOAD_ORDER))
def test_column_bias_loads_sit_where_the_mode_says(mode):
    """A 128x256 kernel with bias + gelu (32 column-bias pairs a thread): "start" issues the loads before the tile's
    MMAs, "late" after its last MMA is issued and before the final wait, "after" after that wait. Each mode's order
    is checked against the other two (the controls)."""
    s = make_spec(**{**BASE, "bn": 256, "fuse": "bias=col:bf16,act=gelu_tanh"})
    seq = _mma_wait_load_sequence(s, mode)
    for m, pattern in BIAS_LOAD_ORDER.items():
        assert bool(re.match(pattern, seq)) == (m == mode), (m, seq[:60])


def test_fused_gemm_c_through_tma_marshals_cs_map(simulated, monkeypatch):
    """--fuse c=tma: the launch carries C's pointer and ldc (the direct-store tiles) and C's tensor map, encoded from the
    same C and ldc; a C whose base or row pitch is not 16-byte aligned is refused."""
    import ptxgen.api.fused

    encoded = []
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", lambda args: encoded.append(args) or bytes(128))
    m, n, k = 100, 72, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    out, c = _Arr((m, n), strides=(n, 1)), _Arr((m, n), strides=(96, 1))
    tma = spec(bn=64, stages=3, schedule="tile", epilogue="tma")
    ptxgen.api.fused.gemm(a, b, out, c=c, beta=1.5, c_tma=True, spec=tma)
    ((name, grid, block, args, stream),) = simulated
    assert name.endswith("_tmastore_fct")
    assert args[-5:-1] == [1.0, 1.5, c.ptr, 96] and len(args[-1]) == 128
    (cmap,) = [e for e in encoded if e.global_address == c.ptr]
    assert cmap.global_dims == (n, m) and cmap.global_strides == (96 * 2,) and cmap.box == (64, 64)
    with pytest.raises(ptxgen.api.fused.ArgumentError, match="16-byte"):
        ptxgen.api.fused.gemm(a, b, out, c=_Arr((m, n), strides=(76, 1)), beta=1.0, c_tma=True, spec=tma)


def test_fused_gemm_fp8_through_the_tma_store_when_asked(simulated, monkeypatch):
    """fp8_tma_store=True keeps a TMA-store spec's epilogue for FP8 output (derive.store.epilogue st.shared.b16); D's map is
    e4m3 (1-byte elements) with a 128-column box."""
    import ptxgen.api.fused

    encoded = []
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", lambda args: encoded.append(args) or bytes(128))
    m, n, k = 100, 128, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    q, scale, amax = _Arr((m, n), "float8_e4m3fn", strides=(n, 1)), _Arr((m,), "float32"), _Arr((m,), "float32")
    tma = spec(schedule="tile", epilogue="tma")
    ptxgen.api.fused.gemm(a, b, q, scale=scale, amax=amax, out_dtype="e4m3", spec=tma, fp8_tma_store=True)
    ((name, grid, block, args, stream),) = simulated
    assert "_oe4m3_" in name and "_tmastore" in name and name.endswith("_fsr")
    (dmap,) = [e for e in encoded if e.global_address == q.ptr]
    assert dmap.box == (128, 64) and dmap.global_strides == (n,)
