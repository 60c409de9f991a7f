"""The wgmma D fragment as the epilogue macros walk it: one value, read by every view whose template touches a
thread's accumulator registers row by row (the fused chain, block FP8's promotion, the grouped row-wise scales).

A thread of a warpgroup holds two rows of an m64nN D fragment, ``row_expr`` and ``row_expr + row_half``; its
registers come in groups of ``group_regs``, each group one column pair on both rows: registers ``i, i + 1`` on the
first row, ``i + hi_pair, i + hi_pair + 1`` on the second (PTX ISA 'wgmma .m64nNk* D fragments';
:mod:`ptxgen.isa.fragment` holds the numbers, :func:`ptxgen.emit.cexpr.wgmma_thread_row` the row).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.fragment import WGMMA_GROUP_REGS, WGMMA_ROW_HALF
from ..cexpr import wgmma_thread_row


@dataclass(frozen=True)
class WgmmaFragmentView:
    row_expr: str  # C: the thread's first row in its 64-row slab
    row_half: int  # rows from the first row to the second
    group_regs: int  # registers per 8 columns (two rows x two columns)
    hi_pair: int  # the group's first register of the second row


def wgmma_fragment_view(thread: str = "wg_tid", lane: str = "lane") -> WgmmaFragmentView:
    """The fragment for the warpgroup thread index ``thread`` and lane ``lane`` (C names in the template)."""
    return WgmmaFragmentView(wgmma_thread_row(thread, lane), WGMMA_ROW_HALF, WGMMA_GROUP_REGS, WGMMA_GROUP_REGS // 2)
