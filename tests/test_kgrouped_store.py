"""The K-grouped GEMM's TMA-store epilogue and its tile variants (ptxgen.kgrouped.KGROUPED_VARIANTS).

L1: D's map (rank 3 over (N, M, G), derived from the staging layout) and the stores of every tile of the walk, resolved
with the launch's own problem values, against the independent model ptxgen.model.layouts.kgroupmodel (what a TMA
store writes); controls: a rank-2 map over the stacked G M rows writes into the next group, and a TMA store on a tile
crossing an N that is not a multiple of 16 bytes writes past N. Ping-pong consumers: the K tail zeroed by one
warpgroup (the rendered C on the CPU), and the ring with tiles of different K-tile counts through the independent
pipeline simulator (control: a warpgroup starting at tile x its K-tiles deadlocks or reads a stale stage). The launch path on a simulated device (the map's
dimensions and strides). L2: every variant compiles with NVRTC, passes the SASS gate, no local memory. GPU (marked gpu):
each variant against float64 at odd shapes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_kgrouped_door import _reference64

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.kgrouped import KGROUPED_FP8_VARIANTS, KGROUPED_VARIANTS, kgrouped_spec
from ptxgen.model.layouts import kgroupmodel
from ptxgen.runtime.launch.grouped import GroupedProblem

ROOT = Path(__file__).resolve().parents[1]
TMA_VARIANTS = [v for v, f in KGROUPED_VARIANTS.items() if f.get("epilogue") == "tma"]


def _spec(variant: str, out_dtype: str = "bf16", major: str = "mn", dtype: str = "bf16"):
    return kgrouped_spec(dtype, out_dtype, "sm_90a", major, major, variant=variant)


def _fp8_spec(variant: str | None, out_dtype: str | None = None):
    return kgrouped_spec("e4m3", out_dtype, "sm_90a", "k", "k", rowwise=True, variant=variant)


FP8_TMA_VARIANTS = [v for v, f in KGROUPED_FP8_VARIANTS.items() if f.get("epilogue") == "tma"]


def _ldd(n: int, out_bytes: int, pad: int = 0) -> int:
    """A row pitch of 16-byte rows (what the launch accepts), ``pad`` more 16-byte granules."""
    per = 16 // out_bytes
    return -(-n // per) * per + pad * per


def _resolve(tma, p: GroupedProblem):
    """The map's extents and strides for problem ``p``, through the launch's own names (GroupedProblem.map_value)."""
    return [p.map_value(d) for d in tma.global_dims], [p.map_value(s) for s in tma.stride_names]


def _tile_writes(plan, p: GroupedProblem, g: int, m0: int, n0: int, rank2: bool = False, always_tma: bool = False):
    """Every element offset one tile's epilogue writes (from out[0]): the TMA stores of each consumer warpgroup's slab
    and chunk where the plan sends the tile through TMA, else the direct stores (exactly rows < M, columns < N)."""
    spec, st = plan.spec, plan.store
    if not (always_tma or st.uses_tma(n0, spec.bn, p.n)):
        rows = np.arange(m0, min(m0 + spec.bm, p.m))
        cols = np.arange(n0, min(n0 + spec.bn, p.n))
        return (g * p.m * p.ldd + rows[:, None] * p.ldd + cols[None, :]).ravel()
    dims, strides = _resolve(st.tma, p)
    box = list(st.tma.box)
    out = []
    for slab in range(spec.bm // st.rows):
        for c in range(st.chunks_per_slab):
            x, y = n0 + c * st.chunk_cols, m0 + slab * st.rows
            if rank2:  # the control: D as one (N, G M) matrix, the group's rows at g M
                out.append(kgroupmodel.tma_store_writes([p.n, p.groups * p.m], [p.ldd], box[:2], [x, g * p.m + y],
                                                        st.tma.element_bytes))
            else:
                out.append(kgroupmodel.tma_store_writes(dims, strides, box, [x, y, g], st.tma.element_bytes))
    return np.concatenate(out)


def _walk_problems(plan, m: int, n: int, groups: int, pad: int = 0, **kw) -> list[str]:
    spec = plan.spec
    p = GroupedProblem(m, n, 1000, groups, m, n, _ldd(n, spec.out_dtype.bytes, pad))
    problems, every = [], []
    for t in plan.kgrouped.walk([1000] * groups, 1000, m, n):
        if not t.active:  # a cluster's CTA past the last tile: it stores nothing (its epilogue is under tile_active)
            continue
        w = _tile_writes(plan, p, t.group, t.m0, t.n0, **kw)
        every.append(w)
        problems += kgroupmodel.check_tile_writes(w, t.group, t.m0, t.n0, spec.bm, spec.bn, m, n, p.ldd)
    allw = np.concatenate(every)
    if not problems and (np.unique(allw).size != allw.size or allw.size != groups * m * n):
        problems.append("the tiles do not write every element of out exactly once")
    return problems


SHAPES = [(1, 8, 1), (64, 64, 2), (100, 72, 13), (200, 264, 3), (128, 130, 2), (129, 257, 1)]  # (M, N, G)


# ---- L1 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", TMA_VARIANTS)
def test_d_map_is_rank3_over_each_groups_out_from_the_staging_layout(variant):
    plan = plan_kernel(_spec(variant))
    tma = plan.store.tma
    assert tma.rank == 3 and tma.global_dims == ("N", "M", "G") and tma.stride_names == ("ldd", "ldd_group")
    assert tma.box == (plan.store.chunk_cols, plan.store.rows, 1) and tma.layout is plan.store.staging
    p = GroupedProblem(100, 72, 50, 3, 100, 72, 80)
    assert _resolve(tma, p) == ([72, 100, 3], [80, 100 * 80])  # out[g] at D + g M ldd
    assert any(d.name == "kgrouped_store" for d in plan.store.derivation)
    j = plan.store.to_json()
    assert j["tma_global_dims"] == ["N", "M", "G"] and j["tma_strides"] == ["ldd", "ldd_group"]


@pytest.mark.parametrize("variant,out_dtype", [(v, "bf16") for v in TMA_VARIANTS] + [("tma", "f32"), ("tma", "f16")])
def test_every_tile_stores_exactly_its_part_of_its_groups_out(variant, out_dtype):
    plan = plan_kernel(_spec(variant, out_dtype))
    for m, n, g in SHAPES:
        for pad in (0, 1):
            assert _walk_problems(plan, m, n, g, pad) == [], (m, n, g, pad)


@pytest.mark.parametrize("variant,out_dtype", [(v, "bf16") for v in FP8_TMA_VARIANTS] + [("tma", "f32")])
def test_rowwise_fp8_tiles_store_exactly_their_part_of_their_groups_out(variant, out_dtype):
    """The row-wise FP8 kernels' TMA store: the same (N, M, G) map over out, every tile of the walk through the model."""
    plan = plan_kernel(_fp8_spec(variant, out_dtype))
    assert plan.store.tma.global_dims == ("N", "M", "G")
    for m, n, g in SHAPES:
        for pad in (0, 1):
            assert _walk_problems(plan, m, n, g, pad) == [], (m, n, g, pad)


