"""Stream-K for block-scaled FP8 (issue 17): the persistent cooperative block-FP8 kernel with its last round split along
K (``--stream-k S``; derive.store.streamk's split and fix-up, the promoted f32 accumulators summed by the owner).

L1: every split promotes with the scale blocks of exactly its K range: the rendered work-unit C (emit.views.streamk_view)
and the rendered scale index (emit.views.blockfp8.k_block_c) run as Python for every unit of random launches, against the
independent model (model.numerics.bfp8model.check_unit_scale_blocks: the K elements each K-tile multiplies, from the loader's
K range) and against the recipe computed split by split (bfp8model.split_recipe vs bfp8model.reference); controls that
must fail (the split's loop counter as the K block; a split reading the next split's blocks). The flag protocol and the
work bijection for block-FP8 plans: tests/test_streamk.py and tests/test_streamk_api.py (their plans include these).
L2: NVRTC sm_90a, SASS gate, no local memory, the flag's release add. GPU tier: tests/blockfp8_streamk_gpu_case.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxgen.api.fp8blocks
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.streamk_view import layout_c, unit_c
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model
from test_blockfp8 import CaiArray, simulated_bfp8_launches
from test_streamk import run_c


TMASF_192 = dict(bm=192, bn=128, fp8_scale_load="tma")  # ptxgen.api.fp8blocks.tma_scales_spec's tile: three consumer warpgroups


def bfsk_spec(s=4, out_dtype="bf16", **kw):
    return ptxgen.api.fp8blocks.default_spec(out_dtype, stream_k=s, **kw)


def kb_c(plan) -> str:
    """The C the kernel indexes the scales with for its K-tile kt (BlockFp8View.kb_cur, what the template renders)."""
    from ptxgen.emit.render import kernel_view

    return kernel_view(plan).bfp8.kb_cur


# -- the spec --------------------------------------------------------------------------------------------------------
def test_stream_k_is_legal_for_block_fp8_and_names_the_kernel():
    s = bfsk_spec(8)
    assert s.kernel_name.endswith("_streamk8") and plan_kernel(s).stream_k.bk == 128
    assert plan_kernel(s).block_fp8 is not None and [q.name for q in plan_kernel(s).abi.params][-1] == "W"
    for kw in (dict(fp8_scale_load="block"), dict(fp8_scale_load="ahead"), dict(fp8_overlap="halves"), dict(cluster="2x1")):
        assert plan_kernel(bfsk_spec(4, **kw)).stream_k is not None
    assert ptxgen.api.fp8blocks.default_spec().stream_k == 1  # the default does not change until measured


@pytest.mark.parametrize("kw", [dict(fp8_stagger="issue"), dict(fp8_stagger="complete"), dict(fp8_stagger="half"),
                                dict(schedule="tile"),
                                dict(consumers="pingpong", bm=64), dict(s=17)])
def test_illegal_block_fp8_stream_k_specs_name_the_field(kw):
    with pytest.raises(SpecError) as e:
        bfsk_spec(**{"s": 4, **kw})
    assert e.value.field == "--stream-k"
    bfsk_spec(1, **{x: v for x, v in kw.items() if x != "s"})  # legal without stream-K


# -- L1: each split's scale blocks -----------------------------------------------------------------------------------
def rendered_units(plan, items: int, clusters: int, k: int, blocks_of=None):
    """Per item: [(split, first K-tile, K-tiles, K blocks read)] of every work entry, as the rendered C computes them.
    ``blocks_of(unit variables)``: the K blocks another reader of the scales takes (default: the consumers' index)."""
    sk = plan.stream_k
    env = run_c(layout_c(sk, "num_items"), {"num_items": items, "gridDim_x": clusters * sk.cluster_size,
                                             "k_tiles_total": -(-k // plan.spec.bk)})
    units: dict[int, list] = {}
    expr = kb_c(plan)
    copy = copy_kb_c(plan)
    for w in range(env["sk_work"]):
        u = run_c(unit_c(), {**env, "work": w})
        blocks = (blocks_of(u) if blocks_of else
                  [int(eval(expr, {}, {**u, "kt": kt})) for kt in range(u["num_k_tiles"])])
        # --fp8-scale-load tma: the TMA thread's copy of A's scales lands the block the consumers promote with
        assert copy is None or [int(eval(copy, {}, {**u, "kt": kt})) for kt in range(u["num_k_tiles"])] == blocks
        units.setdefault(u["tile"], []).append((u["sk_split"], u["kt_first"], u["num_k_tiles"], blocks))
    return env, units


def copy_kb_c(plan) -> str | None:
    """--fp8-scale-load tma: the C of the K block the TMA thread copies A's scales from (its box's y) for K-tile kt,
    after checking that the scale warp's lane 0 loads B's scales of that same block; None for the other modes."""
    from ptxgen.emit.render import kernel_view

    a_tma = kernel_view(plan).bfp8.smem.a_tma if plan.sfa_tma else None
    if a_tma is None:
        return None
    assert a_tma.b_loads and all(f"{a_tma.y}]" in b.value for b in a_tma.b_loads), (a_tma.y, a_tma.b_loads)
    return a_tma.y


PLANS = {name: plan_kernel(spec) for name, spec in (("smem", bfsk_spec(8)), ("block", bfsk_spec(8, fp8_scale_load="block")),
                                                   ("c2x1", bfsk_spec(4, cluster="2x1")), ("m192-tmasf", bfsk_spec(3, **TMASF_192)))}


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(1, 132), st.integers(1, 9000), st.sampled_from(sorted(PLANS)))
def test_every_split_reads_the_scale_blocks_of_exactly_its_k_range(items, clusters, k, name):
    plan = PLANS[name]
    clusters = max(1, clusters // plan.stream_k.cluster_size)
    env, units = rendered_units(plan, items, clusters, k)
    assert sorted(units) == list(range(items))
    for item, us in units.items():
        reads = {(first, count): blocks for _, first, count, blocks in us}
        problems = bfp8model.check_unit_scale_blocks([u[:3] for u in us], k, plan.spec.bk, lambda f, c: reads[(f, c)])
        assert problems == [], (item, problems)
        for _, first, count, blocks in us:  # the rendered index is the plan's
            assert tuple(blocks) == plan.block_fp8.unit_k_blocks(first, count)


def test_the_split_recipe_is_the_recipe_and_the_splits_really_split():
    plan = PLANS["block"]
    # 135 tiles of 128 x 192 on 132 CTAs: 3 in the last round, split 8 ways (K = 4000: 32 K-tiles, the last of 32 elements)
    env, units = rendered_units(plan, 135, 132, 4000)
    assert env["sk_splits"] == 8 and len(units[134]) == 8 and units[0] == [(0, 0, 32, list(range(32)))]
    rng = np.random.default_rng(3)
    m, n, k = 4, 300, 4000
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    sfa, sfb = rng.uniform(0.5, 1.5, (m, 32)), rng.uniform(0.5, 1.5, (32, 3))
    us = units[134]
    reads = {(f, c): bl for _, f, c, bl in us}
    got = bfp8model.split_recipe(a, sfa, b, sfb, [u[:3] for u in us], 128, lambda f, c: reads[(f, c)])
    np.testing.assert_allclose(got, bfp8model.reference(a, sfa, b, sfb), rtol=1e-12, atol=1e-9)


def test_control_the_splits_loop_counter_as_the_k_block_is_caught():
    """A kernel that indexed the scales with its loop counter kt (right for whole tiles, K-tile 0 = block 0) would promote
    every split z > 0 with the first blocks of K: the model and the recipe both say so."""
    plan = PLANS["smem"]
    env, units = rendered_units(plan, 135, 132, 4000)
    us = [u[:3] for u in units[134]]
    wrong = lambda f, c: list(range(c))  # noqa: E731 - kt, not kt_first + kt
    assert any("promotes with block" in p for p in bfp8model.check_unit_scale_blocks(us, 4000, 128, wrong))
    assert bfp8model.check_unit_scale_blocks([u[:3] for u in units[0]], 4000, 128, wrong) == []  # whole tiles: the same
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 4000)), rng.standard_normal((200, 4000))
    sfa, sfb = rng.uniform(0.5, 1.5, (4, 32)), rng.uniform(0.5, 1.5, (32, 2))
    got = bfp8model.split_recipe(a, sfa, b, sfb, us, 128, wrong)
    assert not np.allclose(got, bfp8model.reference(a, sfa, b, sfb), rtol=1e-3)


def test_control_a_split_reading_the_next_splits_blocks_is_caught():
    plan = PLANS["block"]
    _, units = rendered_units(plan, 135, 132, 4000)
    us = [u[:3] for u in units[134]]
    shifted = lambda f, c: [min(31, f + c + kt) for kt in range(c)]  # noqa: E731
    assert bfp8model.check_unit_scale_blocks(us, 4000, 128, shifted) != []
    dropped = us[:-1]  # the last split's K range never multiplied
    assert any("exactly once" in p for p in bfp8model.check_unit_scale_blocks(dropped, 4000, 128, lambda f, c: list(range(f, f + c))))


def test_control_a_scale_copy_at_the_loop_counter_is_caught():
    """The check above compares the TMA copy's K block with the consumers': the whole-K kernel's copy (y = kt, as
    before stream-K) fails it on a unit that starts past K-tile 0."""
    plan = PLANS["m192-tmasf"]
    assert copy_kb_c(plan) == "kt_first + kt"
    u = {"kt_first": 5, "kt": 2}
    assert eval("kt", {}, u) != eval(kb_c(plan), {}, u)


@pytest.mark.parametrize("kw", [dict(), dict(fp8_scale_load="block"), dict(fp8_scale_load="ahead"), dict(fp8_overlap="halves"),
                                dict(fp8_scale_load="tma"), TMASF_192])
def test_every_scale_index_of_the_kernel_follows_the_split(kw):
    """The rendered kernel indexes scale_a and scale_b only through the split's K block (kt_first + ...): no index by
    the bare loop counter is left (the whole-tile kernel's text) in any scale-load mode."""
    src = render_kernel(plan_kernel(bfsk_spec(4, **kw)))
    for bare in ("static_cast<size_t>(kt) * lds_a", "bfp8_sfb[kt]", "lds_b) + kt]", "lds_b + kt]",
                 "static_cast<size_t>(bfp8_kn) * lds_a", "static_cast<size_t>(0) * lds_a"):
        assert bare not in src, bare
    # the consumers index K block kt_first + kt; the smem scale warp's A pointer starts at K block kt_first and steps;
    # with --fp8-scale-load tma the TMA thread's box of A's scales is at K block kt_first + kt
    if kw.get("fp8_scale_load") == "tma":
        assert "&tmap_sfa, m0, kt_first + kt," in src
    else:
        assert "static_cast<size_t>(kt_first + " in src or "static_cast<size_t>(kt_first) * lds_a" in src
    assert "if (sk_split > 0)" in src
    whole = render_kernel(plan_kernel(ptxgen.api.fp8blocks.default_spec(**kw)))
    assert "kt_first" not in whole  # the whole-tile kernel is unchanged (generated/ too: ptxgen check)


def test_api_passes_the_streams_workspace(monkeypatch):
    """ptxgen.api.fp8blocks.gemm with a stream-K spec: the calling stream's workspace (launchplan.streamk_workspace, the
    one ptxgen.gemm uses) as the kernel's last argument, W."""
    import ptxgen.api.fp8blocks as fb

    launches, asked = simulated_bfp8_launches(monkeypatch), []
    monkeypatch.setattr(fb, "launcher", lambda: "driver")
    monkeypatch.setattr(fb, "streamk_workspace", lambda drv, di, stream, nbytes, like, ens: asked.append(nbytes) or (0x7000000, None))

    m, n, k = 300, 8584, 4000  # 135 tiles: 3 split 8 ways on 132 SMs
    a = CaiArray((m, k), "float8_e4m3fn", (k, 1), 0x10000000)
    b = CaiArray((n, k), "float8_e4m3fn", (k, 1), 0x20000000)
    out = CaiArray((m, n), "bfloat16", (n, 1), 0x30000000)
    sa = CaiArray((m, 32), "float32", (1, 304), 0x40000000)
    sb = CaiArray((32, 68), "float32", (1, 32), 0x50000000)  # ceil(8584 / 128) = 68 blocks of B
    fb.gemm(a, b, sa, sb, out, spec=bfsk_spec(8))
    (grid, args), = launches
    assert grid == (132, 1, 1) and args[-1] == 0x7000000 and args[-5:-1] == [0x40000000, 0x50000000, 304, 32]
    from ptxgen.derive.store.streamk import FLAG_REGION_BYTES

    assert asked and asked[0] >= FLAG_REGION_BYTES + 3 * 7 * 128 * 192 * 4  # 3 tiles x 7 partials of 128 x 192 floats


# -- L2: NVRTC + SASS ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(s=4), dict(s=8), dict(s=8, fp8_scale_load="block"), dict(s=4, fp8_overlap="halves"),
                                dict(s=4, out_dtype="f32"), dict(s=4, cluster="2x1"), dict(s=3, **TMASF_192),
                                dict(s=4, fp8_scale_load="tma"), dict(s=4, out_dtype="f32", **TMASF_192)],
                         ids=["default-sk4", "default-sk8", "block-sk8", "halves-sk4", "f32-direct-sk4", "c2x1-sk4", "m192-tmasf-sk3",
                              "tmasf-sk4", "m192-tmasf-f32-sk4"])
