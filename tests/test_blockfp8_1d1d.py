"""Block FP8 with 1 x 128 scales on both operands (``--fp8-blocks 1x128x1x128``, DeepGEMM's 1D1D; derive.scaled.bfp8cols).

L1: every register of every thread's partial is multiplied by its row's A scale and its own column's B scale (the plan's
loads performed on distinct scale values, checked by the independent model ptxgen.model.numerics.bfp8model against the wgmma
fragment model), the scale warp's slots hold each row and column once and each consumer reads its own columns, the
global addresses are torch's layout; controls: the 1D2D plan (B's scale per 128-column block) and a plan shifted by a
column fail. The door (simulated H200, no GPU): the recipe inferred from scale_b's shape as torch infers it, the
arguments it launches with C. L2: NVRTC compiles the kernel, the SASS holds the wgmma (QGMMA) and the paired
shared-memory scale reads, no local memory. gpu: against a float64 reference at odd shapes, with and without c.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptxgen.derive.scaled.bfp8cols import plan_columns
from ptxgen.derive.scaled.blockfp8 import plan_block_fp8
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model
from test_api_plan import doors  # noqa: F401 (the fixture)
from test_blockfp8 import CaiArray, simulated_bfp8_launches

SPEC = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", arch="sm_90a", stages=4,
            epilogue="tma", schedule="persistent", fp8_blocks="1x128x1x128", out_dtype="f32")


def _loads(plan, kb, m0, n0):
    return lambda warp, lane: [(l.operand, l.index, l.targets) for l in plan.promotion_loads(warp % 4, lane, kb, m0, n0, warp // 4)]


@pytest.mark.parametrize("bm, bn, n0", [(128, 128, 0), (128, 128, 384), (64, 8, 8), (64, 40, 200), (128, 64, 192),
                                        (192, 128, 128), (64, 192, 192), (64, 256, 256)])
def test_every_register_takes_its_rows_and_its_columns_scales(bm, bn, n0):
    plan = plan_columns(bm, bn, 128)
    for kb in (0, 3):
        assert bfp8model.check_loads(_loads(plan, kb, 256, n0), bn, kb, 256, n0, bm, kb + 1, np.random.default_rng(kb),
                                     per_column=True) == []


def test_control_b_scale_per_128_column_block_fails():
    """The 1D2D plan reads B's scale per 128-column block: under the per-column recipe almost every register is wrong."""
    bad = plan_block_fp8(128, 128, 128)
    problems = bfp8model.check_loads(_loads(bad, 1, 0, 128), 128, 1, 0, 128, 128, 2, np.random.default_rng(0),
                                     per_column=True)
    assert problems and "column" in problems[0]
    # and the per-column plan is wrong under the 1D2D recipe (the model tells the recipes apart)
    good = plan_columns(128, 128, 128)
    assert bfp8model.check_loads(_loads(good, 1, 0, 128), 128, 1, 0, 128, 128, 2, np.random.default_rng(0))


def test_control_columns_shifted_by_one_fail():
    plan = plan_columns(128, 64, 128)

    def shifted(warp, lane):
        return [(o, (i, j + 1) if o == "sfb" else (i, j), t) for o, (i, j), t in _loads(plan, 2, 0, 64)(warp, lane)]
    assert bfp8model.check_loads(shifted, 64, 2, 0, 64, 128, 3, np.random.default_rng(1), per_column=True)


def _slot_args(plan):
    writes = lambda lane: [(w.operand, w.index, w.offset_bytes) for w in plan.scale_warp_writes(lane)]
    reads = lambda warp, lane, slab: [(r.operand, r.offset_bytes) for r in plan.consumer_reads(warp, lane, slab)]
    return writes, reads, plan.bm, plan.sfb_slots, plan.sfa_stage_bytes, plan.sfb_stage_bytes