def test_control_a_rank2_map_over_the_stacked_rows_writes_into_the_next_group():
    plan = plan_kernel(_spec("tma"))
    problems = _walk_problems(plan, 100, 128, 2, rank2=True)  # M = 100: the second slab's rows 100..127 pass M
    assert any("outside its part of out[0]" in x and "first at out[1][0, " in x for x in problems), problems
    assert _walk_problems(plan, 128, 128, 2, rank2=True) == []  # M a multiple of BM: the control only fails at a tail


def test_control_a_tma_store_across_an_unaligned_n_writes_past_it():
    plan = plan_kernel(_spec("tma"))
    problems = _walk_problems(plan, 64, 130, 2, always_tma=True)  # 130 x 2 B: the last box writes on to column 135
    assert any("outside its part" in x for x in problems), problems
    assert _walk_problems(plan, 64, 130, 2) == []  # the plan sends that tile to the direct stores


def test_model_clips_each_coordinate_at_its_own_dimension():
    # a 3 x 4 x 2 tensor (N = 4 inner, M = 3, G = 2), rows 8 apart, groups 24 apart; a 4 x 4 box at row 1 of group 1
    got = sorted(kgroupmodel.tma_store_writes([4, 3, 2], [8, 24], [4, 4, 1], [0, 1, 1], 2).tolist())
    assert got == [24 + 8 * r + c for r in (1, 2) for c in range(4)]
    got = sorted(kgroupmodel.tma_store_writes([6, 3], [8], [8, 1], [0, 0], 2).tolist())  # 12 B rows: on to 16 B
    assert got == list(range(8))


