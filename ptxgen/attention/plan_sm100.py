"""The attention forward's plan for Blackwell (tcgen05, sm_100a): S and O in tensor memory, P written back to TMEM.

One CTA holds 128 query rows, one per TMEM lane (tcgen05.mma M = 128, cta_group::1: D[m][n] in lane m, column
col0 + n for f32, docs/hardware-layout.md and PTX 'Data path layout'). Everything comes from the public authoring
layer, as on Hopper: the same Q, K and V operand plans with the arch set to sm_100a (``plan.operands``), S = Q·Kᵀ as
``tcgen05(q, k)`` (SS, both K-major) and O += P·V as ``tcgen05(TmemA(dtype), v)`` (A = P read from TMEM, the TS form;
B = V MN-major), each with its instruction descriptor. TMEM columns: ``tmem_plan(S=BN, O=D, P=BN/2)``: S at 0, O
after it, P after O (16-bit P packs two elements a 32-bit column), the allocation the next power of two. The ring:
Q resident, K and V stages with a full barrier each, the empty barrier released by the MMA warp's commit, and four
single barriers (S full, S empty, P full, O ready) and the word tcgen05.alloc writes the TMEM address to.

Reached: L2 only (NVRTC compile for sm_100a and a SASS gate). Not run: this project has no Blackwell GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..author import Arch, OperandPlan, Param, RingPlan, Tcgen05Plan, TmemA, TmemPlan, tcgen05, tmem_plan
from .plan import RingOffsets, operand_json, operands, params, ring
from .spec import AttentionSpec

BARRIERS = ("s_full", "s_empty", "p_full", "o_ready")  # after Q's, K's and V's full and the stages' empty barriers
WORDS = ("tmem_slot",)
# the setmaxnreg wrappers the shared helpers define stay unused in this kernel (one softmax warpgroup, two warps)
REGISTERS = dict(producer_registers=24, consumer_registers=240)


@dataclass(frozen=True)
class AttentionPlanSm100(RingOffsets):
    spec: AttentionSpec
    q: OperandPlan
    k: OperandPlan
    v: OperandPlan
    ring: RingPlan
    qk: Tcgen05Plan
    pv: Tcgen05Plan
    tmem: TmemPlan
    params: tuple[Param, ...]

    @property
    def idesc_qk(self) -> int:
        return int(self.qk.idesc_hex, 16)

    @property
    def idesc_pv(self) -> int:
        return int(self.pv.idesc_hex, 16)

    def to_json(self) -> dict:
        t = self.tmem
        return {"spec": self.spec.to_json(), "idesc_qk": f"{self.idesc_qk:#010x}", "idesc_pv": f"{self.idesc_pv:#010x}",
                "tmem": {"s_col": t.column("S"), "o_col": t.column("O"), "p_col": t.column("P"),
                         "used": self.spec.bn + self.spec.head_dim + self.spec.bn // 2, "alloc": t.alloc_columns},
                "v_descriptors": operand_json(self.v)["descriptors"], "smem_bytes": self.smem_bytes}


def plan_attention_sm100(s: AttentionSpec) -> AttentionPlanSm100:
    assert s.arch is Arch.SM100A
    q, k, v = operands(s)
    r = ring(s, q, k, v, consumer_warpgroups=1, empty_arrivals=1, barriers=BARRIERS, words=WORDS, empty_per_operand=True,
             **REGISTERS)
    return AttentionPlanSm100(spec=s, q=q, k=k, v=v, ring=r, qk=tcgen05(q, k), pv=tcgen05(TmemA(s.dtype), v),
                              tmem=tmem_plan(S=s.bn, O=s.head_dim, P=s.bn // 2), params=params(s, q, k, v))
