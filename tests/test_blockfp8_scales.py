"""Block-scaled FP8, how the scales reach the promotion (--fp8-scale-load, 2026-12-01): the ahead order of the
scale registers and the smem mode's scale slots against the independent model (ptxgen.model.numerics.bfp8model) with
controls, the rules, and the kernels at L2 (NVRTC, SASS gate), clusters included."""

import pytest

from ptxgen.derive.scaled.blockfp8 import plan_block_fp8
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model


def _spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(**kw)


# ---- --fp8-scale-load ahead: K block kb + 1's scales loaded during kb ----------------------------------------------------
def _scale_steps(k_blocks, scale_load):
    return [(x.op, x.kb, x.regs, x.src) for x in plan_block_fp8(128, 192, 128, scale_load=scale_load).scale_steps(k_blocks)]


@pytest.mark.parametrize("k_blocks", [0, 1, 2, 5])
@pytest.mark.parametrize("scale_load", ["block", "ahead"])
def test_scale_steps_against_the_model(k_blocks, scale_load):
    """Every promotion reads its own K block's scales, and no load reads past the tile's last K block."""
    assert bfp8model.check_scale_steps(_scale_steps(k_blocks, scale_load), k_blocks) == []


SCALE_CONTROLS = {
    "no clamp at the last block": lambda st: [("load", x[1] + 1, x[2], x[3]) if x[0] == "load" and x[2] == "next" and x is not st[0]
                                              and x[1] == 3 else x for x in st],
    "promotion reads the set loaded this block": lambda st: [("promote", x[1], "next", "") if x[0] == "promote" else x for x in st],
    "move after the load": lambda st: [y for i, x in enumerate(st) for y in
                                       ([] if x[0] == "move" else [x, st[i - 1]] if x[0] == "load" and i and st[i - 1][0] == "move" else [x])],
    "no prologue load": lambda st: st[1:],
}


@pytest.mark.parametrize("name", sorted(SCALE_CONTROLS))
def test_scale_step_controls_fail(name):
    st = _scale_steps(4, "ahead")
    bad = SCALE_CONTROLS[name](st)
    assert bad != st
    assert bfp8model.check_scale_steps(bad, 4)


def test_scale_load_rules_and_name():
    from ptxgen.derive.tile.spec import make_spec

    base = {**dict(bm=128, bn=192, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", out_dtype="bf16",
                   arch="sm_90a", stages=4, epilogue="tma", schedule="persistent", fp8_blocks="1x128x128")}
    s = make_spec(**base, fp8_scale_load="ahead")
    assert s.kernel_name.endswith("_slahead") and "--fp8-scale-load ahead" in s.cli_args()
    assert make_spec(**base).kernel_name.endswith("_bs128")
    for kw, load in ((dict(fp8_overlap="halves"), "ahead"), (dict(fp8_blocks="none"), "ahead"), (dict(fp8_blocks="none"), "smem")):
        with pytest.raises(SpecError) as e:
            make_spec(**{**base, **kw}, fp8_scale_load=load)
        assert e.value.field == "--fp8-scale-load"
    assert make_spec(**base, fp8_overlap="halves", fp8_scale_load="smem").kernel_name.endswith("_ovhalves_slsmem")


def test_scale_load_ahead_compiles_with_the_next_blocks_loads_and_no_local_memory():
    """L2: the ahead kernel compiles, has no local memory, and each K block issues its scale loads (2 of A, 2 of B for a
    128 x 192 tile) once in the loop and once before it; the SASS gate (ptxgen.runtime.compile.sass) passes."""
    import ptxgen.api.fp8blocks as fb
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    spec = fb.default_spec(fp8_scale_load="ahead")
    src = render_kernel(plan_kernel(spec))
    assert "bfp8_kn = kt + 1 < num_k_tiles ? kt + 1 : kt" in src
    from ptxgen.runtime.compile.cache import compile_cached
    from ptxgen.runtime.compile.toolchain import run_tool

    c = compile_cached(src, spec.kernel_name, "sm_90a").compiled
    usage = run_tool("cuobjdump", ["--dump-resource-usage"], c.cubin)
    assert "LOCAL:0" in usage and "STACK:0" in usage
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert sass.count("LDG.E") >= 8, sass.count("LDG.E")


