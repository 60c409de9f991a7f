"""The K-grouped GEMM with 1 x 128 scales on both operands (--grouped offs_k --fp8-blocks 1x128x1x128; DeepGEMM's
k-grouped 1D1D weight gradient).

L1: which 128-blocks (rows of scale_a and scale_b) each group's K-tiles read, from the plan and from the rendered C of
the walk run on the CPU through g++, against the independent model ptxgen.model.numerics.kgroupbfp8model (groups off the
blocks not computed, NaN); the product simulated through the plan's TMA boxes (no K tail zeroed: none is needed) against
the model's float64 reference; controls that fail. L2: NVRTC compile and SASS gate (with and without --fuse c). Rules,
the CLI, the door on a simulated device and ptxgen.api.plan. The walk, the K boxes and the 1D1D promotion are the
K-grouped and dense 1D1D kernels' own (tests/test_kgrouped*.py, tests/test_blockfp8_1d1d.py). GPU (marked gpu, written
2026-12-08, not yet run): against the model at odd shapes with and without c, compute-sanitizer on a flagship, and
DeepGEMM's six SM90 k-grouped cases.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_kgrouped import WALK, _build
from test_kgrouped_fp8 import _cli

from ptxgen.derive.roles.kgrouped import KGroupedPlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views import kgrouped_view as ckg
from ptxgen.emit.views.schedule_view import batched_tile_coords_c
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import kgroupbfp8model as model

ROOT = Path(__file__).resolve().parents[1]
SPEC = dict(bm=128, bn=128, bk=128, stages=4, a="kmajor-sw128", b="kmajor-sw128", a_order="k", b_order="k", dtype="e4m3",
            acc="f32", out_dtype="f32", arch="sm_90a", schedule="persistent", epilogue="direct", grouped="offs_k",
            fp8_blocks="1x128x1x128")


def _offs(rng: random.Random, groups: int, aligned: bool) -> list[int]:
    """Cumulative K ends: whole blocks (empty groups included), or sizes off the blocks where not ``aligned``."""
    sizes = [128 * rng.choice([0, 0, 1, 2, 3]) if aligned else rng.choice([0, 1, 127, 128, 129, 200, 256])
             for _ in range(groups)]
    return list(np.cumsum(sizes).tolist())


def _cases(seed: int, n: int = 60):
    rng = random.Random(seed)
    for _ in range(n):
        groups = rng.choice([1, 2, 3, 8])
        offs = _offs(rng, groups, aligned=rng.random() < 0.6)
        k_total = max(1, offs[-1] + rng.choice([0, 0, 5, 128]))  # K rows past the last group: not any group's
        cut = rng.choice([1, 50])
        if rng.random() < 0.3 and offs[-1] - cut >= (offs[-2] if len(offs) > 1 else 0):
            offs[-1] -= cut  # the last group ends at K_total off a block: its short last block
            k_total = max(1, offs[-1])
        yield offs, k_total


def _plan_blocks(plan: KGroupedPlan, offs, k_total):
    def blocks(g):
        start, end = plan.group_k(offs, k_total)[g]
        return plan.scale_blocks(start, end, k_total) if plan.blocks_aligned(start, end, k_total) else None
    return blocks


# ---- L1: the blocks each group reads -------------------------------------------------------------------------------
def test_plan_reads_the_recipes_blocks():
    plan = plan_kernel(make_spec(**SPEC)).kgrouped
    assert plan.k_block == 128 and not plan.rowwise
    for offs, k_total in _cases(1):
        assert model.check_blocks(_plan_blocks(plan, offs, k_total), offs, k_total) == []


def test_control_blocks_counted_from_the_tile_fail():
    """Control: the scale block taken as the K-tile's index within its group (kt, the dense kernel's reading) instead
    of k0 / 128 of the stacked axis fails wherever a group starts past block 0."""
    plan = plan_kernel(make_spec(**SPEC)).kgrouped
    wrong = lambda offs, k: lambda g: (lambda s, e: tuple(range(len(plan.k_blocks(s, e)))) if plan.blocks_aligned(s, e, k)  # noqa: E731
                                       else None)(*plan.group_k(offs, k)[g])
    assert model.check_blocks(wrong([256, 512], 512), [256, 512], 512)


def test_the_product_through_the_plans_boxes_needs_no_zeroing():
    """Each computed group's K-tiles, read as TMA boxes (zeros past K_total only, nothing zeroed in shared memory) with
    each box's partial times its block's scales, give the model's float64 reference exactly (integer values); the
    groups off the blocks are NaN in both."""
    plan = plan_kernel(make_spec(**SPEC)).kgrouped
    rng = np.random.default_rng(2)
    for offs, k_total in _cases(3, 25):
        m, n = 5, 3
        a, b = rng.integers(-3, 4, (m, k_total)).astype(float), rng.integers(-3, 4, (n, k_total)).astype(float)
        kb = -(-k_total // 128)
        sa, sb = rng.integers(1, 5, (kb, m)).astype(float), rng.integers(1, 5, (kb, n)).astype(float)
        got = np.zeros((len(offs), m, n))
        for g, (s, e) in enumerate(plan.group_k(offs, k_total)):
            if not plan.blocks_aligned(s, e, k_total):
                got[g] = np.nan
                continue
            for (k0, _, _), blk in zip(plan.k_blocks(s, e), plan.scale_blocks(s, e, k_total)):
                part = a[:, k0:k0 + 128] @ b[:, k0:k0 + 128].T  # the whole box: slicing stops at K_total as TMA's zeros do
                got[g] += part * sa[blk][:, None] * sb[blk][None, :]
        np.testing.assert_array_equal(got, model.reference(a, b, sa, sb, offs))


def test_control_a_group_off_the_blocks_would_read_its_neighbours_rows():
    """Control: computing a group that ends mid-block anyway (no NaN rule) reads the next group's K rows in its last
    box: the sum differs from that group's own product."""
    plan = plan_kernel(make_spec(**SPEC)).kgrouped
    a, b = np.ones((1, 256)), np.ones((1, 256))
    s, e = plan.group_k([100, 256], 256)[0]
    assert not plan.blocks_aligned(s, e, 256)
    box_sum = sum(float((a[:, k0:k0 + 128] @ b[:, k0:k0 + 128].T).sum()) for k0, _, _ in plan.k_blocks(s, e))
    assert box_sum == 128 != 100


