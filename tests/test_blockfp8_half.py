"""--fp8-stagger half (issue 17): the two consumer warpgroups of a block-scaled FP8 kernel held about half a K block
apart. Each commits a K block's wgmma as two groups and arrives on its named barrier after wait_group 1; warpgroup 1
issues kt once warpgroup 0's first half of kt is complete, warpgroup 0 issues kt + 1 once warpgroup 1's is.

L1: the plan's barrier steps (derive.scaled.bfp8steps.stagger_steps) against the independent protocol model
(model.numerics.bfp8model.check_stagger) with controls; L2: NVRTC sm_90a, the loop's two wgmma waits (WARPGROUP.DEPBAR.LE gsb0
0x1, then 0x0) with the barrier arrivals between them, no local memory, no C7514. The GPU tier (against the float64
recipe) is in tests/test_epilogue_ops.py (ids with "half" but not "halves").
"""

import re

import pytest

from ptxgen.derive.scaled.blockfp8 import plan_block_fp8
from ptxgen.derive.scaled.bfp8steps import stagger_commit_groups, stagger_steps
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model


def _steps(stagger):
    return [(x.wg, x.where, x.op, x.barrier, x.not_first) for x in stagger_steps(stagger)]


def _spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(**kw)


@pytest.mark.parametrize("stages", [None, 1, 2, 4])
@pytest.mark.parametrize("k_tiles", [0, 1, 2, 3, 9])
def test_half_protocol_against_the_model(k_tiles, stages):
    """Random interleavings of both warpgroups (and, with ``stages``, the producer's ring): no deadlock, every barrier
    generation holds one arrival of each warpgroup, none left at the end, and the half order both ways."""
    assert bfp8model.check_stagger(_steps("half"), k_tiles, mode="half", stages=stages) == []


@pytest.mark.parametrize("stagger", ["issue", "complete"])
def test_other_orders_with_the_producer_ring(stagger):
    assert bfp8model.check_stagger(_steps(stagger), 7, mode=stagger, stages=2) == []


def test_the_producer_ring_is_modeled():
    """Control for ``stages``: warpgroup 1 waits, after its K-tile i completes (and before it releases i), for warpgroup
    0's issue of i + 1. With one stage warpgroup 0 cannot issue i + 1 before i is released: a deadlock only the ring
    shows (without it the same steps fail otherwise: warpgroup 0 runs ahead and is counted twice)."""
    st = [(0, "after_issue", "arrive", 0, True), (0, "tail", "arrive", 0, True), (1, "after_wait", "sync", 0, False)]
    assert any("deadlock" in p for p in bfp8model.check_stagger(st, 5, mode="issue", stages=1))
    assert not any("deadlock" in p for p in bfp8model.check_stagger(st, 5, mode="issue"))


def _move(st, wg, where):
    """Control: warpgroup ``wg``'s arrival moved to ``where``."""
    return [(g, where if (g, op) == (wg, "arrive") else w, op, b, nf) for g, w, op, b, nf in st]


HALF_CONTROLS = {
    "warpgroup 0 signals after issue": lambda st: _move(st, 0, "after_issue"),
    "warpgroup 1 signals after issue": lambda st: _move(st, 1, "after_issue"),
    "warpgroup 0 waits at its first K-tile": lambda st: [(g, w, op, b, nf and not (g == 0 and w == "before_issue"))
                                                         for g, w, op, b, nf in st],
    "no tail sync": lambda st: [x for x in st if x[1] != "tail"],
    "warpgroup 1 does not wait": lambda st: [x for x in st if not (x[0] == 1 and x[1] == "before_issue")],
    "warpgroup 0 does not wait": lambda st: [x for x in st if not (x[0] == 0 and x[1] == "before_issue")],
    "both signal on barrier 0": lambda st: [(g, w, op, 0 if op == "arrive" else b, nf) for g, w, op, b, nf in st],
    "warpgroup 1 arrives twice": lambda st: st + [(1, "after_wait", "arrive", 1, False)],
}


@pytest.mark.parametrize("name", sorted(HALF_CONTROLS))
def test_half_controls_fail(name):
    assert bfp8model.check_stagger(HALF_CONTROLS[name](_steps("half")), 5, mode="half")