# ---- --fp8-scale-load smem: the producer's scale warp stages each K block's scales beside the stage -------------------
def _slot_args(plan):
    writes = lambda lane: [(w.operand, w.index, w.offset_bytes) for w in plan.scale_warp_writes(lane)]
    reads = lambda warp, lane, slab: [(r.operand, r.offset_bytes) for r in plan.consumer_reads(warp, lane, slab)]
    return writes, reads, plan.bm, plan.sfb_slots, plan.sfa_stage_bytes, plan.sfb_stage_bytes


@pytest.mark.parametrize("bm, bn", [(64, 128), (128, 128), (128, 192), (128, 160), (128, 144), (256, 96), (192, 64), (192, 128)])
def test_scale_slots_against_the_model(bm, bn):
    """Every tile row's A scale and each B block's scale stored once in the stage's slots; every consumer thread reads
    its fragment rows' scales (fragment model) and the B blocks in order."""
    plan = plan_block_fp8(bm, bn, 128, scale_load="smem")
    assert bfp8model.check_scale_slots(*_slot_args(plan)) == []


def _broken(plan, **kw):
    writes, reads, bm, slots, a_bytes, b_bytes = _slot_args(plan)
    return (kw.get("writes", writes), kw.get("reads", reads), bm, slots, a_bytes, b_bytes)


SLOT_CONTROLS = {
    "lane loads rows 4 lane + j but stores them at rows lane + 32 j": lambda p, w, r: _broken(p, writes=lambda lane: [
        ("sfa", 4 * lane + j, x[2]) if x[0] == "sfa" else x for j, x in enumerate(w(lane))]),
    "B scales read from the A slot": lambda p, w, r: _broken(p, reads=lambda warp, lane, slab: [
        (o, off) if o == "sfa" else ("sfa", off) for o, off in r(warp, lane, slab)]),
    "consumer reads row + 1": lambda p, w, r: _broken(p, reads=lambda warp, lane, slab: [(o, off + 4) if o == "sfa" else (o, off)
                                                                                        for o, off in r(warp, lane, slab)]),
    "slab ignored": lambda p, w, r: _broken(p, reads=lambda warp, lane, slab: r(warp, lane, 0)),
    "last lane stores nothing": lambda p, w, r: _broken(p, writes=lambda lane: [] if lane == 31 else w(lane)),
    "one B block only": lambda p, w, r: _broken(p, writes=lambda lane: [x for x in w(lane) if x[0] == "sfa" or x[1] == 0]),
}


@pytest.mark.parametrize("name", sorted(SLOT_CONTROLS))
def test_scale_slot_controls_fail(name):
    plan = plan_block_fp8(128, 192, 128, scale_load="smem")
    args = _slot_args(plan)
    assert bfp8model.check_scale_slots(*SLOT_CONTROLS[name](plan, args[0], args[1]))