@pytest.mark.parametrize("bm, bn", [(128, 128), (128, 64), (64, 40), (192, 96)])
def test_scale_slots_hold_every_row_and_column_once_and_each_thread_reads_its_columns(bm, bn):
    plan = plan_columns(bm, bn, 128)
    assert plan.sfb_slots == bn and plan.sfb_stage_bytes == -(-bn * 4 // 16) * 16
    assert bfp8model.check_scale_slots(*_slot_args(plan), per_column=True) == []


@pytest.mark.parametrize("name", ["reads column + 2", "reads the 1D2D block slots", "lane stores column lane + 1"])
def test_scale_slot_controls_fail(name):
    plan = plan_columns(128, 128, 128)
    writes, reads, *rest = _slot_args(plan)
    if name == "reads column + 2":
        reads2 = lambda w, l, s: [(o, off + 8 if o == "sfb" else off) for o, off in reads(w, l, s)]
        args = (writes, reads2, *rest)
    elif name == "reads the 1D2D block slots":
        args = (writes, lambda w, l, s: reads(w, l, s)[:2] + [("sfb", 0)], *rest)
    else:
        args = (lambda lane: [(o, x + 1 if o == "sfb" else x, off) for o, x, off in writes(lane)], reads, *rest)
    assert bfp8model.check_scale_slots(*args, per_column=True)


def test_global_addresses_are_torchs_mn_major_layout():
    """sfb (kb, n) at kb x lds_b + n from the scale_b base: what torch's y_scales.t() (N x Kb outer-dim-major,
    transposed) holds at that element."""
    plan = plan_columns(128, 128, 128)
    n_total = 700
    lds_b = n_total + 4
    env = {"n0": 384, "lds_a": 1000, "lds_b": lds_b}
    for lane in (0, 7, 30):
        for load in plan.promotion_loads(1, lane, 3, 256, 384):
            if load.operand == "sfb":
                kb, n = load.index
                # torch: y_scales (N x Kb, strides (1, ld)); .t() is (Kb x N, strides (ld, 1)): element (kb, n) at kb ld + n
                assert plan.scale_address(load, env) == kb * lds_b + n
    assert plan.sfb_tile_terms[0].value(env) == 384


def test_reference_with_c_and_per_column_scales_against_dequantized_matmul():
    """The model's float64 recipe equals the dequantized product (each operand times its 1 x 128 scales) plus C; the
    1D2D reading of the same scales differs (a control)."""
    rng = np.random.default_rng(3)
    m, n, k = 5, 11, 300
    a, b = rng.integers(-8, 8, (m, k)).astype(float), rng.integers(-8, 8, (n, k)).astype(float)
    sfa, sfb = rng.uniform(0.5, 2, (m, 3)), rng.uniform(0.5, 2, (3, n))
    c = rng.normal(size=(m, n))
    deq_a = a * np.repeat(sfa, 128, axis=1)[:, :k]
    deq_b = b * np.repeat(sfb.T, 128, axis=1)[:, :k]
    want = deq_a @ deq_b.T + c
    assert np.allclose(bfp8model.reference(a, sfa, b, sfb, c, per_column=True), want, rtol=1e-12, atol=1e-9)
    assert not np.allclose(bfp8model.reference(a, sfa, b, sfb[:, :1], c), want)


@pytest.mark.parametrize("kw, field", [
    (dict(bn=136), "--bn"), (dict(fp8_scale_load="tma"), "--fp8-scale-load"), (dict(fp8_scale_load="block"), "--fp8-scale-load"),
    (dict(fp8_stagger="half"), "--fp8-stagger"), (dict(fp8_overlap="interleave"), "--fp8-overlap"),
    (dict(stream_k=2, bm=192), "--stream-k"), (dict(cluster="2x1"), "--cluster"), (dict(consumers="pingpong", bm=64), "--fp8-scale-load"),
])
def test_spec_refusals_name_the_rule(kw, field):
    from ptxgen.derive.tile.spec import make_spec

    with pytest.raises(SpecError) as e:
        make_spec(**{**SPEC, **kw})
    assert e.value.field == field, str(e.value)


def test_cli_explain_and_build_flag(tmp_path):
    import subprocess
    import sys

    args = [f"--{k.replace('_', '-')}={v}" for k, v in SPEC.items()] + ["--fuse", "c"]
    r = subprocess.run([sys.executable, "-m", "ptxgen", "explain", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "sfb_loads          32 per thread per K block" in r.stdout and "1x128x1x128" in r.stdout
    wide = subprocess.run([sys.executable, "-m", "ptxgen", "explain", *args, "--bn", "192"], capture_output=True, text=True)
    assert wide.returncode == 0 and "48 per thread per K block, read at the promote" in wide.stdout, wide.stderr
    bad = subprocess.run([sys.executable, "-m", "ptxgen", "explain", *args, "--bn", "256"], capture_output=True, text=True)
    assert bad.returncode == 2 and "per-column B scales" in bad.stderr and "Traceback" not in bad.stderr


def test_kernel_name_and_the_1d2d_kernels_unchanged():
    from ptxgen.derive.tile.spec import make_spec

    assert make_spec(**SPEC).kernel_name.endswith("_bs1d1d")
    assert make_spec(**{**SPEC, "fp8_blocks": "1x128x128"}).kernel_name.endswith("_bs128")


# ---- the door on a simulated H200 ----------------------------------------------------------------------------------
M, N, K = 200, 300, 400  # K blocks 4 (K % 128 = 16), N not a multiple of the tile


def _arrays(out_dtype="float32"):
    return dict(a=CaiArray((M, K), "float8_e4m3fn", (K, 1), 0x10000000),
                b=CaiArray((N, K), "float8_e4m3fn", (K, 1), 0x20000000),
                out=CaiArray((M, N), out_dtype, (304, 1), 0x30000000),
                sa=CaiArray((M, 4), "float32", (1, 208), 0x40000000),
                sb=CaiArray((4, N), "float32", (304, 1), 0x50000000))  # torch's y_scales.t(): (Kb, N), strides (ld, 1)


def test_door_infers_the_recipe_from_scale_b_and_launches_c(monkeypatch):
    import ptxgen.api.fp8blocks as fb

    launches = simulated_bfp8_launches(monkeypatch)
    x = _arrays()
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], out_dtype="f32")
    assert launches[-1][1][-4:] == [0x40000000, 0x50000000, 208, 304]  # SFA, SFB, lds_a, lds_b (= scale_b's row pitch)
    from ptxgen.api import fused

    assert any(s.kernel_name.endswith("_bs1d1d_slcpasync") and s.fuse is None for s in fused._KERNELS)  # columns_spec: no C
    c = CaiArray((M, N), "float32", (304, 1), 0x60000000)
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], c=c)
    args = launches[-1][1]
    assert any(s.kernel_name.endswith("_bs1d1d_slcpasync_fc") for s in fused._KERNELS)
    assert args[-8:] == [0x40000000, 0x50000000, 208, 304, 1.0, 1.0, 0x60000000, 304]  # ..., alpha, beta, C, ldc
    # out = c accumulates in place (D += A.B); c partly overlapping out is refused
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], c, c=c)
    with pytest.raises(fb.ArgumentError, match="overlaps c"):
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], CaiArray((M, N), "float32", (304, 1), 0x60000000 + 64), c=c)
    with pytest.raises(fb.ArgumentError, match="f32 output"):
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], _arrays("bfloat16")["out"], out_dtype="bf16", c=c)