def test_block_fp8_stream_k_kernels_compile_without_local_memory(kw):
    from ptxgen.runtime.compile.sass import check_sass, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = bfsk_spec(**kw)
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "e4m3.e4m3" in c.ptx
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "REDG.E.ADD.S32.STRONG.GPU" in sass and "LDG.E.STRONG.GPU" in sass  # the flag's release add, the owner's acquire
    assert sass.count("ATOM") == 0


# -- on the H200 (gpu tier) -------------------------------------------------------------------------------------------
CASE = Path(__file__).resolve().parent / "blockfp8_streamk_gpu_case.py"
CASE_TIMEOUT_S = 300
# shapes with a partial last round on 132 SMs (128 x 192 tiles; the case checks that each launch splits): 300 x 8584 x
# 4000 (N: bf16 rows 16-byte aligned, as D's TMA store needs): 135 tiles, 3 split up to 8 ways, partial tiles along M
# and N, a K tail of 32; 1000 x 7000 x 2000: 296 tiles, 32 split 4 ways, a K tail of 80. In 2x1 clusters (66
# clusters): 90 and 148 cluster tiles, 24 and 16 split 2 and 4 ways
GPU_SHAPES = ["300", "8584", "4000", "1000", "7000", "2000"]
_TIMED_OUT: list = []


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [dict(stream_k=4), dict(stream_k=8), dict(stream_k=8, fp8_scale_load="block"),
                                     dict(stream_k=4, fp8_scale_load="ahead"), dict(stream_k=4, fp8_overlap="halves"),
                                     dict(stream_k=4, out_dtype="f32"), dict(stream_k=4, cluster="2x1"),
                                     dict(stream_k=4, **TMASF_192), dict(stream_k=8, fp8_scale_load="tma"),
                                     dict(stream_k=4, out_dtype="f32", **TMASF_192)],
                         ids=["sk4", "sk8", "block-sk8", "ahead-sk4", "halves-sk4", "f32-direct-sk4", "c2x1-sk4", "m192-tmasf-sk4",
                              "tmasf-sk8", "m192-tmasf-f32-sk4"])
