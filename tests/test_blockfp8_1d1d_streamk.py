"""Stream-K for the 1x128 x 1x128 block-FP8 recipe (DeepGEMM's 1D1D, ``--fp8-blocks 1x128x1x128 --stream-k S``): the
last round's tiles split along K, each split promoting with the A row scales and B column scales of its own K blocks,
the owner summing the promoted f32 accumulators (the 1x128x128 kernels' fix-up, tests/test_blockfp8_streamk.py).

In the 1D1D kernels the consumers read every scale from the stage's slots; which K block a slot holds is the producer's
scale warp's choice: its row and column pointers start at a K block and step one block (lds_a, lds_b) per K-tile.
L1: that start and step, read back from the rendered kernel and run for every work unit of random launches (the
rendered work-unit C of emit.views.streamk_view), against the independent model (bfp8model.check_unit_scale_blocks:
each K-tile's K elements promoted with their own block, every K element once over the splits), and the recipe computed
split by split with per-column scales against the float64 recipe; controls that must fail: the whole-tile kernel's
start (block 0 for every split), a split starting one block late. L2: NVRTC sm_90a, SASS gate, no local memory, the
flag's release add. gpu: tests/blockfp8_streamk_gpu_case.py with the recipe (128 x 192 and 64 x 64).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model
from test_blockfp8_streamk import rendered_units

VARIANTS = {"128x192-cpasync-sk4": dict(bm=128, bn=192, stream_k=4),
            "128x128-smem-sk8": dict(bm=128, fp8_scale_load="smem", stream_k=8),
            "64x64-cpasync-sk8": dict(bm=64, bn=64, stages=6, stream_k=8)}


def _spec(**kw):
    from ptxgen.api.fp8blocks import columns_spec

    return columns_spec("f32", **kw)


def _plan_and_source(kw):
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    plan = plan_kernel(_spec(**kw))
    return plan, render_kernel(plan)


PLANS = {name: _plan_and_source(kw) for name, kw in VARIANTS.items()}

START = {"a": re.compile(r"bfp8_sfa_row = bfp8_sfa \+ static_cast<size_t>\((.+?)\) \* lds_a \+"),
         "b": re.compile(r"bfp8_sfb_col = bfp8_sfb \+ static_cast<size_t>\((.+?)\) \* lds_b \+")}
STEP = re.compile(r"for \(int kt = 0; kt < num_k_tiles; \+\+kt, \+\+it, bfp8_sfa_row \+= lds_a, bfp8_sfb_col \+= lds_b\)")


def warp_start(src: str) -> str:
    """The C of the K block the scale warp's A and B pointers start at (one expression, both operands), after checking
    that its copy loop steps both by one K block per K-tile."""
    (a,), (b,) = START["a"].findall(src), START["b"].findall(src)
    assert a == b and len(STEP.findall(src)) == 1, (a, b)
    return a


def warp_blocks(start: str):
    """A work unit's variables -> the K block of each of its K-tiles' slots, as the warp copies them."""
    return lambda u: [int(eval(start, {}, u)) + kt for kt in range(u["num_k_tiles"])]


def units_with_blocks(plan, src, items: int, clusters: int, k: int):
    """Per output tile: [(split, first K-tile, K-tiles, K blocks of the slots)] of every work unit (the rendered
    work-unit C, as tests/test_blockfp8_streamk.py runs it), the blocks as the scale warp copies them."""
    return rendered_units(plan, items, clusters, k, blocks_of=warp_blocks(warp_start(src)))[1]


# -- the spec --------------------------------------------------------------------------------------------------------
def test_stream_k_is_legal_for_the_recipe_but_not_with_c_a_cluster_or_192_rows():
    from ptxgen.derive.tile.kernel import plan_kernel

    s = _spec(bm=128, stream_k=4)
    assert s.kernel_name.endswith("_bs1d1d_slcpasync_streamk4") and plan_kernel(s).stream_k is not None
    with pytest.raises(SpecError) as e:
        _spec(stream_k=3)  # 192 x 128, three consumer warpgroups: the owner's sum spills (NVRTC 13.5: 16-24 B of stack)
    assert e.value.field == "--stream-k" and "1x128x1x128" in str(e.value)
    with pytest.raises(SpecError) as e:
        _spec(c=True, bm=128, stream_k=4)  # D = C + A.B: the owner would add C before the other splits' sums
    assert e.value.field == "--stream-k"
    with pytest.raises(SpecError) as e:
        _spec(bm=128, stream_k=4, cluster="2x1")
    assert e.value.field == "--cluster"


# -- L1: each split's slots hold the scales of exactly its K range ---------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(1, 132), st.integers(1, 9000), st.sampled_from(sorted(PLANS)))
def test_every_split_stages_the_scale_blocks_of_exactly_its_k_range(items, clusters, k, name):
    plan, src = PLANS[name]
    units = units_with_blocks(plan, src, items, clusters, k)
    assert sorted(units) == list(range(items))
    for item, us in units.items():
        reads = {(first, count): blocks for _, first, count, blocks in us}
        problems = bfp8model.check_unit_scale_blocks([u[:3] for u in us], k, plan.spec.bk, lambda f, c: reads[(f, c)])
        assert problems == [], (item, problems)
        for _, first, count, blocks in us:  # the plan's blocks, which the consumers' promotion is derived with
            assert tuple(blocks) == plan.block_fp8.unit_k_blocks(first, count)


def _split_tile(name: str):
    """A launch whose last round splits: 135 tiles on 132 CTAs, K = 4000 (32 K-tiles, the last of 32 elements)."""
    plan, src = PLANS[name]
    units = units_with_blocks(plan, src, 135, 132, 4000)
    us = units[134]
    assert len(us) > 1 and len({u[0] for u in us}) == len(us), us  # the last tile really splits
    return plan, src, us


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_split_recipe_with_column_scales_is_the_recipe(name):
    _, _, us = _split_tile(name)
    rng = np.random.default_rng(7)
    m, n, k = 5, 300, 4000
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    sfa, sfb = rng.uniform(0.5, 1.5, (m, 32)), rng.uniform(0.5, 1.5, (32, n))
    reads = {(f, c): bl for _, f, c, bl in us}
    got = bfp8model.split_recipe(a, sfa, b, sfb, [u[:3] for u in us], 128, lambda f, c: reads[(f, c)], per_column=True)
    want = bfp8model.reference(a, sfa, b, sfb, per_column=True)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    # control: the 1x128x128 reading of the same scales (one per 128 columns) is another product
    assert not np.allclose(bfp8model.split_recipe(a, sfa, b, sfb[:, :3], [u[:3] for u in us], 128,
                                                  lambda f, c: reads[(f, c)]), want, rtol=1e-3)


def test_control_the_whole_tile_start_is_caught():
    """The whole-tile kernel's scale warp starts at block 0 (``static_cast<size_t>(0)``): with that start every split
    past the first would stage the first blocks of K; the model and the recipe both say so."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    whole = render_kernel(plan_kernel(_spec()))
    assert warp_start(whole) == "0" and "kt_first" not in whole
    plan, src, us = _split_tile("128x192-cpasync-sk4")
    wrong = lambda f, c: list(range(c))  # noqa: E731 - what start 0 copies
    assert any("promotes with block" in p for p in bfp8model.check_unit_scale_blocks([u[:3] for u in us], 4000, 128, wrong))
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((4, 4000)), rng.standard_normal((200, 4000))
    sfa, sfb = rng.uniform(0.5, 1.5, (4, 32)), rng.uniform(0.5, 1.5, (32, 200))
    got = bfp8model.split_recipe(a, sfa, b, sfb, [u[:3] for u in us], 128, wrong, per_column=True)
    assert not np.allclose(got, bfp8model.reference(a, sfa, b, sfb, per_column=True), rtol=1e-3)


