"""Render context of the MMA pieces (templates/mma_wgmma.cuh.j2, mma_tcgen05.cuh.j2): the instruction, its
descriptors per K step, the consumer's slabs and (block-scaled) the scale factors' copies."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...derive.tile.kernel import KernelPlan
from ...derive.tile.layout import TileLayout
from ...derive.scaled.scales import (
    SF_ATOM_BYTES,
    SF_ATOM_CHUNKS,
    SF_ATOM_ROWS,
    keep_mask_c_expr,
)
from ...derive.scaled.sf_atoms import sf_k_atoms_c_expr, sf_k_chunks_c_expr, sf_last_block_c_expr
from ...isa.descriptors import SmemDescriptor
from ...isa.types import Arch, DType
from .blockfp8 import HalfMmaView
from ..cexpr import wgmma_operand_lists


@dataclass(frozen=True)
class KStepView:
    k: int
    k_end: int
    a_desc: str
    b_desc: str
    accumulate: str
    # block-scaled: this MMA's instruction descriptor (its SF IDs) and scale-factor TMEM columns from the stage's base
    idesc: str = ""
    sfa_col: int = 0
    sfb_col: int = 0
    sf_id: int = 0


@dataclass(frozen=True)
class SfCopyView:
    operand: str  # "sfa" / "sfb"
    smem_offset_bytes: int
    nbytes_expr: str  # C: bytes of this K-tile's copy (sf_atoms atoms: fewer in a last partial K-tile)
    src_offset_expr: str  # C expression: byte offset in SFA/SFB


@dataclass(frozen=True)
class SfZeroView:
    stage: str  # "sfa_stage" / "sfb_stage"
    offset: int  # the atom's offset in the stage
    first_chunk_expr: str  # C: the atom's first K chunk (global)


@dataclass(frozen=True)
class SfTmemCopyView:
    operand: str
    smem_offset_bytes: int
    column: int  # from the stage's scale-factor base column
    doc: str
    desc_expr: str  # C expression: the atom's shared-memory descriptor (no swizzle, SBO 128 B)


@dataclass(frozen=True)
class ScaleView:
    """What the block-scaled pieces of the tcgen05 template receive (all arithmetic done here)."""

    mma_opcode: str
    cp_opcode: str
    doc: str
    sfa_offset: int
    sfb_offset: int
    sfa_stage_bytes: int
    sfb_stage_bytes: int
    k_atoms_expr: str  # atoms along K of SFA/SFB in global memory: ceil(K / 4V), CUTLASS's padding
    sfa_last_block_expr: str  # the last 128-row block of SFA (rows padded to 128, CUTLASS) / of SFB
    sfb_last_block_expr: str
    k_chunks_expr: str  # scale factors along K: ceil(K / V)
    stage_atoms_expr: str  # atoms along K this K-tile copies per 128-row block
    expect_tx_expr: str  # C: A + B (a pair's leader: both CTAs' A + B) + this K-tile's SF bytes of the stage
    peer_expect_tx_expr: str  # C: a pair's peer: this K-tile's SF bytes of its own stage (its own full[s])
    chunks_per_stage: int
    chunks_per_atom: int
    atom_cells: int  # 16-byte cells in one 512-byte atom
    keep_mask_expr: str  # C: the word mask keeping chunks 0..keep-1
    zero_fills: tuple[SfZeroView, ...]
    copies: tuple[SfCopyView, ...]
    tmem_copies: tuple[SfTmemCopyView, ...]
    tmem_col0: int  # first TMEM column of the scale factors (after the accumulators)
    stage_cols: int
    cp_desc: str
    sfb_row_col_expr: str  # extra SFB column of a tile starting inside a 128-row atom (BN = 64, 192)
    needs_tile_origin: bool


@dataclass(frozen=True)
class MmaView:
    # wgmma
    opcode: str = ""
    acc_ctype: str = ""
    acc_regs: int = 0
    acc_constraint: str = ""
    op_a_desc: int = 0
    op_b_desc: int = 0
    op_scale_d: int = 0
    d_list: str = ""
    outputs: str = ""
    immediates: str = ""
    a_slab_stride: int = 0
    producer_registers: int | None = None
    consumer_registers: int | None = None
    # tcgen05
    kind: str = ""
    idesc_hex: str = ""
    tmem_cols: int = 0  # allocated: every accumulator stage
    acc_stages: int = 0
    acc_stage_cols: int = 0


@dataclass(frozen=True)
class SlabView:
    index: int
    a_offset: str  # C expression: bytes from the stage base to this slab of A
    row_offset: str  # C expression: the slab's first row within the tile
    doc: str


def k_step_views(t: TileLayout) -> tuple[KStepView, ...]:
    kmma = t.spec.k_per_mma
    sf = t.scales.steps if t.scales is not None else (None,) * len(t.a.k_steps)
    return tuple(
        KStepView(
            k=sa.k,
            k_end=sa.k + kmma - 1,
            a_desc=sa.descriptor.hex,
            b_desc=sb.descriptor.hex,
            # the very first MMA of the tile overwrites the accumulator, every later one adds to it
            accumulate="(kt > 0 ? 1u : 0u)" if i == 0 else "1u",
            **({} if st is None else dict(idesc=st.idesc.hex, sfa_col=st.a_column, sfb_col=st.b_column, sf_id=st.sf_id)),
        )
        for i, (sa, sb, st) in enumerate(zip(t.a.k_steps, t.b.k_steps, sf))
    )


def scale_view(plan: KernelPlan) -> ScaleView | None:
    s, t = plan.spec, plan.layout
    p = t.scales
    if p is None:
        return None
    copies, zeros = [], []
    # a pair: CTA r copies SFA of its own rows (m_cta = m0 + r x BM/2, derive.scaled.scales a_cta_row0) and all of SFB's
    a_row0 = "m_cta" if p.cta_group > 1 else "m0"
    assert p.cta_group == 1 or (p.a_cta_row0[1] == t.pair.a_rows and not any(p.b_cta_row0))
    for name, op, row0 in (("sfa", p.a, a_row0), ("sfb", p.b, "n0")):
        for c in op.copies:
            # a block past the buffer's last (rows padded to 128 only) copies the last one (derive.scaled.scales.last_block)
            block = f"min(static_cast<size_t>({row0} / {SF_ATOM_ROWS}) + {c.block}, {name}_last_block)"
            atom = f"({block} * sf_k_atoms + static_cast<size_t>(kt) * {op.groups})"
            copies.append(SfCopyView(name, c.smem_offset_bytes, f"static_cast<unsigned>(sf_atoms) * {SF_ATOM_BYTES}u",
                                     f"{atom} * {SF_ATOM_BYTES}"))
        for g in range(op.groups):
            for b in range(op.blocks):
                zeros.append(SfZeroView(f"{name}_stage", op.smem_atom_offset(b, g),
                                        f"(kt * {op.groups} + {g}) * {SF_ATOM_CHUNKS}"))
    tcps = []
    for name, op, col0 in (("sfa", p.a, 0), ("sfb", p.b, p.a.tmem_columns)):
        for c in op.tmem_copies:
            start = SmemDescriptor.start_field_c_expr(s.arch, f"{name}_stage + {c.smem_offset_bytes}u")
            tcps.append(SfTmemCopyView(name, c.smem_offset_bytes, col0 + c.column,
                                       f"{name.upper()} rows {128 * c.block}..{128 * c.block + 127}, K chunks {4 * c.group}..{4 * c.group + 3}",
                                       f"{p.cp_descriptor.hex}ull + {start}"))
    offset_in_atom = s.bn % SF_ATOM_ROWS != 0
    return ScaleView(
        mma_opcode=p.mma_opcode,
        cp_opcode=p.cp_opcode,
        doc=(f"{p.kind.scale.value} scale factors, one per {p.vec} elements of K; {p.kind.sfs_per_mma} per row per MMA "
             f"(K={p.kind.k_per_mma}); {p.tmem_columns_per_stage} TMEM columns a stage"),
        sfa_offset=t.smem.sfa_offset,
        sfb_offset=t.smem.sfb_offset,
        sfa_stage_bytes=t.smem.sfa_stage_bytes,
        sfb_stage_bytes=t.smem.sfb_stage_bytes,
        k_atoms_expr=sf_k_atoms_c_expr(p.vec),
        sfa_last_block_expr=sf_last_block_c_expr("M"),
        sfb_last_block_expr=sf_last_block_c_expr("N"),
        k_chunks_expr=sf_k_chunks_c_expr(p.vec),
        stage_atoms_expr=f"min({p.a.groups}, static_cast<int>(sf_k_atoms) - kt * {p.a.groups})",
        expect_tx_expr=(f"{plan.pipeline.expect_tx_bytes - p.expect_tx_bytes}u + static_cast<unsigned>(sf_atoms) * "
                        f"{(p.a.blocks + p.b.blocks) * SF_ATOM_BYTES}u"),
        peer_expect_tx_expr=f"static_cast<unsigned>(sf_atoms) * {(p.a.blocks + p.b.blocks) * SF_ATOM_BYTES}u",
        chunks_per_stage=p.a.groups * SF_ATOM_CHUNKS,
        chunks_per_atom=SF_ATOM_CHUNKS,
        atom_cells=SF_ATOM_BYTES // 16,
        keep_mask_expr=keep_mask_c_expr("keep"),
        zero_fills=tuple(zeros),
        copies=tuple(copies),
        tmem_copies=tuple(tcps),
        tmem_col0=s.accumulator_stages * s.tmem_columns,
        stage_cols=p.tmem_columns_per_stage,
        cp_desc=p.cp_descriptor.hex,
        sfb_row_col_expr="static_cast<unsigned>((n0 % 128) / 32)" if offset_in_atom else "0u",
        needs_tile_origin=offset_in_atom,
    )


def wgmma_mma_view(plan: KernelPlan) -> MmaView:
    s, t = plan.spec, plan.layout
    w = t.wgmma
    acc_regs = s.accumulator_registers
    constraint = "+f" if s.acc is DType.F32 else "+r"
    imm = ", 1, 1" if not s.dtype.is_integer else ""  # imm-scale-a/b exist for floating-point types only
    if w.has_transpose:
        imm += f", {w.imm_trans_a}, {w.imm_trans_b}"
    consumer = plan.pipeline.role("consumer")
    producer = plan.pipeline.role("producer")
    d_list, outputs = wgmma_operand_lists(acc_regs, constraint)
    return MmaView(
        opcode=w.opcode,
        acc_ctype={DType.F32: "float", DType.S32: "int", DType.F16: "unsigned"}[s.acc],
        acc_regs=acc_regs,
        acc_constraint=constraint,
        op_a_desc=acc_regs,
        op_b_desc=acc_regs + 1,
        op_scale_d=acc_regs + 2,
        d_list=d_list,
        outputs=outputs,
        immediates=imm,
        a_slab_stride=t.a.slab_stride_bytes,
        producer_registers=producer.registers,
        consumer_registers=consumer.registers,
    )


def half_mma_view(plan: KernelPlan) -> HalfMmaView | None:
    """Block-scaled FP8 with --fp8-overlap halves: the m64n(BN/2) instruction of one column half, its fragment, and
    where half 1's rows of B start in a stage (the stage layout's offset of row BN / 2, an atom boundary)."""
    bp = plan.block_fp8
    if bp is None or bp.halves == 1:
        return None
    s, t = plan.spec, plan.layout
    n = s.bn // bp.halves
    regs = s.accumulator_registers // bp.halves
    store = t.b.store
    assert store.row_dim == "mn" and n % store.atom_rows == 0, (store.row_dim, n)
    d_list, outputs = wgmma_operand_lists(regs, "+f")
    return HalfMmaView(regs=regs, acc_offsets=tuple(h * regs for h in range(bp.halves)), opcode=replace(t.wgmma, n=n).opcode,
                       d_list=d_list, outputs=outputs, op_a_desc=regs, op_b_desc=regs + 1, op_scale_d=regs + 2,
                       b_offsets_bytes=tuple(store.linear(h * n, 0) for h in range(bp.halves)))


def tcgen05_mma_view(plan: KernelPlan) -> MmaView:
    s, t = plan.spec, plan.layout
    return MmaView(kind=s.mma_kind, idesc_hex=t.idesc.hex, tmem_cols=s.tmem_alloc_columns,
                   acc_stages=s.accumulator_stages, acc_stage_cols=s.tmem_columns)


def slab_views(plan: KernelPlan) -> tuple[SlabView, ...]:
    """The 64-row slabs of A each wgmma consumer warpgroup multiplies: its own (cooperative) or all (pingpong)."""
    s, t = plan.spec, plan.layout
    if s.arch is not Arch.SM90A:
        return ()
    stride = t.a.slab_stride_bytes
    if not plan.pipeline.pingpong and plan.slabs is not None:  # --consumer-slabs: warpgroup wg's slabs (derive.scaled.bfp8slabs)
        out = []
        for i in range(plan.slabs.slabs):
            (wg_bytes, in_bytes), (wg_rows, in_rows) = plan.slabs.slab_stride_terms(i, stride), plan.slabs.row_offset_terms(i)
            out.append(SlabView(i, f"static_cast<unsigned>(wg) * {wg_bytes}u + {in_bytes}u", f"wg * {wg_rows} + {in_rows}",
                                f"this warpgroup's slab {i}: rows {wg_rows} wg + {in_rows}.. of the tile"))
        return tuple(out)
    if not plan.pipeline.pingpong:
        return (SlabView(0, f"static_cast<unsigned>(wg) * {stride}u", "wg * 64", "this warpgroup's 64-row slab wg"),)
    return tuple(SlabView(i, f"{i * stride}u", f"{64 * i}", f"rows {64 * i}..{64 * i + 63} of the tile") for i in range(s.bm // 64))
