"""Which operand elements of a fused epilogue chain each thread loads, and which of its accumulator registers each
one feeds: the wgmma D fragment's (ptxgen.isa.fragment) and tcgen05's 32x32b TMEM loads. Read by the chain's plan
(derive.store.fusion), block FP8's per-column scales (derive.scaled.blockfp8) and the checks that model them."""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.epiops import BiasAxis, ScaleMode
from ...isa.fragment import LANES_PER_ROW, WGMMA_GROUP_COLS, WGMMA_ROW_HALF, WGMMA_WARP_ROWS
from .chainspec import ChainSpec


@dataclass(frozen=True)
class Load:
    """One load of consecutive operand elements by one thread.

    ``row``/``col``: tile-relative (wgmma: relative to the 64-row slab) coordinates of the first element; a column
    vector (bias per column) has no row, a row vector (bias or scale per row) no column, a per-tensor scalar
    neither. Consecutive elements run along the columns. ``targets[k]``: the accumulator registers (fragment
    element indices; tcgen05: registers of the 32x32b load) that element k feeds."""

    operand: str
    row: int | None
    col: int | None
    targets: tuple[tuple[int, ...], ...]

    @property
    def count(self) -> int:
        return len(self.targets)

    def to_json(self) -> list:
        return [self.operand, self.row, self.col, [list(t) for t in self.targets]]


ROWSCALE_AXES = {"scale_a": "r", "scale_b": "c"}  # rowscale: scale_a per row of D (A's rows), scale_b per column


def _axis(chain: ChainSpec, operand: str) -> str:
    """'rc' (a matrix), 'c' (indexed by column), 'r' (by row) or '' (one scalar)."""
    if operand in ("c", "residual", "aux"):
        return "rc"
    if operand == "bias":
        return "c" if chain.bias is BiasAxis.COL else "r"
    if operand in ROWSCALE_AXES:
        return ROWSCALE_AXES[operand]
    if operand == "scale":
        return "r" if chain.fp8_scale is ScaleMode.ROW else ""
    raise ValueError(operand)


def wgmma_loads(chain: ChainSpec, operand: str, warp: int, lane: int, bn: int) -> tuple[Load, ...]:
    """The loads of ``operand`` by ``lane`` of ``warp`` for one m64nBN slab. The thread's registers, per group g of
    8 columns: 4g, 4g+1 = row 16w + lane/4, columns 8g + 2(lane%4) + {0, 1}; 4g+2, 4g+3 = the same columns 8 rows
    down. A pair of columns is one load (4 B for 16-bit, 8 B for f32) that feeds both rows when the operand does not
    depend on the row."""
    axis = _axis(chain, operand)
    row0 = WGMMA_WARP_ROWS * warp + lane // LANES_PER_ROW
    groups = bn // WGMMA_GROUP_COLS
    upper = tuple(i for g in range(groups) for i in (4 * g, 4 * g + 1))
    lower = tuple(i for g in range(groups) for i in (4 * g + 2, 4 * g + 3))
    if axis == "":
        return (Load(operand, None, None, (upper + lower,)),)
    if axis == "r":
        return (Load(operand, row0, None, (upper,)), Load(operand, row0 + WGMMA_ROW_HALF, None, (lower,)))
    loads = []
    for g, (col, targets) in enumerate(wgmma_column_pairs(lane, bn)):
        if axis == "c":
            loads.append(Load(operand, None, col, targets))
        else:
            loads.append(Load(operand, row0, col, ((4 * g,), (4 * g + 1,))))
            loads.append(Load(operand, row0 + WGMMA_ROW_HALF, col, ((4 * g + 2,), (4 * g + 3,))))
    return tuple(loads)


def wgmma_column_pairs(lane: int, bn: int) -> tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]:
    """Per register group g of an m64nBN D fragment, the first of the two adjacent columns ``lane`` holds and the
    registers of each: ((8g + 2(lane%4), ((4g, 4g+2), (4g+1, 4g+3))), ...): column c in registers 4g (row r) and 4g+2
    (row r + 8), column c + 1 in 4g+1 and 4g+3 (used by column operands of the chain and by block FP8's per-column
    B scales, derive.scaled.blockfp8)."""
    return tuple((WGMMA_GROUP_COLS * g + 2 * (lane % LANES_PER_ROW), ((4 * g, 4 * g + 2), (4 * g + 1, 4 * g + 3)))
                 for g in range(bn // WGMMA_GROUP_COLS))


def tmem_row(bm: int, warp: int, lane: int) -> int | None:
    """Row of D that ``lane`` of epilogue warp ``warp`` holds after tcgen05.ld 32x32b (None: a lane with no row).
    M=128: lane 32w + t is row 32w + t; M=64: rows 16w..16w+15 are lanes 32w..32w+15."""
    if bm == 128:
        return 32 * warp + lane
    return 16 * warp + lane if lane < 16 else None


def tmem_loads(chain: ChainSpec, operand: str, bm: int, warp: int, lane: int, col0: int, chunk: int) -> tuple[Load, ...]:
    """The loads of ``operand`` for one ``tcgen05.ld 32x32b.x<chunk>`` at column ``col0``: register j is column col0 + j
    of the thread's row. A column vector or a matrix row is read a column pair at a time (registers 2p, 2p + 1);
    a row vector or a per-tensor scalar is read once per tile and feeds every register."""
    axis = _axis(chain, operand)
    row = tmem_row(bm, warp, lane)
    if row is None:
        return ()
    if axis in ("", "r"):
        return (Load(operand, row if axis else None, None, (tuple(range(chunk)),)),)
    return tuple(Load(operand, None if axis == "c" else row, col0 + j, ((j,), (j + 1,))) for j in range(0, chunk, 2))
