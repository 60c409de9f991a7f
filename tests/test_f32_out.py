"""An f32 output asked of a chooser pick with the TMA-store epilogue (``ptxgen.gemm(a, b, out)`` with a float32 ``out``,
or ``out_dtype="f32"``): ``api.select._with_out_dtype`` keeps the pick's kernel (tile, stages, schedule, cluster, stream-K,
swap): with the f32 TMA store where the rules accept it (a row-major D on wgmma: st.shared.v2.f32 staging, 2026-12-02; measured
1.0-4.6% faster than the direct stores, runs/2026-12-02-stage-release-f32-store/run5 and runs/2026-12-02-gpu-tier-f32-store), with the direct stores where they refuse it (an
M-major D: stmatrix.trans packs 16-bit outputs). Before 2026-12-02, only swap-AB's M-major TMA-store picks kept their tile; a
row-major tuned pick fell to the default kernel.

Tiers: selection (pure Python, the shipped tables) with controls; the launch path up to the driver on a simulated device
(NVRTC compiles the kernel); and on the H200 (gpu, ``-k out_dtype_fallback``) ``ptxgen.gemm`` against float64 with the
launched kernel's name.
"""

from __future__ import annotations

import dataclasses

import pytest

from ptxgen.api.select import _with_out_dtype, default_spec, select_choice
from ptxgen.isa.types import DMajor, DType, Epilogue, Major, SpecError
from ptxgen.runtime.choose import choose

# (dtype, M, N, K, the rule that picks a TMA-store kernel there, its tile): row-major picks of every kind, then swap-AB's
PICKS = [
    ("bf16", 8192, 8192, 1024, "tuned", (128, 128)),  # the tuning table's persistent ping-pong kernel
    ("bf16", 3000, 5000, 2000, "tuned", (128, 192)),
    ("bf16", 1024, 1024, 1024, "cost-model", (128, 128)),
    ("f16", 2048, 2048, 2048, "cost-model", (128, 256)),  # one CTA per tile (bf16's table, borrowed)
    ("bf16", 3000, 7000, 5000, "cost-model+off-sector+stream-k", (128, 256)),  # 2x1 cluster, stream-K
    ("e4m3", 1024, 1024, 1024, "cost-model", (64, 256)),
    ("e4m3", 2048, 2048, 2048, "cost-model", (128, 256)),  # 2x1 cluster
    ("bf16", 128, 16384, 4096, "small-m", (128, 128)),  # small-m's wide kernel
    ("bf16", 16, 4096, 4096, "swap-ab", (64, 16)),
    ("e4m3", 64, 7168, 16384, "swap-ab", (64, 64)),
    ("bf16", 333, 8192, 8192, "cost-model+swap-ab", (128, 168)),
]
F32 = DType.F32


def _pick(dtype, m, n, k, rule, tile):
    """(the chooser's choice, the spec an f32 output must get): the pick stores through TMA; for an f32 output the rules
    refuse that store for an M-major D (then the direct stores) and accept it for a row-major one (wgmma: the f32 TMA
    store), which the API keeps."""
    c = choose(dtype, "sm_90a", m, n, k)
    assert (c.chosen_by, (c.spec.bm, c.spec.bn), c.spec.epilogue) == (rule, tile, Epilogue.TMA)
    if c.spec.d_major is DMajor.M:
        with pytest.raises(SpecError, match="--epilogue"):
            dataclasses.replace(c.spec, out_dtype=F32)
        return c, dataclasses.replace(c.spec, out_dtype=F32, epilogue=Epilogue.DIRECT)
    want = dataclasses.replace(c.spec, out_dtype=F32)
    assert want.epilogue is Epilogue.TMA
    return c, want