def test_door_refusals_and_the_explicit_recipe(monkeypatch):
    import ptxgen.api.fp8blocks as fb

    simulated_bfp8_launches(monkeypatch)
    x = _arrays()
    for recipe in (None, "1x128x1x128"):  # (Kb, N) is the 1D1D shape (as torch infers it), but K-major: refused
        with pytest.raises(fb.ArgumentError, match="MN-major"):
            fb.gemm(x["a"], x["b"], x["sa"], CaiArray((4, N), "float32", (1, 4), 0x50000000), x["out"], out_dtype="f32",
                    recipe=recipe)
    with pytest.raises(fb.ArgumentError, match=r"takes \(4, 300\)"):  # a 1D2D-shaped scale_b under the 1D1D recipe
        fb.gemm(x["a"], x["b"], x["sa"], CaiArray((4, 3), "float32", (1, 4), 0x50000000), x["out"], out_dtype="f32",
                recipe="1x128x1x128")
    with pytest.raises(fb.ArgumentError, match="recipe="):
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], out_dtype="f32", recipe="128x128x128x128")
    with pytest.raises(fb.ArgumentError, match="1x128 x 1x128 recipe"):  # c with 1D2D scales
        fb.gemm(x["a"], x["b"], x["sa"], CaiArray((4, 3), "float32", (1, 4), 0x50000000), x["out"],
                c=CaiArray((M, N), "float32", (304, 1), 0x60000000))  # (out_dtype f32: c given)
    with pytest.raises(fb.ArgumentError, match="built for --fp8-blocks 1x128x128"):
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], out_dtype="f32", spec=fb.default_spec("f32"))


# ---- L2 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(fuse="c"), dict(bn=64, out_dtype="bf16", epilogue="direct", stages=5),
                                dict(bm=192, bn=96, fuse="c")])
