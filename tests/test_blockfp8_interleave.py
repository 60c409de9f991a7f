"""--fp8-overlap interleave (issue 17): a block-scaled FP8 K block's MMAs as the tile's two column halves (m64n(BN/2),
two partial fragments of BN/4 registers, as --fp8-overlap halves derives them), issued alternately per K-step (two
independent dependency chains) in the K block's one commit group (two with --fp8-stagger half), then wait_group 0,
release, promote both halves: the default loop's order, only the MMA issue differs.

L1: the plan's order (derive.scaled.bfp8steps.overlap_steps) in the model of one warpgroup's wgmma groups
(model.numerics.bfp8model.check_overlap, whose issue with n = 1 joins the previous group) with controls; the fragments' columns
and B-scale split are tests/test_blockfp8.py::test_half_fragments_take_their_columns_b_scales (parametrized over
halves and interleave); the stagger protocol is independent of the MMA issue (tests/test_blockfp8_half.py).
L2: NVRTC sm_90a: 8 QGMMA.64x(BN/2)x32 in the loop, their destinations alternating between the two fragments, the
loop's one wgmma wait (two with --fp8-stagger half), no local memory, no C7514/C7517. The GPU tier is in
tests/test_epilogue_ops.py (``-k interleave``).
"""

import re

import pytest

from ptxgen.derive.scaled.blockfp8 import plan_block_fp8
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model


def _spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(**kw)


def _steps(k_blocks, overlap="interleave"):
    return [(x.op, x.kb, x.half, x.n) for x in plan_block_fp8(128, 192, 128, overlap=overlap).overlap_steps(k_blocks)]


@pytest.mark.parametrize("k_blocks", [0, 1, 2, 3, 7])
def test_interleave_steps_against_the_model(k_blocks):
    """Both halves' MMAs of a K block in one wgmma group (the second issue joins the first), then wait 0, release,
    promote both: fragments overwritten only after promotion, each (K block, half) promoted once from a complete
    fragment, stages released in order after their MMAs, nothing in flight at a K block's start. Without the halves
    it is the default order, step for step."""
    steps = _steps(k_blocks)
    assert bfp8model.check_overlap(steps, k_blocks, 2, require_overlap=False) == []
    one = [(op, kb, 0, n) for op, kb, h, n in steps if h == 0]
    assert one == _steps(k_blocks, "none")
    assert sum(1 for op, *_ in steps if op == "issue") == 2 * k_blocks


def _swap_first_issues(st):
    """Half 1 joins before half 0 opened the group."""
    out = list(st)
    out[0], out[1] = ("issue", 0, 1, 1), ("issue", 0, 0, 0)
    return out


INTERLEAVE_CONTROLS = {
    # with both halves in ONE group, wait 1 completes nothing (as two groups it would complete half 0)
    "wait 1 instead of wait 0": lambda st: [("wait", 0, 0, 1) if x[0] == "wait" else x for x in st],
    "no wait": lambda st: [x for x in st if x[0] != "wait"],
    "release before the wait": lambda st: [y for i, x in enumerate(st) for y in
                                           ([("release", st[i - 2][1], 0, 0), x] if x[0] == "wait" else
                                            [] if x[0] == "release" else [x])],
    "half 1 promoted before the wait": lambda st: [y for x in st for y in
                                                   ([x] if not (x[0] == "promote" and x[2] == 1) else [])
                                                   + ([("promote", x[1], 1, 0)] if x[0] == "issue" and x[2] == 1 else [])],
    "half 1 joins no open group": _swap_first_issues,
    "half 1 never promoted": lambda st: [x for x in st if not (x[0] == "promote" and x[2] == 1)],
}


@pytest.mark.parametrize("name", sorted(INTERLEAVE_CONTROLS))
def test_interleave_controls_fail(name):
    assert bfp8model.check_overlap(INTERLEAVE_CONTROLS[name](_steps(4)), 4, 2, require_overlap=False)


def test_joined_group_differs_from_two_groups():
    """The model tells one group from two: with half 1 committed as its own group, wait 1 completes half 0 (and only
    half 1's promotion fails); joined, wait 1 completes neither."""
    def wait1(st):
        return [("wait", 0, 0, 1) if x[0] == "wait" else x for x in st]

    two = [(op, kb, h, 0) if op == "issue" else (op, kb, h, n) for op, kb, h, n in _steps(1)]
    assert [p for p in bfp8model.check_overlap(wait1(two), 1, 2, require_overlap=False) if "fragment 0" in p] == []
    assert [p for p in bfp8model.check_overlap(wait1(_steps(1)), 1, 2, require_overlap=False) if "fragment 0" in p]


def test_interleave_plan():
    """The halves' fragments and B-scale split, none of the halves' peeled K block, the stagger's commit groups."""
    p, h = plan_block_fp8(128, 192, 128, overlap="interleave"), plan_block_fp8(128, 192, 128, overlap="halves")
    assert p.halves == h.halves == 2 and not p.peeled and h.peeled
    assert [p.half_first_regs(ph, x) for ph in p.phases for x in range(2)] == \
        [h.half_first_regs(ph, x) for ph in h.phases for x in range(2)]
    assert plan_block_fp8(128, 192, 128, overlap="interleave", stagger="half").commit_groups == ((0, 1), (2, 3))
    assert any(d.name == "promotion_overlap" and "alternately per K-step" in d.formula for d in p.derivation)


