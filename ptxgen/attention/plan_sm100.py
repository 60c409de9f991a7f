"""The attention forward's plan for Blackwell (tcgen05, sm_100a): S and O in tensor memory, P written back to TMEM.

One CTA holds 128 query rows, one per TMEM lane (tcgen05.mma M = 128, cta_group::1: D[m][n] in lane m, column
col0 + n for f32, docs/hardware-layout.md and PTX 'Data path layout'). The two MMAs come from ptxgen's derivations as
on Hopper (``plan.gemm_tiles`` with the arch set to sm_100a): S = Q·Kᵀ (SS, both K-major) and O += P·V with A = P
read from TMEM (the TS form) and B = V MN-major. TMEM columns: S at 0, O after it, P after O (16-bit P packs two
elements a 32-bit column, BN/2 columns), the allocation the next power of two.

Reached: L2 only (NVRTC compile for sm_100a and a SASS gate). Not run: this project has no Blackwell GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..derive.tile.layout import TileLayout, derive
from ..isa.types import Arch
from .plan import STAGE_ALIGN_BYTES, OperandPlan, _operand, gemm_tiles, stage_offsets
from .spec import AttentionSpec

TMEM_COLUMNS = 512
TMEM_LANES = 128


@dataclass(frozen=True)
class TmemPlan:
    s_col: int  # S: BN f32 columns
    o_col: int  # O: D f32 columns
    p_col: int  # P: BN/2 columns of packed 16-bit pairs
    used: int
    alloc: int  # power of two in [32, 512]


@dataclass(frozen=True)
class AttentionPlanSm100:
    spec: AttentionSpec
    qk: TileLayout
    pv: TileLayout
    q: OperandPlan
    k: OperandPlan
    v: OperandPlan
    idesc_qk: int
    idesc_pv: int
    tmem: TmemPlan
    smem_q: int
    smem_k: tuple[int, ...]
    smem_v: tuple[int, ...]
    smem_barriers: int
    smem_bytes: int

    def to_json(self) -> dict:
        t = self.tmem
        return {"spec": self.spec.to_json(), "idesc_qk": f"{self.idesc_qk:#010x}", "idesc_pv": f"{self.idesc_pv:#010x}",
                "tmem": {"s_col": t.s_col, "o_col": t.o_col, "p_col": t.p_col, "used": t.used, "alloc": t.alloc},
                "v_descriptors": [f"{d:#018x}" for d in self.v.descriptors], "smem_bytes": self.smem_bytes}


def tmem_plan(bn: int, head_dim: int) -> TmemPlan:
    used = bn + head_dim + bn // 2
    alloc = 32
    while alloc < used:
        alloc *= 2
    if alloc > TMEM_COLUMNS:
        raise ValueError(f"S ({bn}), O ({head_dim}) and P ({bn // 2}) need {used} TMEM columns, more than {TMEM_COLUMNS}")
    return TmemPlan(0, bn, bn + head_dim, used, alloc)


BARRIERS = ("q_full", "k_full", "v_full", "kv_empty", "s_full", "s_empty", "p_full", "o_ready", "tmem_slot")


def plan_attention_sm100(s: AttentionSpec) -> AttentionPlanSm100:
    assert s.arch is Arch.SM100A
    qk_spec, pv_spec = gemm_tiles(s)
    qk, pv = derive(qk_spec), derive(pv_spec)
    q, k, v = _operand("q", qk.a), _operand("k", qk.b), _operand("v", pv.b)
    smem_k, smem_v, barriers = stage_offsets(q, k, v, s.stages)
    at = barriers + 8 * (1 + 3 * s.stages + 4) + 8  # q_full, k/v full and kv_empty per stage, s_full, s_empty, p_full, o_ready; TMEM slot
    return AttentionPlanSm100(
        spec=s, qk=qk, pv=pv, q=q, k=k, v=v, idesc_qk=qk.idesc.encode(), idesc_pv=pv.idesc.encode(),
        tmem=tmem_plan(s.bn, s.head_dim), smem_q=0, smem_k=smem_k, smem_v=smem_v, smem_barriers=barriers,
        smem_bytes=at + STAGE_ALIGN_BYTES)
