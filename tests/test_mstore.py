"""The TMA-store epilogue of an M-major D (``--d-major m --epilogue tma``: stmatrix.trans into shared memory, a TMA store
over the user's row-major D; derive.store.epilogue ``_plan_m_major``) and the chooser's switch for it (swaprules.SWAP_TMA_STORE).

Tiers: the models' own statements (stmatrix .trans, the TMA store's clipping) against hand-written cases; L1 (the plan
through model.bridges.check_mstore: every element of D once, at its address, partial tiles at both edges) with controls that
must fail; the spec, the binding and the switch; L2 (NVRTC + SASS: STSM.16.MT88, UTMASTG, no local memory); and on the
H200 (gpu) ``ptxgen validate``'s runner and ``ptxgen.gemm`` with the switch (``runtime.choose.rules.SWAP_TMA_STORE``) on,
against float64.
"""

import dataclasses

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.rules import m_major_chunk_cols
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.isa.types import DMajor, Epilogue, SpecError
from ptxgen.model.layouts import fragmodel, tmamodel
from ptxgen.model.bridges.check_mstore import check_m_major_store
from ptxgen.runtime.choose import rules as swaprules
from ptxgen.runtime.choose import choose
from ptxgen.runtime.launch.launch import Problem, problem_errors
from test_dmajor import _rel, _torch


def tspec(bm=128, bn=16, stages=10, **kw):
    fields = dict(bm=bm, bn=bn, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=stages,
                  out_dtype="bf16", d_major="m", epilogue="tma")
    return make_spec(**{**fields, **kw})


# the swapped tiles the chooser builds (swap-ab 128 x 16, 10 stages; swap-fit 128 x 168 / 128 x 104, stages that fit) and others
SPECS = {
    "128x16": tspec(),
    "128x168": tspec(bn=168, stages=5),
    "128x104": tspec(bn=104, stages=6),
    "64x24-f16": tspec(bm=64, bn=24, stages=8, dtype="f16", out_dtype="f16"),
    "64x8": tspec(bm=64, bn=8, stages=12),  # swap-ab at M <= 8: one x2 call a chunk
    "64x16-e4m3": tspec(bm=64, bn=16, bk=128, stages=12, dtype="e4m3", out_dtype="bf16"),  # e4m3 inputs, bf16 out
    "128x16-persistent": tspec(stages=4, schedule="persistent"),
    "128x192-persistent": tspec(bn=192, stages=4, schedule="persistent"),
    "128x128-pingpong": tspec(bn=128, stages=4, schedule="persistent", consumers="pingpong"),
}


