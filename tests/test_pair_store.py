"""The TMA-store epilogue with a CTA pair (``--cta-group 2 --epilogue tma``): L1 (the two CTAs' stores, through the
independent pair model's placement of D in TMEM and the TMA model, write every element of the tile once, with
controls that must fail) and L2 (NVRTC for sm_100a: the pair forms and the TMA stores in the SASS, no local memory)."""

import dataclasses

import pytest

from ptxgen.derive.store.epilogue import plan_store
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model.bridges.check_store import check_pair_store_plan

BASE = dict(bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", cta_group=2, stages=4, epilogue="tma")


def pair_store(bm: int, bn: int, **kw):
    return make_spec(**{**BASE, "bm": bm, "bn": bn, **kw})


# Every legal (M, N) of the pair's TMA-store epilogue: M=256 (Layout A) takes N a multiple of 64, M=128 (Layout B)
# a multiple of 128 (each warp holds N/2 columns, stored in 64-column chunks).
LEGAL = [(256, n) for n in (64, 128, 192, 256)] + [(128, n) for n in (128, 256)]


@pytest.mark.parametrize("bm,bn", LEGAL)
def test_pair_stores_write_every_element_of_the_tile_once(bm, bn):
    plan = plan_store(pair_store(bm, bn))
    assert plan.writer == "st.shared.v4" and plan.storers == 4 and plan.tma.box == (64, 32)
    assert plan.chunks_per_slab * plan.chunk_cols == (bn if bm == 256 else bn // 2)
    for base, tmem_chunk in ((0, 32), (4096, 16)):
        assert check_pair_store_plan(plan, bm, bn, seed=bn, base=base, tmem_chunk=tmem_chunk) == []


def test_pair_store_plan_names_its_layout_in_explain_json():
    j = plan_store(pair_store(128, 256)).to_json()
    assert j["pair"] == {"tmem_layout": "B", "warp_row0": "(warp % 2) * 32", "warp_col0": "(warp / 2) * 128", "cols_per_warp": 128}
    assert plan_store(pair_store(256, 256)).to_json()["pair"]["tmem_layout"] == "A"
    single = make_spec(**{**BASE, "bm": 128, "bn": 256, "cta_group": 1})
    assert "pair" not in plan_store(single).to_json()  # one CTA: the JSON is unchanged


@pytest.mark.parametrize(
    "bm,bn,wrong",
    [
        (128, 256, dict(warp_col0_expr="0")),  # every warp stores the left half: the right half is never stored
        (128, 256, dict(warp_row0_expr="warp * 32")),  # Layout B read as Layout A: warps 2, 3 land past the CTA's 64 rows
        (128, 256, dict(chunks_per_slab=4)),  # a warp stores BN columns though its lanes hold BN/2
        (256, 256, dict(warp_row0_expr="(warp % 2) * 32", warp_col0_expr="(warp / 2) * 128", chunks_per_slab=2)),  # Layout B on A
        (256, 128, dict(warp_row0_expr="warp * 16")),  # rows of the wrong warp
    ],
    ids=["B-no-column-split", "B-as-A", "B-whole-width", "A-as-B", "wrong-row-origin"],
)
def test_control_a_wrong_pair_store_fails_the_check(bm, bn, wrong):
    plan = plan_store(pair_store(bm, bn))
    assert check_pair_store_plan(plan, bm, bn) == []
    assert check_pair_store_plan(dataclasses.replace(plan, **wrong), bm, bn), f"the model check passed {wrong}"


def test_the_single_cta_plan_fails_as_a_pair():
    """Control: the cta_group::1 M=128 plan (warp w: rows 32w.., all BN columns) stored by both CTAs of an M=128 pair."""
    single = plan_store(make_spec(**{**BASE, "bm": 128, "bn": 256, "cta_group": 1}))
    assert check_pair_store_plan(single, 128, 256)


def test_layout_b_narrower_than_two_chunks_is_refused_with_the_rule():
    with pytest.raises(SpecError) as e:
        pair_store(128, 64)
    assert e.value.field == "--bn" and "Layout B" in str(e.value) and "BN/2 = 32" in str(e.value)
    assert "Data path layout" in str(e.value)
    pair_store(256, 64)  # Layout A: one 64-column chunk per warp


@pytest.mark.parametrize("bm,bn", [(256, 256), (128, 256)], ids=["M256-LayoutA", "M128-LayoutB"])
def test_pair_tma_store_kernels_compile_with_the_pair_and_store_instructions(bm, bn):
    from ptxgen.runtime.compile.artifacts import generate

    spec = pair_store(bm, bn, schedule="persistent")
    art = generate(spec)
    ptx, cu = art.files["kernel.ptx"], art.files["kernel.cu"]
    for form in ("tcgen05.mma.cta_group::2", "cp.async.bulk.tensor.2d.global.shared::cta", "cp.async.bulk.wait_group.read",
                 "tcgen05.ld.sync.aligned.32x32b", ".reqnctapercluster 2, 1, 1"):
        assert form in ptx, form
    assert "m_cta + " in cu  # each CTA stores its own rows
    if bm == 128:
        assert "(warp / 2) * 128" in cu and "(warp % 2) * 32" in cu
    rep = art.sass
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0 and rep.stack_bytes == 0
