"""FP8 with DeepSeek-style block scales on Hopper (wgmma): the plan of scales and promotions.

The recipe (DeepSeek-V3; torch ``_scaled_mm`` with ``ScalingType.BlockWise1x128`` for A and ``BlockWise128x128``
for B): A (M x K, e4m3) has one f32 scale per row per 128 of K, B (N x K, e4m3) one per 128 x 128 block, and

    D[m, n] = sum over K blocks kb of  sfa[m, kb] x sfb[kb, n / 128] x (sum over k in block kb of A[m, k] B[n, k])

Hopper's wgmma accumulates FP8 products with limited precision, so each K block's partial sum is computed by the
tensor core into a fresh register fragment (``scale-d = 0`` at the block's first MMA) and promoted into the f32
accumulator in registers with its two scales: ``acc += partial x sfa x sfb`` (the promotion point). With BK = 128
every pipeline stage is one K block, and the promotion follows the stage's ``wgmma.wait_group``.

Global layouts, as ``torch._scaled_mm`` takes them for this recipe (and cuBLASLt's VEC128/BLK128x128 scale modes):

* ``scale_a``: f32, logical M x ceil(K/128), *outer-dim-major* (``s.t().contiguous().t()``: strides (1, lds_a),
  lds_a >= M): element (m, kb) at ``kb x lds_a + m``;
* ``scale_b``: f32, logical ceil(K/128) x ceil(N/128), the transpose of a row-major ceil(N/128) x Kb' array
  (``s.t()``, Kb' >= ceil(K/128), cuBLAS wants Kb' a multiple of 4): element (kb, nb) at ``nb x lds_b + kb``.

A thread of the wgmma fragment holds rows ``16w + lane/4`` and 8 rows further of its slab, so per K block it loads two
A scales. Its register group g (registers 4g..4g+3) holds columns 8g..8g+7 of the tile, which lie in one 128-column
block of B. With BN dividing 128 the whole tile lies in one block (one B scale); otherwise (BN = 136..192, as DeepGEMM's
1D2D kernel takes) a tile starting at column n0 spans two blocks: the first ``min(BN, 128 - n0 % 128) / 8`` groups take
block ``n0 / 128``'s scale, the rest block ``n0 / 128 + 1``'s. ``n0 % 128`` is a multiple of gcd(BN, 128), so a tile
spans at most two blocks exactly when BN <= 128 + gcd(BN, 128); the kernel has one promotion branch per reachable
split (``phases``), chosen once per tile.

Two partial fragments make ptxas serialize every wgmma (C7514), so each K block drains before its promotion (as in CUTLASS
and DeepGEMM); the two consumer warpgroups overlap one's promotion with the other's MMAs (docs/block-fp8.md).

>>> p = plan_block_fp8(bm=128, bn=128, bk=128)
>>> [(l.operand, l.index, len(l.targets)) for l in p.promotion_loads(warp=1, lane=5, kb=3, m0=256, n0=384)]
[('sfa', (273, 3), 32), ('sfa', (281, 3), 32), ('sfb', (3, 3), 64)]
>>> p = plan_block_fp8(bm=128, bn=192, bk=128)
>>> [(ph.residue, ph.first_groups) for ph in p.phases]
[(0, 16), (64, 8)]
>>> [(l.operand, l.index, len(l.targets)) for l in p.promotion_loads(warp=0, lane=0, kb=1, m0=0, n0=192)]
[('sfa', (0, 1), 48), ('sfa', (8, 1), 48), ('sfb', (1, 1), 32), ('sfb', (1, 2), 64)]
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ...isa.epiops import Fp8ScaleLoad
from ...isa.types import SpecError
from ..tile.derived import Derived
from ..store.fusion_loads import wgmma_column_pairs
from .bfp8steps import BarrierStep, OverlapStep, ScaleStep, overlap_steps, scale_steps, stagger_commit_groups, stagger_steps

BLOCK_K = 128  # K per scale of A and of B (the promotion interval)
BLOCK_N = 128  # rows of B per scale
K_PER_WGMMA_E4M3 = 32  # wgmma .e4m3 K per instruction
GROUP_COLS = 8  # columns of one register group (registers 4g..4g+3) of the wgmma D fragment
GROUP_REGS = 4
FLAG = "--fp8-blocks"
BLOCKS_1D2D = "1x128x128"  # B: one scale per 128 x 128 block (DeepGEMM's 1D2D)
COLUMNS_1D1D = "1x128x1x128"  # B: one scale per row of B (column of D) per 128 of K (DeepGEMM's 1D1D)
B_SCALE = {BLOCKS_1D2D: "block", COLUMNS_1D1D: "column"}  # --fp8-blocks -> BlockFp8Plan.b_scale
MAX_BN_1D1D = 256  # wgmma N; the register check (derive.tile.rules) bounds it further


@dataclass(frozen=True)
class ScaleLoad:
    operand: str  # "sfa" (index (m, kb)) or "sfb" (index (kb, nb))
    index: tuple[int, int]
    targets: tuple[int, ...]  # the fragment registers whose partial sums this scale multiplies

    def offset(self, lds: int) -> int:
        """Element offset in the global scale array: sfa (m, kb) at kb x lds_a + m, sfb (kb, nb) at nb x lds_b + kb."""
        first, second = self.index
        return second * lds + first

    def to_json(self) -> list:
        return [self.operand, list(self.index), list(self.targets)]


SCALE_WARP = 1  # --fp8-scale-load smem: the producer warpgroup's warp that stages the scales (warp 0 issues the TMA)
SCALE_WARP_LANES = 32
SF_BYTES = 4  # f32 scales
# --fp8-scale-load values whose scales reach the consumers through per-stage shared-memory slots (the scale warp's
# ld/st, its cp.async, or the TMA thread's box of A scales), as the plans name them
STAGED_SCALE_LOADS = tuple(v.value for v in Fp8ScaleLoad if v.staged)
SFB_STAGE_BYTES = 16  # a stage's B scales: at most two (a tile spans at most two 128-column blocks), padded to 16 B


def sfb_stage_bytes(b_scale: str, bn: int) -> int:
    """A stage's B-scale slot: at most two block scales padded to 16 B, or (per column) BN f32 rounded up to 16 B."""
    if b_scale == "column":
        return -(-bn * SF_BYTES // SFB_STAGE_BYTES) * SFB_STAGE_BYTES
    return SFB_STAGE_BYTES


@dataclass(frozen=True)
class ScaleSlot:
    """--fp8-scale-load smem: one f32 of a stage's scale area: A's scale of tile row ``index`` (operand sfa) or the B
    scale of block n0 / 128 + ``index`` (sfb), at ``offset_bytes`` from the stage's sfa (or sfb) ring slot."""

    operand: str
    index: int
    offset_bytes: int


@dataclass(frozen=True)
class ScalePhase:
    """Tiles whose first column n0 has ``n0 % 128 == residue``: their first ``first_groups`` register groups lie in
    128-column block n0 / 128, the other groups in the next block."""

    residue: int
    first_groups: int


def scale_phases(bn: int) -> tuple[ScalePhase, ...]:
    """One phase per reachable ``n0 % 128`` that splits the tile differently (n0 a multiple of BN)."""
    out = {}
    for r in sorted({t * bn % BLOCK_N for t in range(BLOCK_N)}):
        out.setdefault(min(bn, BLOCK_N - r) // GROUP_COLS, r)
    return tuple(ScalePhase(r, f) for f, r in sorted(out.items(), key=lambda x: x[1]))


@dataclass(frozen=True)
class OffsetTerm:
    """One term of a tile's scale-array base offset in elements: ``(var / divisor) x stride``, where ``var`` is a value
    of the tile (``n0``: its first column; ``group``: its group, grouped kernels) and ``stride`` a kernel parameter. The
    kernel adds the terms to the scale pointer once per tile (ptxgen.emit.views.blockfp8 renders them as C)."""

    var: str
    divisor: int
    stride: str  # "" for 1

    def value(self, env: dict) -> int:
        return env[self.var] // self.divisor * (env[self.stride] if self.stride else 1)


@dataclass(frozen=True)
class BlockFp8Plan:
    bm: int
    bn: int
    bk: int
    derivation: tuple[Derived, ...]
    phases: tuple[ScalePhase, ...]
    stagger: tuple[BarrierStep, ...] = ()
    grouped: bool = False  # a grouped GEMM (--grouped offs): B's scales are G per-group arrays, lds_b_group apart
    overlap: str = "none"  # none | halves | interleave (OverlapStep sequence: overlap_steps)
    scale_load: str = "block"  # block | ahead (ScaleStep sequence: scale_steps)
    # the K-steps of each wgmma commit group of a K block (stagger_commit_groups; two with --fp8-stagger half)
    commit_groups: tuple[tuple[int, ...], ...] = stagger_commit_groups("none", BLOCK_K // K_PER_WGMMA_E4M3)
    # B's scales: block (one per 128 x 128 block, --fp8-blocks 1x128x128) or column (one per column of D per K block,
    # --fp8-blocks 1x128x1x128: scale_b (kb, n) at kb x lds_b + n, MN-major as DeepGEMM's 1D1D and torch's
    # BlockWise1x128 scale_b take it)
    b_scale: str = "block"
    # --fp8-blocks 1x128x1x128: when a consumer thread reads its columns' B scales from the stage (derive.scaled.bfp8cols):
    # issue (all BN / 4 after issuing the K block's MMAs, held through them) or promote (each register group's pair
    # inside the promotion, the stage released after it)
    column_scales_at: str = "issue"

    @property
    def per_column(self) -> bool:
        return self.b_scale == "column"

    @property
    def column_scale_registers(self) -> int:
        """f32 registers a consumer thread holds through the MMAs for one K block's per-column B scales (two per register
        group when read at the issue; none when each pair is read inside the promotion, as the 1D2D B scale is)."""
        return 2 * self.groups if self.per_column and self.column_scales_at == "issue" else 0

    @property
    def k_loop_unroll(self) -> int:
        """2 without a stagger or overlap: the next K block's barrier check lands among the promotion's FFMA (2026-12-02,
        tools/probe_loop.py: +4-5%, tensor pipe 87% -> 90%; 4 and 8 no better); the (slower) ordered loops stay at 1."""
        return 2 if not self.stagger and self.overlap == "none" else 1

    @property
    def sfa_stage_bytes(self) -> int:
        """--fp8-scale-load smem: a stage's A scales, one f32 per tile row (0 in the other modes)."""
        return self.bm * SF_BYTES if self.scale_load in STAGED_SCALE_LOADS else 0

    @property
    def sfb_stage_bytes(self) -> int:
        if self.scale_load not in STAGED_SCALE_LOADS:
            return 0
        return sfb_stage_bytes(self.b_scale, self.bn)

    @property
    def sfb_slots(self) -> int:
        """B scales per stage: the tile's block n0 / 128 and, when some tile spans two, the next block's; per column:
        one per column of the tile."""
        if self.per_column:
            return self.bn
        return 2 if self.spans_two_blocks else 1

    @staticmethod
    def sfa_slot(row: int) -> ScaleSlot:
        """Where tile row ``row``'s A scale lies in a stage's sfa slot (rows in order, one f32 each)."""
        return ScaleSlot("sfa", row, row * SF_BYTES)

    @staticmethod
    def sfb_slot(block: int) -> ScaleSlot:
        return ScaleSlot("sfb", block, block * SF_BYTES)

    @property
    def scale_rows_per_lane(self) -> int:
        return self.bm // SCALE_WARP_LANES

    def scale_warp_writes(self, lane: int) -> tuple[ScaleSlot, ...]:
        """What lane ``lane`` of the scale warp writes into a stage: tile rows lane + 32 j (coalesced global reads of the
        outer-dim-major scale_a: a K block's rows are contiguous), and lanes 0..sfb_slots-1 one B scale each."""
        rows = tuple(self.sfa_slot(lane + SCALE_WARP_LANES * j) for j in range(self.scale_rows_per_lane))
        if self.per_column:  # columns lane + 32 j (coalesced: a K block's row of scale_b is contiguous along N)
            return rows + tuple(self.sfb_slot(c) for c in range(lane, self.bn, SCALE_WARP_LANES))
        return rows + ((self.sfb_slot(lane),) if lane < self.sfb_slots else ())

    @property
    def scale_cols_per_lane(self) -> int:
        """Per column: the most B-scale columns one scale-warp lane stores per stage (lane + 32 j < BN)."""
        return -(-self.bn // SCALE_WARP_LANES) if self.per_column else 0

    def consumer_reads(self, warp: int, lane: int, slab: int = 0) -> tuple[ScaleSlot, ...]:
        """The slots a consumer thread reads per K block: its two rows' A scales (the rows of promotion_loads) and the
        tile's B scales."""
        row = 64 * slab + 16 * warp + lane // 4
        if self.per_column:  # the thread's own columns, in register-group order: c and c + 1 of each group
            cols = tuple(c + i for c, _ in self.thread_column_pairs(lane) for i in (0, 1))
            return (self.sfa_slot(row), self.sfa_slot(row + 8)) + tuple(self.sfb_slot(c) for c in cols)
        return (self.sfa_slot(row), self.sfa_slot(row + 8)) + tuple(self.sfb_slot(j) for j in range(self.sfb_slots))

    def thread_column_pairs(self, lane: int) -> tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]:
        """Per register group: the first of the thread's two columns and each column's registers (the wgmma D
        fragment, derive.store.fusion_loads.wgmma_column_pairs)."""
        return wgmma_column_pairs(lane, self.bn)

    def scale_steps(self, k_blocks: int) -> tuple[ScaleStep, ...]:
        """One consumer thread's scale loads and promotions for a tile of ``k_blocks`` K blocks, in program order
        (templates/mma_blockfp8.cuh.j2; ptxgen.model.numerics.bfp8model.check_scale_steps simulates it)."""
        return scale_steps(k_blocks, self.scale_load)

    @property
    def sfa_tile_terms(self) -> tuple[OffsetTerm, ...]:
        """A's scale pointer needs no per-tile base: its rows are A's rows (stacked along M for a grouped GEMM, so a
        tile's row index m0 + .. is already the row of scale_a), element (m, kb) at kb x lds_a + m."""
        return ()

    @property
    def sfb_tile_terms(self) -> tuple[OffsetTerm, ...]:
        """B's scale pointer for a tile: its 128-row block of B (n0 / 128) x lds_b, and for a grouped GEMM its group's
        array, group x lds_b_group (every group's scale_b is the dense kernel's ceil(K/128) x ceil(N/128) array)."""
        if self.per_column:  # (kb, n) at kb x lds_b + n: the tile's columns start at n0
            return (OffsetTerm("n0", 1, ""),)
        own = (OffsetTerm("n0", BLOCK_N, "lds_b"),)
        return ((OffsetTerm("group", 1, "lds_b_group"),) if self.grouped else ()) + own

    def scale_address(self, load: ScaleLoad, env: dict) -> int:
        """The element of the flat scale array a load reads, as the kernel forms it: the tile's base (the terms above,
        ``env`` holding n0, group and the strides) plus the in-tile index: sfa[kb x lds_a + row]; sfb[kb] for block
        n0 / 128 and sfb[lds_b + kb] for the next."""
        first, second = load.index
        if load.operand == "sfa":
            return sum(t.value(env) for t in self.sfa_tile_terms) + second * env["lds_a"] + first
        if self.per_column:  # sfb[kb x lds_b + (n - n0)] from the tile's base
            return sum(t.value(env) for t in self.sfb_tile_terms) + first * env["lds_b"] + second - env["n0"]
        return sum(t.value(env) for t in self.sfb_tile_terms) + (second - env["n0"] // BLOCK_N) * env["lds_b"] + first

    @property
    def halves(self) -> int:
        """Partial fragments (and commit groups) per K block: 2 with --fp8-overlap halves (columns 0..BN/2-1 and
        BN/2..BN-1, one m64n(BN/2) wgmma per K step each) or interleave (the same two, in one commit group), else 1."""
        return 2 if self.overlap in ("halves", "interleave") else 1

    @property
    def peeled(self) -> bool:
        """K block 0's MMAs are issued before the K loop (--fp8-overlap halves only: overlap_steps)."""
        return self.overlap == "halves"

    def half_first_regs(self, phase: ScalePhase, half: int) -> int:
        """Registers of half ``half``'s fragment (BN/4 per thread) that take block n0 / 128's B scale: the first
        ``first_groups`` register groups of the whole tile, counted from the half's first group."""
        regs = self.bn // 2 // self.halves
        return max(0, min(regs, phase.first_groups * GROUP_REGS - half * regs))

    @property
    def groups(self) -> int:
        return self.bn // GROUP_COLS

    @property
    def spans_two_blocks(self) -> bool:
        """Some tile's columns lie in two 128-column blocks of B (two B scales per K block)."""
        return any(ph.first_groups < self.groups for ph in self.phases)

    def phase_of(self, n0: int) -> ScalePhase:
        if self.per_column:
            return self.phases[0]
        r = n0 % BLOCK_N
        return next(ph for ph in self.phases if ph.first_groups == min(self.bn, BLOCK_N - r) // GROUP_COLS)

    def overlap_steps(self, k_blocks: int) -> tuple[OverlapStep, ...]:
        """One consumer warpgroup's operations for a tile of ``k_blocks`` K blocks, in program order (what
        templates/mma_blockfp8.cuh.j2 does; ptxgen.model.numerics.bfp8model.check_overlap simulates it)."""
        return overlap_steps(k_blocks, self.halves, self.overlap == "interleave")

    @property
    def partial_registers(self) -> int:
        """f32 registers of one K block's partial sum per thread (the m64nBN fragment), beside the accumulator."""
        return self.bn // 2

    @property
    def mmas_per_block(self) -> int:
        return BLOCK_K // K_PER_WGMMA_E4M3

    def k_block(self, k_tile: int) -> int:
        """The scale K block that K-tile ``k_tile`` (of the whole K loop, counted from K = 0) promotes with: the tile's K
        elements are k_tile x BK .. k_tile x BK + BK - 1, and with BK = BLOCK_K (the plan's rule) they all lie in 128-block
        k_tile x BK / BLOCK_K."""
        first, last = k_tile * self.bk // BLOCK_K, (k_tile * self.bk + self.bk - 1) // BLOCK_K
        assert first == last, (self.bk, k_tile)  # a K-tile never straddles two scale blocks
        return first

    def unit_k_blocks(self, first_k_tile: int, k_tiles: int) -> tuple[int, ...]:
        """The scale K block of each K-tile kt = 0 .. k_tiles - 1 of a work unit whose K range starts at K-tile
        ``first_k_tile`` (a stream-K split: derive.store.streamk.StreamKPlan.unit; a whole tile: 0). The kernel's K-tile kt
        loads K elements from (first_k_tile + kt) x BK on (the loader's k0), so it must promote with block
        k_block(first_k_tile + kt), not k_block(kt): the scale index follows the split's K range, not its loop counter."""
        return tuple(self.k_block(first_k_tile + kt) for kt in range(k_tiles))

    def stream_k_derivation(self) -> Derived:
        """With --stream-k: which scale blocks a split promotes with, and what the owner sums."""
        return Derived("stream_k_scales", "K-tile kt of a unit promotes with scale block kt_first + kt",
                       f"k_block(kt_first + kt) = (kt_first + kt) x {self.bk} / {BLOCK_K} (BK = {BLOCK_K}): the K elements the "
                       "loader brings in at K-tile kt of a split starting at K-tile kt_first; the scale warp's stores and the "
                       "consumers' loads index scale_a's column and scale_b's row with it",
                       "each split promotes its own K blocks into its own f32 accumulator; the owner adds the splits' promoted "
                       "accumulators (the recipe is a sum over K blocks, so the split sums are the recipe's)",
                       "ptxgen.derive.scaled.blockfp8.BlockFp8Plan.unit_k_blocks; checked by model.numerics.bfp8model.check_unit_scale_blocks")

    def promotion_points(self, k: int) -> tuple[int, ...]:
        """K offsets after which the partial sum is promoted into the accumulator: the end of every 128-block."""
        return tuple(min(k, kb + BLOCK_K) for kb in range(0, k, BLOCK_K))

    def promotion_loads(self, warp: int, lane: int, kb: int, m0: int = 0, n0: int = 0, slab: int = 0) -> tuple[ScaleLoad, ...]:
        """The scales a thread loads at K block ``kb`` for slab ``slab`` of the tile at (m0, n0). Registers 4g, 4g+1
        are row 16w + lane/4, registers 4g+2, 4g+3 eight rows further (the m64nN D fragment)."""
        row = m0 + 64 * slab + 16 * warp + lane // 4
        regs = range(self.bn // 2)
        upper = tuple(i for i in regs if i % GROUP_REGS < 2)
        lower = tuple(i for i in regs if i % GROUP_REGS >= 2)
        if self.per_column:  # sfb index (kb, n): one scale per column the thread holds
            cols = tuple(ScaleLoad("sfb", (kb, n0 + c + i), regs_i) for c, pair in self.thread_column_pairs(lane)
                         for i, regs_i in enumerate(pair))
            return (ScaleLoad("sfa", (row, kb), upper), ScaleLoad("sfa", (row + 8, kb), lower)) + cols
        first = self.phase_of(n0).first_groups
        loads = [ScaleLoad("sfa", (row, kb), upper), ScaleLoad("sfa", (row + 8, kb), lower),
                 ScaleLoad("sfb", (kb, n0 // BLOCK_N), tuple(i for i in regs if i // GROUP_REGS < first))]
        if first < self.groups:
            loads.append(ScaleLoad("sfb", (kb, n0 // BLOCK_N + 1), tuple(i for i in regs if i // GROUP_REGS >= first)))
        return tuple(loads)


def _check_args(bm: int, bn: int, bk: int, dtype: str, a_major: str, b_major: str, arch: str, stagger: str,
                overlap: str, scale_load: str) -> None:
    """SpecError naming the first rule of the 1D2D recipe the arguments break."""
    if arch != "sm_90a":
        raise SpecError(FLAG, arch, "the DeepSeek recipe here is for Hopper wgmma (tcgen05 has block-scaled kinds: --scale)",
                        "--arch sm_90a")
    if dtype != "e4m3":
        raise SpecError(FLAG, dtype, "block-scaled FP8 takes e4m3 A and B", "--dtype e4m3")
    if a_major != "k" or b_major != "k":
        raise SpecError(FLAG, f"{a_major}/{b_major}", "wgmma reads 8-bit operands K-major only", "kmajor A and B")
    if bk != BLOCK_K:
        raise SpecError("--bk", bk, f"one pipeline stage is one scale block: BK = {BLOCK_K}", str(BLOCK_K))
    if bn % GROUP_COLS or bn > BLOCK_N + gcd(bn, BLOCK_N):
        raise SpecError("--bn", bn, f"a tile's columns may span at most two {BLOCK_N}-column scale blocks of B: BN a multiple "
                        f"of {GROUP_COLS} with BN <= {BLOCK_N} + gcd(BN, {BLOCK_N})", "8..128 in steps of 8, 136, 144, 160, 192, 256")
    if bm % 64:
        raise SpecError("--bm", bm, "one consumer warpgroup per 64 rows", "64, 128, 192, 256")
    if overlap in ("halves", "interleave") and (bn % (2 * GROUP_COLS) or overlap == "halves" and stagger != "none"):
        raise SpecError("--fp8-overlap", overlap, f"two column halves of a multiple of {GROUP_COLS} columns (halves: without "
                        "--fp8-stagger)", "BN a multiple of 16, halves with --fp8-stagger none")
    if scale_load == "ahead" and overlap != "none":
        raise SpecError("--fp8-scale-load", scale_load, "the one-partial consumer loop (--fp8-overlap none)", "block or smem")


def _core_fields(bn: int) -> tuple[Derived, ...]:
    """The promotion, the partial's registers and the A scales each thread loads."""
    return (
        Derived("promotion", f"every {BLOCK_K} of K", f"BK = {BLOCK_K}: one stage = one scale block; "
                f"{BLOCK_K // K_PER_WGMMA_E4M3} wgmma (K={K_PER_WGMMA_E4M3}) into a fresh partial, then acc += partial x sfa x sfb",
                "wgmma accumulates FP8 products with limited precision (DeepSeek-V3 sec. 3.3.2: about 14 bits); f32 "
                "promotion every 128 bounds the error", "DeepSeek-V3 technical report; DeepGEMM"),
        Derived("partial_registers", bn // 2, f"BN / 2 = {bn} / 2 f32 per thread beside the accumulator's {bn // 2}",
                "the block's partial sum lives in its own fragment until it is promoted (wait_group 0 first: a second "
                "fragment in flight during the promotion makes ptxas serialize every wgmma, C7514)",
                "PTX ISA 'wgmma .m64nNk32 D fragments'"),
        Derived("sfa_loads", "2 per thread per K block", "rows 16w + lane/4 and + 8 of the slab: sfa[kb x lds_a + m]",
                "the thread's two rows", "torch._scaled_mm BlockWise1x128 (outer-dim-major)"),
    )


def _sfb_field(plan: "BlockFp8Plan", bn: int) -> Derived:
    """The B scales a tile loads per K block: one, or two where its columns span two 128-row blocks of B."""
    split = ", ".join(f"n0 % {BLOCK_N} = {ph.residue}: groups 0..{ph.first_groups - 1} in block n0 / {BLOCK_N}"
                      + (f", {ph.first_groups}..{plan.groups - 1} in the next" if ph.first_groups < plan.groups else "")
                      for ph in plan.phases)
    return (Derived("sfb_loads", "2 per tile per K block", f"sfb[(n0 / {BLOCK_N}) x lds_b + kb] and sfb[(n0 / {BLOCK_N} + 1) x "
                    f"lds_b + kb]; {split}", f"register group g holds columns 8g..8g+7; a tile of {bn} columns spans two "
                    f"{BLOCK_N}-row blocks of B; one promotion branch per split, chosen once per tile",
                    "torch._scaled_mm BlockWise128x128 (s.t()); DeepGEMM sm90 1D2D (BLOCK_N up to 192)")
            if plan.spans_two_blocks else
            Derived("sfb_loads", "1 per tile per K block", f"sfb[(n0 / {BLOCK_N}) x lds_b + kb]; BN | {BLOCK_N}",
                    "every column of the tile is in one 128-row block of B", "torch._scaled_mm BlockWise128x128 (s.t())"))


def _order_field(stagger: str, bk: int) -> Derived:
    """--fp8-stagger: the two consumer warpgroups' order."""
    return Derived("warpgroup_order", stagger, {
        "none": "each consumer warpgroup issues a K block's MMAs as soon as the stage lands",
        "issue": "warpgroup 1 issues block kt after warpgroup 0 has issued it; warpgroup 0 issues kt + 1 after warpgroup 1 "
                 "has issued kt (two named barriers, bar.arrive / bar.sync of 256 threads)",
        "complete": "warpgroup 1 issues block kt once warpgroup 0's MMAs of kt are complete; warpgroup 0 issues kt + 1 after "
                    "warpgroup 1 has issued kt (two named barriers)",
        "half": f"each warpgroup commits a K block's {bk // K_PER_WGMMA_E4M3} wgmma as two groups (K-steps of the block's "
                "first and second half) and arrives on its named barrier after wait_group 1 (the first group complete; no "
                "partial register is read before wait_group 0); warpgroup 1 issues block kt once warpgroup 0's first half "
                "of kt is complete, warpgroup 0 issues kt + 1 once warpgroup 1's first half of kt is"}.get(stagger, stagger),
        "meant to let one warpgroup promote while the other's MMAs run; measured on the H200 (docs/block-fp8.md): both "
        "orders are slower than none (issue 0.71-0.80, complete 0.54-0.67 of torch's blockwise call against 0.78-0.91); "
        "half (an offset of about one promotion between the two) is not measured yet",
        "CUTLASS OrderedSequenceBarrier (ping-pong); DeepGEMM overlaps by FFMA interleaving instead")


def _grouped_field() -> Derived:
    """--grouped offs: each group's B scales."""
    return Derived("grouped_block_scales", "sfb + group x lds_b_group; sfa by the stacked row",
                   "a grouped tile (--grouped offs) takes B's scales from its group's array: the tile's scale_b base is "
                   "group x lds_b_group + (n0 / 128) x lds_b, chosen once per tile from the walk's cursor; A's scales "
                   "are indexed by the tile's rows of the stacked A (m0 = the group's first row + tile row x BM), so "
                   "they need no group offset; rows past the group's end read the next group's scales and are not stored",
                   "the MoE recipe (DeepSeek-V3; DeepGEMM's m-grouped contiguous layout): one scale_a over the stacked "
                   "tokens, one block-scale array per expert weight; the promotion loop is the dense one",
                   "DeepGEMM m_grouped_fp8_gemm_nt_contiguous; torch._scaled_mm BlockWise128x128 per group")


def _overlap_field(overlap: str, bn: int) -> Derived:
    """--fp8-overlap: promotion beside the MMAs of the other column half."""
    return Derived("promotion_overlap", overlap, {
        "none": "per K block: 4 wgmma into the partial, wait_group 0, release the stage, promote",
        "halves": f"columns 0..{bn // 2 - 1} and {bn // 2}..{bn - 1} as two m64n{bn // 2}k32 wgmma groups into two partials "
                  f"of {bn // 4} registers; per K block kb: issue half 0, promote half 1 of kb - 1 while it runs, issue half 1, "
                  "wait_group 1, promote half 0 while half 1 runs, wait_group 0, release kb",
        "interleave": f"columns 0..{bn // 2 - 1} and {bn // 2}..{bn - 1} as two m64n{bn // 2}k32 chains into two partials of "
                      f"{bn // 4} registers, issued alternately per K-step (h0 k0, h1 k0, h0 k1, ...) in the K block's commit "
                      "group(s); then wait_group 0, release, promote both (the default loop's order, two independent "
                      "dependency chains instead of one)"}.get(overlap, overlap),
        "wait_group 0 leaves the tensor core without this warpgroup's work while it promotes; with two half fragments "
        "one group is in flight during each promotion but the tile's last (the registers stay acc + BN/2). Measured on "
        "the H200 (runs/2026-12-01-blockfp8-overlap/run1): slower than none at 128 x 192 (0.73-0.86 of torch's blockwise call "
        "against 0.80-0.91), far slower at 128 x 128 (m64n64 halves: 0.62-0.73)",
        "FlashAttention-3's intra-warpgroup overlap (wait_group 1); PTX ISA wgmma.wait_group")


def _scale_load_field(plan: "BlockFp8Plan", bm: int, scale_load: str) -> Derived:
    """--fp8-scale-load: how the scales reach the consumers."""
    return Derived("scale_load", scale_load, {
        "block": "each K block's 2 A scales and 1-2 B scales are loaded from global memory at the top of that block's "
                 "iteration and used by its promotion",
        "ahead": "K block kb + 1's scales are loaded during K block kb into a second register set (kb + 1 clamped to the "
                 "tile's last block, which reloads itself); the promotion of kb reads the set loaded one iteration before "
                 f"(+{2 + (2 if plan.spans_two_blocks else 1)} f32 registers per thread)",
        "smem": f"warp {SCALE_WARP} of the producer warpgroup walks the producer's tiles and stages: per stage it waits "
                f"empty[s], loads the K block's {bm} A scales (lane l: tile rows l + 32 j, zero past M) and "
                f"{plan.sfb_slots} B scale(s) (lanes 0..{plan.sfb_slots - 1}, zero for a block past N) from global memory, "
                f"stores them at sfa[s] + row x {SF_BYTES} and sfb[s] + j x {SF_BYTES}, and each lane arrives on full[s] "
                f"(+{SCALE_WARP_LANES} arrivals); the consumers read them with ld.shared after full[s] and before releasing "
                "the stage",
        "cpasync": f"as smem, but each lane copies its {bm // SCALE_WARP_LANES} A scales and its B scale(s) with 4-byte "
                   "cp.async.ca (src-size 0 past M and N: the slot is zero-filled) and arrives on full[s] with "
                   "cp.async.mbarrier.arrive.noinc once its copies land (+32 arrivals): the warp issues a stage's copies "
                   "and goes on to the next empty stage without waiting for a load",
        "tma": f"as smem, but the TMA thread copies the {bm} A scales as one box of scale_a's tensor map into sfa[s] (inside "
               "its expect_tx; derive.scaled.sfa_tma) and only the scale warp's lane 0 loads, stores and arrives (+1 arrival)"}.get(scale_load, scale_load),
        "with block, ncu puts 41% of the warp-stall samples on the first use of the loaded scales (their L2 latency, "
        "not the MMAs, set the pace; ptxas also moves the B scale to a uniform register between the block's wgmma); "
        "smem hides the loads behind the pipeline's stages and measured 4-9% faster than block on the H200, ahead "
        "slower (runs/2026-12-01-blockfp8-smem-scales, docs/block-fp8.md)",
        "DeepGEMM sm90 1D2D loads the scales through shared memory (A's per stage by TMA, B's once per tile)")


def plan_block_fp8(bm: int, bn: int, bk: int, dtype: str = "e4m3", a_major: str = "k", b_major: str = "k",
                   arch: str = "sm_90a", stagger: str = "none", grouped: bool = False,
                   overlap: str = "none", scale_load: str = "block") -> BlockFp8Plan:
    """The 1D2D plan (--fp8-blocks 1x128x128), or SpecError naming the rule it breaks (1x128x1x128: derive.scaled.bfp8cols)."""
    _check_args(bm, bn, bk, dtype, a_major, b_major, arch, stagger, overlap, scale_load)
    D = _core_fields(bn)
    phases = scale_phases(bn)
    plan = BlockFp8Plan(bm, bn, bk, D, phases)
    fields = (_sfb_field(plan, bn), _order_field(stagger, bk), _overlap_field(overlap, bn), _scale_load_field(plan, bm, scale_load))
    return BlockFp8Plan(bm, bn, bk, D + fields + ((_grouped_field(),) if grouped else ()), phases, stagger_steps(stagger),
                        grouped=grouped, overlap=overlap, scale_load=scale_load,
                        commit_groups=stagger_commit_groups(stagger, BLOCK_K // K_PER_WGMMA_E4M3))
