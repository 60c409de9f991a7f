"""Block FP8 with 128 x 128 blocks on A and 1 x 128 rows on B (torch's BlockWise128x128 x BlockWise1x128; the recipe
``128x128x1x128`` of ``ptxgen.api.fp8blocks.gemm``).

It is DeepSeek's 1x128 x 128x128 recipe with the operands' roles swapped: D^T = B A^T, B's 1 x 128 rows the kernel's
A scales and A's 128 x 128 blocks its B scales, D^T stored M-major into the row-major out (``--d-major m``, the
store swap-AB uses). Tiers: L1, the identity against an independent float64 dequantization (and controls: the roles
not swapped, the blocks read in the wrong order), the M-major stores of the block-FP8 kernels through the store models
(every element once, at its address); the door on a simulated H200 (the recipe told from scale_a's shape as torch
tells it, the arguments it launches with, refusals); ``ptxgen.api.plan``; L2, NVRTC; gpu, against float64.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.model.bridges.check_dstore import check_direct_store
from ptxgen.model.bridges.check_mstore import check_m_major_store
from ptxgen.model.numerics import bfp8model
from test_api_plan import doors  # noqa: F401 (the fixture)
from test_blockfp8 import CaiArray, simulated_bfp8_launches

B = 128


def _dequantized(q, scale, rows_per_block):
    """q (R x K) times its scales (R / rows_per_block x ceil(K/128) blocks), float64: written here from the recipe's
    definition, sharing nothing with bfp8model."""
    r, k = q.shape
    s = np.repeat(np.repeat(scale, rows_per_block, 0)[:r], B, 1)[:, :k]
    return q.astype(np.float64) * s


def _problem(m, n, k, seed):
    rng = np.random.default_rng(seed)
    kb, mb = -(-k // B), -(-m // B)
    a = rng.integers(-8, 9, (m, k)).astype(np.float64)
    b = rng.integers(-8, 9, (n, k)).astype(np.float64)
    sa = rng.uniform(0.5, 2.0, (mb, kb))  # A's 128 x 128 blocks (row block, K block)
    sb = rng.uniform(0.5, 2.0, (n, kb))  # B's 1 x 128 rows
    return a, b, sa, sb


# ---- L1: the recipe is the 1x128x128 recipe on (b, a), transposed ---------------------------------------------------
@pytest.mark.parametrize("m, n, k", [(300, 200, 400), (128, 256, 512), (129, 8, 272), (4, 33, 100)])
def test_the_recipe_is_the_1d2d_recipe_on_b_and_a_transposed(m, n, k):
    a, b, sa, sb = _problem(m, n, k, m + n + k)
    want = _dequantized(a, sa, B) @ _dequantized(b, sb, 1).T
    # the kernel's reading: A' = b with 1 x 128 row scales sb (N x Kb), B' = a with 128 x 128 blocks sa.T (Kb x Mb)
    got = bfp8model.reference(b, sb, a, sa.T).T
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())  # the sums' order differs


def test_controls_roles_not_swapped_and_blocks_reversed_fail():
    m, n, k = 300, 200, 400
    a, b, sa, sb = _problem(m, n, k, 7)
    want = _dequantized(a, sa, B) @ _dequantized(b, sb, 1).T
    # a door that read A's block scales as if they were B's (no swap) gets B's rows scaled per 128-row block of D^T
    unswapped = bfp8model.reference(a, np.repeat(sa, B, 0)[:m], b, np.repeat(sb.T, 1, 0)[:, ::B])
    assert not np.allclose(unswapped, want, rtol=1e-6)
    reversed_k = bfp8model.reference(b, sb, a, sa.T[::-1]).T
    assert not np.allclose(reversed_k, want, rtol=1e-6)


def _spec(**kw):
    fields = dict(bm=128, bn=192, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", arch="sm_90a", stages=4,
                  epilogue="tma", schedule="persistent", fp8_blocks="1x128x128", out_dtype="bf16", d_major="m")
    return make_spec(**{**fields, **kw})


# the kernels the door picks for the recipe (fp8blocks._swapped_spec): chosen_spec's tiles with D M-major
TMA_SPECS = {
    "128x192": _spec(),
    "64x128-sltma-sk": _spec(bm=64, bn=128, stages=6, fp8_scale_load="tma", stream_k=8),
    "192x128-sltma": _spec(bm=192, bn=128, stages=3, fp8_scale_load="tma"),
    "128x128-sltma-f16": _spec(bn=128, fp8_scale_load="tma", out_dtype="f16"),
}
DIRECT_SPECS = {
    "128x192-f32": _spec(out_dtype="f32", epilogue="direct", stages=5),
    "192x128-f32-sltma": _spec(bm=192, bn=128, stages=3, fp8_scale_load="tma", out_dtype="f32", epilogue="direct"),
}


@pytest.mark.parametrize("name", sorted(TMA_SPECS))
@pytest.mark.parametrize("km, kn", [(200, 300), (520, 130), (136, 17), (1001, 1)])
def test_m_major_tma_stores_put_every_element_once_at_its_address(name, km, kn):
    """The kernel's D' (km = N rows of b, kn = M) through the M-major TMA store: every element of the user's row-major
    out once, at its address (model.bridges.check_mstore), rows padded and not."""
    spec = TMA_SPECS[name]
    k = plan_kernel(spec)
    for ldd in (-(-km // 8) * 8, -(-km // 8) * 8 + 24):
        assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, km, kn, ldd) == []


@pytest.mark.parametrize("name", sorted(DIRECT_SPECS))
def test_m_major_direct_stores_put_every_element_at_its_address(name):
    from ptxgen.emit.views.epilogue_view import wgmma_epilogue_view

    spec = DIRECT_SPECS[name]
    plan = plan_kernel(spec)
    view = wgmma_epilogue_view(plan)
    for km, kn in [(200, 300), (136, 17), (129, 1)]:
        assert check_direct_store(plan.direct, spec.bm, spec.bn, km, kn, km + 5, view.frag_row_expr,
                                  view.frag_col_expr) == [], (km, kn)


def test_the_1d1d_kernel_keeps_a_row_major_d():
    from ptxgen.isa.types import SpecError

    with pytest.raises(SpecError) as e:
        _spec(bn=128, fp8_blocks="1x128x1x128", out_dtype="f32", epilogue="direct")
    assert e.value.field == "--d-major" and "1x128 x 1x128" in e.value.rule


def test_control_the_untransposed_tma_store_fails():
    spec = TMA_SPECS["128x192"]
    k = plan_kernel(spec)
    assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, 264, 200, 264, trans=False)


# ---- the door on a simulated H200 ---------------------------------------------------------------------------------------
M, N, K = 300, 200, 400  # K blocks 4 (L4 = 4), row blocks 3


def _arrays(out_dtype="bfloat16", sa_rows=4):
    return dict(a=CaiArray((M, K), "float8_e4m3fn", (K, 1), 0x10000000),
                b=CaiArray((N, K), "float8_e4m3fn", (K, 1), 0x20000000),
                out=CaiArray((M, N), out_dtype, (208, 1), 0x30000000),
                sa=CaiArray((sa_rows, 3), "float32", (1, sa_rows), 0x40000000),  # torch's x_scales.t(): (L4, Mb), strides (1, L4)
                sb=CaiArray((4, N), "float32", (208, 1), 0x50000000))  # torch's y_scales.t(): (Kb, N), strides (ld, 1)


def test_door_runs_the_1d2d_kernel_on_b_and_a_with_an_m_major_d(monkeypatch):
    import ptxgen.api.fp8blocks as fb
    from ptxgen.api import fused

    launches = simulated_bfp8_launches(monkeypatch)
    x = _arrays()
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"])
    args = launches[-1][1]
    ints = [v for v in args if not isinstance(v, bytes)]
    # D (out itself), the kernel's M = N, its N = M, K, ldd = out's row pitch; SFA = scale_b, SFB = scale_a, lds_a = scale_b's
    # row pitch, lds_b = L4
    assert ints[:9] == [0x30000000, N, M, K, 208, 0x50000000, 0x40000000, 208, 4], ints
    name = [s.kernel_name for s in fused._KERNELS][-1]
    assert name.endswith(("_dm", "_dm_streamk8")) and "_bs128" in name, name
    # the same call with K's blocks unpadded (Kb x Mb) is the same recipe
    fb.gemm(x["a"], x["b"], CaiArray((4, 3), "float32", (1, 4), 0x40000000), x["sb"], x["out"])
    assert [v for v in launches[-1][1] if not isinstance(v, bytes)][:9] == ints[:9]


def test_f32_out_takes_the_direct_m_major_stores(monkeypatch):
    import ptxgen.api.fp8blocks as fb
    from ptxgen.api import fused

    simulated_bfp8_launches(monkeypatch)
    x = _arrays("float32")
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], out_dtype="f32")
    name = [s.kernel_name for s in fused._KERNELS][-1]
    assert "_dm" in name and "tmastore" not in name and "_f32_" in name, name


def test_scale_a_of_1x128_rows_keeps_the_other_recipes(monkeypatch):
    """scale_a (M, Kb) is A's 1 x 128 rows: the 1D2D / 1D1D door as before (no swap: SFA is scale_a). Where torch's
    two shapes for scale_a are one (M = 4, K <= 128: (4, 1) both), the rows are taken."""
    import ptxgen.api.fp8blocks as fb

    launches = simulated_bfp8_launches(monkeypatch)
    x = _arrays("float32")
    fb.gemm(x["a"], x["b"], CaiArray((M, 4), "float32", (1, 304), 0x40000000), x["sb"], x["out"], out_dtype="f32")
    assert launches[-1][1][-4:] == [0x40000000, 0x50000000, 304, 208]  # 1D1D: SFA, SFB, lds_a, lds_b
    a4 = CaiArray((4, 128), "float8_e4m3fn", (128, 1), 0x10000000)
    b4 = CaiArray((16, 128), "float8_e4m3fn", (128, 1), 0x20000000)
    out4 = CaiArray((4, 16), "bfloat16", (16, 1), 0x30000000)
    fb.gemm(a4, b4, CaiArray((4, 1), "float32", (1, 4), 0x40000000), CaiArray((4, 1), "float32", (1, 4), 0x50000000), out4)
    ints = [v for v in launches[-1][1] if not isinstance(v, bytes)]
    assert ints[:4] == [0x30000000, 4, 16, 128], ints  # not swapped: the kernel's M is the call's M


def test_door_refusals_name_the_rule(monkeypatch):
    import ptxgen.api.fp8blocks as fb

    simulated_bfp8_launches(monkeypatch)
    x = _arrays()
    with pytest.raises(fb.ArgumentError, match="1x128 x 1x128 recipe"):  # c is the 1D1D recipe's
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], CaiArray((M, N), "float32", (208, 1), 0x30000000),
                c=CaiArray((M, N), "float32", (208, 1), 0x60000000))
    with pytest.raises(fb.ArgumentError, match=r"scale_b has shape \(4, 2\)"):  # 128 x 128 blocks on both: not a recipe
        fb.gemm(x["a"], x["b"], x["sa"], CaiArray((4, 2), "float32", (1, 4), 0x50000000), x["out"])
    with pytest.raises(fb.ArgumentError, match="MN-major"):  # B's rows K-major
        fb.gemm(x["a"], x["b"], x["sa"], CaiArray((4, N), "float32", (1, 4), 0x50000000), x["out"])
    with pytest.raises(fb.ArgumentError, match="outer-dim-major"):  # A's blocks row-major
        fb.gemm(x["a"], x["b"], CaiArray((4, 3), "float32", (3, 1), 0x40000000), x["sb"], x["out"], recipe="128x128x1x128")
    with pytest.raises(fb.ArgumentError, match=r"scale_a has shape \(300, 4\)"):  # the recipe asked for, rows given
        fb.gemm(x["a"], x["b"], CaiArray((M, 4), "float32", (1, 304), 0x40000000), x["sb"], x["out"], recipe="128x128x1x128")
    with pytest.raises(fb.ArgumentError, match=r"out has shape \(200, 300\)"):  # in the caller's terms, not the kernel's
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], CaiArray((N, M), "bfloat16", (304, 1), 0x30000000))
    with pytest.raises(fb.ArgumentError, match="--d-major m"):  # a spec that is not the swapped kernel
        fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], spec=fb.default_spec())


def test_plan_agrees_with_the_door(doors):  # noqa: F811 (the fixture)
    import ptxgen.api.fp8blocks as fb
    from ptxgen.api.callplan import Path, plan
    from test_api_plan import F8, F32, DevArray, door_spec

    m, n, k = 384, 700, 1280
    args = (DevArray((m, k), F8), DevArray((n, k), F8), DevArray((12, 3), F32, (1, 12)), DevArray((10, n), F32, (n, 1)),
            DevArray((m, n), "bfloat16"))
    p = plan("fp8blocks.gemm", *args)
    assert p.path is Path.HOT and "128x128 x 1x128" in p.why, p.why
    assert "_dm" in p.spec.kernel_name
    assert door_spec(fb.gemm, *args) == p.spec


# ---- L2 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["128x192", "64x128-sltma-sk", "192x128-f32-sltma"])
def test_compiles_with_the_intended_sass(name):
    """NVRTC for sm_90a: the wgmma (QGMMA) loop, no local memory, no serialized wgmma, with the M-major stores."""
    from test_blockfp8_1d1d import gated_sass

    gated_sass({**TMA_SPECS, **DIRECT_SPECS}[name])


# ---- gpu: against float64 ---------------------------------------------------------------------------------------------
def _quantize(torch, x, rows_per_block):
    """x (R x K) -> e4m3 values and f32 dequantization scales (ceil(R / rows_per_block) x ceil(K/128))."""
    r, k = x.shape
    kb, rb = -(-k // B), -(-r // rows_per_block)
    pad = torch.nn.functional.pad(x, (0, kb * B - k, 0, rb * rows_per_block - r))
    blocks = pad.view(rb, rows_per_block, kb, B)
    scale = blocks.abs().amax((1, 3)).clamp(min=1e-12).float() / 448.0
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).view(rb * rows_per_block, kb * B)[:r, :k]
    return q.contiguous(), scale


def _torch_layouts(torch, xs, ys):
    """torch's BlockWise128x128 scale_a ((L4, Mb), strides (1, L4)) and BlockWise1x128 scale_b ((Kb, N), strides (N, 1))."""
    kb = xs.shape[1]
    sa = torch.nn.functional.pad(xs, (0, -(-kb // 4) * 4 - kb)).t()
    sb = ys.t().contiguous().t().t()
    return sa, sb


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(300, 200, 400), (1000, 136, 1104), (129, 8, 272), (4, 4096, 2000), (2048, 1024, 4096)])
@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
def test_matches_float64(torch_cuda, m, n, k, out_dtype):
    import ptxgen.api.fp8blocks as fb

    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    xq, xs = _quantize(torch, torch.randn(m, k, device="cuda", generator=g) * 3, B)
    yq, ys = _quantize(torch, torch.randn(n, k, device="cuda", generator=g) * 0.01, 1)
    sa, sb = _torch_layouts(torch, xs, ys)
    got = fb.gemm(xq, yq, sa, sb, out_dtype=out_dtype)
    again = fb.gemm(xq.clone(), yq.clone(), sa.clone(), sb.clone(), out_dtype=out_dtype)  # the prepared launch, new pointers
    torch.cuda.synchronize()
    rtol = 2.0 ** -20 if out_dtype == "f32" else 2.0 ** -8
    a64, b64 = xq.double().cpu().numpy(), yq.double().cpu().numpy()
    for d in (got, again):
        assert d.shape == (m, n) and d.stride(1) == 1
        bad = bfp8model.outside_bound(d.double().cpu().numpy().T, b64, ys.double().cpu().numpy(), a64,
                                      xs.t().double().cpu().numpy(), out_rtol=rtol)
        assert not bad.any(), f"{int(bad.sum())} of {bad.size} outside the bound"


@pytest.mark.gpu
def test_out_with_padded_rows_and_the_control(torch_cuda):
    """out= a view with rows 16 elements longer: only its M x N elements change. Control: the output is far from a
    reading with A's K blocks reversed (what a wrong scale index would give)."""
    import ptxgen.api.fp8blocks as fb

    torch = torch_cuda
    m, n, k = 384, 272, 768
    g = torch.Generator(device="cuda").manual_seed(3)
    xq, xs = _quantize(torch, torch.randn(m, k, device="cuda", generator=g), B)
    yq, ys = _quantize(torch, torch.randn(n, k, device="cuda", generator=g), 1)
    sa, sb = _torch_layouts(torch, xs, ys)
    full = torch.full((m, n + 16), 7.0, device="cuda", dtype=torch.bfloat16)
    got = fb.gemm(xq, yq, sa, sb, full[:, :n])
    torch.cuda.synchronize()
    assert got.data_ptr() == full.data_ptr() and (full[:, n:] == 7.0).all()
    args = (b64 := yq.double().cpu().numpy(), ys.double().cpu().numpy(), xq.double().cpu().numpy())
    d = got.double().cpu().numpy().T
    assert not bfp8model.outside_bound(d, *args, xs.t().double().cpu().numpy(), out_rtol=2.0 ** -8).any()
    assert bfp8model.outside_bound(d, *args, xs.t().double().cpu().numpy()[::-1].copy(), out_rtol=2.0 ** -8).mean() > 0.5
    assert b64.shape == (n, k)


# ---- the prepared launch (ptxgen.api.launch.fp8launch) of the swapped recipe, on a simulated H200 -----------------------
def _moved(x, name, shift):
    old = x[name]
    cai = old.__cuda_array_interface__
    size = {"float8_e4m3fn": 1, "bfloat16": 2, "float32": 4}[old.dtype]
    return CaiArray(tuple(cai["shape"]), old.dtype, tuple(s // size for s in cai["strides"]), cai["data"][0] + shift)


@pytest.mark.parametrize("moved", ["a", "b", "out", "sa", "sb"])
def test_a_repeated_call_re_points_the_swapped_arrays_without_a_spec(monkeypatch, moved):
    """The second call with one key takes the prepared launch (no spec built) with the pointers in the kernel's roles:
    its A is b, its B a, its SFA scale_b, its SFB scale_a; a moved array lands in its role, as the slow path puts it."""
    import ptxgen.api.fp8blocks as fb

    launches = simulated_bfp8_launches(monkeypatch)
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode",
                        lambda args: args.global_address.to_bytes(8, "little") + bytes(120))
    x = _arrays()
    fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"])
    first = launches[-1]
    y = dict(x)
    y[moved] = _moved(x, moved, 0x1000)
    with monkeypatch.context() as mp:
        mp.setattr(fb, "chosen_spec", lambda *a, **k: pytest.fail("the prepared call built a spec"))
        mp.setattr(fb, "_swapped_spec", lambda *a, **k: pytest.fail("the prepared call built a spec"))
        fb.gemm(y["a"], y["b"], y["sa"], y["sb"], y["out"])
    hot = launches[-1]
    assert len(fb._BY_INFO) == 1 and hot != first  # control: the move is visible in the arguments
    fb._BY_INFO.clear()
    fb.gemm(y["a"], y["b"], y["sa"], y["sb"], y["out"])
    assert launches[-1] == hot  # what the slow path launches for the moved arrays
