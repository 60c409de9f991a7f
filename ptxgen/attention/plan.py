"""The attention forward's plan, from the public authoring layer (ptxgen.author) only.

Two MMAs share one pipeline:

* S = Q·Kᵀ: wgmma m64nBNk16, A = Q (``Q:k-sw128:<dtype>:<BM>x<D>:a``, K-major: the head dim is K, one 64-row slab per
  consumer warpgroup), B = K (``K:k-sw128:<dtype>:<BN>x<D>``, K-major: a key row is contiguous along the head dim).
  Their :class:`~ptxgen.author.OperandPlan` give the stages' layouts, the descriptor of each K step, Q's slab
  offsets and the TMA boxes; ``wgmma(q, k)`` the instruction and its operand lists.
* O += P·V: wgmma m64nDk16 in its RS form, A = P from registers (``RegisterA``), B = V **MN-major**
  (``V:mn-sw128:<dtype>:<D>x<BN>``: V's rows are keys = this MMA's K, contiguous along the head dim = this MMA's N;
  atoms K-first, one TMA box per 64 head-dim columns, BN key rows deep): LBO (the next 128-byte atom along the head
  dim), SBO (the next 8 key rows) and the start of each 16-key step come from the same layer.
* P: ``RegisterA(dtype).acc_pairs(j)``: the S accumulator fragment of m64nBNk16 and the A register fragment of
  m64nDk16 place their elements alike within each 16-column group (PTX 'Register Fragments', Figures wgmma-64N16-D and
  wgmma-64N16-A), so the A registers of K-step j are the accumulator pairs (8j + 2q, 8j + 2q + 1), q = 0..3,
  converted to 16 bits. ``ptxgen.model.layouts.attnmodel`` checks this against its own transcription of both figures.
* The pipeline: one ``Ring`` with Q resident (loaded once, its own full barrier), K and V in ``stages`` stages with a
  full barrier each (S = Q·Kᵀ starts before V lands) and, on sm_90a, an empty barrier each that every consumer warp
  releases (K once S = Q·Kᵀ has landed, V once P·V has: the producer refills K while P·V still reads V; with one
  barrier for both, the overlapped schedules held two stages at once and starved the loads: an H100 profile of the
  ``overlap`` schedule at D 128, seqlen 8k showed the consumers waiting on the full barriers); the setmaxnreg budgets
  of ``spec.consumer_registers``, checked against the register pool by the ring.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..author import DType, Operand, OperandPlan, Param, RegisterA, Ring, RingPlan, WgmmaPlan, wgmma
from .spec import AttentionSpec, consumer_registers

LOG2E = 1.4426950408889634


def operands(s: AttentionSpec) -> tuple[OperandPlan, OperandPlan, OperandPlan]:
    """Q, K and V as the public layer describes them (both archs): 128-byte swizzle, Q and K K-major with their atoms
    side by side along M/N, V MN-major with its atoms stacked along the keys (one TMA box per 64 head-dim columns)."""
    q = Operand("Q", "k", "sw128", s.dtype, mn=s.bm, k=s.head_dim, mma_role="a", arch=s.arch, order="mn").plan()
    k = Operand("K", "k", "sw128", s.dtype, mn=s.bn, k=s.head_dim, mma_role="b", arch=s.arch, order="mn").plan()
    v = Operand("V", "mn", "sw128", s.dtype, mn=s.head_dim, k=s.bn, mma_role="b", arch=s.arch, order="k").plan()
    return q, k, v


def ring(s: AttentionSpec, q: OperandPlan, k: OperandPlan, v: OperandPlan, **kw) -> RingPlan:
    """Q resident, K and V in ``s.stages`` stages, a full barrier per operand; ``kw``: the arch's own choices."""
    return Ring(stages=s.stages, operands=(k, v), resident=(q,), full_per_operand=True, **kw).plan()


