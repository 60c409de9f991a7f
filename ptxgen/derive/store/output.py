"""Where the direct epilogue stores each accumulator element: D's layout in global memory (``--d-major``).

D is the kernel's M x N result (rows: the MMA's M, the rows of A; columns: the rows of B).

* ``n`` (row-major, the default): element (i, j) at ``i x ldd + j``, ``ldd >= N``. The two adjacent columns (j, j + 1)
  that a wgmma thread holds for one row are one 4- or 8-byte vector store, so rows start 16-byte aligned.
* ``m`` (M-major, column-major): element (i, j) at ``j x ldd + i``, ``ldd >= M``. The thread's two columns are ``ldd``
  elements apart: each element is its own store (the 8 lanes that share a column pair hold 8 consecutive rows, so
  a warp's stores of one register still cover 8 consecutive elements of a column). No row alignment is needed.

M-major D is what swap-AB needs: for ``out = a @ b.T`` with few rows of ``a`` (decode), the kernel computes
``D' = b @ a.T`` (the weights' N rows take the MMA's M) and D' (N x M) written M-major at ``ldd = out``'s row pitch
is exactly the row-major ``out``. With ``--epilogue tma`` (16-bit outputs) the tile goes through shared memory instead:
``stmatrix .trans`` turns the fragment's columns into rows of the user's D and a TMA store writes them
(``derive.store.epilogue``, :func:`~ptxgen.derive.store.epilogue.plan_store`); tiles it cannot clip exactly take these stores.
Refused for what would store D another way: a TMA store of 32-bit or 8-bit outputs, a fused chain,
split-K (not derived with an M-major D), batched and grouped kernels, and tcgen05 (its epilogue warps store TMEM rows
as 16-byte vectors; not derived there). Block FP8's 1x128x128 kernels take it (their promoted accumulator goes
through the same epilogue): ``ptxgen.api.fp8blocks``'s 128x128 x 1x128 recipe runs them on (b, a) and writes D^T
M-major into the row-major out.

The address rule is rendered here into C expressions (``offset_expr``, ``next_col_expr``); the template only places
them. ``ptxgen.model.layouts.outmodel`` checks, independently, that every element of D is stored once, at its address.

>>> n, m = plan_direct_store(DMajor.N), plan_direct_store(DMajor.M)
>>> n.offset_expr, n.vector_pair, m.offset_expr, m.next_col_expr
('static_cast<size_t>(row) * ldd + col', True, 'static_cast<size_t>(col) * ldd + row', 'ldd')
>>> m.offset(row=3, col=2, ldd=10), n.offset(row=3, col=2, ldd=10)
(23, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.ptxref import cite
from ...isa.types import Arch, Batch, DMajor, DType, Epilogue, Grouping, SpecError
from ...isa.epiops import Fp8Blocks
from ..tile.derived import Derived

ROW_VECTOR_ALIGN_BYTES = 16  # row-major D: the epilogue's vector stores need rows (and D) 16-byte aligned


@dataclass(frozen=True)
class DirectStore:
    """The direct epilogue's address rule for D, as C expressions in ``row``, ``col`` (the element's coordinates in the
    kernel's M x N result) and ``ldd``."""

    d_major: DMajor
    offset_expr: str  # elements from D's base to element (row, col)
    next_col_expr: str  # elements from (row, col) to (row, col + 1)
    vector_pair: bool  # (row, col) and (row, col + 1) are adjacent: one vector store of the pair
    ld_extent: str  # "N" or "M": ldd must be at least this
    ld_align_bytes: int  # ldd x element bytes (and D's address) must be a multiple of this (0: element alignment only)
    derivation: tuple[Derived, ...]

    def offset(self, row: int, col: int, ldd: int) -> int:
        """``offset_expr`` evaluated (the L1 check evaluates the expression itself; this is for callers)."""
        return (row * ldd + col) if self.d_major is DMajor.N else (col * ldd + row)

    def to_json(self) -> dict:
        return {"d_major": self.d_major.value, "offset": self.offset_expr, "next_col": self.next_col_expr,
                "vector_pair": self.vector_pair, "ldd_at_least": self.ld_extent}


def plan_direct_store(d_major: DMajor) -> DirectStore:
    if d_major is DMajor.N:
        return DirectStore(DMajor.N, "static_cast<size_t>(row) * ldd + col", "1", True, "N", ROW_VECTOR_ALIGN_BYTES, (
            Derived("d_layout", "row-major (N-major)", "D[i, j] at i x ldd + j, ldd >= N",
                    "a wgmma thread's two adjacent columns of a row are one vector store", cite("wgmma")),))
    return DirectStore(DMajor.M, "static_cast<size_t>(col) * ldd + row", "ldd", False, "M", 0, (
        Derived("d_layout", "M-major (column-major)", "D[i, j] at j x ldd + i, ldd >= M",
                "the kernel's rows are the user's columns (swap-AB: D^T = B A^T written into a row-major D)", cite("wgmma")),
        Derived("d_stores", "2 scalar stores per element pair", "(row, col) and (row, col + 1) are ldd elements apart",
                "the fragment's pair is not adjacent in memory; lanes 4q..4q+3 x 8 rows: a register's stores cover 8 "
                "consecutive rows (16 B of bf16) per column", cite("wgmma")),
        Derived("d_alignment", "element", "ldd and D need only the element's alignment",
                "no vector store spans two elements", cite("wgmma")),
    ))


def check_d_major(t) -> None:
    """SpecError where ``--d-major m`` meets something that stores D another way (called by ``rules.validate``)."""
    if t.d_major is DMajor.N:
        return
    refuse = [
        (t.arch is not Arch.SM90A, "--arch", t.arch.value, "tcgen05 epilogue warps store TMEM rows as 16-byte vectors of a "
         "row-major D; the M-major stores are derived for the wgmma fragment only", "--arch sm_90a"),
        (t.epilogue is Epilogue.TMA and t.out_dtype not in (DType.BF16, DType.F16), "--epilogue", t.epilogue.value,
         f"the TMA store of an M-major D transposes 16-bit outputs with stmatrix.trans (8x8 matrices of b16), here "
         f"{t.out_dtype.value}", "--out-dtype bf16|f16, or --epilogue direct"),
        (t.fuse is not None, "--fuse", t.fuse.token if t.fuse is not None else "", "the fused chain's C, residual, bias and "
         "scale reads are derived for row-major D", "leave out --fuse"),
        (t.split_k > 1, "--split-k", t.split_k, "split-K's last-arrival epilogue is derived for a row-major D", "--split-k 1"),
        (t.batch is not Batch.NONE, "--batch", t.batch.value, "batched D is addressed row-major per batch", "--batch none"),
        (t.grouped is not Grouping.NONE, "--grouped", t.grouped.value, "grouped D is addressed row-major per group",
         "--grouped none"),
        (t.fp8_blocks is Fp8Blocks.COLUMNS, "--fp8-blocks", t.fp8_blocks.value, "the 1x128 x 1x128 kernel's M-major D "
         "is not derived (the 1x128x128 kernels take it, for the 128x128 x 1x128 recipe)", "--fp8-blocks 1x128x128"),
    ]
    for bad, flag, value, why, legal in refuse:
        if bad:
            raise SpecError("--d-major", "m", f"M-major D with {flag} {value}: {why}", legal)
