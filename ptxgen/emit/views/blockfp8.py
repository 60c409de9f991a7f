"""Block-scaled FP8 on wgmma (ptxgen.derive.scaled.blockfp8), rendered: what templates/mma_blockfp8.cuh.j2 receives."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.scaled.blockfp8 import (BLOCK_K, BLOCK_N, GROUP_COLS, SCALE_WARP, SCALE_WARP_LANES, SF_BYTES, STAGED_SCALE_LOADS,
                                      BlockFp8Plan, OffsetTerm)
from ...derive.scaled.bfp8steps import STAGGER_WHERE, BarrierStep
from ...derive.tile.abi import SFA_MAP
from ...derive.scaled.sfa_tma import sfa_copy_origin
from ...derive.operands.tma import TmaPlan
from ...isa.fragment import LANES_PER_ROW, WGMMA_GROUP_REGS
from ...derive.roles.barriers import stagger_first_barrier_id
from .fragment import WgmmaFragmentView, wgmma_fragment_view
from .pipeline_view import parity_c_expr

WARPGROUP_THREADS = 128
SECOND_BLOCK_C = f"(n0 / {BLOCK_N} + 1) * {BLOCK_N} < N"  # block n0 / 128 + 1 of B holds columns (else its scale is 0)


@dataclass(frozen=True)
class PhaseView:
    first_groups: int  # register groups of the tile in block n0 / 128 (the branch's key)
    first_regs: int  # fragment registers 0..first_regs-1 take the first block's B scale, the rest the next block's
    doc: str
    half_first_regs: tuple[int, ...] = ()  # --fp8-overlap halves: the same split counted in each half's fragment


@dataclass(frozen=True)
class HalfMmaView:
    """--fp8-overlap halves: the m64n(BN/2) wgmma of one column half and its fragment (derive.scaled.blockfp8)."""

    regs: int  # f32 registers of one half's fragment per thread (BN / 4)
    acc_offsets: tuple[int, ...]  # half h's register i is accumulator register acc_offsets[h] + i
    opcode: str
    d_list: str
    outputs: str
    op_a_desc: int
    op_b_desc: int
    op_scale_d: int
    b_offsets_bytes: tuple[int, ...]  # each column half's first row of B from the stage base (the stage layout at row 0, BN / 2)


@dataclass(frozen=True)
class BlockFp8View:
    block_n: int
    frag: WgmmaFragmentView  # a thread's two rows and its registers' column pairs
    fresh: tuple[str, ...]  # per MMA of a K-tile: its scale-d (the first overwrites the partial)
    sfa_doc: str
    sfb_doc: str
    two_blocks: bool  # some tile spans two 128-column blocks of B: a second B scale and one promotion branch per phase
    first_expr: str  # C: the tile's register groups in block n0 / 128
    second_block_expr: str  # C: block n0 / 128 + 1 holds columns of B (else its scale is not loaded)
    phases: tuple[PhaseView, ...]
    sfb_base: str  # C: the tile's element offset into SFB (derive.scaled.blockfp8 sfb_tile_terms; a grouped tile adds its group's array)
    stagger: str  # none | issue | complete | half (the two consumer warpgroups' order; spec --fp8-stagger)
    half: HalfMmaView | None  # --fp8-overlap halves or interleave (the two column halves' instruction and fragments)
    scale_ahead: bool  # --fp8-scale-load ahead: K block kt + 1's scales loaded during kt (derive.scaled.bfp8steps.scale_steps)
    smem: "ScaleSmemView | None" = None  # --fp8-scale-load smem: the producer's scale warp and the stage's scale slots
    # C of the scale K block (the column of scale_a, the row of scale_b) of the unit's K-tile kt, of the ahead load's
    # K-tile bfp8_kn, and of its first K-tile (k_block_c: with stream-K the unit starts at K-tile kt_first)
    kb_cur: str = "kt"
    kb_next: str = "bfp8_kn"
    kb_zero: str = "0"
    # C statements of the stagger protocol (derive.scaled.bfp8steps.stagger_steps) at each point of the K loop, and after it
    before_issue: tuple[str, ...] = ()
    after_issue: tuple[str, ...] = ()
    after_half: tuple[str, ...] = ()  # after wait_group 1 (--fp8-stagger half: the K block's first commit group complete)
    after_wait: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()
    # the K-steps of each wgmma commit group of a K block (derive.scaled.bfp8steps.stagger_commit_groups); with two, the loop
    # waits for the first (wait_group 1, half_wait) before wait_group 0
    commit_groups: tuple[tuple[int, ...], ...] = ()
    half_wait: bool = False
    # --fp8-overlap interleave: the default loop with the K block's MMAs as two column halves, alternated per K-step
    interleave: bool = False
    k_loop_unroll: int = 1  # #pragma unroll of the consumer's K loop (derive.scaled.blockfp8.BlockFp8Plan.k_loop_unroll)
    # --consumer-slabs N > 1 (derive.scaled.bfp8slabs.shared_partial_steps): one K block's operations in program order, each
    # (op, slab index), the N slabs' MMAs passing through one shared partial; () for one partial per slab
    shared_steps: tuple["SlabStepView", ...] = ()
    columns: "ColumnScalesView | None" = None  # --fp8-blocks 1x128x1x128: per-column B scales (derive.scaled.bfp8cols)


@dataclass(frozen=True)
class ColumnScalesView:
    """--fp8-blocks 1x128x1x128 (derive.scaled.bfp8cols), rendered: the scale warp stages a K block's BN column scales, each
    consumer thread reads the pair of columns of each of its register groups."""

    cols_per_lane: int  # the scale warp: lane l stores columns l + 32 j, j < cols_per_lane (and < BN)
    col_step: int  # 32: columns between a lane's consecutive B scales
    pairs: int  # register groups of the fragment (BN / 8): one pair of adjacent columns each
    pair_expr: str  # C: the thread's first column of register group 0 (group g: + pair_stride_bytes / 4 x g)
    pair_stride_bytes: int  # bytes between register groups' pairs in the stage's sfb slot
    sfb_doc: str
    at_promote: bool = False  # each pair read inside the promotion, the stage released after it (BlockFp8Plan.column_scales_at)


@dataclass(frozen=True)
class SlabStepView:
    op: str  # issue | scales | wait | release | promote
    slab: int  # the warpgroup's slab (k.slabs[slab]) of an issue or promote; -1 otherwise
    first: bool  # the K block's first issue: it waits for the stage (full[s])


@dataclass(frozen=True)
class ScaleSmemView:
    """--fp8-scale-load smem (derive.scaled.blockfp8: scale_warp_writes, consumer_reads), rendered."""

    warp: int  # the producer warpgroup's warp that stages the scales
    rows_per_lane: int
    row_expr: str  # C: tile row of the lane's j-th A scale: row_lane_expr + row_step x j
    row_lane_expr: str  # C: the lane's first tile row
    row_step: int  # rows between a lane's consecutive A scales
    sfa_offset: int  # bytes from the aligned base: the ring of A-scale slots, sfa_stage_bytes each
    sfa_stage_bytes: int
    sfb_offset: int
    sfb_stage_bytes: int
    sfb_slots: int  # B scales a stage holds (lanes 0..sfb_slots-1 store one each; with a_tma lane 0 stores all)
    sf_bytes: int  # one scale (f32): a row's (or block's) byte offset in its slot is index x sf_bytes
    a_tma: "SfaTmaView | None" = None  # --fp8-scale-load tma: the TMA thread copies the A scales; lane 0 the B scales
    cp_async: bool = False  # --fp8-scale-load cpasync: the lanes' 4-byte cp.async (zero-fill) and noinc arrivals


@dataclass(frozen=True)
class SfaTmaView:
    """--fp8-scale-load tma (derive.scaled.sfa_tma): the TMA thread's copy of a stage's A scales into its sfa slot."""

    x: str  # C: the box's coordinate along M (the tile's first row)
    y: str  # C: along the K blocks (the K-tile's scale block)
    doc: str
    b_loads: tuple["SfbLoadView", ...] = ()  # the scale warp's lane 0: each B scale of the stage, in slot order
    map_name: str = SFA_MAP  # the kernel parameter (derive.tile.abi)


@dataclass(frozen=True)
class SfbLoadView:
    value: str  # C: the B scale (zero for a block past N)
    offset_bytes: int  # its place in the stage's sfb slot (BlockFp8Plan.sfb_slot)


def sfa_tma_view(sfa_tma: TmaPlan | None, plan: BlockFp8Plan, k_first: str = "") -> SfaTmaView | None:
    """The copy's coordinates: (m0, K block of K-tile kt) by derive.scaled.sfa_tma.sfa_copy_origin; its one copy lands at the
    slot's start, rows in order (the sfa_slot layout the consumers read). ``k_first``: as for k_block_c (stream-K's
    kt_first), the unit's first K-tile, for the copy's K block and the B scales'."""
    if sfa_tma is None:
        return None
    (copy,) = sfa_tma.copies
    assert (copy.smem_offset_bytes, copy.inner, copy.outer) == (0, 0, 0) and sfa_tma.box == (plan.bm, 1)
    assert sfa_copy_origin(7, 3) == (7, 3) and plan.sfa_slot(1).offset_bytes == sfa_tma.element_bytes
    kb = k_block_c(plan, "kt", k_first)
    blocks = (f"bfp8_sfb[{kb}]", f"({SECOND_BLOCK_C}) ? bfp8_sfb[static_cast<size_t>(lds_b) + {kb}] : 0.f")[:plan.sfb_slots]
    b_loads = tuple(SfbLoadView(v, plan.sfb_slot(j).offset_bytes) for j, v in enumerate(blocks))
    return SfaTmaView("m0", kb, b_loads=b_loads, doc=f"box {sfa_tma.box[0]} x {sfa_tma.box[1]} f32 at (m0, K block) of scale_a "
                      f"(dims {', '.join(sfa_tma.global_dims)}, stride {sfa_tma.ld_name} x {sfa_tma.element_bytes} B), "
                      f"{sfa_tma.expect_tx_bytes} B a stage, rows past M zero")