def _ldd(m):
    return -(-m // 8) * 8


# -- the models' statements, by hand -------------------------------------------------------------------------------------
def test_stmatrix_trans_stores_each_matrix_column_as_a_row():
    """One 8x8 matrix (x1): element (r, c) = 8r + c, thread t holds row t/4, columns 2(t%4), +1; lane c gives the address
    of column c. After .trans, column c's 8 elements lie at that address, row r at +2r; the plain form stores row r there."""
    regs = [((8 * (t // 4) + 2 * (t % 4)) | ((8 * (t // 4) + 2 * (t % 4) + 1) << 16),) for t in range(32)]
    addresses = [32 * lane for lane in range(32)]
    for trans in (True, False):
        image = np.zeros(32 * 8, dtype=np.uint8)
        fragmodel.stmatrix(image, addresses, regs, matrices=1, trans=trans)
        got = image.view(np.uint16).reshape(8, 16)[:, :8]  # the 16-byte run at address 32 j, j = 0..7
        want = np.arange(64).reshape(8, 8)
        assert (got == (want.T if trans else want)).all()


def test_tma_store_drops_rows_past_the_end_and_overruns_a_ragged_inner_end():
    """A 64 x 2 box at (inner 0, outer 0) over a 13 x 3 tensor (rows 16 apart): rows >= 3 dropped; columns 13..15 written
    (the measured overrun to the 16-byte boundary), 16.. not; with no overrun, exactly 13."""
    tma = {"swizzle": "none", "box": [64, 2], "copies": [{"smem_offset_bytes": 0, "inner": 0, "outer": 0}]}
    image = np.arange(256, dtype=np.uint16).view(np.uint8).copy()
    w = tmamodel.store(tma, 2, 0, image, (0, 2), (13, 3), 16)
    assert sorted(off for off, _ in w) == [32 + i for i in range(16)]  # only row 2 (box row 0) lies inside
    assert dict(w)[32 + 5] == 5
    assert len(tmamodel.store(tma, 2, 0, image, (0, 0), (13, 3), 16, overrun_bytes=0)) == 2 * 13
    with pytest.raises(ValueError):
        tmamodel.store(tma, 2, 0, image, (0, 0), (13, 3), 13)  # a row stride of 26 B: no tensor map


# -- the plan ------------------------------------------------------------------------------------------------------------
def test_chunks_buffers_and_the_map_follow_bn_and_the_schedule():
    assert [m_major_chunk_cols(bn) for bn in (8, 16, 24, 104, 168, 192, 256)] == [8, 16, 24, 104, 56, 96, 128]
    p = plan_kernel(SPECS["128x168"]).store
    assert (p.chunk_cols, p.chunks_per_slab, p.buffers_per_storer, p.tma.box, p.tma.global_dims) == (56, 3, 2, (64, 56), ("M", "N"))
    assert [c.matrices for c in p.trans_calls] == [4, 4, 4, 2]
    one = plan_kernel(SPECS["128x104"]).store  # one chunk a warpgroup, one tile a CTA: one buffer
    assert (one.chunks_per_slab, one.buffers_per_storer, one.tma.box) == (1, 1, (64, 104))
    assert plan_kernel(SPECS["128x16-persistent"]).store.buffers_per_storer == 2  # a next tile to overlap with
    assert SPECS["128x104"].store_staging_bytes == 2 * 104 * 128
    ex = plan_kernel(SPECS["128x16"]).store.to_json()
    assert ex["writer"] == "stmatrix.trans" and ex["chunk"] == [64, 16] and ex["d_major"] == "m"


# -- L1: the plan through the independent models -------------------------------------------------------------------------
CASES = [
    ("128x16", 300, 13), ("128x16", 1001, 1), ("128x16", 256, 32), ("128x16", 136, 17),  # M % 8 != 0: edge tiles direct
    ("128x168", 130, 333), ("128x168", 264, 168), ("128x104", 200, 200), ("128x104", 131, 105),
    ("64x24-f16", 77, 50), ("64x8", 131, 7), ("64x16-e4m3", 64, 16), ("128x16-persistent", 129, 31), ("128x192-persistent", 136, 200),
    ("128x128-pingpong", 200, 130),
]


@pytest.mark.parametrize("name,m,n", CASES)
def test_every_element_lands_once_at_its_address(name, m, n):
    spec = SPECS[name]
    k = plan_kernel(spec)
    for ldd in (_ldd(m), _ldd(m) + 24):
        assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, m, n, ldd) == []


@pytest.mark.parametrize("name,m,n", [("128x16", 300, 13), ("128x168", 130, 333), ("128x104", 131, 105)])
def test_controls_untransposed_a_row_major_box_and_no_edge_rule_fail(name, m, n):
    spec = SPECS[name]
    k = plan_kernel(spec)
    ldd = _ldd(m)
    assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, m, n, ldd, trans=False)
    assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, m, n, ldd, box_order="swapped")
    assert check_m_major_store(k.store, k.direct, spec.bm, spec.bn, m, n, ldd, edge_rule=False)  # M % 8 != 0 here
    assert not check_m_major_store(k.store, k.direct, spec.bm, spec.bn, _ldd(m), n, ldd, edge_rule=False)  # M % 8 == 0


def test_control_a_wrong_stmatrix_address_is_caught():
    spec = SPECS["128x168"]
    k = plan_kernel(spec)
    c0 = k.store.trans_calls[0]
    bad = dataclasses.replace(c0, row_expr=c0.row_expr.replace("lane % 8", "(lane + 1) % 8"))
    store = dataclasses.replace(k.store, trans_calls=(bad,) + k.store.trans_calls[1:])
    assert check_m_major_store(store, k.direct, spec.bm, spec.bn, 264, 168, 264)


# -- the spec, the emitted code, the binding, the switch ------------------------------------------------------------------
def test_m_major_tma_store_is_legal_for_16_bit_outputs_only():
    assert SPECS["128x16"].kernel_name.endswith("_tmastore_dm")
    with pytest.raises(SpecError) as e:
        tspec(out_dtype="f32")
    assert e.value.field == "--d-major" and "--epilogue" in e.value.rule
    with pytest.raises(SpecError) as e:
        tspec(fuse="bias=col")
    assert e.value.field == "--d-major"


def test_the_kernel_places_the_plans_calls_and_box_coordinates():
    src = render_kernel(plan_kernel(SPECS["128x168"]))
    assert src.count("stmatrix_x4_trans(buf") == 3 and src.count("stmatrix_x2_trans(buf") == 1
    assert "tma_store_2d(&tmap_d, buf, m0 + wg * 64, n0 + c * 56)" in src
    assert "if (m0 + 128 <= M || M % 8 == 0)" in src and "bulk_wait_read<1>()" in src
    one = render_kernel(plan_kernel(SPECS["128x104"]))
    assert "bulk_wait_read<0>()" in one and "stmatrix_x4(" not in one.split("__global__")[1]
    plain = render_kernel(plan_kernel(make_spec(**{**SPECS["128x16"].to_json(), "d_major": "n", "bn": 64, "stages": 4})))
    assert "stmatrix_x4_trans" not in plain  # the row-major TMA store is unchanged


def test_problem_needs_a_16_byte_row_pitch_for_the_map():
    spec = SPECS["128x16"]
    assert problem_errors(spec, Problem(1001, 13, 64, 64, 64, 1008)) == []
    errs = problem_errors(spec, Problem(1001, 13, 64, 64, 64, 1001))
    assert errs and "TMA store" in errs[0]
    direct = make_spec(**{**spec.to_json(), "epilogue": "direct"})
    assert problem_errors(direct, Problem(1001, 13, 64, 64, 64, 1001)) == []  # control: the direct stores take any pitch


def test_binding_pads_an_allocated_d_and_refuses_an_unaligned_one():
    from ptxgen.api.arrays.binding import bind
    from ptxgen.runtime.launch.arrays import ArrayInfo
    from ptxgen.runtime.launch.errors import ProblemError

    def info(name, shape, strides, ptr=1 << 20):
        return ArrayInfo(name, ptr, shape, strides, "bf16", 2, (2, 0), "torch", "torch")

    spec = SPECS["128x16"]
    b, a = info("a", (1001, 64), (64, 1)), info("b", (13, 64), (64, 1), ptr=1 << 24)  # kernel(b, a, out.T): A = b is N x K
    assert bind(spec, b, a, None).problem.ldd == 1008
    assert bind(dataclasses.replace(spec, epilogue=Epilogue.DIRECT), b, a, None).problem.ldd == 1001
    assert bind(spec, b, a, info("out", (1001, 13), (1, 1008), ptr=1 << 28)).problem.ldd == 1008
    with pytest.raises(ProblemError, match="TMA store"):
        bind(spec, b, a, info("out", (1001, 13), (1, 1001), ptr=1 << 28))
    one_row = bind(spec, b, info("b", (1, 64), (64, 1), ptr=1 << 24), info("out", (1001, 1), (1, 1001), ptr=1 << 28))  # a single column: any pitch
    assert one_row.problem.ldd == 1008


@pytest.mark.parametrize("dtype,m,n,k,rule,tile", [("bf16", 333, 8192, 8192, "cost-model+swap-ab", (128, 168)),
                                                    ("bf16", 200, 8192, 8192, "cost-model+swap-ab", (128, 104)),
                                                    ("bf16", 16, 16384, 4096, "swap-ab", (128, 16)),
                                                    ("bf16", 1, 7168, 16384, "swap-ab", (64, 8)),
                                                    ("bf16", 64, 16384, 4096, "swap-ab", (128, 64)),
                                                    ("e4m3", 16, 7168, 16384, "swap-ab", (64, 16))])
def test_the_switch_puts_the_swapped_picks_on_the_tma_store(monkeypatch, dtype, m, n, k, rule, tile):
    on = choose(dtype, "sm_90a", m, n, k)  # shipped: on (measured faster, runs/2026-12-01-gpu-tier-swap-tmastore)
    monkeypatch.setattr(swaprules, "SWAP_TMA_STORE", False)  # control: the direct stores
    off = choose(dtype, "sm_90a", m, n, k)
    assert off.chosen_by == rule and off.spec.epilogue is Epilogue.DIRECT and (off.spec.bm, off.spec.bn) == tile
    assert on.chosen_by == rule and on.swap_ab and on.spec.d_major is DMajor.M and (on.spec.bm, on.spec.bn) == tile
    assert on.spec.epilogue is Epilogue.TMA and "TMA store" in on.why
    assert on.spec.stages <= off.spec.stages  # the staging buffers may cost a stage (128 x 168: 6 -> 5)


# -- L2: NVRTC and the SASS check ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SPECS))
def test_kernels_compile_with_stmatrix_trans_tma_stores_and_no_local_memory(name):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = SPECS[name]
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok, rep.problems
    assert rep.structure["stmatrix .trans"] > 0 and rep.structure["TMA stores"] > 0 and rep.local_bytes == 0


def test_control_the_sass_check_wants_the_transposed_form():
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    spec = SPECS["128x16"]
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    rep = check_sass(spec, c.cubin, sass=sass.replace("STSM.16.MT88", "STSM.16.M88"))
    assert any("stmatrix .trans" in p for p in rep.problems)


# -- on the H200 -----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name,m,n,k", [("128x16", 1001, 13, 1000), ("128x16", 4096, 1, 200), ("128x168", 331, 333, 520),
                                        ("128x104", 8200, 201, 264), ("64x24-f16", 77, 50, 72),
                                        ("128x16-persistent", 1999, 31, 128), ("128x192-persistent", 1000, 400, 256),
                                        ("128x128-pingpong", 517, 260, 192)])