def test_block_fp8_stream_k_matches_the_recipe_bit_for_bit_thrice(gpu, artifact_dir, variant):
    pytest.importorskip("torch")
    if _TIMED_OUT:
        pytest.fail(f"not run: {_TIMED_OUT[0]} timed out")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CASE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, str(CASE), json.dumps(variant), *GPU_SHAPES], capture_output=True,
                              text=True, timeout=CASE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        _TIMED_OUT.append(json.dumps(variant))
        pytest.fail(f"{variant}: no result in {CASE_TIMEOUT_S} s (a stream-K wait that never ends?): {e.stdout!r}")
    with open(artifact_dir / "blockfp8_streamk.jsonl", "a") as f:
        f.write(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["passed"]


# Since 2026-12-02: block-FP8 stream-K launches fill every SM (KernelABI.fills_sms), so a launch of one partial round splits too:
# 32 x 4096 x 7168 (32 tiles of 192 x 128, 4 ways), 200 x 304 x 4096 (6 tiles, 8 ways), 128 x 7168 x 2048 (56, 2 ways)
FEW_TILE_SHAPES = ["32", "4096", "7168", "200", "304", "4096", "128", "7168", "2048"]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [dict(stream_k=8, **TMASF_192), dict(stream_k=8)], ids=["m192-tmasf-sk8", "sk8"])
def test_block_fp8_stream_k_splits_a_single_round(gpu, artifact_dir, variant):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CASE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(CASE), json.dumps(variant), *FEW_TILE_SHAPES], capture_output=True,
                          text=True, timeout=CASE_TIMEOUT_S, env=env)
    with open(artifact_dir / "blockfp8_streamk.jsonl", "a") as f:
        f.write(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["passed"]


def test_a_single_round_splits_over_every_sm():
    """The launch geometry of a block-FP8 stream-K kernel with fewer tiles than SMs: a grid of every SM, whose layout
    splits; the same kernel without stream-K keeps one CTA per tile there (control)."""
    from ptxgen.runtime.launch.launch import Problem, launch_geometry, streamk_items, workspace_bytes

    plan = plan_kernel(bfsk_spec(8, **TMASF_192))
    p = Problem(32, 4096, 7168, 7168, 7168, 4096)
    grid, _, _ = launch_geometry(plan, p, 132)
    lay = plan.stream_k.layout(streamk_items(plan, p), grid[0], p.k)
    assert grid == (132, 1, 1) and (lay.items, lay.splits, lay.dp_items) == (32, 4, 0)
    assert workspace_bytes(plan, p, 132) >= 16384 + 32 * 3 * 192 * 128 * 4
    from ptxgen.derive.tile.spec import make_spec

    whole = plan_kernel(make_spec(**{**bfsk_spec(8, **TMASF_192).to_json(), "stream_k": 1}))
    assert launch_geometry(whole, p, 132)[0] == (-(-4096 // 128), 1, 1)


def test_explain_says_which_scale_blocks_a_split_reads():
    from ptxgen.derive.tile.explain import explain_text
    from ptxgen.derive.tile.layout import derive

    text = explain_text(derive(bfsk_spec(4)))
    assert "Stream-K" in text and "stream_k_scales" in text and "kt_first + kt" in text
    assert "stream_k_scales" not in explain_text(derive(bfsk_spec(1)))