def scale_smem_view(plan: BlockFp8Plan, smem, sfa_tma: TmaPlan | None = None, k_first: str = "") -> ScaleSmemView | None:
    if plan.scale_load not in STAGED_SCALE_LOADS:
        return None
    if plan.scale_load == "tma":
        return ScaleSmemView(SCALE_WARP, 0, "", "", SCALE_WARP_LANES, smem.sfa_offset, plan.sfa_stage_bytes, smem.sfb_offset,
                             plan.sfb_stage_bytes, plan.sfb_slots, SF_BYTES, sfa_tma_view(sfa_tma, plan, k_first))
    # the derived lane -> rows map is rows lane + 32 j: check it is what the rendered expression computes
    assert all(w.index == lane + SCALE_WARP_LANES * j for lane in range(SCALE_WARP_LANES)
               for j, w in enumerate(plan.scale_warp_writes(lane)[:plan.scale_rows_per_lane]))
    assert plan.sfa_slot(1).offset_bytes == SF_BYTES and plan.sfb_slot(1).offset_bytes == SF_BYTES
    return ScaleSmemView(SCALE_WARP, plan.scale_rows_per_lane, f"lane + {SCALE_WARP_LANES} * j", "lane", SCALE_WARP_LANES, smem.sfa_offset,
                         plan.sfa_stage_bytes, smem.sfb_offset, plan.sfb_stage_bytes, plan.sfb_slots, SF_BYTES,
                         cp_async=plan.scale_load == "cpasync")


