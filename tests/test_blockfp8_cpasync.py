"""``--fp8-scale-load cpasync``: the producer's scale warp copies each stage's scales with 4-byte cp.async (zero-filled past
M and N) and each lane arrives on full[s] with cp.async.mbarrier.arrive.noinc, so the warp never waits for a load.

L1: the rendered copy loops, read back from the kernel source and run for every lane (not the plan's expressions), put
every tile row's and column's scale once into the slot the consumers read (ptxgen.model.numerics.bfp8model.check_scale_slots
against the wgmma fragment model), and zero-fill exactly the rows past M and the columns past N; controls: a
destination shifted by one scale, a bound that keeps the last row. The spec rules and the barrier counts. L2: NVRTC
compiles both recipes with LDGSTS and its barrier arrival, no global load in the scale warp, no local memory, no
serialized wgmma. gpu: both recipes against float64 at odd shapes.
"""

from __future__ import annotations

import re

import pytest

from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model
from test_blockfp8_2d1d import _quantize  # e4m3 values and dequantization scales per (rows x 128 of K) block

COLUMNS = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", arch="sm_90a", stages=4,
               epilogue="tma", schedule="persistent", fp8_blocks="1x128x1x128", out_dtype="f32", fp8_scale_load="cpasync")
BLOCKS = {**COLUMNS, "bn": 192, "fp8_blocks": "1x128x128", "out_dtype": "bf16"}


def _spec(**kw):
    from ptxgen.derive.tile.spec import make_spec

    return make_spec(**kw)


def _source(spec) -> str:
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    return render_kernel(plan_kernel(spec))


SFA_COPY = re.compile(r"for \(int j = 0; j < (\d+); \+\+j\) \{\s*const bool in = (\d+) \* j < bfp8_rows( \+ \d+)?;.*?\n\s*"
                      r"cp_async_scale\(bfp8_sfa_stage \+ static_cast<unsigned>\((.+?)\) \* (\d+)u,\s*"
                      r"in \? bfp8_sfa_row \+ (\d+) \* j : bfp8_sfa, in \? (\d+)u : 0u\);")
SFB_COPY = re.compile(r"for \(int j = 0; j < (\d+); \+\+j\)\s*if \((.+?) < (\d+)\) \{\s*const bool in = (\d+) \* j < bfp8_cols;"
                      r".*?\n\s*cp_async_scale\(bfp8_sfb_stage \+ static_cast<unsigned>\((.+?)\) \* (\d+)u,\s*"
                      r"in \? bfp8_sfb_col \+ (\d+) \* j : bfp8_sfb, in \? (\d+)u : 0u\);")


def rendered_copies(src: str):
    """The scale warp's copies as the source writes them: lane, rows left (M - m0), columns left (N - n0) -> a list of
    (operand, source index or None for a zero-filled slot, destination byte offset in the stage's slot)."""
    sfa_first = re.search(r"bfp8_sfa_row = bfp8_sfa \+ .*? \+ \(m0 \+ (\w+)\);", src).group(1)
    sfb_first = re.search(r"bfp8_sfb_col = bfp8_sfb \+ .*? \* lds_b \+ (\w+);", src).group(1)
    assert re.search(r"bfp8_rows = M - m0 - " + sfa_first + ";", src) and re.search(r"bfp8_cols = N - n0 - " + sfb_first + ";", src)
    (a,) = SFA_COPY.findall(src)
    (b,) = SFB_COPY.findall(src)

    def copies(lane: int, rows_left: int, cols_left: int):
        out = []
        n, bound_step, extra, dst, size, src_step, nbytes = a
        for j in range(int(n)):
            inside = int(bound_step) * j < rows_left - lane + int(extra.strip(" +") or 0)
            row = lane + int(src_step) * j
            out.append(("sfa", row if inside and nbytes == size else None, eval(dst, {}, dict(lane=lane, j=j)) * int(size)))
        n, guard, slots, bound_step, dst, size, src_step, nbytes = b
        for j in range(int(n)):
            if eval(guard, {}, dict(lane=lane, j=j)) < int(slots):
                inside = int(bound_step) * j < cols_left - lane
                col = lane + int(src_step) * j
                out.append(("sfb", col if inside and nbytes == size else None, eval(dst, {}, dict(lane=lane, j=j)) * int(size)))
        return out
    return copies