@pytest.mark.parametrize("dtype,m,n,k,rule,tile", PICKS, ids=[f"{p[0]}-{p[1]}x{p[2]}x{p[3]}" for p in PICKS])
def test_an_f32_output_keeps_the_picks_kernel(dtype, m, n, k, rule, tile):
    c, want = _pick(dtype, m, n, k, rule, tile)
    spec, why, swapped = select_choice(dtype, "sm_90a", m, n, k, out_dtype="f32")
    # every field as picked (tile, stages, schedule, consumers, raster, cluster, stream-K, D's majorness) but the output
    # type and, for an M-major D, the epilogue
    assert spec == want
    assert spec.stages == c.spec.stages and why == c.why and swapped == c.swap_ab == (spec.d_major is DMajor.M)
    assert spec.kernel_name != default_spec(dtype, "sm_90a", Major.K, Major.K, "f32").kernel_name
    # control: the pick's own output type keeps the TMA store, the whole spec as chosen
    own, own_why, own_swap = select_choice(dtype, "sm_90a", m, n, k)
    assert own == c.spec and own.epilogue is Epilogue.TMA and own_why == c.why and own_swap == c.swap_ab


def test_an_output_the_tma_store_takes_keeps_it():
    """f16 out of a bf16 pick: the TMA store packs f16 too, so nothing falls back (the fallback is the rules' refusal)."""
    c = choose("bf16", "sm_90a", 8192, 8192, 1024)
    spec, _, _ = select_choice("bf16", "sm_90a", 8192, 8192, 1024, out_dtype="f16")
    assert spec == dataclasses.replace(c.spec, out_dtype=DType.F16) and spec.epilogue is Epilogue.TMA


def test_a_row_major_f32_pick_keeps_the_tma_store_an_m_major_one_takes_the_direct_stores():
    """Both sides of the fallback in one place: the ping-pong bf16 pick (row-major D) keeps its TMA store for f32, the
    swap-AB pick (M-major D, refused) gets the direct stores."""
    row = choose("bf16", "sm_90a", 8192, 8192, 1024)
    spec, _, _ = select_choice("bf16", "sm_90a", 8192, 8192, 1024, out_dtype="f32")
    assert spec == dataclasses.replace(row.spec, out_dtype=F32) and spec.epilogue is Epilogue.TMA
    col = choose("bf16", "sm_90a", 16, 4096, 4096)
    assert col.spec.d_major is DMajor.M and col.spec.epilogue is Epilogue.TMA
    spec, _, _ = select_choice("bf16", "sm_90a", 16, 4096, 4096, out_dtype="f32")
    assert spec.epilogue is Epilogue.DIRECT and (spec.bm, spec.bn, spec.stages) == (col.spec.bm, col.spec.bn, col.spec.stages)


def test_what_the_direct_stores_refuse_too_is_still_refused():
    """An output no epilogue writes from an f32 accumulator (s32) raises for a TMA-store pick (the direct retry is refused
    by the rules as well) and for a direct-store one (no retry at all): select_choice then takes the default path."""
    tma = choose("bf16", "sm_90a", 8192, 8192, 1024).spec
    direct = dataclasses.replace(tma, epilogue=Epilogue.DIRECT)
    for spec in (tma, direct):
        with pytest.raises(SpecError, match="out-dtype"):
            _with_out_dtype(spec, "s32")
    assert _with_out_dtype(direct, "f32") == dataclasses.replace(direct, out_dtype=F32)


# -- L2: the kernels an f32 output gets compile (NVRTC, sm_90a) and pass the SASS check ---------------------------------
@pytest.mark.parametrize("dtype,m,n,k,rule,tile", PICKS, ids=[f"{p[0]}-{p[1]}x{p[2]}x{p[3]}" for p in PICKS])
def test_the_f32_kernels_compile_with_no_local_memory(dtype, m, n, k, rule, tile):
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    spec, _, _ = select_choice(dtype, "sm_90a", m, n, k, out_dtype="f32")
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    rep = check_sass(spec, c.cubin, sass=sass)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "STSM" not in sass  # no stmatrix: it packs 16-bit outputs
    if spec.epilogue is Epilogue.TMA:  # the f32 staging: st.shared.v2.f32 pairs, then the TMA store
        assert "STS.64" in sass and "UTMASTG" in sass
    else:  # D leaves through global stores only
        assert "UTMASTG" not in sass and "STG.E" in sass


