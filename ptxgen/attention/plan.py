"""The attention forward's plan, derived from ptxgen's operand derivations.

Two MMAs share one pipeline:

* S = Q·Kᵀ: wgmma m64nBNk16, A = Q (K-major, the head dim is K), B = K (K-major: a key row is contiguous along
  the head dim). ``derive`` of the GEMM tile (BM, BN, BK = D) gives both stages' layouts, descriptors per K-step,
  the 64-row slab offsets of Q and the TMA boxes.
* O += P·V: wgmma m64nDk16 in its RS form, A = P from registers, B = V **MN-major** (V's rows are keys = this
  MMA's K, contiguous along the head dim = this MMA's N). ``derive`` of the tile (BM, D, BK = BN) with B
  ``mnmajor-sw128`` and K-first atom order (one TMA box per 64 head-dim columns, BN key rows deep) gives LBO (the
  next 128-byte atom along the head dim), SBO (the next 8 key rows) and the start of each 16-key step.
* P: the S accumulator fragment of m64nBNk16 and the A register fragment of m64nDk16 place their elements
  alike within each 16-column group (PTX 'Register Fragments', Figures wgmma-64N16-D and wgmma-64N16-A), so the
  A registers of K-step j are the accumulator pairs (8j + 2q, 8j + 2q + 1), q = 0..3, converted to 16 bits.
  ``ptxgen.model.layouts.attnmodel`` checks this against its own transcription of both figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..derive.tile.layout import TileLayout, derive
from ..derive.operands.operand import OperandLayout
from ..derive.tile.spec import OperandSpec, TileSpec
from ..isa.idesc import WgmmaInstr
from ..isa.types import DType, Major
from .spec import AttentionSpec, consumer_registers

LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Copy:
    smem_offset_bytes: int  # from the operand's stage base
    inner: int  # head-dim element offset of the box
    outer: int  # row offset of the box inside the tile


@dataclass(frozen=True)
class OperandPlan:
    name: str  # q, k, v
    major: str  # "k" or "mn": as the MMA reads it
    stage_bytes: int
    lbo_bytes: int
    sbo_bytes: int
    k_step_offsets: tuple[int, ...]  # start of each 16-element K-step from the stage base
    slab_offsets: tuple[int, ...]  # start of each 64-row slab (Q only: one per consumer warpgroup)
    descriptors: tuple[int, ...]  # raw 64-bit descriptor of each K-step for a stage at shared address 0
    box: tuple[int, int]  # TMA box (head-dim elements, rows)
    copies: tuple[Copy, ...]
    layout: OperandLayout  # the derivation it came from (explain, show)

    def descriptor(self, k_step: int, slab: int = 0) -> int:
        return self.layout.descriptor(k_step, slab).encode()


@dataclass(frozen=True)
class AttentionPlan:
    spec: AttentionSpec
    qk: TileLayout
    pv: TileLayout
    q: OperandPlan
    k: OperandPlan
    v: OperandPlan
    qk_instr: WgmmaInstr
    pv_instr: WgmmaInstr
    p_pairs: tuple[tuple[tuple[int, int], ...], ...]  # [K-step j][register q] = (acc index lo, acc index hi)
    smem_q: int  # offsets from the 1024-aligned base
    smem_k: tuple[int, ...]
    smem_v: tuple[int, ...]
    smem_barriers: int
    smem_bytes: int  # dynamic shared memory to request (with the alignment slack)
    producer_registers: int
    consumer_registers: int

    @property
    def s_regs(self) -> int:
        return self.spec.bn // 2

    @property
    def o_regs(self) -> int:
        return self.spec.head_dim // 2

    def to_json(self) -> dict:
        def op(o: OperandPlan) -> dict:
            return {"major": o.major, "stage_bytes": o.stage_bytes, "lbo_bytes": o.lbo_bytes, "sbo_bytes": o.sbo_bytes,
                    "k_step_offsets": list(o.k_step_offsets), "slab_offsets": list(o.slab_offsets),
                    "descriptors": [f"{d:#018x}" for d in o.descriptors], "box": list(o.box),
                    "copies": [[c.smem_offset_bytes, c.inner, c.outer] for c in o.copies]}

        return {"spec": self.spec.to_json(), "q": op(self.q), "k": op(self.k), "v": op(self.v),
                "qk": self.qk_instr.opcode, "pv": self.pv_instr.opcode + " (A from registers)",
                "pv_imm_trans_b": self.pv_instr.imm_trans_b, "p_pairs": [list(map(list, s)) for s in self.p_pairs],
                "smem": {"q": self.smem_q, "k": list(self.smem_k), "v": list(self.smem_v), "barriers": self.smem_barriers,
                         "bytes": self.smem_bytes},
                "registers": {"producer": self.producer_registers, "consumer": self.consumer_registers}}


def gemm_tiles(s: AttentionSpec) -> tuple[TileSpec, TileSpec]:
    """The two GEMM tiles whose derivations the attention plan reuses (Q·Kᵀ, then P·V)."""
    sw128_k = OperandSpec.parse("kmajor-sw128", "mn")
    qk = TileSpec(s.bm, s.bn, s.head_dim, sw128_k, sw128_k, dtype=s.dtype, arch=s.arch, stages=s.stages)
    # P·V: A (P) comes from registers; its TileSpec operand only satisfies the spec's A-side rules.
    pv = TileSpec(s.bm, s.head_dim, s.bn, sw128_k, OperandSpec.parse("mnmajor-sw128", "k", field="--b"), dtype=s.dtype,
                  arch=s.arch, stages=s.stages)
    return qk, pv


def _operand(name: str, lay: OperandLayout) -> OperandPlan:
    tma = lay.tma.to_json()
    copies = tuple(Copy(c["smem_offset_bytes"], c["inner"], c["outer"]) for c in tma["copies"])
    return OperandPlan(
        name=name,
        major="k" if lay.major is Major.K else "mn",
        stage_bytes=lay.stage_bytes,
        lbo_bytes=lay.lbo_bytes,
        sbo_bytes=lay.sbo_bytes,
        k_step_offsets=tuple(st.start_offset_bytes for st in lay.k_steps),
        slab_offsets=tuple(lay.slab_offsets_bytes),
        descriptors=tuple(st.descriptor.encode() for st in lay.k_steps),
        box=(int(tma["box"][0]), int(tma["box"][1])),
        copies=copies,
        layout=lay,
    )


def p_register_pairs(bn: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """[j][q]: the two S accumulator registers whose 16-bit conversions fill A register q of P·V's K-step j.
    Accumulator register i of m64nNk16 sits at column 8 (i / 4) + 2 (lane % 4) + (i % 2), row + 8 ((i / 2) % 2); the
    A register element e of m64nNk16 at column 8 (e / 4) + 2 (lane % 4) + (e % 2), row + 8 ((e / 2) % 2): the same
    map on a 16-column group, so element e of step j is accumulator 8j + e and register q packs elements 2q, 2q + 1."""
    return tuple(tuple((8 * j + 2 * q, 8 * j + 2 * q + 1) for q in range(4)) for j in range(bn // 16))


STAGE_ALIGN_BYTES = 1024  # every stage on the 128-byte swizzle's repeat: base offset 0 (derive.operands.operand.base_offset_rule)


def stage_offsets(q: OperandPlan, k: OperandPlan, v: OperandPlan, stages: int) -> tuple[tuple, tuple, int]:
    """Shared memory from the 1024-aligned base: Q's tile at 0, then ``stages`` K tiles, then ``stages`` V tiles, each
    on a STAGE_ALIGN_BYTES boundary; (K offsets, V offsets, where the barriers start). Both archs' plans use it."""
    def up(n: int) -> int:
        return -(-n // STAGE_ALIGN_BYTES) * STAGE_ALIGN_BYTES

    at = up(q.stage_bytes)
    smem_k = tuple(at + i * up(k.stage_bytes) for i in range(stages))
    at += stages * up(k.stage_bytes)
    smem_v = tuple(at + i * up(v.stage_bytes) for i in range(stages))
    return smem_k, smem_v, at + stages * up(v.stage_bytes)


def plan_attention(s: AttentionSpec) -> AttentionPlan:
    qk_spec, pv_spec = gemm_tiles(s)
    qk, pv = derive(qk_spec), derive(pv_spec)
    q, k, v = _operand("q", qk.a), _operand("k", qk.b), _operand("v", pv.b)
    qk_instr = WgmmaInstr(s.bn, s.dtype, DType.F32, Major.K, Major.K)
    pv_instr = WgmmaInstr(s.head_dim, s.dtype, DType.F32, Major.K, Major.MN)
    smem_k, smem_v, barriers = stage_offsets(q, k, v, s.stages)
    smem_q, at = 0, barriers + 8 * (1 + 3 * s.stages)  # q_full, k_full[S], v_full[S], kv_empty[S]
    producer, consumer = consumer_registers(s.consumers)
    return AttentionPlan(
        spec=s, qk=qk, pv=pv, q=q, k=k, v=v, qk_instr=qk_instr, pv_instr=pv_instr, p_pairs=p_register_pairs(s.bn),
        smem_q=smem_q, smem_k=smem_k, smem_v=smem_v, smem_barriers=barriers, smem_bytes=at + STAGE_ALIGN_BYTES,
        producer_registers=producer, consumer_registers=consumer,
    )


# ---- which key blocks a query block visits (top-left causal alignment, as scaled_dot_product_attention's is_causal)

def n_blocks(seqlen_k: int, bn: int) -> int:
    return -(-seqlen_k // bn)


def n_block_end(m_block: int, bm: int, bn: int, seqlen_k: int, causal: bool) -> int:
    """One past the last key block query block ``m_block`` visits: its last row (bm (m + 1) - 1) sees keys up to its
    own index when causal."""
    n = n_blocks(seqlen_k, bn)
    if not causal:
        return n
    return min(n, (bm * (m_block + 1) - 1) // bn + 1)


def needs_mask(m_block: int, n_block: int, bm: int, bn: int, seqlen_k: int, causal: bool) -> bool:
    """Whether any element of the (m_block, n_block) tile is masked: keys past seqlen_k, or (causal) a key past the
    tile's first query row."""
    if bn * (n_block + 1) > seqlen_k:
        return True
    return causal and bn * (n_block + 1) - 1 > bm * m_block


# The same three rules as C expressions for the kernel (tests/test_attention_codegen.py evaluates them against the
# functions above). Names: m_block, n_block, n_blocks, seqlen_k and the grid's blockIdx.x / gridDim.x.

def m_block_expr(causal: bool) -> str:
    """Causal tiles differ in work: the grid visits the longest (the last query block) first."""
    return "static_cast<int>(gridDim.x - 1 - blockIdx.x)" if causal else "static_cast<int>(blockIdx.x)"


def n_block_end_expr(bm: int, bn: int, causal: bool) -> str:
    return f"min(n_blocks, ({bm} * (m_block + 1) - 1) / {bn} + 1)" if causal else "n_blocks"


def needs_mask_expr(bm: int, bn: int, causal: bool) -> str:
    e = f"{bn} * (n_block + 1) > seqlen_k"
    return e + (f" || {bn} * (n_block + 1) - 1 > {bm} * m_block" if causal else "")