WALK_1D1D = WALK.replace(
    'std::printf("%%d %%d %%d %%d %%d %%d %%d %%d %%d\\n", bz, m0, n0, k_start, k_end, num_k_tiles, k_base, k_head, k_valid_last);',
    '(void)m0; (void)n0; std::printf("%%d %%d %%d\\n", bz, k_unaligned ? 1 : 0, num_k_tiles > 0 ? %(first)s : -1); std::printf("%%d\\n", num_k_tiles);')


def _rendered_walk(tmp_path, kg, coords):
    spec = make_spec(**SPEC)
    assert WALK_1D1D != WALK
    exe = _build(tmp_path, "walk1d1d", WALK_1D1D % dict(bm=spec.bm, bm1=spec.bm - 1, bn=spec.bn, bn1=spec.bn - 1,
                                                      coords="\n      ".join(coords), first=ckg.k_block_first_c(kg)))
    cases = list(_cases(4, 40))
    stdin = "".join(f"{len(o)} 1 1 {k} {' '.join(map(str, o))}\n" for o, k in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("end\n")
    for (offs, k_total), text in zip(cases, out):
        lines = text.splitlines()
        got = {}
        for head, trips in zip(lines[::2], lines[1::2]):
            g, unaligned, first = map(int, head.split())
            got[g] = None if unaligned else tuple(range(first, first + int(trips))) if int(trips) else ()
        yield model.check_blocks(got.get, offs, k_total)


def test_rendered_walk_reads_the_recipes_blocks(tmp_path):
    """The tile_k_c lines every role pastes (k_unaligned, num_k_tiles) and the scale warp's first block
    (kgrouped_view.k_block_first_c), compiled for the CPU: one tile per group (M = N = 1)."""
    spec = make_spec(**SPEC)
    plan = plan_kernel(spec)
    coords = batched_tile_coords_c(plan.schedule, spec.bm, spec.bn) + ckg.tile_k_c(plan.kgrouped)
    assert all(p == [] for p in _rendered_walk(tmp_path, plan.kgrouped, coords))


def test_control_rendered_walk_without_the_block_check_fails(tmp_path):
    spec = make_spec(**SPEC)
    plan = plan_kernel(spec)
    kg = plan.kgrouped
    coords = batched_tile_coords_c(plan.schedule, spec.bm, spec.bn) + ckg.tile_k_c(replace(kg, k_block=0)) + (
        "const bool k_unaligned = false;",)
    assert any(p != [] for p in _rendered_walk(tmp_path, kg, coords))


def test_source_marks_the_unaligned_group_and_starts_the_scales_at_its_block():
    src = render_kernel(plan_kernel(make_spec(**SPEC)))
    assert src.count("const bool k_unaligned = k_end > k_start && (k_start % 128 != 0 || (k_end % 128 != 0 && k_end != K));") == 3
    assert "bfp8_sfa + static_cast<size_t>((k_base / 128)) * lds_a" in src
    assert "bfp8_sfb + static_cast<size_t>((k_base / 128)) * lds_b" in src
    nan = src.index("if (k_unaligned) {")
    assert src.index("wgmma_wait<0>();") < nan < src.index("Epilogue: the wgmma D fragment straight to global memory")
    assert "st_shared_zero" not in src.split("---- consumer warpgroups")[1]  # no K tail zeroed
    assert "lds_b_group" not in src and "scale_a" not in src  # neither the M-grouped 1D2D's nor the row-wise form's
    with_c = render_kernel(plan_kernel(make_spec(**dict(SPEC, fuse="c"))))
    # C[g] at C + g M ldc f32 elements, as out[g] at D + g M ldd; the chain after the NaN of a group off the blocks
    assert ("const ChainArgs ca = {alpha, beta, C + static_cast<size_t>(bz) * static_cast<size_t>(M) * "
            "static_cast<size_t>(ldc) * 4u, ldc,") in with_c
    assert with_c.index("if (k_unaligned) {") < with_c.index("const ChainArgs ca")


# ---- L2 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [{}, dict(out_dtype="bf16"), dict(fuse="c")], ids=["f32", "bf16", "c"])
def test_compiles_with_the_intended_sass(extra):
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    spec = make_spec(**dict(SPEC, **extra))
    report = check_sass(spec, compile(spec).cubin)
    assert report.ok, report.summary() + "; " + "; ".join(report.problems)
    assert "QGMMA" in report.summary() and "local 0 B" in report.summary()


def test_control_sass_check_fails_checked_as_another_tile():
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    compiled = compile(make_spec(**SPEC))
    plain = dict(SPEC, dtype="bf16", bk=64, fp8_blocks="none", out_dtype="bf16")  # the 16-bit K-grouped kernel: HGMMA
    assert not check_sass(make_spec(**plain), compiled.cubin).ok


# ---- rules and the CLI ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields,rule", [
    (dict(SPEC, dtype="e5m2"), "e4m3 A and B"),
    (dict(SPEC, out_dtype="f16"), "bf16 or f32"),
    (dict(SPEC, epilogue="tma"), "direct epilogue"),
    (dict(SPEC, consumers="pingpong"), "cooperative"),
    (dict(SPEC, grouped="offs_k_rowwise"), "offs_k_rowwise"),
    (dict(SPEC, grouped="offs"), "offs"),
    (dict(SPEC, fuse="c", out_dtype="bf16"), "only chain is C"),
    (dict(SPEC, fuse="bias"), "only chain is C"),
    (dict(SPEC, dtype="bf16", bk=64, fp8_blocks="none", out_dtype="bf16", fuse="c"), "no fused epilogue"),
])
def test_illegal_specs_name_the_rule(fields, rule):
    with pytest.raises(SpecError, match=rule):
        make_spec(**fields)