# -- through ptxgen.gemm on a simulated device (NVRTC compiles the kernel; no GPU) ---------------------------------------
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (16, 4096, 4096)], ids=["cost-model", "swap-ab"])
def test_gemm_with_an_f32_out_launches_the_picks_tile(monkeypatch, m, n, k):
    import ptxgen
    from ptxgen.api import dispatch
    from test_api import FakeArray, SimulatedGPU, kmajor

    sim = SimulatedGPU(monkeypatch)
    monkeypatch.setattr(dispatch, "_BY_KEY", {})
    monkeypatch.setattr(dispatch, "_SWAPPED", {})
    c = choose("bf16", "sm_90a", m, n, k)
    assert c.spec.epilogue is Epilogue.TMA
    # row-major D (cost-model): the f32 TMA store; M-major D (swap-ab): refused, the direct stores
    want = dataclasses.replace(c.spec, out_dtype=F32, **({"epilogue": Epilogue.DIRECT} if c.spec.d_major is DMajor.M else {}))

    class Out(FakeArray):
        @property
        def T(self):  # the swap-ab launch writes out.T: the same pointer, shape and strides reversed
            return FakeArray((n, m), "float32", strides=(1, n), ptr=ptr)

    ptr = 0x7A0000000000
    out = Out((m, n), "float32", strides=(n, 1), ptr=ptr)
    assert ptxgen.gemm(kmajor(m, k), kmajor(n, k), out) is out  # out's dtype is the output type
    assert sim.loaded["name"] == want.kernel_name and len(sim.launches) == 1


# -- on the H200 ---------------------------------------------------------------------------------------------------------
GPU_PICKS = [p for p in PICKS if p[1] * p[2] <= 3000 * 7000]  # the reference is float64 on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,m,n,k,rule,tile", GPU_PICKS, ids=[f"{p[0]}-{p[1]}x{p[2]}x{p[3]}" for p in GPU_PICKS])
def test_gemm_out_dtype_fallback_f32_matches_float64_with_the_picks_tile(gpu, reference_chooser, monkeypatch, dtype, m, n, k, rule, tile):
    """ptxgen.gemm(a, b, out) with a float32 out (NaN-filled) on shapes whose pick stores through TMA: the kernel launched
    is the pick's tile (its name) with the f32 TMA store (row-major D) or the direct stores (M-major D), not the default; out within 1e-3 of float64 (1e-2 for
    e4m3 inputs)."""
    import ptxgen
    from ptxgen.api import dispatch
    from ptxgen.api.kernel import CompiledKernel

    torch = pytest.importorskip("torch")
    if gpu.arch.value != "sm_90a":
        pytest.skip("the shipped tables are the H200's (sm_90a)")
    c, want = _pick(dtype, m, n, k, rule, tile)
    launched = []
    real = CompiledKernel._launch

    def spy(self, *args):
        launched.append(self.name)
        return real(self, *args)

    monkeypatch.setattr(CompiledKernel, "_launch", spy)
    monkeypatch.setattr(dispatch, "_BY_KEY", {})  # select afresh: the slow path, where CompiledKernel._launch runs
    monkeypatch.setattr(dispatch, "_SWAPPED", {})
    dispatch._TORCH_ENTRIES.clear()
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}[dtype]
    a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(tdt)
    b = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(tdt)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    spec, why = ptxgen.api.gemm_spec(a, b, out)
    assert spec == want and why == c.why
    assert ptxgen.gemm(a, b, out) is out
    torch.cuda.synchronize()
    assert launched == [want.kernel_name], launched
    assert want.kernel_name != default_spec(dtype, "sm_90a", Major.K, Major.K, "f32").kernel_name
    ref = a.double() @ b.double().t()
    rel = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    tol = 1e-2 if dtype == "e4m3" else 1e-3  # FP8 wgmma adds its products with fewer bits than f32 (test_api_torch: 2e-2)
    assert not torch.isnan(out).any() and rel < tol, rel