@pytest.mark.parametrize("stagger", ["none", "issue", "complete", "half"])
def test_interleave_takes_every_stagger(stagger):
    s = _spec(bn=192, stages=4, epilogue="tma", fp8_overlap="interleave", fp8_stagger=stagger)
    assert "_ovinterleave" in s.kernel_name and "--fp8-overlap interleave" in s.cli_args()


@pytest.mark.parametrize("kw, field", [(dict(bn=136), "--fp8-overlap"), (dict(fp8_blocks="none"), "--fp8-overlap"),
                                       (dict(grouped="offs"), "--fp8-overlap"), (dict(fp8_scale_load="ahead"), "--fp8-scale-load")])
def test_interleave_rules(kw, field):
    from ptxgen.derive.tile.spec import make_spec

    with pytest.raises(SpecError) as e:
        make_spec(**{**_spec(bn=192, stages=4, epilogue="tma").to_json(), "fp8_overlap": "interleave", **kw})
    assert e.value.field == field


def _loop_sass(sass: str) -> list[str]:
    from ptxgen.runtime.compile.sass import main_loop_instructions

    return main_loop_instructions(sass)


def _build(**kw):
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = _spec(stages=4, **kw)
    src = render_kernel(plan_kernel(s))
    c = compile_cuda(src, s.kernel_name, "sm_90a")
    return s, src, c, _loop_sass(run_tool("cuobjdump", ["--dump-sass"], c.cubin))


_QGMMA = re.compile(r"QGMMA\.(64x\d+x32)\.\S+\s+(R\d+),")


@pytest.mark.parametrize("bn, stagger, epilogue", [(192, "none", "tma"), (192, "complete", "tma"), (192, "half", "tma"),
                                                   (128, "none", "tma"), (160, "none", "direct")])
def test_interleave_compiles_with_alternating_chains(bn, stagger, epilogue):
    """NVRTC sm_90a, persistent, smem scales: the loop holds 8 QGMMA.64x(BN/2)x32 and no other MMA (none outside it),
    consecutive ones write the two fragments alternately (two destination registers, never the same twice in a row),
    the loop's wgmma waits are WARPGROUP.DEPBAR.LE gsb0 0x0 (with stagger half 0x1 first), no local memory, no C7514
    (serialized wgmma) or C7517. Control: the default kernel's loop is one chain (4 QGMMA.64xBNx32 a K-tile, unrolled
    k_loop_unroll times, one destination)."""
    from ptxgen.runtime.compile.sass import check_sass

    s, src, c, loop = _build(bn=bn, epilogue=epilogue, fp8_overlap="interleave", fp8_stagger=stagger)
    assert src.count("mma_half(part0_0") == 4 and src.count("mma_half(part0_1") == 4
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.mma_in_loop == 8 and rep.mma_total == 8, rep.problems
    assert f"m64n{bn // 2}k32.f32.e4m3.e4m3" in c.ptx and "C7514" not in c.log and "C7517" not in c.log, c.log
    mmas = [m.groups() for t in loop for m in [_QGMMA.search(t)] if m]
    assert [shape for shape, _ in mmas] == [f"64x{bn // 2}x32"] * 8, mmas
    dests = [d for _, d in mmas]
    assert len(set(dests)) == 2 and all(a != b for a, b in zip(dests, dests[1:])), dests
    waits = [re.sub(r"^@!?U?P\w+\s+", "", t) for t in loop if t.startswith("WARPGROUP.DEPBAR")]
    assert waits == (["WARPGROUP.DEPBAR.LE gsb0, 0x1"] if stagger == "half" else []) + ["WARPGROUP.DEPBAR.LE gsb0, 0x0"], waits
    if (bn, stagger) == (192, "none"):
        from ptxgen.derive.tile.kernel import plan_kernel
        from ptxgen.runtime.compile.toolchain import run_tool

        cs, _, cc, _ = _build(bn=bn, epilogue=epilogue)
        u = plan_kernel(cs).block_fp8.k_loop_unroll
        crep = check_sass(cs, cc.cubin)  # u K-tiles in the loop, u - 1 in its remainder
        ctl = [m.groups() for t in run_tool("cuobjdump", ["--dump-sass"], cc.cubin).splitlines() for m in [_QGMMA.search(t)] if m]
        assert crep.ok and crep.mma_in_loop == 4 * u, crep.problems
        assert [x for x, _ in ctl] == ["64x192x32"] * 4 * (2 * u - 1) and len({d for _, d in ctl}) == 1, ctl


@pytest.mark.parametrize("kw", [dict(stream_k=4), dict(bm=192, bn=128, epilogue="tma"), dict(fp8_scale_load="block"),
                                dict(cluster="2x1")], ids=["sk4", "m192", "block", "c2x1"])
def test_interleave_compiles_with_the_other_options(kw):
    """The interleaved issue inside the default loop's other variants: stream-K splits, three consumer warpgroups (BM =
    192, m64n64 halves), scales from global memory, a 2x1 cluster: SASS gate (8 MMAs in the loop), no local memory, no
    C7514/C7517. L2 only; the GPU tier covers the dense kernels above."""
    from ptxgen.runtime.compile.sass import check_sass

    s, _, c, _ = _build(**{"bn": 192, "epilogue": "tma", **kw, "fp8_overlap": "interleave"})
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.mma_in_loop == 8, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