FLAGS = ["--bm", "128", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e4m3",
         "--acc", "f32", "--arch", "sm_90a", "--stages", "4", "--out-dtype", "f32", "--schedule", "persistent",
         "--grouped", "offs_k", "--fp8-blocks", "1x128x1x128"]


def test_cli_explain_build_and_refusals(tmp_path):
    r = _cli("explain", *FLAGS)
    assert r.returncode == 0, r.stderr
    assert "kgrouped_blocks" in r.stdout and "promotion_1d1d" in r.stdout
    assert "k_tail" not in r.stdout  # nothing is zeroed: every K-tile is a whole block of one group
    assert "group 2: K 128..199 is off the 128-blocks: no K-tile, out[2] stored as NaN" in r.stdout
    assert "group 4: 1 K-tile(s): K 384..511 (zeros from 434, past K_total): block 3" in r.stdout
    r = _cli("build", *FLAGS, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert any(p.name.endswith("bs1d1d") for p in tmp_path.iterdir())
    r = _cli("explain", *FLAGS, "--dtype", "e5m2")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "e4m3" in r.stderr


# ---- the door: ptxgen.blockscaled_grouped_gemm_k (no GPU: a simulated device) -------------------------------------------
def _door_arrays(m=200, n=136, k=1024, g=8, lds_a=None, lds_b=None):
    from test_grouped import CaiArray

    kb = -(-k // 128)
    lds_a, lds_b = lds_a or m, lds_b or n
    return dict(
        a=CaiArray((m, k), "|u1", 1, 0x100000, dtype="float8_e4m3fn"),
        b=CaiArray((n, k), "|u1", 1, 0x200000, dtype="float8_e4m3fn"),
        scale_a=CaiArray((m, kb), "<f4", 4, 0x500000, strides=(1, lds_a)),  # outer-dim-major, as torch's 1x128 scale_a
        scale_b=CaiArray((kb, n), "<f4", 4, 0x600000, strides=(lds_b, 1)),
        offs=CaiArray((g,), "<i4", 4, 0x300000))


def test_door_launches_the_1d1d_kernel_with_the_scales_in_abi_order(monkeypatch):
    """Everything up to cuLaunchKernel: the maps (A over M x K_total, B over N x K_total), D, offs, the problem, then
    SFA, SFB and their strides between K blocks; an f32 G x M x N out by default; the refusals in the caller's terms."""
    from test_grouped import CaiArray, fake_launcher, simulate_device

    import ptxgen
    import ptxgen.kgrouped as kgrouped
    from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError
    from ptxgen.runtime.launch.gpu import Device

    fake = Device(0, "simulated H100", (9, 0), None, None, 132)
    spec = kgrouped.kgrouped_spec("e4m3", None, "sm_90a", "k", "k", blocks=True)
    assert spec == make_spec(**SPEC)
    kinds = [q.kind for q in plan_kernel(spec).abi.params]
    assert [q.name for q in plan_kernel(spec).abi.params] == ["tmap_a", "tmap_b", "D", "offs", "M", "N", "K", "G", "ldd",
                                                             "SFA", "SFB", "lds_a", "lds_b"]
    kernel_cls, driver, launched = fake_launcher(kinds)
    simulate_device(monkeypatch, fake, kernel_cls, driver, kgrouped, ("_KERNELS", "_PREPARED"))
    m, n, k, g = 200, 136, 1024, 8
    arrs = _door_arrays(m, n, k, g, lds_a=208, lds_b=144)
    out = CaiArray((g, m, n), "<f4", 4, 0x400000)
    assert ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"], out) is out
    call = launched[0]
    assert call["name"] == spec.kernel_name and call["grid"] == (min(132, g * 2 * 2), 1, 1)  # G x ceil(200/128) x ceil(136/128)
    args = call["args"]
    word = lambda x, i: int.from_bytes(x[8 * i:8 * i + 8], "little")  # noqa: E731
    assert (word(args[0], 0), word(args[0], 1), word(args[0], 2), word(args[0], 3)) == (0x100000, k, m, k)
    assert (word(args[1], 0), word(args[1], 1), word(args[1], 2), word(args[1], 3)) == (0x200000, k, n, k)
    assert args[2:] == [0x400000, 0x300000, m, n, k, g, n, 0x500000, 0x600000, 208, 144]
    with pytest.raises(ArgumentError, match="scale_a"):  # the row-wise form's scale_a (G M values): not this form's
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], CaiArray((g * m,), "<f4", 4, 0x500000), arrs["scale_b"],
                                          arrs["offs"], out)
    with pytest.raises(ArgumentError, match="MN-major"):
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"],
                                          CaiArray((k // 128, n), "<f4", 4, 0x600000, strides=(1, k // 128)), arrs["offs"], out)
    with pytest.raises(DTypeError, match="e4m3"):
        e5 = CaiArray((n, k), "|u1", 1, 0x200000, dtype="float8_e5m2")
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], e5, arrs["scale_a"], arrs["scale_b"], arrs["offs"], out)
    with pytest.raises(DTypeError, match="f32 or bf16"):
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"],
                                          out_dtype="f16")
    with pytest.raises(ArgumentError, match="K-major only"):
        mn = CaiArray((m, k), "|u1", 1, 0x100000, strides=(1, m), dtype="float8_e4m3fn")
        ptxgen.blockscaled_grouped_gemm_k(mn, arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"], out)

    # c = out: out[g] += the product (--fuse c): alpha = beta = 1, C is D with D's row pitch
    spec_c = kgrouped.kgrouped_spec("e4m3", "f32", "sm_90a", "k", "k", blocks=True, accumulate=True)
    kinds[:] = [q.kind for q in plan_kernel(spec_c).abi.params]
    assert [q.name for q in plan_kernel(spec_c).abi.params][13:] == ["alpha", "beta", "C", "ldc"]
    ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"], c=out)
    call = launched[-1]
    assert call["name"] == spec_c.kernel_name
    assert call["args"][2:] == [0x400000, 0x300000, m, n, k, g, n, 0x500000, 0x600000, 208, 144, 1.0, 1.0, 0x400000, n]
    with pytest.raises(ArgumentError, match="in place"):
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"],
                                          CaiArray((g, m, n), "<f4", 4, 0x700000), c=out)
    with pytest.raises(DTypeError, match="accumulates"):
        ptxgen.blockscaled_grouped_gemm_k(arrs["a"], arrs["b"], arrs["scale_a"], arrs["scale_b"], arrs["offs"],
                                          c=CaiArray((g, m, n), "<f2", 2, 0x700000, dtype="bfloat16"))