def test_source_stores_through_the_3d_map_with_the_group_coordinate():
    src = render_kernel(plan_kernel(_spec("tma")))
    assert "tma_store_3d(&tmap_d, buf, n0 + c * 64, m0 + wg * 64, bz);" in src
    assert "if (n0 + 128 <= N || N % 8 == 0) {" in src  # else the direct stores, at out[g] = D + g M ldd
    assert "static_cast<size_t>(bz) * static_cast<size_t>(M) * static_cast<size_t>(ldd)" in src
    assert "tma_store_2d(" not in src.split("extern \"C\"")[1]
    direct = render_kernel(plan_kernel(_spec("direct")))
    assert "tma_store" not in direct


def test_variant_names_and_the_default():
    from ptxgen.kgrouped import DEFAULT_VARIANT
    from ptxgen.runtime.launch.arrays import ArgumentError

    assert kgrouped_spec() == _spec(DEFAULT_VARIANT)
    assert _spec("tma-n256").bn == 256 and _spec("tma").epilogue.value == "tma"
    with pytest.raises(ArgumentError, match="variant"):
        _spec("nope")
    with pytest.raises(ArgumentError, match="row-wise FP8 K-grouped form takes one of direct, tma"):
        _fp8_spec("tma-m192")  # a 16-bit variant's name
    from ptxgen.kgrouped import DEFAULT_FP8_VARIANT

    assert kgrouped_spec("e4m3", None, "sm_90a", "k", "k", rowwise=True) == _fp8_spec(DEFAULT_FP8_VARIANT)
    assert _fp8_spec("tma-n256").bn == 256 and _fp8_spec("tma").epilogue.value == "tma"


def test_rowwise_fp8_pingpong_variants_scale_both_slabs_of_the_warpgroups_tile():
    """pp-tma, pp-tma-s5: ping-pong consumers for the row-wise FP8 kernel; each warpgroup scales its tile's two 64-row
    slabs (rows m0 + 0.. and m0 + 64..) before its TMA stores, and counts every tile's K-tiles."""
    for v in ("pp-tma", "pp-tma-s5"):
        spec = _fp8_spec(v)
        assert spec.consumers.value == "pingpong" and spec.epilogue.value == "tma"
        src = render_kernel(plan_kernel(spec))
        assert "const int row_lo = m0 + 0 + (wg_tid / 32) * 16" in src and "const int row_lo = m0 + 64 + (wg_tid / 32) * 16" in src
        assert "acc1[i] *= sa_lo * sb_lo;" in src and "it += num_k_tiles;" in src


