"""The shared-memory layout of one operand stage (or of the store epilogue's staging buffer): a leaf module.

:class:`SmemLayout` maps a logical 16-byte cell (row, col) to a byte offset from the stage base, as a sum of
:class:`AddressTerm` and a swizzle. The operand layouts (ptxgen.derive.operands.operand), the TMA plan (tma) and the
store epilogue (epilogue) all build on it, so it imports nothing of ptxgen.derive.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...isa.types import AtomOrder, Major, Swizzle


@dataclass(frozen=True)
class AddressTerm:
    """``((coord >> shift) & (2**bits - 1)) * stride_bytes``; ``bits`` None means no mask."""

    coord: str  # "row" or "col"
    shift: int
    bits: int | None
    stride_bytes: int

    def value(self, row: int, col: int) -> int:
        v = (row if self.coord == "row" else col) >> self.shift
        if self.bits is not None:
            v &= (1 << self.bits) - 1
        return v * self.stride_bytes


@dataclass(frozen=True)
class SmemLayout:
    """The shared-memory layout of one operand stage: the one value per operand from which the MMA
    descriptors, the TMA tensor map and the cp.async store offsets are all derived.

    It maps logical 16-byte cell (row, col) to a byte offset from the stage base: ``linear`` is the
    canonical layout before the swizzle, ``physical`` applies it as a cp.async store does. The same
    terms render the cp.async loader's index expression (ptxgen.emit), so table and kernel agree.
    """

    rows: int
    cols: int
    row_dim: str  # "mn" or "k": what a row index counts
    terms: tuple[AddressTerm, ...]
    swizzle: Swizzle
    atom_rows: int  # rows of one swizzle atom (core matrix for none)
    atom_cols: int  # 16-byte cells in one atom row
    row_atom_stride_bytes: int  # between atoms adjacent along the row dimension
    col_atom_stride_bytes: int  # between atoms adjacent along the column dimension

    @property
    def atom_bytes(self) -> int:
        return self.atom_rows * self.atom_cols * 16

    @property
    def stage_bytes(self) -> int:
        return self.rows * self.cols * 16

    def linear(self, row: int, col: int) -> int:
        return sum(t.value(row, col) for t in self.terms)

    def physical(self, row: int, col: int) -> int:
        return self.swizzle.apply(self.linear(row, col))

    def table(self) -> list[list[int]]:
        """physical() of every cell, row by row (a fresh list; computed once per layout)."""
        return [list(row) for row in _table(self)]

    def formula(self, row: int, col: int) -> str:
        """The linear offset with the numbers put in, e.g. ``(2 >> 2) x 512 + (2 & 3) x 16 = 32``."""
        parts = []
        for t in self.terms:
            c = row if t.coord == "row" else col
            e = f"({c} >> {t.shift})" if t.shift else f"{c}"
            if t.bits is not None:
                e = f"({e} & {(1 << t.bits) - 1})" if t.shift else f"({c} & {(1 << t.bits) - 1})"
            parts.append(f"{e} x {t.stride_bytes}")
        return " + ".join(parts) + f" = {self.linear(row, col)}"


@lru_cache(maxsize=256)
def _table(layout: SmemLayout) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(layout.physical(r, c) for c in range(layout.cols)) for r in range(layout.rows))


def _log2(x: int) -> int:
    assert x > 0 and x & (x - 1) == 0, x
    return x.bit_length() - 1


def operand_stage(major: Major, swz: Swizzle, order: AtomOrder, mn: int, bk: int, per_cell: int) -> SmemLayout:
    """The layout of one operand stage (MN x K elements, ``per_cell`` to a 16-byte cell): rows are MN indices
    (K-major) or K indices (MN-major), tiled by ``swz``'s atoms, which lie adjacent along ``order``.

    ptxgen.derive.operands.operand derives the descriptors from it; the spec's cluster rule (ptxgen.derive.tile.rules) splits
    its TMA copies; both build it here."""
    k_major = major is Major.K
    rows, cols = (mn, bk // per_cell) if k_major else (bk, mn // per_cell)
    R, W = swz.atom_rows, swz.row_bytes // 16
    atom = swz.atom_bytes
    n_row_atoms, n_col_atoms = rows // R, cols // W
    # Which atom dimension is MN: rows for K-major, columns for MN-major.
    rows_are_mn = k_major
    along_rows = (order is AtomOrder.MN) == rows_are_mn  # atoms adjacent along the row dimension?
    if along_rows:
        row_atom_stride, col_atom_stride = atom, n_row_atoms * atom
    else:
        col_atom_stride, row_atom_stride = atom, n_col_atoms * atom

    terms = [AddressTerm("row", _log2(R), None, row_atom_stride), AddressTerm("row", 0, _log2(R), swz.row_bytes)]
    if W > 1:
        terms += [AddressTerm("col", _log2(W), None, col_atom_stride), AddressTerm("col", 0, _log2(W), 16)]
    else:
        terms += [AddressTerm("col", 0, None, col_atom_stride)]
    return SmemLayout(rows, cols, "mn" if k_major else "k", tuple(terms), swz, R, W, row_atom_stride, col_atom_stride)