# ---- GPU: against the model's float64 reference ---------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
@pytest.mark.parametrize("sizes,k_extra", [([128, 0, 256, 384], 0), ([0, 128, 128], 70), ([256, 100, 128], 0),
                                           ([128, 256, 77], 0)], ids=["whole", "tail-past-offs", "off-the-blocks", "short-last"])
@pytest.mark.parametrize("accumulate", [False, True], ids=["out", "c"])
def test_against_the_model_on_the_gpu(gpu, out_dtype, sizes, k_extra, accumulate):
    """e4m3 with random 1 x 128 scales at odd M and N (200 x 136): every group against kgroupbfp8model.reference in float64
    (within the dense 1D1D kernels' bound), an empty group's out zero, a group off the blocks NaN (and only it), a last
    group ending at K_total mid-block, K rows past offs[-1]."""
    torch = pytest.importorskip("torch")
    import ptxgen

    ends = np.cumsum(sizes).tolist()
    m, n, k = 200, 136, ends[-1] + k_extra
    kb = -(-k // 128)
    g = torch.Generator(device="cuda").manual_seed(len(sizes) + k)
    a = (torch.randn(m, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    sa = (torch.rand(kb, m, device="cuda", generator=g) + 0.5).t()  # M x kb, outer-dim-major
    sb = torch.rand(kb, n, device="cuda", generator=g) + 0.5
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    if accumulate and out_dtype != "f32":
        pytest.skip("c accumulates into an f32 out only")
    c = torch.randn(len(ends), m, n, device="cuda", generator=g) if accumulate else None
    c0 = None if c is None else c.cpu().double().numpy()
    out = ptxgen.blockscaled_grouped_gemm_k(a, b, sa, sb, offs, c=c) if accumulate else \
        ptxgen.blockscaled_grouped_gemm_k(a, b, sa, sb, offs, out_dtype=out_dtype)
    assert c is None or out is c
    torch.cuda.synchronize()
    want = model.reference(a.float().cpu().numpy(), b.float().cpu().numpy(), sa.t().cpu().numpy(), sb.cpu().numpy(), ends)
    if c0 is not None:
        want = want + c0  # NaN groups stay NaN
    got = out.float().cpu().numpy()
    assert got.shape == want.shape
    assert (np.isnan(got) == np.isnan(want)).all(), "NaN exactly for the groups off the blocks"
    ok = ~np.isnan(want)
    # the dense 1D1D kernels' bound (model.numerics.bfp8model.outside_bound): the output's rounding of |D| plus the FP8
    # tensor core's accumulation, 2^-9 of the sum of the terms' magnitudes (the recipe on |a|, |b|)
    magnitude = model.reference(np.abs(a.float().cpu().numpy()), np.abs(b.float().cpu().numpy()), sa.t().cpu().numpy(),
                                sb.cpu().numpy(), ends)
    tol = (2.0 ** -8 if out_dtype == "bf16" else 1e-6) * np.abs(want[ok]) + 2.0 ** -9 * magnitude[ok]
    assert (np.abs(got[ok] - want[ok]) <= tol).all()


def test_api_plan_answers_for_the_door():
    torch = pytest.importorskip("torch")
    import ptxgen.api

    f8, f32, i32 = torch.float8_e4m3fn, torch.float32, torch.int32
    meta = lambda *s, dtype: torch.empty(*s, dtype=dtype, device="meta")  # noqa: E731
    a, b, offs = meta(200, 1024, dtype=f8), meta(136, 1024, dtype=f8), meta(8, dtype=i32)
    sa, sb = meta(8, 200, dtype=f32).t(), meta(8, 136, dtype=f32)
    p = ptxgen.api.plan("blockscaled_grouped_gemm_k", a, b, sa, sb, offs, device="h100")
    assert p.path.value == "hot" and p.kernel == make_spec(**SPEC).kernel_name and "1D1D" in p.why
    p = ptxgen.api.plan("blockscaled_grouped_gemm_k", a, b, meta(200, 8, dtype=f32), sb, offs, device="h100")
    assert p.path.value == "refused" and p.error == "ArgumentError" and "outer-dim-major" in p.why


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_clean_on_the_1d1d_kgrouped_flagship(gpu, tool, artifact_dir):
    """The scale warp's shared-memory slots between its stores and the consumers' reads across a K-grouped walk whose
    groups take 0 to 2 K-tiles: memcheck (the scale and operand reads inside the arrays), racecheck, synccheck."""
    from sanitize import check_case

    check_case("kgrouped_1d1d_sanitizer_case.py", tool, artifact_dir, "kgrouped_1d1d_sanitizer.log")


# DeepGEMM's SM90 k-grouped cases (deepseek-ai/DeepGEMM tests/generators.py, enumerate_k_grouped_contiguous: K-major a and
# b, 1D1D scales, f32 accumulation into c; tests/test_fp8.py test_k_grouped_gemm_contiguous: each case also with one group
# emptied, passing at calc_diff(d, ref_d) < 0.001): (num_groups, m, n, expected_k_per_group), each group's K drawn from
# 0.7-1.3 x expected and aligned to 128
DEEPGEMM_K_GROUPED = ((4, 4096, 7168, 8192), (4, 7168, 2048, 8192), (8, 4096, 7168, 4096), (8, 7168, 2048, 4096),
                      (16, 4096, 7168, 2048), (16, 7168, 2048, 2048))


def _calc_diff(torch, x, y) -> float:
    """DeepGEMM's calc_diff: 1 - 2 <x, y> / (|x|^2 + |y|^2), in float64."""
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def _blockwise_e4m3(torch, t):
    """t (rows x K, K a multiple of 128) as e4m3 with one f32 scale per row per 128 of K: (q, scales rows x K/128)."""
    rows, k = t.shape
    blocks = t.float().view(rows, k // 128, 128)
    s = blocks.abs().amax(-1).clamp_min(1e-4) / 448.0
    return (blocks / s[..., None]).to(torch.float8_e4m3fn).view(rows, k), s


@pytest.mark.gpu
@pytest.mark.parametrize("case", DEEPGEMM_K_GROUPED, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("empty", [False, True], ids=["all", "one-empty"])
def test_deepgemms_sm90_k_grouped_cases(gpu, case, empty):
    torch = pytest.importorskip("torch")
    import ptxgen

    groups, m, n, expected = case
    rng = random.Random(groups * 7 + m + empty)
    ks = [-(-int(expected * rng.uniform(0.7, 1.3)) // 128) * 128 for _ in range(groups)]
    if empty:
        ks[rng.randrange(groups)] = 0
    k = sum(ks)
    g = torch.Generator(device="cuda").manual_seed(groups + m)
    a, sa = _blockwise_e4m3(torch, torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16))
    b, sb = _blockwise_e4m3(torch, torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16))
    c = torch.randn(groups, m, n, device="cuda", generator=g)
    ref = c.clone()
    offs = torch.tensor(np.cumsum(ks).tolist(), device="cuda", dtype=torch.int32)
    lo = 0
    for gi, size in enumerate(ks):
        if size:
            sl = slice(lo, lo + size)
            da = (a[:, sl].float().view(m, -1, 128) * sa[:, lo // 128:(lo + size) // 128, None]).view(m, size)
            db = (b[:, sl].float().view(n, -1, 128) * sb[:, lo // 128:(lo + size) // 128, None]).view(n, size)
            ref[gi] += da @ db.T
        lo += size
    out = ptxgen.blockscaled_grouped_gemm_k(a, b, sa.t().contiguous().t(), sb.t().contiguous(), offs, c=c)
    torch.cuda.synchronize()
    assert out is c
    assert _calc_diff(torch, c, ref) < 0.001