def test_explain_prints_the_store_map_derivation():
    flags = ["--bm", "128", "--bn", "128", "--bk", "64", "--a", "mnmajor-sw128", "--b", "mnmajor-sw128", "--a-order", "k",
             "--b-order", "k", "--dtype", "bf16", "--acc", "f32", "--arch", "sm_90a", "--stages", "4", "--out-dtype",
             "bf16", "--schedule", "persistent", "--grouped", "offs_k", "--epilogue", "tma"]
    r = subprocess.run([sys.executable, "-m", "ptxgen", "explain", *flags], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "kgrouped_store" in r.stdout and "3-D map (N, M, G)" in r.stdout


def test_launch_path_encodes_d_over_n_m_g(monkeypatch):
    """Up to cuLaunchKernel on a simulated device: D's map has extents (N, M, G) and strides (ldd, M ldd) in bytes."""
    from test_grouped import CaiArray, read_block, simulate_device

    import ptxgen.kgrouped as kgrouped
    from ptxgen.runtime.launch.gpu import Device

    fake = Device(0, "simulated H100", (9, 0), None, None, 132)
    encoded, launched = [], []
    spec = _spec("tma")
    kinds = [q.kind for q in plan_kernel(spec).abi.params]

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            self.func = id(self)

    def encode(args):
        encoded.append(args)
        return len(encoded).to_bytes(8, "little").ljust(128, b"\0")

    class FakeDriver:
        def __init__(self):
            self.encode = encode

        def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            launched.append(read_block(params, kinds))
            return 0

    simulate_device(monkeypatch, fake, FakeKernel, FakeDriver(), kgrouped, ("_KERNELS", "_PREPARED"))
    m, n, k, g, ldd = 200, 136, 1000, 8, 144
    a = CaiArray((m, k), "<f2", 2, 0x100000, strides=(1, m), dtype="bfloat16")
    b = CaiArray((n, k), "<f2", 2, 0x200000, strides=(1, n), dtype="bfloat16")
    offs = CaiArray((g,), "<i4", 4, 0x300000)
    out = CaiArray((g, m, n), "<f2", 2, 0x400000, strides=(m * ldd, ldd, 1), dtype="bfloat16")
    assert kgrouped.grouped_gemm_k_variant(a, b, offs, out, variant="tma") is out
    d = [x for x in encoded if x.global_address == 0x400000]
    assert len(d) == 1 and len(launched) == 1
    assert tuple(d[0].global_dims) == (n, m, g) and tuple(d[0].global_strides)[:2] == (ldd * 2, m * ldd * 2)
    assert tuple(d[0].box) == (64, 64, 1)


# ---- ping-pong consumers: one warpgroup zeroes its own tile's K tail -----------------------------------------------------
@pytest.mark.parametrize("major", ["mn", "k"])
def test_pingpong_tail_zeroing_by_one_warpgroup_leaves_exactly_the_groups_k_rows(tmp_path, major):
    from test_kgrouped import _zero_fn

    from ptxgen.emit.views import kgrouped_view as ckg

    spec = _spec("pp-tma", major=major)
    plan = plan_kernel(spec)
    tj = plan.layout.to_json()
    for name, op, mn in (("a_zero", plan.layout.a, spec.bm), ("b_zero", plan.layout.b, spec.bn)):
        # the rendered loop of one warpgroup (threads numbered wg_tid 0..127), as the kernel runs it for warpgroup 1
        lines = ("const int wg_tid = tid;",) + ckg._zero_loop_c(op, name, 128, 2, "wg_tid")
        run = _zero_fn(tmp_path, op, 128, name, lines)
        for lo, hi in ((0, 1), (0, 9), (0, 63), (5, 64), (3, 12)):
            assert kgroupmodel.check_tail_zeroing(tj[op.name]["tma"], major == "k", mn, spec.bk, lo, hi, run) == [], (name, lo, hi)


def test_control_the_cooperative_zeroing_run_by_one_warpgroup_leaves_cells(tmp_path):
    from test_kgrouped import _zero_fn

    from ptxgen.emit.views import kgrouped_view as ckg

    plan = plan_kernel(_spec("pp-tma"))
    op = plan.layout.a
    run = _zero_fn(tmp_path, op, 128, "a_zero", ckg._zero_loop_c(op, "a_zero", 256, 2))  # 256-thread stride, 128 threads
    assert kgroupmodel.check_tail_zeroing(plan.layout.to_json()["a"]["tma"], False, 128, 64, 0, 9, run)


def _cta_tile_k(plan, offs, k_total, m, n, grid, cta):
    """The K-tiles of each tile CTA ``cta`` of a persistent grid takes (items cta, cta + grid, ...) in the K-grouped walk."""
    kg = plan.kgrouped
    return tuple(kg.k_tiles(t.k_start, t.k_end) for t in kg.walk(offs, k_total, m, n)[cta::grid])


@pytest.mark.parametrize("variant", ["pp-tma", "pp-tma-s5", "pp-tma-64x256", "tma", "tma-n256", "fp8 pp-tma", "fp8 pp-tma-s5"])
def test_ring_keeps_its_phases_with_tiles_of_different_k_tile_counts(variant):
    """The pipeline plan through the independent simulator (ptxgen.model.sim.pipesim, tile_k) with the K-tile counts of
    the tiles a CTA takes in the K-grouped walk: empty groups (0 K-tiles), a group of 1 K row, long groups; no deadlock,
    stale read or early accumulator read, every schedule explored."""
    import dataclasses
    import random

    from ptxgen.model.bridges.check_pipeline import config_of
    from ptxgen.model.sim import pipesim

    plan = plan_kernel(_fp8_spec(variant[4:]) if variant.startswith("fp8 ") else _spec(variant))
    rng = random.Random(7)
    seen = set()
    for _ in range(12):
        sizes = [rng.choice([0, 0, 1, 64, 65, 200, 500]) for _ in range(rng.randint(1, 13))]
        offs = np.cumsum(sizes).tolist()
        m, n = rng.choice([(128, 128), (200, 256), (64, 520)])
        grid = rng.choice([1, 3, 7])
        for cta in range(min(grid, 2)):
            tile_k = _cta_tile_k(plan, offs, max(offs[-1], 1), m, n, grid, cta)
            if not tile_k or tile_k in seen:
                continue
            seen.add(tile_k)
            cfg = dataclasses.replace(config_of(plan.pipeline, 1, (), len(tile_k)), tile_k=tile_k)
            r = pipesim.explore(cfg, range(4))
            assert r.ok, (tile_k, r.problems[:3])
    assert any(0 in t for t in seen) and any(len(set(t)) > 2 for t in seen)


def test_control_pingpong_starting_at_tile_times_its_k_tiles_breaks_the_ring():
    import dataclasses

    from ptxgen.model.bridges.check_pipeline import config_of
    from ptxgen.model.sim import pipesim

    plan = plan_kernel(_spec("pp-tma")).pipeline
    for tile_k in ((3, 0, 5, 1, 0, 7), (9, 2, 0, 4, 4)):
        cfg = dataclasses.replace(config_of(plan, 1, (), len(tile_k)), tile_k=tile_k)
        assert pipesim.explore(cfg, range(4)).ok
        bad = pipesim.simulate(dataclasses.replace(cfg, pingpong_first="product"), 0, max_steps=200_000)
        assert not bad.ok and any(w in p for p in bad.problems for w in ("deadlock", "stale read")), bad.problems


def test_pingpong_source_counts_every_tiles_k_tiles():
    src = render_kernel(plan_kernel(_spec("pp-tma")))
    assert "int it = lt * num_k_tiles;" not in src  # tiles differ in K-tiles
    body = src.split("// ---- consumer warpgroups")[1]
    assert body.index("it += num_k_tiles;") < body.index("mbar_wait(order_bar")
    assert "named_barrier_sync(5 + wg, 128);" in src and "for (int cell = wg_tid; cell < 1024; cell += 128)" in src
    assert "tma_store_3d(&tmap_d, buf, n0 + c * 64, m0 + 0, bz);" in src  # the warpgroup stores both slabs of its tile
    assert "tma_store_3d(&tmap_d, buf, n0 + c * 64, m0 + 64, bz);" in src
    coop = render_kernel(plan_kernel(_spec("tma")))
    assert "named_barrier_sync(1, 256);" in coop and "it += num_k_tiles;" not in coop


# ---- L2 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant,out_dtype,major,dtype",
                         [(v, "bf16", "mn", "bf16") for v in KGROUPED_VARIANTS]
                         + [("tma", "f32", "mn", "bf16"), ("tma", "f16", "k", "f16"), ("tma-n256", "f32", "k", "bf16")]
                         + [(v, "bf16", "k", "e4m3") for v in KGROUPED_FP8_VARIANTS] + [("tma", "f32", "k", "e4m3")])
