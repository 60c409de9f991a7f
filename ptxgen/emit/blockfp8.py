"""Block-scaled FP8 on wgmma (ptxgen.derive.blockfp8), rendered: what templates/mma_blockfp8.cuh.j2 receives."""

from __future__ import annotations

from dataclasses import dataclass

from ..derive.blockfp8 import BLOCK_N, BlockFp8Plan
from ..derive.fusion import LANES_PER_ROW, WGMMA_GROUP_REGS, WGMMA_ROW_HALF, WGMMA_WARP_ROWS


@dataclass(frozen=True)
class BlockFp8View:
    block_n: int
    row_expr: str  # C: the thread's first row in its slab
    row_half: int
    group_regs: int
    hi_pair: int
    fresh: tuple[str, ...]  # per MMA of a K-tile: its scale-d (the first overwrites the partial)
    sfa_doc: str
    sfb_doc: str


def block_fp8_view(plan: BlockFp8Plan | None, mmas_per_k_tile: int) -> BlockFp8View | None:
    if plan is None:
        return None
    return BlockFp8View(
        block_n=BLOCK_N,
        row_expr=f"(wg_tid / 32) * {WGMMA_WARP_ROWS} + lane / {LANES_PER_ROW}",
        row_half=WGMMA_ROW_HALF,
        group_regs=WGMMA_GROUP_REGS,
        hi_pair=WGMMA_GROUP_REGS // 2,
        fresh=tuple("0u" if i == 0 else "1u" for i in range(mmas_per_k_tile)),
        sfa_doc="f32, M x ceil(K/128) outer-dim-major: (m, kb) at kb x lds_a + m",
        sfb_doc=f"f32, ceil(K/128) x ceil(N/{BLOCK_N}): (kb, nb) at nb x lds_b + kb",
    )
