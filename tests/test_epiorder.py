"""--epilogue-order alternate (ptxgen.derive.roles.epiorder): the cooperative consumer warpgroups' epilogues in turn.

L1: the derived steps against the independent model (ptxgen.model.sim.ordermodel: every warp and the producer's ring under
random interleavings; 2, 3 and 4 consumer warpgroups, 0/1/2/many tiles per CTA, 1..2S+1 K-tiles), with controls that
must fail. Rules: the refused combinations exit 2 with the field named. L2: NVRTC sm_90a compiles the ordered kernels,
SASS holds the order's BAR.SYNC / BAR.ARV (256 threads) at the derived ids and no local memory; the unordered twin has
none of them.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ptxgen.derive.roles.barriers import NAMED_BARRIERS, STORE_FIRST_BARRIER_ID, order_first_barrier_id, stagger_first_barrier_id
from ptxgen.derive.roles.epiorder import order_steps
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model.sim.ordermodel import check_order

BASE = dict(dtype="bf16", arch="sm_90a", stages=4, out_dtype="bf16", schedule="persistent", epilogue="tma")


def _steps(c, uniform=False):
    return [s.as_tuple() for s in order_steps(c, uniform)]


def _spec(bm=128, bn=256, bk=64, **kw):
    return make_spec(bm, bn, bk, "kmajor-sw128", "kmajor-sw128", **{**BASE, "epilogue_order": "alternate", **kw})


# ---- L1: the derived protocol against the model ------------------------------------------------------------------
@pytest.mark.parametrize("consumers", [2, 3])
@pytest.mark.parametrize("stages", [2, 4])
def test_protocol_passes_the_model(consumers, stages):
    """0, 1, 2 and many tiles per CTA, 1..2S+1 K-tiles, release lag 0 and 1, 4 warps a warpgroup."""
    for tiles in (0, 1, 2, 7):
        for k in range(1, 2 * stages + 2):
            for lag in (0, 1):
                p = check_order(_steps(consumers), consumers, tiles, k, stages, lag=lag, seeds=range(4))
                assert p == [], (tiles, k, lag, p)


@pytest.mark.parametrize("consumers", [2, 3, 4])
def test_uniform_form_passes_the_model(consumers):
    """alternate-uniform: the last warpgroup's prologue arrival, every step unconditional."""
    steps = _steps(consumers, uniform=True)
    assert all(when is False for *_, when in steps) and sum(s[1] == "prologue" for s in steps) == 1
    for tiles in (0, 1, 2, 6):
        for k in (1, 2, 5):
            assert check_order(steps, consumers, tiles, k, 2, seeds=range(4)) == [], (tiles, k)


UNIFORM_CONTROLS = {
    # no prologue arrival: warpgroup 0's first sync waits for nobody
    "no prologue": ([s for s in _steps(2, True) if s[1] != "prologue"], "deadlock", 3),
    # the prologue arrival from warpgroup 0 itself: its own sync meets its arrival (counted twice)
    "prologue by warpgroup 0": ([(0, "prologue", "arrive", 0, False) if s[1] == "prologue" else s for s in _steps(2, True)],
                                "counted twice", 3),
    # the tail skipped when the CTA has no tile: the prologue arrival stays open
    "tail only after a tile": ([(0, "tail", "sync", 0, "not_first") if s[1] == "tail" else s for s in _steps(2, True)],
                               "left with", 0),
}


@pytest.mark.parametrize("name", sorted(UNIFORM_CONTROLS))
def test_uniform_controls_fail(name):
    steps, what, tiles = UNIFORM_CONTROLS[name]
    problems = check_order(steps, 2, tiles, 3, 2, seeds=range(6))
    assert problems and any(what in p for p in problems), problems


def test_four_warpgroups_and_many_seeds():
    for tiles, k in ((1, 1), (3, 1), (9, 2), (4, 5)):
        assert check_order(_steps(4), 4, tiles, k, 2, seeds=range(6)) == [], (tiles, k)
    assert check_order(_steps(2), 2, 12, 1, 2, warps=4, seeds=range(60)) == []  # few K-tiles, many tiles: the risky case