def test_scale_smem_plan_rules_and_compile():
    """The smem plan: the scale rings in shared memory, full[s] counts the scale warp's 32 lanes; not for grouped or
    ping-pong kernels. L2: compiles with no local memory, the consumer loop reads the scales with LDS (no LDG), the
    scale warp loads with LDG and stores with STS."""
    import ptxgen.api.fp8blocks as fb
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.toolchain import run_tool

    spec = fb.default_spec(fp8_scale_load="smem")
    plan = plan_kernel(spec)
    smem = plan.layout.smem if hasattr(plan, "layout") and hasattr(plan.layout, "smem") else spec.smem_plan()
    assert smem.sfa_offset and smem.sfb_offset - smem.sfa_offset == 4 * 128 * spec.stages
    assert "full_arrivals" in [d.name for d in plan.pipeline.derivation]
    assert plan.pipeline.full_arrivals == 33
    with pytest.raises(SpecError) as e:
        make_spec(**{**spec.to_json(), "bn": 64, "consumers": "pingpong"})
    assert e.value.field == "--fp8-scale-load"
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    c = compile_cuda(render_kernel(plan), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "LDS " in sass and "STS " in sass


@pytest.mark.parametrize("cluster", ["2x1", "1x2"])
def test_smem_scales_in_a_cluster_compile_and_the_rule(cluster):
    """A 2-CTA cluster (TMA multicast of B for 2x1, of A for 1x2) with the scales staged in shared memory: each CTA's
    scale warp fills its own stages (full[s] stays local; empty[s] counts both CTAs' consumers, as for the TMA copies);
    L2: compiles with a multicast copy, no local memory, no serialized wgmma. Without --fp8-scale-load smem a cluster
    is refused (the per-thread global scale loads were not derived for it)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = _spec(fp8_scale_load="smem", cluster=cluster)
    plan = plan_kernel(s)
    assert plan.pipeline.empty_arrivals == 512 and plan.pipeline.full_arrivals == 33  # 2 CTAs x 2 warpgroups x 128 threads
    c = compile_cuda(render_kernel(plan), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "UTMALDG.2D.MULTICAST" in run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    with pytest.raises(SpecError) as e:
        make_spec(**{**s.to_json(), "fp8_scale_load": "block"})
    assert e.value.field == "--fp8-blocks"


def test_smem_scale_kernels_release_each_stage_per_thread():
    """With the scales in shared memory every consumer thread reads the stage's scale slots itself, so every consumer
    thread arrives on empty[s] after its own reads and empty[s] counts them. compute-sanitizer racecheck flagged one
    elected arrive per warpgroup (warp 0's wgmma_wait orders none of the other threads' ld.shared) and one arrive
    per warp after a __syncwarp (2026-12-02: 3 hazards), and passes this form (runs/2026-12-02-stage-release-f32-store; the L1 race is
    tests/test_blockfp8_3wg.py's "one release per warpgroup" control). Control: scales from global memory (block)
    keep one elected arrive per warpgroup (only the wgmma read the stage)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    for load in ("smem", "tma"):
        src = render_kernel(plan_kernel(_spec(fp8_scale_load=load)))
        releases = [ln.strip() for ln in src.splitlines() if "mbar_arrive(empty_bar" in ln]
        assert releases and all(ln.startswith("mbar_arrive(empty_bar") for ln in releases), releases  # no lane/thread guard
        assert "__syncwarp" not in src
        assert "mbar_init(empty_bar + s * 8u, 256);" in src  # 2 consumer warpgroups x 128 threads
    block = render_kernel(plan_kernel(_spec(fp8_scale_load="block")))
    assert "if (wg_tid == 0) mbar_arrive(empty_bar" in block
    assert "mbar_init(empty_bar + s * 8u, 2);" in block


def test_the_release_probe_makes_s6s_per_warp_form(monkeypatch):
    """tools/probe_release.py rewrites the rendered per-thread release into the earlier per-warp one (the racecheck control:
    3 hazards on the H200, runs/2026-12-02-stage-release-f32-store/run3): every release becomes __syncwarp + lane 0's arrive and
    empty[s] counts the 8 consumer warps; the kernel is otherwise the rendered one, line for line."""
    import pathlib
    import sys

    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
    sys.modules.pop("probe_release", None)
    import probe_release

    for load in ("smem", "tma"):
        src = render_kernel(plan_kernel(_spec(fp8_scale_load=load)))
        warp = probe_release.per_warp(src)
        releases = [ln.strip() for ln in warp.splitlines() if "mbar_arrive(empty_bar" in ln]
        assert releases and all(ln.startswith("if (lane == 0) mbar_arrive(empty_bar") for ln in releases), releases
        assert warp.count("__syncwarp();") == len(releases)
        assert "mbar_init(empty_bar + s * 8u, 8);" in warp and "mbar_init(empty_bar + s * 8u, 256);" in src
        kept = [ln for ln in src.splitlines() if "mbar_arrive(empty_bar" not in ln and "mbar_init(empty_bar" not in ln]
        assert [ln for ln in warp.replace("_bs128_relwarp", "_bs128").splitlines() if "mbar_arrive(empty_bar" not in ln
                and "mbar_init(empty_bar" not in ln and "__syncwarp();  // this warp's" not in ln] == kept
