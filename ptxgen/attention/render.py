"""The attention kernel's source: the plan's values, as the template's view, rendered with StrictUndefined."""

from __future__ import annotations

from ..emit.env import environment
from ..isa.descriptors import SmemDescriptor, tmem_lane_c_expr
from ..emit.sources import generated_line
from .plan import AttentionPlan, m_block_expr, n_block_end_expr, needs_mask_expr

TEMPLATE = "attention_sm90.cu.j2"
OUT_CTYPE = {"bf16": "unsigned short", "f16": "unsigned short"}


def _common(s) -> dict:
    """Expressions both templates take: the descriptor start field of a run-time address (ptxgen.isa.descriptors), -inf,
    the full-warp shuffle mask, the TMEM lane offset."""
    return {"start_field": lambda expr: SmemDescriptor.start_field_c_expr(s.arch, expr), "neg_inf": "__int_as_float(0xff800000)",
            "full_mask": "0xffffffffu", "tmem_lane": tmem_lane_c_expr}


def _regs(n: int, first: int = 0) -> str:
    return "{" + ", ".join(f"%{first + i}" for i in range(n)) + "}"


def _outputs(n: int) -> str:
    return ", ".join(f'"+f"(d[{i}])' for i in range(n))


def cli_args(s) -> str:
    return (f"--kind attention --head-dim {s.head_dim} --bm {s.bm} --bn {s.bn}" + (" --causal" if s.causal else "")
            + f" --dtype {s.dtype.value} --stages {s.stages} --schedule {s.schedule} --arch {s.arch.value}")


def view(p: AttentionPlan) -> dict:
    s = p.spec
    return {
        **_common(s),
        "generated_line": generated_line(cli_args(s)),
        "kernel_name": s.kernel_name,
        "dtype": s.dtype.value,
        "out_ctype": OUT_CTYPE[s.dtype.value],
        "head_dim": s.head_dim, "bm": s.bm, "bn": s.bn, "stages": s.stages, "causal": s.causal,
        "consumers": s.consumers, "threads": s.threads, "schedule": s.schedule, "pingpong": s.schedule == "pingpong",
        "producer_registers": p.producer_registers, "consumer_registers": p.consumer_registers,
        "qk_opcode": p.qk_instr.opcode, "pv_opcode": p.pv_instr.opcode, "pv_trans_b": p.pv_instr.imm_trans_b,
        "s_regs": p.s_regs, "o_regs": p.o_regs, "p_regs": s.bn // 4,
        "s_list": _regs(p.s_regs), "s_outputs": _outputs(p.s_regs),
        "o_list": _regs(p.o_regs), "o_outputs": _outputs(p.o_regs),
        "q": {"stage_bytes": p.q.stage_bytes, "copies": p.q.copies, "slab_offsets": p.q.slab_offsets[: s.consumers]},
        "k": {"stage_bytes": p.k.stage_bytes, "copies": p.k.copies},
        "v": {"stage_bytes": p.v.stage_bytes, "copies": p.v.copies},
        "q_k_steps": [{"q": f"{p.q.descriptors[i]:#018x}", "k": f"{p.k.descriptors[i]:#018x}"} for i in range(len(p.q.descriptors))],
        "v_k_steps": [f"{d:#018x}" for d in p.v.descriptors],
        "p_pairs": p.p_pairs,
        "k_stage_stride": p.smem_k[1] - p.smem_k[0] if s.stages > 1 else 0,
        "v_stage_stride": p.smem_v[1] - p.smem_v[0] if s.stages > 1 else 0,
        "q_slab_stride": p.q.slab_offsets[1] - p.q.slab_offsets[0] if s.consumers > 1 else 0,
        "smem_q": p.smem_q, "smem_k": p.smem_k, "smem_v": p.smem_v, "smem_barriers": p.smem_barriers,
        "m_block_expr": m_block_expr(s.causal),
        "n_end_expr": n_block_end_expr(s.bm, s.bn, s.causal),
        "needs_mask_expr": needs_mask_expr(s.bm, s.bn, s.causal),
    }


def render(p: AttentionPlan) -> str:
    return environment().get_template(TEMPLATE).render(a=view(p))


TEMPLATE_SM100 = "attention_sm100.cu.j2"


def view_sm100(p) -> dict:
    """The sm_100a template's values (ptxgen.attention.plan_sm100)."""
    s = p.spec
    t = p.tmem
    return {
        **_common(s),
        "generated_line": generated_line(cli_args(s)),
        "kernel_name": s.kernel_name, "dtype": s.dtype.value, "out_ctype": OUT_CTYPE[s.dtype.value],
        "head_dim": s.head_dim, "bm": s.bm, "bn": s.bn, "stages": s.stages, "causal": s.causal, "threads": s.threads,
        "pingpong": False, "producer_registers": 24, "consumer_registers": 240,  # setmaxnreg wrappers stay unused here
        "q": {"stage_bytes": p.q.stage_bytes, "copies": p.q.copies},
        "k": {"stage_bytes": p.k.stage_bytes, "copies": p.k.copies},
        "v": {"stage_bytes": p.v.stage_bytes, "copies": p.v.copies},
        "q_k_steps": [{"q": f"{p.q.descriptors[i]:#018x}", "k": f"{p.k.descriptors[i]:#018x}"} for i in range(len(p.q.descriptors))],
        "v_k_steps": [f"{d:#018x}" for d in p.v.descriptors],
        "idesc_qk": f"{p.idesc_qk:#010x}", "idesc_pv": f"{p.idesc_pv:#010x}",
        "tmem": {"s_col": t.s_col, "o_col": t.o_col, "p_col": t.p_col, "alloc": t.alloc},
        "smem_q": p.smem_q, "smem_k": p.smem_k, "smem_v": p.smem_v, "smem_barriers": p.smem_barriers,
        "k_stage_stride": p.smem_k[1] - p.smem_k[0] if s.stages > 1 else 0,
        "v_stage_stride": p.smem_v[1] - p.smem_v[0] if s.stages > 1 else 0,
        "ld32_regs": _regs(32), "ld32_outputs": ", ".join(f'"=r"(r[{i}])' for i in range(32)),
        "st16_regs": _regs(16, 1), "st16_inputs": ", ".join(f'"r"(r[{i}])' for i in range(16)),
        "st32_regs": _regs(32, 1), "st32_inputs": ", ".join(f'"r"(r[{i}])' for i in range(32)),
        "m_block_expr": m_block_expr(s.causal),
        "n_end_expr": n_block_end_expr(s.bm, s.bn, s.causal),
        "needs_mask_expr": needs_mask_expr(s.bm, s.bn, s.causal),
    }


def render_sm100(p) -> str:
    return environment().get_template(TEMPLATE_SM100).render(a=view_sm100(p))