def _check(copies, plan, rows_left=10_000, cols_left=10_000):
    """check_scale_slots over the rendered copies (a zero-filled slot stands for its own index: the model checks
    placement) and the zero-fill: exactly the rows past rows_left and columns past cols_left."""
    writes = lambda lane: [(o, off // 4 if what is None else what, off) for o, what, off in copies(lane, rows_left, cols_left)]
    reads = lambda warp, lane, slab: [(r.operand, r.offset_bytes) for r in plan.consumer_reads(warp, lane, slab)]
    problems = bfp8model.check_scale_slots(writes, reads, plan.bm, plan.sfb_slots, plan.sfa_stage_bytes, plan.sfb_stage_bytes,
                                           per_column=True)
    zeros = {(o, off // 4) for lane in range(32) for o, what, off in copies(lane, rows_left, cols_left) if what is None}
    want = {("sfa", r) for r in range(rows_left, plan.bm)} | {("sfb", c) for c in range(cols_left, plan.sfb_slots)}
    return problems + ([f"zero-filled {sorted(zeros ^ want)[:4]}"] if zeros != want else [])


@pytest.mark.parametrize("tile", [(128, 128), (192, 128), (64, 128), (64, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("rows_left, cols_left", [(10_000, 10_000), (77, 128), (128, 5), (1, 1), (40, 63)])
def test_rendered_copies_fill_every_slot_the_consumers_read(rows_left, cols_left, tile):
    """Every tile the 1D1D door picks (fp8blocks.columns_chosen), at five (rows left, columns left) pairs."""
    from ptxgen.derive.scaled.bfp8cols import plan_columns

    bm, bn = tile
    plan = plan_columns(bm, bn, 128, scale_load="cpasync")
    copies = rendered_copies(_source(_spec(**{**COLUMNS, "bm": bm, "bn": bn, "stages": 6 if bm == 64 else 4})))
    assert _check(copies, plan, min(rows_left, bm), min(cols_left, bn)) == []


@pytest.mark.parametrize("name", ["destination + 1 scale", "bound keeps one more row"])
def test_controls_fail(name):
    from ptxgen.derive.scaled.bfp8cols import plan_columns

    plan = plan_columns(128, 128, 128, scale_load="cpasync")
    src = _source(_spec(**COLUMNS))
    bad = {"destination + 1 scale": ("bfp8_sfb_stage + static_cast<unsigned>(lane + 32 * j)",
                                     "bfp8_sfb_stage + static_cast<unsigned>(lane + 1 + 32 * j)"),
           "bound keeps one more row": ("32 * j < bfp8_rows;", "32 * j < bfp8_rows + 1;")}[name]
    assert bad[0] in src
    assert _check(rendered_copies(src.replace(*bad)), plan, 77, 5)


def test_wide_1d1d_tiles_read_the_column_scales_in_the_promotion():
    """128 x 192 and 192 x 128 (accumulator + partial + the held scale pairs would exceed the consumer's registers): each
    register group's pair is read by ld.shared inside the promotion and the stage is released after it (every consumer
    thread's reads before its arrival on empty[s]); 128 x 128 keeps the reads after the issue and the release before
    the promotion."""
    for kw, late in ((dict(bn=192), True), (dict(bm=192), True), ({}, False)):
        src = _source(_spec(**{**COLUMNS, **kw}))
        loop = src[src.index("wgmma_wait<0>();  // the partial sums are complete"):]
        release, promote = loop.index("mbar_arrive(empty_bar"), loop.index("acc0[i] += part0[i]")
        assert (release > promote) == late and ("bfp8_sbc[" in src) == (not late)
        assert ("ld_shared_f32x2(bfp8_pair0 + static_cast<unsigned>(g)" in loop[:release]) == late


def test_plan_rules_and_barrier_counts():
    """cpasync keeps smem's slots and counts (full[s]: the TMA thread + 32 lanes; empty[s]: every consumer thread), names
    the kernel ``_slcpasync``, and is refused where the scale warp does not walk the tiles (grouped, ping-pong)."""
    from ptxgen.derive.tile.kernel import plan_kernel

    for kw in (COLUMNS, BLOCKS):
        spec = _spec(**kw)
        plan = plan_kernel(spec)
        smem = _spec(**{**kw, "fp8_scale_load": "smem"})
        assert spec.kernel_name == smem.kernel_name.replace("_slsmem", "_slcpasync")
        assert (plan.pipeline.full_arrivals, plan.pipeline.empty_arrivals) == (33, 256)
        assert spec.smem_plan() == smem.smem_plan()
        assert "cp.async.mbarrier.arrive.noinc" in dict((d.name, d.formula) for d in plan.pipeline.derivation)["full_arrivals"]
    with pytest.raises(SpecError) as e:
        _spec(**{**BLOCKS, "bm": 64, "bn": 128, "consumers": "pingpong"})
    assert e.value.field == "--fp8-scale-load"


@pytest.mark.parametrize("kw", [COLUMNS, BLOCKS], ids=["1x128x1x128", "1x128x128"])
def test_compiles_with_ldgsts_and_no_local_memory(kw):
    """L2 (NVRTC, sm_90a): the scale warp's copies are LDGSTS with their barrier arrival (ARRIVES.LDGSTSBAR) and it
    issues no plain global load (LDG) any more; no local memory, no serialized wgmma."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    spec = _spec(**kw)
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "LDGSTS" in sass and "ARRIVES.LDGSTSBAR" in sass
    assert not re.search(r"\bLDG\.E", sass), "a plain global load left"


# ---- gpu: against float64 ---------------------------------------------------------------------------------------------
# the 1D1D tiles: 128 x 128 reads the column scales at the issue; 128 x 192 and 192 x 128 inside the promotion
TILES = {"1d1d": dict(bm=128), "1d1d-64x128": dict(bm=64, stages=6), "1d1d-64x64": dict(bm=64, bn=64, stages=6),
         "1d1d-128x192": dict(bm=128, bn=192), "1d1d-192x128": dict(bm=192), "1d1d-192x128-c": dict(bm=192, c=True),
         "1d2d": None}


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(TILES))
@pytest.mark.parametrize("m, n, k", [(200, 300, 400), (1000, 700, 1104), (129, 8, 272), (4, 4096, 2000), (2048, 2048, 4096)])
def test_matches_float64(torch_cuda, variant, m, n, k):
    import ptxgen.api.fp8blocks as fb

    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    xq, xs = _quantize(torch, torch.randn(m, k, device="cuda", generator=g) * 3, 1)
    cols = TILES[variant] is not None
    yq, ys = _quantize(torch, torch.randn(n, k, device="cuda", generator=g) * 0.01, 1 if cols else 128)
    sa = xs.t().contiguous().t()  # (M, Kb) outer-dim-major
    kb, c = xs.shape[1], None
    if cols:
        kw = dict(TILES[variant])
        if kw.pop("c", False):  # D = C + A.B into an f32 out with rows 16 bytes apart
            c = torch.randn(m, -(-n // 4) * 4, device="cuda", generator=g)[:, :n]
        sb = ys.t().contiguous()  # (Kb, N), strides (N, 1)
        spec = fb.columns_spec("f32", c=c is not None, fp8_scale_load="cpasync", **kw)
        out_dtype, rtol, sfb = "f32", 2.0 ** -20, ys.t()
    else:  # (Kb, Nb) with strides (1, Kb4): cuBLAS's padded layout
        sb = torch.nn.functional.pad(ys, (0, -(-kb // 4) * 4 - kb)).t()[:kb]
        spec, out_dtype, rtol, sfb = fb.default_spec("bf16", fp8_scale_load="cpasync"), "bf16", 2.0 ** -8, ys.t()
    got = fb.gemm(xq, yq, sa, sb, out_dtype=out_dtype, spec=spec, c=c)
    torch.cuda.synchronize()
    bad = bfp8model.outside_bound(got.double().cpu().numpy(), xq.double().cpu().numpy(), xs.double().cpu().numpy(),
                                  yq.double().cpu().numpy(), sfb.double().cpu().numpy(), out_rtol=rtol, per_column=cols,
                                  c=None if c is None else c.double().cpu().numpy())
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} outside the bound"


@pytest.mark.parametrize("kw", [COLUMNS, {**COLUMNS, "bm": 192}, {**COLUMNS, "bm": 64, "bn": 64, "stages": 6}, BLOCKS],
                         ids=["1d1d", "1d1d-192x128", "1d1d-64x64-s6", "1d2d"])
def test_ring_with_the_copying_lanes_has_no_deadlock_or_stale_read(kw):
    """L1 (ptxgen.model.sim.pipesim over the kernel's pipeline plan): the 32 copying lanes wait empty[s] and arrive on
    full[s] (a noinc arrival fires once the lane's copies have landed: the simulator's store-then-arrive), the consumers
    read every slot before they release it: no deadlock, stale read or early overwrite over 1..2S+1 K-tiles."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.model.bridges.check_pipeline import config_of, tma_copy_bytes
    from ptxgen.model.sim import pipesim

    s = _spec(**kw)
    cfg = config_of(plan_kernel(s).pipeline, 2 * s.stages + 1, tma_copy_bytes(s), 2)
    assert (cfg.scale_lanes, cfg.full_arrivals) == (32, 33)
    assert pipesim.explore(cfg, range(6)).problems == []
