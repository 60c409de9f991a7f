"""Block-scaled FP8 with two 64-row slabs per cooperative consumer warpgroup sharing one partial (--consumer-slabs 2,
ptxgen.derive.scaled.bfp8slabs; DeepGEMM's 256 x 128 configuration).

L1: the rule and its refusals, the counts it derives (warpgroups, threads, setmaxnreg, barriers), the order of one
warpgroup's K block in the independent model (model.numerics.slabmodel.check_shared_partial) with controls that must fail, every
accumulator register's rows and scales (check_slab_registers), the scale slots each thread reads for its two slabs, the
rendered slab expressions against the model's ownership, the ring (pipesim) with two consumer warpgroups.
L2: NVRTC sm_90a, the SASS gate (4 QGMMA x 2 slabs per K-tile, the unrolled loop), no local memory, no C7514/C7517,
setmaxnreg 40 / 232. The gpu tests are in tests/test_epilogue_ops.py (-k consumer_slabs)."""

import re

import numpy as np
import pytest

from ptxgen.derive.scaled.bfp8slabs import plan_consumer_slabs, shared_partial_steps
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import slabmodel


def _spec(**kw):
    from ptxgen.api.fp8blocks import slabs_spec

    return slabs_spec(**kw)


# ---- L1: the spec -------------------------------------------------------------------------------------------------------
def test_counts_registers_and_barriers():
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import TileSpec

    s = _spec()
    plan = plan_kernel(s)
    assert (s.bm, s.bn, s.stages, s.consumer_warpgroups, s.slabs_per_consumer) == (256, 128, 3, 2, 2)
    assert plan.pipeline.threads == 384 and plan.abi.block[0] == 384
    assert {r.name: r.registers for r in plan.pipeline.roles} == {"consumer": 232, "producer": 40}
    assert plan.pipeline.empty_arrivals == 256 and plan.pipeline.full_arrivals == 2  # 2 warpgroups x 128; TMA + lane 0
    assert plan_kernel(_spec(fp8_scale_load="smem")).pipeline.full_arrivals == 33
    assert s.stage_bytes("a") == 32768 and s.stage_bytes("b") == 16384
    assert s.store_staging_bytes == 2 * 2 * 64 * 128  # two 8 KB buffers per consumer warpgroup, serving both its slabs
    assert s.kernel_name.endswith("_cs2") and "--consumer-slabs 2" in s.cli_args()
    assert TileSpec.from_json(s.to_json()) == s and "consumer_slabs" not in _spec(consumer_slabs=1, bm=128).to_json()
    assert plan.slabs is not None and plan.slabs.consumer_warpgroups == 2