def test_control_a_start_one_block_late_is_caught():
    plan, src, us = _split_tile("128x128-smem-sk8")
    late = lambda f, c: [min(31, f + 1 + kt) for kt in range(c)]  # noqa: E731
    assert bfp8model.check_unit_scale_blocks([u[:3] for u in us], 4000, 128, late) != []


# -- L2: NVRTC + SASS ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_kernels_compile_without_local_memory(name):
    from ptxgen.runtime.compile.sass import check_sass, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda

    plan, src = PLANS[name]
    c = compile_cuda(src, plan.spec.kernel_name, "sm_90a")
    rep = check_sass(plan.spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log and "C7517" not in c.log, c.log
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "REDG.E.ADD.S32.STRONG.GPU" in sass and "LDG.E.STRONG.GPU" in sass  # the flag's release add, the owner's acquire


# -- gpu: against the float64 recipe (tests/blockfp8_streamk_gpu_case.py: the launch splits, three calls bit-identical,
# every element within the bound, the workspace's flags back to zero) ---------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("variant", [dict(bm=128, bn=192, stream_k=4), dict(bm=64, bn=64, stages=6, stream_k=8)],
                         ids=["128x192-sk4", "64x64-sk8"])
def test_matches_the_recipe_bit_for_bit_thrice(gpu, artifact_dir, variant):
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    from test_blockfp8_streamk import CASE, CASE_TIMEOUT_S, GPU_SHAPES

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CASE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    arg = json.dumps({**variant, "fp8_blocks": "1x128x1x128", "out_dtype": "f32"})
    proc = subprocess.run([sys.executable, str(CASE), arg, *GPU_SHAPES], capture_output=True, text=True,
                          timeout=CASE_TIMEOUT_S, env=env)
    with open(artifact_dir / "blockfp8_streamk.jsonl", "a") as f:
        f.write(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["passed"]