def test_variants_compile_with_the_intended_sass(variant, out_dtype, major, dtype):
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    spec = _fp8_spec(variant, out_dtype) if dtype == "e4m3" else _spec(variant, out_dtype, major, dtype)
    report = check_sass(spec, compile(spec).cubin)
    assert report.ok, report.summary() + "; " + "; ".join(report.problems)
    assert "local 0 B" in report.summary()
    if spec.epilogue.value == "tma":
        assert "TMA stores" in report.summary()


# ---- GPU: each variant against float64 ----------------------------------------------------------------------------------
GPU_CASES = [  # (M, N, offs)
    (128, 128, [64]),  # G = 1
    (200, 136, [0, 1, 1, 65, 130, 130, 300, 301]),  # empty groups, a group of 1 K row, tails not multiples of BK
    (72, 264, [17]),  # G = 1, K < BK, M < BM
    (136, 8, [0, 0, 0]),  # every group empty: zeros
    (100, 130, [5, 5, 6, 70, 71, 200, 200, 333, 334, 400, 401, 401, 600]),  # G = 13; N x 2 B not a multiple of 16
    (257, 520, [1, 2, 900]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(KGROUPED_VARIANTS))
def test_variant_against_float64(gpu, variant):
    """Every element of out written (a NaN-filled out with padded rows: the padding keeps its NaNs), empty groups zero,
    MN-major and K-major operands, bf16 and f32 out."""
    import torch

    from ptxgen.kgrouped import grouped_gemm_k_variant

    gen = torch.Generator(device="cuda").manual_seed(1)
    for layout, out_dtype in (("mn", "bf16"), ("k", "f32"), ("mn", "f32")):
        tdt = torch.bfloat16 if out_dtype == "bf16" else torch.float32
        for m, n, offs_list in GPU_CASES:
            k_total = -(-(offs_list[-1] + 5) // 8) * 8
            # rows of M (N) elements padded to 16 bytes: the kernel's rule for an MN-major operand (the door packs others)
            dy = torch.randn(k_total, -(-m // 8) * 8, device="cuda", generator=gen).to(torch.bfloat16)[:, :m]
            x = torch.randn(k_total, -(-n // 8) * 8, device="cuda", generator=gen).to(torch.bfloat16)[:, :n]
            a, b = (dy.t(), x.t()) if layout == "mn" else (dy.t().contiguous(), x.t().contiguous())
            offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
            ldd = _ldd(n, 2 if out_dtype == "bf16" else 4, pad=1)
            full = torch.full((len(offs_list), m, ldd), float("nan"), dtype=tdt, device="cuda")
            out = full[:, :, :n]
            assert grouped_gemm_k_variant(a, b, offs, out, variant=variant) is out
            torch.cuda.synchronize()
            ref = _reference64(torch, a, b, offs_list)
            tol = dict(rtol=2e-2, atol=2e-2) if out_dtype == "bf16" else dict(rtol=1e-3, atol=1e-3)
            torch.testing.assert_close(out.double(), ref, **tol, msg=lambda s: f"{variant} {layout} {out_dtype} {m}x{n} {offs_list}: {s}")
            assert torch.isnan(full[:, :, n:]).all(), f"{variant}: the padding past N was written"
            allocated = grouped_gemm_k_variant(a, b, offs, variant=variant, out_dtype=out_dtype)  # rows padded to 16 B
            torch.cuda.synchronize()
            assert allocated.shape == out.shape and allocated.stride(2) == 1 and torch.equal(allocated, out)


def test_bench_variants_flag_names_the_legal_kernels():
    r = subprocess.run([sys.executable, "tools/bench_grouped.py", "--kgrouped", "--variants", "tma,nope"], cwd=ROOT,
                       capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "unknown --variants nope" in r.stderr and "tma-n256" in r.stderr
    assert "Traceback" not in r.stderr
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import bench_grouped
    finally:
        sys.path.remove(str(ROOT / "tools"))
    every = bench_grouped.k_variant_names("all")
    assert set(every) == set(KGROUPED_VARIANTS) | set(KGROUPED_FP8_VARIANTS) and len(every) == len(set(every))
    assert bench_grouped.k_variant_names("default, tma") == ("default", "tma")


def test_rowwise_fp8_takes_wide_tiles_for_a_16_bit_output():
    """fp8_variant: 128 x 256 in a 2x1 cluster for a 16-bit output (the H100, 128 to 8192 tokens a group,
    runs/2026-12-07-h100-rowwise-scale-loads, runs/2026-12-07-h100-kgrouped-cluster), the 128 x 128 TMA-store kernel
    in a 2x1 cluster for an f32 output, which spills at 128 x 256; no cluster where M fits one tile row (the second CTA
    would only repeat the first's tile: 0.961 against 1.113 at M = 128, run 2)."""
    from ptxgen.kgrouped import fp8_variant

    assert fp8_variant("bf16") == fp8_variant("f16") == "tma-n256-c2" and fp8_variant("f32") == "tma-c2"
    assert _fp8_spec(fp8_variant("bf16")).bn == 256 and _fp8_spec(fp8_variant("bf16")).cluster.value == "2x1"
    assert not _fp8_spec(fp8_variant("f32"), "f32").bn == 256  # the spilling form is never picked
    assert [fp8_variant("bf16", m) for m in (1, 128, 129, 384, 7168)] == ["tma-n256"] * 2 + ["tma-n256-c2"] * 3
    assert [fp8_variant("f32", m) for m in (16, 128, 129)] == ["tma", "tma", "tma-c2"]
    assert _fp8_spec(fp8_variant("bf16", 128)).cluster.value == "1x1"


def test_the_door_takes_the_cluster_from_two_tile_rows():
    """What ptxgen.api.plan reports for scaled_grouped_gemm's K-grouped form follows fp8_variant's rows rule."""
    from ptxgen.kgrouped import decide
    from ptxgen.runtime.launch.arrays import ArrayInfo

    def info(name, shape, strides, dtype):
        return ArrayInfo(name=name, ptr=0x1000, shape=shape, strides=strides, dtype=dtype,
                         itemsize=1 if dtype == "e4m3" else 4, device=(2, 0), library="torch", via="torch")

    for m, cluster in ((128, "1x1"), (256, "2x1")):
        a, b = info("a", (m, 512), (512, 1), "e4m3"), info("b", (256, 512), (512, 1), "e4m3")
        offs = info("offs", (4,), (1,), "s32")
        scales = (info("scale_a", (4 * m,), (1,), "f32"), info("scale_b", (4 * 256,), (1,), "f32"))
        spec, _, _ = decide(a, b, offs, None, "bf16", "sm_90a", scales)
        assert spec.cluster.value == cluster, (m, spec.kernel_name)