def test_compiles_with_the_intended_sass(kw):
    """NVRTC 13.5 for sm_90a: wgmma (QGMMA) in the consumer loop, each thread's column scales read as 8-byte pairs from
    shared memory (LDS.64), the scale warp's global loads and shared stores, no local memory, no serialized wgmma."""
    from ptxgen.derive.tile.spec import make_spec

    spec = make_spec(**{**SPEC, **kw})
    sass = gated_sass(spec)
    assert sass.count("LDS.64") >= spec.bn // 8 and "LDG.E" in sass and "STS " in sass


def gated_sass(spec) -> str:
    """NVRTC sm_90a: the SASS gate passes with no local memory, no serialized wgmma (C7514/C7517), at least 4 QGMMA of the
    spec's N; returns the SASS for further checks."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert sass.count("QGMMA.64x%dx32" % spec.bn) >= 4, sass.count("QGMMA")
    return sass


# ---- gpu: against float64 ---------------------------------------------------------------------------------------------
def _quantize_1x128(torch, x):
    """x (R x K) -> e4m3 values and f32 scales (R x ceil(K/128)) with x ~ q x scale (the dequantization scale)."""
    r, k = x.shape
    kb = -(-k // 128)
    pad = torch.nn.functional.pad(x, (0, kb * 128 - k)).view(r, kb, 128)
    amax = pad.abs().amax(-1).clamp(min=1e-12).float()
    scale = amax / 448.0
    q = (pad / scale[..., None]).to(torch.float8_e4m3fn).view(r, kb * 128)[:, :k].contiguous()
    return q, scale


@pytest.mark.gpu
# K a multiple of 16 (A's and B's rows 16-byte aligned for TMA) and, but for 128, not of 128; N off the 128-column tile
@pytest.mark.parametrize("m, n, k", [(200, 300, 400), (1000, 700, 1104), (64, 136, 128), (129, 1, 272), (4, 4096, 2000)])
@pytest.mark.parametrize("with_c", ["none", "c", "in_place"])
def test_matches_float64(torch_cuda, m, n, k, with_c):
    import ptxgen.api.fp8blocks as fb

    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    x = torch.randn(m, k, device="cuda", generator=g) * 3
    y = torch.randn(n, k, device="cuda", generator=g) * 0.01
    xq, xs = _quantize_1x128(torch, x)
    yq, ys = _quantize_1x128(torch, y)
    sa = xs.t().contiguous().t()  # torch's BlockWise1x128 scale_a (outer-dim-major)
    sb = ys.t().contiguous().t().t()  # torch's BlockWise1x128 scale_b for b.t(): (Kb, N), strides (N, 1)
    assert sb.shape == (xs.shape[1], n) and (sb.stride(1) == 1 or n == 1)
    # c (and out = c) with rows 16 bytes apart, as the epilogue's stores need: N = 1 is a view of an M x 4 array
    c = torch.randn(m, -(-n // 4) * 4, device="cuda", generator=g)[:, :n] if with_c != "none" else None
    c0 = None if c is None else c.clone()
    if with_c == "in_place":
        got = fb.gemm(xq, yq, sa, sb, c, c=c)
        assert got.data_ptr() == c.data_ptr()
    else:
        got = fb.gemm(xq, yq, sa, sb, c=c, out_dtype="f32")
    torch.cuda.synchronize()
    a64 = xq.double().cpu().numpy()
    b64 = yq.double().cpu().numpy()
    bad = bfp8model.outside_bound(got.double().cpu().numpy(), a64, xs.double().cpu().numpy(), b64, ys.t().double().cpu().numpy(),
                                  out_rtol=2.0 ** -20, c=None if c0 is None else c0.double().cpu().numpy(), per_column=True)
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} outside the bound"


@pytest.mark.gpu
def test_gpu_control_block_scales_read_as_columns_fail(torch_cuda):
    """The kernel's output is not the 1D2D reading of the same scales: the check fails when the model reads B's scale per
    128-column block (what a kernel that ignored the per-column scales would give)."""
    import ptxgen.api.fp8blocks as fb

    torch = torch_cuda
    m, n, k = 256, 384, 512
    g = torch.Generator(device="cuda").manual_seed(5)
    xq, xs = _quantize_1x128(torch, torch.randn(m, k, device="cuda", generator=g))
    yq, ys = _quantize_1x128(torch, torch.randn(n, k, device="cuda", generator=g))
    got = fb.gemm(xq, yq, xs.t().contiguous().t(), ys.t().contiguous(), out_dtype="f32")
    torch.cuda.synchronize()
    blocks = ys.t()[:, ::128].double().cpu().numpy()  # column 0 of each 128-block stands for the block
    bad = bfp8model.outside_bound(got.double().cpu().numpy(), xq.double().cpu().numpy(), xs.double().cpu().numpy(),
                                  yq.double().cpu().numpy(), blocks, out_rtol=2.0 ** -20)
    assert bad.mean() > 0.5


def test_door_takes_out_dtype_from_out(monkeypatch):
    """Without out_dtype the output is what ``out`` holds (as ptxgen.gemm's door); a bf16 out without c gets bf16."""
    import ptxgen.api.fp8blocks as fb
    from ptxgen.api import fused

    simulated_bfp8_launches(monkeypatch)
    x = _arrays()
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"])  # f32 out
    assert fused._KERNELS and "_obf16_" not in list(fused._KERNELS)[-1].kernel_name
    bf = CaiArray((M, N), "bfloat16", (304, 1), 0x70000000)
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], bf)
    assert "_obf16_" in list(fused._KERNELS)[-1].kernel_name