_SIGNALS = {  # what each barrier's generation says, per mode (derive.scaled.bfp8steps.stagger_steps)
    "issue": ("warpgroup 0 has issued K-tile it", "warpgroup 1 has issued K-tile it"),
    "complete": ("warpgroup 0 has completed K-tile it", "warpgroup 1 has issued K-tile it"),
    "half": ("warpgroup 0 has completed the first half of K-tile it", "warpgroup 1 has completed the first half of K-tile it"),
}


def _barrier_c(step: BarrierStep, first_id: int, stagger: str) -> str:
    """One step as C: the named barrier first_id + step.barrier, 128 threads of each warpgroup."""
    cond = f"wg == {step.wg}" + (" && it > 0" if step.not_first else "")
    what = _SIGNALS[stagger][step.barrier] + (" - 1" if step.barrier == 1 and step.op == "sync" else "")
    call = f"named_barrier_{step.op}({first_id + step.barrier}, {2 * WARPGROUP_THREADS})"
    return f"if ({cond}) {call};  // {'wait until ' if step.op == 'sync' else 'signal: '}{what}"


def offset_c(terms: tuple[OffsetTerm, ...], env: dict[str, str]) -> str:
    """The C of a tile's base offset: each term ``static_cast<size_t>(var / divisor) * stride``, ``env`` naming the C of
    each tile value (n0, group)."""
    def index(t: OffsetTerm) -> str:
        return env[t.var] if t.divisor == 1 else f"{env[t.var]} / {t.divisor}"
    return " + ".join(f"static_cast<size_t>({index(t)})" + (f" * {t.stride}" if t.stride else "") for t in terms) or "0"