def test_half_order_is_neither_of_the_others():
    """The complete protocol does not give the half order (warpgroup 0 may issue kt + 1 before warpgroup 1's first half
    of kt is complete), nor the half protocol the complete order (warpgroup 1 issues before warpgroup 0's kt completes)."""
    assert bfp8model.check_stagger(_steps("complete"), 5, mode="half")
    assert bfp8model.check_stagger(_steps("half"), 5, mode="complete")
    assert bfp8model.check_stagger(_steps("half"), 5, mode="issue") == []  # half implies the issue order


def test_plan_commit_groups():
    assert stagger_commit_groups("half", 4) == ((0, 1), (2, 3))
    assert stagger_commit_groups("complete", 4) == ((0, 1, 2, 3),)
    assert plan_block_fp8(128, 192, 128, stagger="half").commit_groups == ((0, 1), (2, 3))
    assert plan_block_fp8(128, 192, 128).commit_groups == ((0, 1, 2, 3),)
    with pytest.raises(SpecError):
        stagger_commit_groups("half", 3)
    assert any(d.name == "warpgroup_order" and "wait_group 1" in d.formula
               for d in plan_block_fp8(128, 192, 128, stagger="half").derivation)


@pytest.mark.parametrize("kw", [dict(bm=64), dict(fp8_overlap="halves"), dict(stream_k=4)])
def test_half_rules(kw):
    with pytest.raises(SpecError) as e:
        _spec(fp8_stagger="half", **kw)
    assert e.value.field in ("--fp8-stagger", "--fp8-overlap", "--stream-k")


def _loop_sass(sass: str) -> list[str]:
    from ptxgen.runtime.compile.sass import main_loop_instructions

    return main_loop_instructions(sass)


@pytest.mark.parametrize("bn, scale_load", [(192, "auto"), (128, "auto"), (192, "block")])
def test_half_stagger_compiles_with_the_half_wait(bn, scale_load):
    """NVRTC sm_90a, 4 stages, TMA store, persistent: 4 QGMMA in the loop in two commit groups, the loop's wgmma waits
    are exactly WARPGROUP.DEPBAR.LE gsb0 0x1 then 0x0 with both warpgroups' BAR.ARV between them, no local memory, no
    C7514 (a partial register read between the two waits would serialize every wgmma). Control: the complete
    order's loop has only the 0x0 wait."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    def build(stagger):
        s = _spec(bn=bn, stages=4, epilogue="tma", fp8_stagger=stagger, fp8_scale_load=scale_load)
        src = render_kernel(plan_kernel(s))
        c = compile_cuda(src, s.kernel_name, "sm_90a")
        return s, src, c, _loop_sass(run_tool("cuobjdump", ["--dump-sass"], c.cubin))

    s, src, c, loop = build("half")
    assert "_sthalf" in s.kernel_name and "--fp8-stagger half" in s.cli_args()
    assert src.count("wgmma_wait<1>();") == 1 and src.count("named_barrier_arrive(") == 2 + 1
    assert src.count("named_barrier_sync(5, 256)") == 1 and src.count("named_barrier_sync(6, 256)") == 2
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.mma_in_loop == 4, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    marks = [re.sub(r"^@!?U?P\w+\s+", "", t) for t in loop if t.startswith("WARPGROUP.DEPBAR") or "BAR.ARV" in t]
    assert marks == ["WARPGROUP.DEPBAR.LE gsb0, 0x1", "BAR.ARV 0x5, 0x100", "BAR.ARV 0x6, 0x100",
                     "WARPGROUP.DEPBAR.LE gsb0, 0x0"], marks
    *_, control = build("complete")
    assert [t for t in control if t.startswith("WARPGROUP.DEPBAR")] == ["WARPGROUP.DEPBAR.LE gsb0, 0x0"]


@pytest.mark.parametrize("stagger", ["complete", "half"])
def test_stagger_compiles_with_the_direct_epilogue(stagger):
    """The named-barrier wrappers are there without the TMA store too (before 2026-12-02 a staggered kernel with the direct
    epilogue did not compile: named_barrier_sync was emitted only for the store's and ping-pong's barriers)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(bn=160, stages=5, epilogue="direct", fp8_stagger=stagger)
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and "C7514" not in c.log, rep.problems