def test_kernels_match_float64_and_write_nothing_else(gpu, name, m, n, k):
    """ptxgen validate's runner (the kernel's M x N x K; D M-major, poison around it, float64 reference)."""
    from ptxgen.runtime.check.validate import validate_spec

    r = validate_spec(SPECS[name], m, n, k, seed=11)
    assert r.passed, r.verdict


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,dtype", [(1, 7169, 16384, "bfloat16"), (13, 16385, 4096, "bfloat16"), (16, 4099, 1000, "float16"),
                                         (61, 8191, 4096, "float8_e4m3fn"), (331, 8199, 8192, "bfloat16"),
                                         (201, 8208, 8192, "bfloat16")])
def test_gemm_with_the_switch_on_matches_float64(gpu, reference_chooser, monkeypatch, m, n, k, dtype):
    """ptxgen.gemm with swaprules.SWAP_TMA_STORE on, odd M and N: the swapped TMA-store kernel, slow path then hot path, with
    and without out (an allocated out's rows are padded to 16 B; the user's unaligned out is staged)."""
    import ptxgen
    from ptxgen.api import dispatch

    torch = _torch()
    monkeypatch.setattr(swaprules, "SWAP_TMA_STORE", True)
    monkeypatch.setattr(dispatch, "_BY_KEY", {})
    monkeypatch.setattr(dispatch, "_SWAPPED", {})
    if n * k < swaprules.SWAP_AB_MIN_WEIGHT:
        monkeypatch.setattr(swaprules, "SWAP_AB_MIN_WEIGHT", 0)
    tdt = getattr(torch, dtype)
    odt = torch.bfloat16 if dtype.startswith("float8") else tdt  # e4m3 inputs: bf16 out
    g = torch.Generator(device="cuda").manual_seed(m + n)

    def rand(rows):
        return (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=g) * 0.5).to(tdt)

    a, b = rand(m), rand(n)
    spec, why = ptxgen.api.gemm_spec(a, b)
    assert spec.d_major is DMajor.M and spec.epilogue is Epilogue.TMA and "TMA store" in why
    out = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
    assert ptxgen.gemm(a, b, out) is out
    fresh = ptxgen.gemm(a, b)  # allocated: rows padded, a view of the first n columns
    a2 = rand(m)
    again = ptxgen.gemm(a2, b)  # the hot path
    padded = torch.full((m, _ldd(n)), float("nan"), device="cuda", dtype=odt)
    view = padded[:, :n]
    assert ptxgen.gemm(a2, b, view) is view
    torch.cuda.synchronize()
    assert fresh.shape == (m, n) and fresh.stride(1) == 1
    assert _rel(torch, out, a, b) < 1e-2 and _rel(torch, fresh, a, b) < 1e-2 and _rel(torch, again, a2, b) < 1e-2
    assert _rel(torch, view, a2, b) < 1e-2 and torch.isnan(padded[:, n:]).all()  # nothing past column n