# ---- ptxgen.api.plan answers for the recipe as the door does -----------------------------------------------------------
@pytest.mark.parametrize("with_c", [False, True])
def test_plan_agrees_with_the_door(doors, with_c):  # noqa: F811 (the fixture)
    import ptxgen.api.fp8blocks as fb
    from ptxgen.api.callplan import Path, plan
    from test_api_plan import F8, F32, DevArray, door_spec

    m, n, k = 384, 700, 1280
    args = (DevArray((m, k), F8), DevArray((n, k), F8), DevArray((m, 10), F32, (1, m)), DevArray((10, n), F32, (n, 1)),
            DevArray((m, n), F32))
    kw = dict(c=DevArray((m, n), F32)) if with_c else dict(out_dtype="f32")
    p = plan("fp8blocks.gemm", *args, **kw)
    assert p.path is Path.HOT, p.why
    assert p.spec.kernel_name.endswith("_bs1d1d_slcpasync_fc" if with_c else "_bs1d1d_slcpasync") and "1x128 x 1x128" in p.why
    assert door_spec(fb.gemm, *args, **kw) == p.spec


def test_bench_variant_tokens():
    """tools/bench_blockfp8.py's 1d1d and acc tokens build the recipe's kernels (f32 out; acc: --fuse c)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "bench_blockfp8.py"
    spec = importlib.util.spec_from_file_location("bench_blockfp8_1d1d", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _, plain, _, fields = mod.parse_variant("s4-tma-1d1d-acc")
    s = mod.variant_spec(fields, plain)
    assert s.kernel_name.endswith("_bs1d1d_fc") and s.out_dtype.value == "f32"
    _, _, _, fields = mod.parse_variant("s4-tma")
    assert mod.variant_spec(fields, False).fp8_blocks.value == "1x128x128"  # the control: the 1D2D kernel


def test_show_draws_each_threads_columns():
    """layout.svg's block-FP8 panel for the recipe: per lane % 4, register group g's columns 8g + 2 (lane % 4), + 1."""
    import re

    from ptxgen.derive.tile.layout import derive
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.emit.pictures.svg import layout_svg

    cells = re.findall(r'data-lane4="(\d)" data-group="(\d+)" data-columns="(\d+),(\d+)"', layout_svg(derive(make_spec(**SPEC))))
    assert len(cells) == 4 * 16
    assert all(int(c0) == 8 * int(g) + 2 * int(q) and int(c1) == int(c0) + 1 for q, g, c0, c1 in cells)


def test_n1_scale_b_is_either_recipe_and_c_takes_1d1d():
    """N = 1: scale_b (Kb, 1) is both torch shapes (the products are equal): 1x128x128 without c, 1x128x1x128 with c."""
    from ptxgen.api.arrays.fp8recipe import infer_recipe
    from ptxgen.runtime.launch.arrays import ArrayInfo

    sb = ArrayInfo("scale_b", 0x1000, (3, 1), (1, 1), "f32", 4, (2, 0), "test", "cai")
    assert infer_recipe(None, sb, 300, 1, 4) == "1x128x128"
    assert infer_recipe(None, sb, 300, 1, 4, with_c=True) == "1x128x1x128"
    wide = ArrayInfo("scale_b", 0x1000, (3, 700), (700, 1), "f32", 4, (2, 0), "test", "cai")
    assert infer_recipe(None, wide, 300, 700, 4) == "1x128x1x128"
    assert infer_recipe(None, ArrayInfo("scale_b", 0x1000, (4, 6), (1, 4), "f32", 4, (2, 0), "test", "cai"), 300, 700, 4) == "1x128x128"