def test_the_other_form_passes_too():
    """The last warpgroup arriving only when its CTA has a next tile, and no tail: also correct (the kernel uses the
    tail, which needs nothing of the tile walk)."""
    for c in (2, 3):
        steps = [(c - 1, "after", "arrive", 0, "has_next") if s[0] == c - 1 and s[1] == "after" else s
                 for s in _steps(c) if s[1] != "tail"]
        for tiles in (0, 1, 2, 5):
            assert check_order(steps, c, tiles, 2, 2, seeds=range(4)) == []


def _without(pred, c=2):
    return [s for s in _steps(c) if not pred(s)]


CONTROLS = {
    # no sync at all: the arrivals alone count a warp twice (and nothing orders the epilogues)
    "no sync": (_without(lambda s: s[2] == "sync"), "counted twice"),
    # warpgroup 0 waits before its first epilogue too: nobody arrived yet
    "wg 0 syncs first": ([(0, "before", "sync", 0, "always") if s[:2] == (0, "before") else s for s in _steps(2)], "deadlock"),
    # no tail: the last warpgroup's final arrival stays open at exit
    "no tail": (_without(lambda s: s[1] == "tail"), "left with"),
    # the last warpgroup arrives after every tile and nobody takes the last one (the brief's form without its condition)
    "arrive after the last tile": ([s for s in _steps(2) if s[1] != "tail"], "left with"),
    # warpgroup 1 waits after its epilogue instead of before: balanced, but the order is not kept
    "sync after": ([(1, "after", "sync", 1, "always") if s[:3] == (1, "before", "sync") else s for s in _steps(2)], "started its epilogue"),
    # warpgroup 1 arrives on its own barrier: warpgroup 0's arrivals meet themselves
    "wrong barrier": ([(1, "after", "arrive", 1, "always") if s[:3] == (1, "after", "arrive") else s for s in _steps(2)], "counted twice"),
    # warpgroup 1 waits before its main loop: warpgroup 0 cannot finish the tile without warpgroup 1's releases
    "sync before the main loop": ([(1, "before_mainloop", "sync", 1, "always") if s[:3] == (1, "before", "sync") else s
                                   for s in _steps(2)], "deadlock"),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_controls_fail(name):
    steps, what = CONTROLS[name]
    problems = check_order(steps, 2, 3, 5, 2, seeds=range(6))
    assert problems and any(what in p for p in problems), problems


def test_order_is_checked_for_three_warpgroups():
    """Control: warpgroup 2 waiting on warpgroup 0 (E_1's arrivals of warpgroup 0 sent to warpgroup 2) breaks it."""
    steps = [(0, "after", "arrive", 2, "always") if s[:3] == (0, "after", "arrive") else
             (1, "after", "arrive", 1, "always") if s[:3] == (1, "after", "arrive") else s for s in _steps(3)]
    assert check_order(steps, 3, 3, 3, 2, seeds=range(6))


# ---- the barrier ids ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("consumers", [2, 3, 4])
@pytest.mark.parametrize("staggered", [False, True])
def test_barrier_ids_do_not_collide(consumers, staggered):
    used = [0, 1, 2] + [STORE_FIRST_BARRIER_ID + w for w in range(consumers)]
    if staggered:
        used += [stagger_first_barrier_id(consumers), stagger_first_barrier_id(consumers) + 1]
    first = order_first_barrier_id(consumers, staggered)
    order = [first + w for w in range(consumers)]
    assert not set(order) & set(used) and max(order) < NAMED_BARRIERS


def test_plan_and_explain():
    from ptxgen.derive.tile.explain import explain_text
    from ptxgen.derive.tile.layout import derive
    from ptxgen.derive.tile.kernel import plan_kernel

    s = _spec()
    assert "--epilogue-order alternate" in s.cli_args() and s.kernel_name.endswith("_eoalternate")
    p = plan_kernel(s).epi_order
    assert p.first_barrier_id == 5 and p.consumers == 2 and p.threads_per_generation == 256
    text = explain_text(derive(s))
    assert "Epilogue order" in text and "E_0 = 5, E_1 = 6" in text
    plain = make_spec(128, 256, 64, "kmajor-sw128", "kmajor-sw128", **BASE)
    assert plan_kernel(plain).epi_order is None and "Epilogue order" not in explain_text(derive(plain))
    assert "epilogue_order" not in plain.to_json() and s.to_json()["epilogue_order"] == "alternate"


def test_show_draws_the_order():
    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.pictures.svg import layout_svg

    svg = layout_svg(derive(_spec(bm=192, bn=128)))
    assert 'id="epilogue-order"' in svg and svg.count('class="eo-epi"') == 3 * 3
    assert 'id="epilogue-order"' not in layout_svg(derive(make_spec(128, 256, 64, "kmajor-sw128", "kmajor-sw128", **BASE)))


# ---- rules -------------------------------------------------------------------------------------------------------
REFUSED = {
    "pingpong": dict(consumers="pingpong"),
    "one warpgroup": dict(bm=64),
    "tile schedule": dict(schedule="tile"),
    "tcgen05": dict(arch="sm_100a"),
    "cluster": dict(cluster="2x1"),
    "stream-k": dict(stream_k=2),
    "grouped": dict(grouped="offs"),
    "batch": dict(batch="a", epilogue="direct"),
    "block fp8": dict(dtype="e4m3", bn=192, bk=128, fp8_blocks="1x128x128"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    kw = dict(REFUSED[name])
    with pytest.raises(SpecError) as e:
        _spec(**kw)
    assert e.value.field == "--epilogue-order" or "--epilogue-order" in str(e.value), str(e.value)


def test_refused_on_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "explain", "--bm", "128", "--bn", "256", "--bk", "64", "--a",
                           "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--arch", "sm_90a", "--consumers",
                           "pingpong", "--schedule", "persistent", "--epilogue-order", "alternate"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--epilogue-order" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_rendered_steps():
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    src = render_kernel(plan_kernel(_spec(bm=192, bn=128)))
    syncs = re.findall(r"if \((wg == \d)( && order_tiles > 0)?\) named_barrier_sync\((\d+), 256\)", src)
    arrives = re.findall(r"if \(wg == (\d)\) named_barrier_arrive\((\d+), 256\)", src)
    # E_w = 6 + w with three warpgroups (store barriers 3..5)
    assert syncs == [("wg == 0", " && order_tiles > 0", "6"), ("wg == 1", "", "7"), ("wg == 2", "", "8"),
                     ("wg == 0", " && order_tiles > 0", "6")]
    assert arrives == [("0", "7"), ("1", "8"), ("2", "6")]
    plain = render_kernel(plan_kernel(make_spec(192, 128, 64, "kmajor-sw128", "kmajor-sw128", **BASE)))
    assert "named_barrier_arrive" not in plain and "order_tiles" not in plain
    uni = render_kernel(plan_kernel(_spec(bm=192, bn=128, epilogue_order="alternate-uniform")))
    assert "order_tiles" not in uni and "if (wg == 2) named_barrier_arrive(6, 256);" in uni
    assert uni.count("named_barrier_sync(6 + wg, 256);") == 1 and uni.count("named_barrier_arrive(6 + (wg + 1) % 3, 256);") == 1
    assert uni.count("if (wg == 0) named_barrier_sync(6, 256);") == 1


# ---- L2: NVRTC sm_90a, SASS ----------------------------------------------------------------------------------------
L2 = {
    "bf16-128x256-tma": dict(),
    "bf16-128x192-tma": dict(bn=192),
    "e4m3-128x256-tma": dict(dtype="e4m3", bk=128),
    "fused-128x256-tma": dict(fuse="bias=col:bf16,act=gelu_tanh"),
    "bf16-192x128-3wg-tma": dict(bm=192, bn=128),
    "bf16-128x256-direct": dict(epilogue="direct"),
    "bf16-128x128-cpasync-direct": dict(bn=128, loader="cp.async", epilogue="direct"),
}


def _bar_ops(sass: str) -> list[str]:
    """The 256-thread named-barrier operations of the SASS: BAR.SYNC / BAR.ARV with 0x100 threads, the id an immediate
    (an int) or a register ("R")."""
    out = []
    for line in sass.splitlines():
        m = re.search(r"BAR\.(SYNC(?:\.DEFER_BLOCKING)?|ARV) (0x[0-9a-f]+|R\d+), 0x100", line)
        if m:
            bar = m.group(2)
            out.append(("SYNC" if m.group(1).startswith("SYNC") else "ARV", int(bar, 16) if bar.startswith("0x") else "R"))
    return out


@pytest.mark.parametrize("name", sorted(L2))
def test_ordered_kernels_compile(name):
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    kw = dict(L2[name])
    fuse = kw.pop("fuse", None)
    s = _spec(fuse=fuse, **kw)
    plan = plan_kernel(s)
    c = compile_cuda(render_kernel(plan), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log, c.log
    ops = _bar_ops(run_tool("cuobjdump", ["--dump-sass"], c.cubin))
    o = plan.epi_order
    want_sync = {o.barrier_id(st.barrier) for st in o.steps if st.op == "sync"}
    want_arv = {o.barrier_id(st.barrier) for st in o.steps if st.op == "arrive"}
    assert {b for op, b in ops if op == "SYNC"} == want_sync and {b for op, b in ops if op == "ARV"} == want_arv, ops
    assert want_sync == want_arv == set(range(o.first_barrier_id, o.first_barrier_id + o.consumers))
    assert sum(op == "ARV" for op, _ in ops) >= o.consumers and sum(op == "SYNC" for op, _ in ops) >= o.consumers + 1


UNIFORM_L2 = {"bf16-128x256-tma": dict(), "bf16-192x128-3wg-tma": dict(bm=192, bn=128),
              "fused-128x192-direct": dict(bn=192, epilogue="direct", fuse="bias=col:bf16,act=gelu_tanh")}


@pytest.mark.parametrize("name", sorted(UNIFORM_L2))
def test_uniform_kernels_compile(name):
    """alternate-uniform: the prologue arrival and the tail sync with immediate ids, the loop's sync and arrive with the
    id in a register (computed from wg: no branch), no local memory."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    kw = dict(UNIFORM_L2[name])
    s = _spec(epilogue_order="alternate-uniform", fuse=kw.pop("fuse", None), **kw)
    assert s.kernel_name.endswith("_eoalternateuniform")
    o = plan_kernel(s).epi_order
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and "C7514" not in c.log, rep.problems
    ops = set(_bar_ops(run_tool("cuobjdump", ["--dump-sass"], c.cubin)))
    assert ops == {("ARV", o.first_barrier_id), ("SYNC", o.first_barrier_id), ("SYNC", "R"), ("ARV", "R")}, ops


def test_unordered_twin_has_no_order_barriers():
    """Control for the SASS check: the same kernel without the order has no 256-thread named barriers."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = make_spec(128, 256, 64, "kmajor-sw128", "kmajor-sw128", **BASE)
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    assert _bar_ops(run_tool("cuobjdump", ["--dump-sass"], c.cubin)) == []


# ---- the bench tool's kernels (tools/bench_epilogue.py --epilogue-order, --plain-only; no GPU) ----------------------
def _bench_tool():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "tools" / "bench_epilogue.py"
    spec = importlib.util.spec_from_file_location("bench_epilogue", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_variants():
    tool = _bench_tool()
    specs, _ = tool.shape_specs(4096, 4096, 4096, "alternate", False, False)
    assert sorted(specs) == ["fused", "fused_ordered", "plain", "plain_ordered", "plain_twin"]
    assert specs["plain_ordered"] == tool.ordered(specs["plain"], "alternate") != specs["plain"]
    assert specs["fused_ordered"].fuse == specs["fused"].fuse and specs["fused_ordered"].epilogue_order.value == "alternate"
    assert sorted(tool.shape_specs(4096, 4096, 4096, "none", False, False)[0]) == ["fused", "plain", "plain_twin"]
    # a ping-pong pick takes no order: --plain-only compares on the cooperative kernel
    specs, why = tool.shape_specs(8192, 8192, 1024, "alternate", False, True)
    assert sorted(specs) == ["plain", "plain_ordered", "plain_twin"] and "cooperative" in why
    assert specs["plain"].consumers.value == "cooperative" and specs["plain_ordered"].epilogue_order.value == "alternate"