def k_block_c(plan: BlockFp8Plan, local: str, k_first: str = "") -> str:
    """C of the scale K block of a unit's K-tile ``local`` (its loop counter): BlockFp8Plan.k_block of the K-tile
    k_first + local of the whole K loop (``k_first``: the C of the unit's first K-tile, stream-K's kt_first; "" for a
    kernel whose units all start at K = 0). The plan's k_block is the K-tile index itself (BK = BLOCK_K), checked here;
    tests/test_blockfp8_streamk.py runs the result against the plan's unit_k_blocks and model.numerics.bfp8model."""
    assert plan.bk == BLOCK_K and all(plan.k_block(t) == t for t in range(8)), plan.bk
    return f"{k_first} + {local}" if k_first else local


def block_fp8_view(plan: BlockFp8Plan | None, mmas_per_k_tile: int, stagger: str = "none",
                   consumer_warpgroups: int = 2, group_expr: str = "", half: HalfMmaView | None = None,
                   smem=None, k_first: str = "", sfa_tma: TmaPlan | None = None, slabs=None) -> BlockFp8View | None:
    """``group_expr``: the C of the tile's group (a grouped kernel's cursor, ptxgen.emit.views.grouped_view); ``k_first``: the
    C of the unit's first K-tile (stream-K: kt_first; "": K-tile 0)."""
    if plan is None:
        return None
    assert sorted(i for g in plan.commit_groups for i in g) == list(range(mmas_per_k_tile)) and len(plan.commit_groups) <= 2
    regs = plan.bn // 2
    phases = tuple(PhaseView(ph.first_groups, ph.first_groups * WGMMA_GROUP_REGS,
                             f"n0 % {BLOCK_N} = {ph.residue}: columns 0..{ph.first_groups * GROUP_COLS - 1} in block n0 / {BLOCK_N}"
                             + (f", {ph.first_groups * GROUP_COLS}..{plan.bn - 1} in the next" if ph.first_groups < plan.groups else ""),
                             tuple(plan.half_first_regs(ph, h) for h in range(plan.halves)))
                   for ph in plan.phases)
    kb_zero = k_block_c(plan, "0", k_first) if not k_first else k_first
    # the smem scale warp starts its A pointer at K block kb_zero and steps it by one block per K-tile: kb_cur must be
    # kb_zero + kt (k_block_c: the K block is the unit's first K-tile plus the loop counter)
    assert k_block_c(plan, "kt", k_first) in ("kt", f"{kb_zero} + kt") and (k_first or kb_zero == "0")
    return BlockFp8View(
        block_n=BLOCK_N,
        frag=wgmma_fragment_view(),
        fresh=fresh_scale_d(mmas_per_k_tile),
        sfa_doc="f32, M x ceil(K/128) outer-dim-major: (m, kb) at kb x lds_a + m",
        sfb_doc=("f32, ceil(K/128) x N: (kb, n) at kb x lds_b + n" if plan.per_column else
                 f"f32, ceil(K/128) x ceil(N/{BLOCK_N}): (kb, nb) at nb x lds_b + kb"),
        two_blocks=plan.spans_two_blocks,
        first_expr=f"min({plan.bn}, {BLOCK_N} - n0 % {BLOCK_N}) / {GROUP_COLS}",
        second_block_expr=SECOND_BLOCK_C,
        phases=phases if plan.spans_two_blocks else (PhaseView(plan.groups, regs, "the whole tile in block n0 / 128",
                                                               (regs // plan.halves,) * plan.halves),),
        sfb_base=offset_c(plan.sfb_tile_terms, {"n0": "n0", "group": group_expr}),
        stagger=stagger,
        half=half,
        scale_ahead=plan.scale_load == "ahead",
        smem=scale_smem_view(plan, smem, sfa_tma, k_first),
        kb_cur=k_block_c(plan, "kt", k_first),
        kb_next=k_block_c(plan, "bfp8_kn", k_first),
        kb_zero=kb_zero,
        # the named barriers follow the store epilogue's per-warpgroup ones (ptxgen.derive.roles.barriers)
        **{w: tuple(_barrier_c(st, stagger_first_barrier_id(consumer_warpgroups), stagger) for st in plan.stagger if st.where == w)
           for w in STAGGER_WHERE},
        commit_groups=plan.commit_groups,
        half_wait=len(plan.commit_groups) == 2,
        interleave=plan.overlap == "interleave",
        k_loop_unroll=plan.k_loop_unroll,
        shared_steps=shared_step_views(slabs),
        columns=column_scales_view(plan),
    )


def column_scales_view(plan: BlockFp8Plan) -> ColumnScalesView | None:
    """The thread's columns come from the plan's fragment map (derive.store.fusion_loads.wgmma_column_pairs, the same the model
    checks): the rendered expression is evaluated here for every lane and group against it."""
    if not plan.per_column:
        return None
    pair_expr = f"2 * (lane % {LANES_PER_ROW})"
    stride = GROUP_COLS * SF_BYTES
    for lane in range(SCALE_WARP_LANES):
        pairs = plan.thread_column_pairs(lane)
        assert len(pairs) == plan.groups and all(
            plan.sfb_slot(col).offset_bytes == eval(pair_expr, {"lane": lane}) * SF_BYTES + g * stride  # noqa: S307
            and regs == ((4 * g, 4 * g + 2), (4 * g + 1, 4 * g + 3)) for g, (col, regs) in enumerate(pairs)), lane
        assert [w.index for w in plan.scale_warp_writes(lane) if w.operand == "sfb"] == list(range(lane, plan.bn, SCALE_WARP_LANES))
    assert plan.consumer_reads(0, 0)[2].offset_bytes == 0 and SF_BYTES == 4
    return ColumnScalesView(plan.scale_cols_per_lane, SCALE_WARP_LANES, plan.groups, pair_expr, stride,
                            "f32, ceil(K/128) x N, MN-major: (kb, n) at kb x lds_b + n",
                            at_promote=plan.column_scales_at == "promote")


def shared_step_views(slabs) -> tuple[SlabStepView, ...]:
    """``slabs``: the kernel's derive.scaled.bfp8slabs.SlabPlan (None: one partial per slab, no steps)."""
    if slabs is None:
        return ()
    issues = [i for i, st in enumerate(slabs.steps) if st.op == "issue"]
    assert [slabs.steps[i].slab for i in issues] == list(range(slabs.slabs)), slabs.steps
    return tuple(SlabStepView(st.op, st.slab, i == issues[0]) for i, st in enumerate(slabs.steps))


def fresh_scale_d(mmas_per_k_tile: int) -> tuple[str, ...]:
    """Each K-step's scale-d into a partial started fresh per K-tile: 0 at the first (it overwrites the partial), then 1."""
    return tuple("0u" if i == 0 else "1u" for i in range(mmas_per_k_tile))


@dataclass(frozen=True)
class PromoteView:
    """--promote G (derive.tile.rules_promote), rendered: the block-FP8 loop's issue / wait_group 0 / release / promote
    structure (templates/mma_blockfp8.cuh.j2 consumer_loop_promote) with no scales: acc += partial, one f32 add each,
    after every G K-tiles (G > 1: K-tiles j = 0..G-1 of a group issued as the plain loop issues them, wait_group 1
    releasing K-tile j - 1's stage, the first K-step of K-tile 0 overwriting the partial)."""

    fresh: tuple[str, ...]  # per K-step of a K-tile: its scale-d (C; the group's first overwrites the partial)
    commit_groups: tuple[tuple[int, ...], ...]  # one wgmma commit group: every K-step of the K-tile
    every_k: int  # K elements per promotion (G K-tiles)
    k_tiles: int  # G: K-tiles per promotion
    parity: str  # C: the full barrier's wait parity of K-tile itj (it + j)


def promote_view(spec, consumer_parity) -> PromoteView | None:
    """``consumer_parity``: the pipeline's Parity of the consumers' full-barrier waits (derive.roles.pipeline)."""
    if not spec.promote:
        return None
    n = spec.mmas_per_k_tile
    fresh = fresh_scale_d(n) if spec.promote == 1 else ("(j > 0 ? 1u : 0u)",) + ("1u",) * (n - 1)
    return PromoteView(fresh, (tuple(range(n)),), spec.bk * spec.promote, spec.promote, parity_c_expr(consumer_parity, "itj"))