def test_the_benchmark_times_the_swapped_kernels_both_ways():
    """tools/bench_mstore.py: per shape the same swapped tile with the direct and the TMA store (and the direct stores at
    the TMA kernel's depth where staging costs a stage); it leaves the chooser's switch as shipped."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "bench_mstore.py"
    mod = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location("bench_mstore", path))
    spec.loader.exec_module(mod)
    for shape in mod.SHAPES:
        d, t, how = mod.specs_for(*shape)
        assert (d.epilogue, t.epilogue) == (Epilogue.DIRECT, Epilogue.TMA) and d.d_major is t.d_major is DMajor.M
        assert (d.bm, d.bn) == (t.bm, t.bn) and (t.bn >= shape[0] or shape[0] > 128)
        ctl = mod.control_for(d, t)
        assert ctl is None or (ctl.stages == t.stages and ctl.epilogue is Epilogue.DIRECT)
    assert swaprules.SWAP_TMA_STORE is True  # the shipped switch, restored after the tool's picks


def test_an_f32_output_keeps_the_swap_with_the_direct_stores(monkeypatch):
    # the M-major TMA store is derived for 16-bit outputs; ptxgen.gemm with out_dtype f32 on a swapped shape used to
    # lose the swap (the retyped spec was illegal, select fell to the default kernel): the full GPU-tier run's gpu test caught it
    from ptxgen.api.select import select_choice

    monkeypatch.setattr(swaprules, "SWAP_AB_MIN_WEIGHT", 0)
    monkeypatch.setattr(swaprules, "SWAP_AB_MIN_FILL", 0.0)
    spec, why, swapped = select_choice("bf16", "sm_90a", 16, 999, 4100, out_dtype="f32")
    assert swapped and spec.d_major is DMajor.M and spec.out_dtype.value == "f32" and spec.epilogue is Epilogue.DIRECT
    spec, _, swapped = select_choice("bf16", "sm_90a", 16, 999, 4100)  # control: a bf16 output keeps the TMA store
    assert swapped and spec.epilogue is Epilogue.TMA
    spec, _, swapped = select_choice("bf16", "sm_90a", 333, 8192, 8192, out_dtype="f32")
    assert swapped and spec.epilogue is Epilogue.DIRECT and (spec.bm, spec.bn) == (128, 168)