def params(s: AttentionSpec, q: OperandPlan, k: OperandPlan, v: OperandPlan) -> tuple[Param, ...]:
    """The kernel's parameters, in order: Q, K, V as rank-4 tensor maps of (B, H, S, D) views (128-byte L2
    promotion), O, the optional LSE, the problem sizes (the batch count for the persistent walk), O's strides and the
    softmax scale times log2(e)."""
    maps = tuple(Param(f"tmap_{o.name.lower()}", "tensormap", operand=o, l2_promotion_bytes=128) for o in (q, k, v))
    return (*maps, Param("o", "ptr", dtype=s.dtype.value, const=False),
            Param("lse", "ptr", dtype="f32", const=False, optional=True),
            *(Param(n, "i32") for n in ("seqlen_q", "seqlen_k", "heads", "group", "batch")),
            *(Param(n, "u64") for n in ("o_sb", "o_sh", "o_ss")), Param("scale_log2", "f32"))


def stage_offsets(r: RingPlan, name: str) -> tuple[int, ...]:
    """Each stage's offset of operand ``name`` from the aligned base, as the ring plan placed them."""
    reg = r.regions[name]
    return tuple(reg.offset_bytes + i * reg.stage_stride_bytes for i in range(reg.nbytes // max(reg.stage_stride_bytes, 1)))


def p_register_pairs(bn: int, dtype: DType = DType.BF16) -> tuple[tuple[tuple[int, int], ...], ...]:
    """[j][q]: the two S accumulator registers whose 16-bit conversions fill A register q of P·V's K-step j
    (``RegisterA.acc_pairs``, one 16-key step after another)."""
    a = RegisterA(dtype)
    return tuple(a.acc_pairs(j) for j in range(bn // 16))


class RingOffsets:
    """The shared-memory offsets both attention plans (wgmma and tcgen05) give their templates, read from ``self.ring``
    (their :class:`RingPlan`): Q's region, K's and V's stages, the barriers, the dynamic bytes to request."""

    ring: RingPlan

    @property
    def smem_q(self) -> int:
        return self.ring.regions["Q"].offset_bytes

    @property
    def smem_k(self) -> tuple[int, ...]:
        return stage_offsets(self.ring, "K")

    @property
    def smem_v(self) -> tuple[int, ...]:
        return stage_offsets(self.ring, "V")

    @property
    def smem_barriers(self) -> int:
        return self.ring.barriers_offset_bytes

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to request: the ring's bytes and the slack to round the window up to 1024 B."""
        return self.ring.dynamic_smem_bytes


@dataclass(frozen=True)
class AttentionPlan(RingOffsets):
    spec: AttentionSpec
    q: OperandPlan
    k: OperandPlan
    v: OperandPlan
    ring: RingPlan
    qk: WgmmaPlan  # S = Q·Kᵀ, both from shared memory
    pv: WgmmaPlan  # O += P·V, A from registers
    p_pairs: tuple[tuple[tuple[int, int], ...], ...]  # [K-step j][register q] = (acc index lo, acc index hi)
    params: tuple[Param, ...]

    @property
    def s_regs(self) -> int:
        return self.qk.acc_regs

    @property
    def o_regs(self) -> int:
        return self.pv.acc_regs

    @property
    def producer_registers(self) -> int:
        return self.ring.producer_registers

    @property
    def consumer_registers(self) -> int:
        return self.ring.consumer_registers

    def to_json(self) -> dict:
        return {"spec": self.spec.to_json(), "q": operand_json(self.q), "k": operand_json(self.k), "v": operand_json(self.v),
                "qk": self.qk.opcode, "pv": self.pv.opcode + " (A from registers)",
                "pv_imm_trans_b": self.pv.instr.imm_trans_b, "p_pairs": [list(map(list, s)) for s in self.p_pairs],
                "smem": {"q": self.smem_q, "k": list(self.smem_k), "v": list(self.smem_v), "barriers": self.smem_barriers,
                         "bytes": self.smem_bytes},
                "registers": {"producer": self.producer_registers, "consumer": self.consumer_registers}}


def operand_json(o: OperandPlan) -> dict:
    return {"major": o.operand.major.value, "stage_bytes": o.stage_bytes, "lbo_bytes": o.lbo_bytes, "sbo_bytes": o.sbo_bytes,
            "k_step_offsets": [st.start_offset_bytes for st in o.k_steps], "slab_offsets": list(o.slab_offsets_bytes),
            "descriptors": [f"{d:#018x}" for d in o.descriptors], "box": list(o.tma.box),
            "copies": [[c.smem_offset_bytes, c.inner, c.outer] for c in o.copies]}


def plan_attention(s: AttentionSpec) -> AttentionPlan:
    q, k, v = operands(s)
    producer, consumer = consumer_registers(s.consumers)
    # every consumer warp's lane 0 releases a stage (the warps of a warpgroup finish P·V at different times)
    r = ring(s, q, k, v, consumer_warpgroups=s.consumers, empty_arrivals=4 * s.consumers, producer_registers=producer,
             consumer_registers=consumer, empty_per_operand=True, resident_stages=s.q_buffers,
             resident_release=s.persistent)
    return AttentionPlan(spec=s, q=q, k=k, v=v, ring=r, qk=wgmma(q, k), pv=wgmma(RegisterA(s.dtype), v),
                         p_pairs=p_register_pairs(s.bn, s.dtype), params=params(s, q, k, v))


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


def tile_of(t: int, m_blocks: int, heads: int, batch: int, causal: bool) -> tuple[int, int, int]:
    """(m_block, head, batch index) of tile ``t`` of the persistent walk (which CTA takes it: ``walk_tile``). A
    head's query blocks are consecutive tiles, so the CTAs running at once share a few heads' K and V in L2 (as the
    one-CTA-per-tile grid's blockIdx.x-first order does). Causal: within a head the last (longest) query block first.
    (Measured on the H100: a causal order that ran the longest block of every head first, 128 heads at once, read
    K and V of all of them together and fell to 0.7x of the grid's speed at D 128, 2k; docs/attention.md.)"""
    hb, r = divmod(t, m_blocks)
    return (m_blocks - 1 - r if causal else r), hb % heads, hb // heads


def walk_tile(r: int, cta: int, grid: int, causal: bool) -> int:
    """The tile CTA ``cta`` of ``grid`` takes in its round ``r`` of the persistent walk: ``r * grid + cta``; causal,
    every other round in reverse (``r * grid + grid - 1 - cta`` for odd r), so a CTA that took a long tile in one round
    takes a short one in the next. Causal tiles of a head run longest first, and with ``grid`` a multiple of the
    query blocks per head (132 SMs, 4 blocks at seqlen 512) plain striding gave each CTA tiles of one length only:
    the busiest CTA carried 1.47x the mean (``walk_balance``); reversed, 1.03."""
    return r * grid + (grid - 1 - cta if causal and r % 2 else cta)


def walk_balance(lengths: list[int], grid: int, causal: bool, per_tile: float = 1.0) -> float:
    """The busiest CTA's work over the mean when ``grid`` CTAs walk tiles of ``lengths`` key blocks (each tile costs
    ``per_tile`` more, its start and end) as ``walk_tile`` assigns them."""
    load = [0.0] * grid
    for cta in range(grid):
        r = 0
        while (t := walk_tile(r, cta, grid, causal)) < len(lengths):
            load[cta] += lengths[t] + per_tile
            r += 1
    return max(load) / (sum(load) / grid)


def walk_exprs(causal: bool) -> dict[str, str]:
    """``walk_tile`` as C (names: tcount, the round; gridDim.x, blockIdx.x): this round's tile and the next round's."""
    def at(r: str) -> str:
        if not causal:
            return f"({r}) * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x)"
        # odd rounds reversed: cta + (r & 1) (grid - 1 - 2 cta)
        return (f"({r}) * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x) + (({r}) & 1) * "
                f"(static_cast<int>(gridDim.x) - 1 - 2 * static_cast<int>(blockIdx.x))")
    return {"tile": at("tcount"), "next": at("tcount + 1")}


def tile_exprs(causal: bool, tile: str = "tile") -> dict[str, str]:
    """``tile_of`` as C (names: ``tile``, m_blocks, heads, batch): the template's m_block, head and batch index."""
    m = f"m_blocks - 1 - {tile} % m_blocks" if causal else f"{tile} % m_blocks"
    return {"m_block": m, "head": f"({tile} / m_blocks) % heads", "batch": f"({tile} / m_blocks) / heads"}


def n_block_end_expr(bm: int, bn: int, causal: bool, m_block: str = "m_block") -> str:
    return f"min(n_blocks, ({bm} * ({m_block} + 1) - 1) / {bn} + 1)" if causal else "n_blocks"


def needs_mask_expr(bm: int, bn: int, causal: bool) -> str:
    e = f"{bn} * (n_block + 1) > seqlen_k"
    return e + (f" || {bn} * (n_block + 1) - 1 > {bm} * m_block" if causal else "")
