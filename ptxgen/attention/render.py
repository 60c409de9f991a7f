"""The attention kernel as a ``ptxgen.author.Kernel``: the plan's values as the template's view (``a``, frozen
``Values``), the template file, the parameters and the SASS counts to expect; rendered with StrictUndefined."""

from __future__ import annotations

from ..author import Kernel, TmemLoad, Values, generated_line, template_file
from .plan import AttentionPlan, m_block_expr, n_block_end_expr, needs_mask_expr, tile_exprs, walk_exprs

TEMPLATE = "attention_sm90.cu.j2"
TEMPLATE_SM100 = "attention_sm100.cu.j2"
OUT_CTYPE = {"bf16": "unsigned short", "f16": "unsigned short"}


def cli_args(s) -> str:
    return (f"--kind attention --head-dim {s.head_dim} --bm {s.bm} --bn {s.bn}" + (" --causal" if s.causal else "")
            + f" --dtype {s.dtype.value} --stages {s.stages} --schedule {s.schedule}" + (" --persistent" if s.persistent else "")
            + f" --arch {s.arch.value}")


def _common(p) -> dict:
    """What both templates read: the spec's choices, the operand plans (``a.q.start_field(addr)``: the descriptor
    start field of a run-time address), the ring (its barriers by name, relative to the first), the block rules."""
    s, r = p.spec, p.ring
    assert r.bar_offset("Q_full") == 0  # the templates' Q_FULL is ``bars`` itself
    return {
        "generated_line": generated_line(cli_args(s)), "kernel_name": s.kernel_name, "dtype": s.dtype.value,
        "out_ctype": OUT_CTYPE[s.dtype.value], "head_dim": s.head_dim, "bm": s.bm, "bn": s.bn, "stages": s.stages,
        "causal": s.causal, "threads": s.threads, "neg_inf": "__int_as_float(0xff800000)", "full_mask": "0xffffffffu",
        "q": p.q, "k": p.k, "v": p.v, "ring": r, "bar": {name: r.bar_offset(name) for name in r.bars},
        "producer_registers": r.producer_registers, "consumer_registers": r.consumer_registers,
        "q_k_steps": [{"q": f"{dq:#018x}", "k": f"{dk:#018x}"} for dq, dk in zip(p.q.descriptors, p.k.descriptors)],
        "v_k_steps": [f"{d:#018x}" for d in p.v.descriptors],
        "smem_q": p.smem_q, "smem_k": p.smem_k, "smem_v": p.smem_v, "smem_barriers": p.smem_barriers,
        "k_stage_stride": r.regions["K"].stage_stride_bytes, "v_stage_stride": r.regions["V"].stage_stride_bytes,
        "m_block_expr": m_block_expr(s.causal), "n_end_expr": n_block_end_expr(s.bm, s.bn, s.causal),
        "needs_mask_expr": needs_mask_expr(s.bm, s.bn, s.causal), "persistent": s.persistent,
        "tile": tile_exprs(s.causal),
        "walk": walk_exprs(s.causal),
        "q_buffers": s.q_buffers, "q_stage_stride": r.regions["Q"].stage_stride_bytes, "o_staging": s.o_staging,
        "carry": s.carry, "tile_next": tile_exprs(s.causal, "tile_n"),
        "n_end_next_expr": n_block_end_expr(s.bm, s.bn, s.causal, "m_block_n"),
    }


def view(p: AttentionPlan) -> dict:
    s = p.spec
    return {
        **_common(p),
        "consumers": s.consumers, "schedule": s.schedule, "pingpong": s.schedule == "pingpong",
        "qk": p.qk, "pv": p.pv, "pv_trans_b": p.pv.instr.imm_trans_b, "s_regs": p.s_regs, "o_regs": p.o_regs,
        "p_pairs": p.p_pairs,
        "q_slab_stride": p.q.slab_offsets_bytes[1] - p.q.slab_offsets_bytes[0] if s.consumers > 1 else 0,
        **o_staging_view(p),
    }


def o_staging_view(p: AttentionPlan) -> dict:
    """The staged O store's expressions, from Q's layout (``OperandPlan.cell_offset_expr``): a consumer thread writes
    its two rows' 4-byte pairs of 16-byte cell ``g`` (row 64 c + 16 warp + lane / 4 + 8 r), then reads cell ``i`` of
    its warpgroup's 64 rows (row 64 c + i / cells, column i % cells) and stores it whole."""
    s = p.spec
    cells = s.head_dim * (s.dtype.bits // 8) // 16  # 16-byte cells in a row of O
    row = f"(64 * c + {p.pv.frag_row('(4 * g + 2 * r)', '(32 * warp)', 'lane')})"  # O's fragment: element 4 g + 2 r
    return {"o_cells": cells, "o_cell_elems": 16 // (s.dtype.bits // 8),
            "o_chunks": 64 * cells // 128,
            "o_stage_write": p.q.cell_offset_expr(row, "g"),
            "o_stage_read": p.q.cell_offset_expr(f"(64 * c + i / {cells})", f"(i % {cells})")}


def view_sm100(p) -> dict:
    """The sm_100a template's values (ptxgen.attention.plan_sm100)."""
    return {
        **_common(p),
        "pingpong": False, "tmem": p.tmem, "qk": p.qk, "pv": p.pv,
        "idesc_qk": p.qk.idesc_hex, "idesc_pv": p.pv.idesc_hex,
        "tmem32": TmemLoad(32), "tmem16": TmemLoad(16),  # tcgen05.ld / st of 32 and 16 columns (the pieces' plans)
    }


def expect_sass(p) -> dict:
    """The MMA count the whole kernel holds (ptxgen.author's count gate; build.check_attention_sass checks each MMA's
    form and the loop): sm_90a one copy of D/16 + BN/16 HGMMA per schedule copy (serial 1, overlap and pingpong 2:
    the first S before the loop and the last P·V after it; the carried form one more S, the next tile's, beside that
    P·V), sm_100a D/16 + BN/16 UTCHMMA."""
    s = p.spec
    if s.tcgen05:
        return {p.qk.sass_opcode: (s.head_dim + s.bn) // 16}
    copies = 1 if s.schedule == "serial" else 2
    return {p.qk.sass_opcode: ((copies + s.carry) * s.head_dim + copies * s.bn) // 16}


def kernel(p) -> Kernel:
    """The attention kernel declared with the public layer."""
    s = p.spec
    v = view_sm100(p) if s.tcgen05 else view(p)
    return Kernel(s.kernel_name, template_file(TEMPLATE_SM100 if s.tcgen05 else TEMPLATE), p.params, block=(s.threads, 1, 1),
                  shared_bytes=p.smem_bytes, expect_sass=expect_sass(p), context={"a": Values(**v)}, arch=s.arch)


def render(p: AttentionPlan) -> str:
    return kernel(p).render()


def render_sm100(p) -> str:
    return kernel(p).render()