REFUSED = {
    "pingpong": dict(bm=128, consumers="pingpong", fp8_scale_load="block"),
    "one-warpgroup": dict(bm=128),
    "bm-not-multiple": dict(bm=192),
    "stagger": dict(fp8_stagger="complete"),
    "overlap": dict(fp8_overlap="interleave"),
    "block-scales": dict(fp8_scale_load="block"),
    "cluster": dict(fp8_scale_load="smem", cluster="2x1"),
    "stream-k": dict(fp8_scale_load="smem", stream_k=4),
    "five": dict(consumer_slabs=5),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_illegal_combinations_are_refused(name):
    with pytest.raises(SpecError) as e:
        _spec(**REFUSED[name])
    assert e.value.field == "--consumer-slabs", str(e.value)


def test_plain_kernels_are_refused():
    from ptxgen.derive.tile.spec import make_spec

    with pytest.raises(SpecError) as e:
        make_spec(bm=256, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", arch="sm_90a", stages=3,
                  schedule="persistent", epilogue="tma", out_dtype="bf16", consumer_slabs=2)
    assert e.value.field == "--consumer-slabs" and "block-scaled FP8" in str(e.value)


def test_register_rule_counts_one_shared_partial(monkeypatch):
    """2 accumulators + 1 partial of BN/2 + the 32 reserve must fit the 232 of two consumer warpgroups: BN = 128 (224)
    does, BN = 192 (320) does not. Control: counted as one partial per slab (ping-pong's rule), BN = 128 is refused."""
    import ptxgen.derive.tile.rules as rules

    _spec()
    with pytest.raises(SpecError) as e:
        _spec(bn=192)
    assert e.value.field == "--bn" and "of the 232" in str(e.value)
    monkeypatch.setattr(rules, "PARTIAL_FRAGMENTS", 2)
    with pytest.raises(SpecError):
        _spec()


def test_cli_explain_and_refusal(capsys):
    from ptxgen.cli import main

    args = ["explain", "--bm", "256", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype",
            "e4m3", "--out-dtype", "bf16", "--arch", "sm_90a", "--stages", "3", "--epilogue", "tma", "--schedule",
            "persistent", "--fp8-blocks", "1x128x128", "--fp8-scale-load", "tma", "--consumer-slabs", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "consumer_slabs" in out and "shared_partial" in out and "threads: 384" in out
    assert "issue 0, scales, wait, promote 0, issue 1, wait, release, promote 1" in out
    assert main(args[:-1] + ["3"]) == 2
    err = capsys.readouterr().err
    assert "--consumer-slabs" in err and "Traceback" not in err


# ---- L1: the order of one warpgroup's K block -----------------------------------------------------------------------------
@pytest.mark.parametrize("k_blocks", range(6))
@pytest.mark.parametrize("slabs", [2, 3, 4])
def test_shared_partial_order_in_the_model(k_blocks, slabs):
    steps = plan_consumer_slabs(64 * slabs * 2, slabs).tile_steps(k_blocks)
    assert slabmodel.check_shared_partial(steps, k_blocks, slabs) == []


def _move(steps, what, before):
    """Move the first step equal to ``what`` (op, slab) of every K block to just before the first ``before`` of it."""
    out = []
    for kb in sorted({s[1] for s in steps}):
        block = [s for s in steps if s[1] == kb]
        item = next(s for s in block if (s[0], s[2]) == what)
        block.remove(item)
        i = next(j for j, s in enumerate(block) if (s[0], s[2]) == before)
        out += block[:i] + [item] + block[i:]
    return tuple(out)


def _swap_last_wait_and_release(steps):
    out = list(steps)
    for i in range(len(out) - 1):
        if out[i][0] == "wait" and out[i + 1][0] == "release":
            out[i], out[i + 1] = out[i + 1], out[i]
    return tuple(out)


ORDER_CONTROLS = {
    "slab 1 issued before slab 0's promotion": lambda st: _move(st, ("issue", 1), ("promote", 0)),
    "slab 1 issued before slab 0's wait": lambda st: _move(st, ("issue", 1), ("wait", -1)),
    "the stage released before slab 1's wait": lambda st: _swap_last_wait_and_release(st),
    "the stage released before slab 1's issue": lambda st: _move(st, ("release", -1), ("issue", 1)),
    "the stage released before the scale reads": lambda st: _move(st, ("release", -1), ("scales", -1)),
    "slab 0 promoted before its wait": lambda st: _move(st, ("promote", 0), ("wait", -1)),
    "no wait before slab 1's promotion": lambda st: tuple(s for i, s in enumerate(st)
                                                          if not (s[0] == "wait" and i + 2 < len(st) and st[i + 2][0] == "promote")),
    "slab 1 never promoted": lambda st: tuple(s for s in st if s != ("promote", s[1], 1)),
    "promoted before the scales": lambda st: _move(st, ("scales", -1), ("issue", 1)),
}


@pytest.mark.parametrize("name", sorted(ORDER_CONTROLS))
def test_shared_partial_order_controls_fail(name):
    steps = plan_consumer_slabs(256, 2).tile_steps(3)
    bad = ORDER_CONTROLS[name](steps)
    assert bad != steps
    assert slabmodel.check_shared_partial(bad, 3, 2), name


def test_one_slab_steps_are_the_one_partial_loop():
    """shared_partial_steps(1) is the one-slab loop's order (issue, scales, wait, release, promote); the model accepts it."""
    one = tuple((s.op, kb, s.slab) for kb in range(3) for s in shared_partial_steps(1))
    assert [s.op for s in shared_partial_steps(1)] == ["issue", "scales", "wait", "release", "promote"]
    assert slabmodel.check_shared_partial(one, 3, 1) == []


# ---- L1: every accumulator register's rows and scales ----------------------------------------------------------------------
def _loads(bfp8, slabs, kb, m0, n0, tile_slab=None):
    tile_slab = tile_slab or slabs.tile_slab
    return lambda wg, i, warp, lane: [(l.operand, l.index, l.targets)
                                      for l in bfp8.promotion_loads(warp, lane, kb, m0, n0, slab=tile_slab(wg, i))]


@pytest.mark.parametrize("bn, n0", [(128, 384), (64, 64), (96, 96)])
def test_every_register_of_both_slabs_takes_its_rows_scales(bn, n0):
    from ptxgen.derive.scaled.blockfp8 import plan_block_fp8

    bfp8, slabs = plan_block_fp8(256, bn, 128), plan_consumer_slabs(256, 2)
    rng = np.random.default_rng(0)
    assert slabmodel.check_slab_registers(_loads(bfp8, slabs, 2, 512, n0), 2, 2, bn, 2, 512, n0, rng) == []


@pytest.mark.parametrize("name", ["slabs interleaved between the warpgroups", "the warpgroup ignored", "the slab ignored"])
def test_register_controls_fail(name):
    from ptxgen.derive.scaled.blockfp8 import plan_block_fp8

    bfp8, slabs = plan_block_fp8(256, 128, 128), plan_consumer_slabs(256, 2)
    wrong = {"slabs interleaved between the warpgroups": lambda wg, i: 2 * i + wg,
             "the warpgroup ignored": lambda wg, i: i, "the slab ignored": lambda wg, i: 2 * wg}[name]
    assert slabmodel.check_slab_registers(_loads(bfp8, slabs, 1, 0, 0, wrong), 2, 2, 128, 1, 0, 0, np.random.default_rng(1))


@pytest.mark.parametrize("load", ["smem", "tma"])
def test_scale_slots_each_thread_reads_for_its_two_slabs(load):
    """The scale warp's stores (smem: 8 rows a lane at BM = 256; tma: the box lands rows in order, modelled as row r at
    4r) and each consumer thread's reads of its two slabs' rows, through bfp8model.check_scale_slots with the ownership
    stated by slabmodel; control: the reads of warpgroup 1 taken as warpgroup 0's."""
    from ptxgen.derive.scaled.blockfp8 import plan_block_fp8

    bfp8, slabs = plan_block_fp8(256, 128, 128, scale_load=load), plan_consumer_slabs(256, 2)
    if load == "smem":
        writes = lambda lane: [(w.operand, w.index, w.offset_bytes) for w in bfp8.scale_warp_writes(lane)]
    else:  # tests/test_blockfp8_tmasf.py checks the box through the TMA model; here its landed rows and lane 0's B scale
        writes = lambda lane: ([("sfa", r, 4 * r) for r in range(256)] + [("sfb", 0, 0)]) if lane == 0 else []
    reads = lambda wg, i, warp, lane: [(r.operand, r.offset_bytes) for r in bfp8.consumer_reads(warp, lane, slabs.tile_slab(wg, i))]
    args = (2, 2, bfp8.sfb_slots, bfp8.sfa_stage_bytes, bfp8.sfb_stage_bytes)
    assert slabmodel.check_slot_reads(writes, reads, *args) == []
    bad = lambda wg, i, warp, lane: reads(0, i, warp, lane)
    assert slabmodel.check_slot_reads(writes, bad, *args)


def _c_int(expr: str, wg: int) -> int:
    """Evaluate a rendered slab expression (``static_cast<unsigned>(wg) * 16384u + 8192u``, ``wg * 128 + 64``)."""
    py = re.sub(r"(\d+)u\b", r"\1", expr.replace("static_cast<unsigned>(wg)", "wg"))
    assert re.fullmatch(r"[wg\d\s*+]+", py), expr
    return eval(py, {"wg": wg})


def test_rendered_slabs_are_the_models_ownership():
    """What the template receives (emit.views.mma_view.slab_views): slab i of warpgroup wg starts at the model's tile row, its
    A rows at that row x 128 B (K-major 128-byte rows of the stage: one slab = 8 KB)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.views.mma_view import slab_views

    plan = plan_kernel(_spec())
    views = slab_views(plan)
    assert [v.index for v in views] == [0, 1]
    for wg in range(2):
        for v in views:
            rows = slabmodel.tile_rows(wg, v.index, 2)
            assert _c_int(v.row_offset, wg) == rows.start
            assert _c_int(v.a_offset, wg) == rows.start * 128 == rows.start * plan.layout.a.slab_stride_bytes // 64


def test_rendered_loop_follows_the_steps():
    """The K loop as rendered: slab 0's MMAs (A at + 0u), its scale reads, wait, acc0's promotion, slab 1's MMAs (+ 8192u),
    wait, the per-thread release, acc1's promotion; one partial ``part`` for both."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    src = render_kernel(plan_kernel(_spec()))
    loop = src[src.index("#pragma unroll 2\n    for (int kt = 0;"):]
    loop = loop[:loop.index("Epilogue:")]
    marks = ["* 16384u + 0u;", "bfp8_lo1 = ld_shared_f32", "wgmma_wait<0>();", "acc0[i] += part[i]", "* 16384u + 8192u;",
             "wgmma_wait<0>();", "mbar_arrive(empty_bar", "acc1[i] += part[i]"]
    pos = 0
    for m in marks:
        pos = loop.index(m, pos) + 1
    assert loop.count("mma(part, ") == 8 and "part0" not in loop and "part1" not in loop
    assert "float part[64];" in src and src.count("mbar_arrive(empty_bar") == 1


def test_ring_with_two_consumer_warpgroups():
    """pipesim over the kernel's ring (every consumer thread releasing a stage after its scale reads, 2 warpgroups);
    controls: empty[s] counting 4 warpgroups (what BM / 64 would give: deadlock) or 1."""
    from dataclasses import replace

    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.model.bridges.check_pipeline import check_plan, check_spec, tma_copy_bytes

    for kw in ({}, {"fp8_scale_load": "smem"}):
        assert check_spec(_spec(**kw)) == [], kw
    s = _spec()
    pipe = plan_kernel(s).pipeline
    for n in (2 * pipe.empty_arrivals, pipe.empty_arrivals // 2):
        assert check_plan(replace(pipe, empty_arrivals=n), copy_bytes=tma_copy_bytes(s)), n


def test_bench_token():
    import importlib.util
    from pathlib import Path

    from ptxgen.api.fp8blocks import default_spec

    path = Path(__file__).resolve().parent.parent / "tools" / "bench_blockfp8.py"
    mod_spec = importlib.util.spec_from_file_location("bench_blockfp8", path)
    bench = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(bench)
    assert default_spec(**bench.parse_variant("m256-n128-s3-tma-tmasf-cs2")[3]) == _spec()
    assert "consumer_slabs" not in bench.parse_variant("m192-n128-s4-tma-tmasf")[3]


def test_not_a_default():
    from ptxgen.api.fp8blocks import TMA_SCALE_OUTPUTS, chosen_spec, default_spec, tma_scales_spec

    assert default_spec().consumer_slabs == 1 and tma_scales_spec().consumer_slabs == 1
    assert all(tma_scales_spec(o).consumer_slabs == 1 for o in TMA_SCALE_OUTPUTS) and chosen_spec


# ---- L2: NVRTC ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"out_dtype": "f32"}, {"fp8_scale_load": "smem"}, {"epilogue": "direct", "stages": 4}],
                         ids=["tma-bf16", "tma-f32", "smem", "direct"])
def test_compiles_without_local_memory(kw):
    """4 QGMMA.64x128x32 per slab and K-tile: 8 per K-tile, the loop unrolled u times holds 8u, its remainder 8 (u - 1);
    no local memory, no C7514/C7517; setmaxnreg 40 / 232; one WARPGROUP.DEPBAR per slab."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = _spec(**kw)
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    u = plan_kernel(s).block_fp8.k_loop_unroll
    assert rep.mma_in_loop == 8 * u
    assert re.findall(r"QGMMA\.\S+", sass) == ["QGMMA.64x128x32.F32.E4M3.E4M3"] * 8 * (2 * u - 1)
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x28" in sass and "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass)


def test_show_draws_each_slab_at_its_owner():
    """ptxgen show / layout.svg: one rect per tile slab, coloured by the warpgroup the model says owns it."""
    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.pictures.svg import layout_svg

    svg = layout_svg(derive(_spec()))
    got = {(int(t), int(w), int(i)) for t, w, i in re.findall(r'data-slab="(\d+)" data-warpgroup="(\d+)" data-own-slab="(\d+)"', svg)}
    assert got == {(slabmodel.tile_rows(w, i, 2).start // 64, w, i) for w in range(2) for i in range(2)}
    assert "per K block: issue 0, scales, wait, promote 0, issue 1, wait, release, promote 1" in svg
    assert "data-slab" not in layout_svg(derive(_spec(bm=128, consumer_slabs=1)))


def test_module_examples():
    import doctest

    import ptxgen.derive.scaled.bfp8slabs as m

    assert doctest.testmod(m).failed == 0
