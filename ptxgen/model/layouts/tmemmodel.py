"""An independent model of tensor memory (TMEM) as the Blackwell attention forward uses it: which lane and column hold
each element of S, P and O, written and read by the MMAs and by the softmax threads.

It imports nothing from ptxgen. Transcribed from the PTX ISA (tcgen05, "Tensor Memory", "Matrix fragments for shape
.32x32b", "Data path layout organization", cvt) and read against CuTe's traits (``cute/atom/mma_traits_sm100_frag.hpp``:
``tmem_frg`` with M = 128 puts row m on data path m; the TS forms' A fragment is ``tmem_frg_1sm<a_type, a_type>``, so
consecutive K elements of a row are consecutive 16-bit halves, two to a 32-bit column):

* a TMEM address holds the lane in bits 31..16 and the column in bits 15..0; a cell is 32 bits;
* ``tcgen05.ld/st .32x32b.xN``: warp w of a warpgroup may access lanes 32 (w % 4) .. 32 (w % 4) + 31 only; the warp's
  thread t touches lane (address lane) + t, register j column (address column) + j;
* ``tcgen05.mma.cta_group::1`` with M = 128 (data path layout D): D[m][n] (32-bit) is at lane (d lane) + m, column
  (d column) + n;
* the same MMA with A in TMEM (16-bit A): A[m][k] is at lane (a lane) + m, column (a column) + k / 2, in the lower 16
  bits for even k and the upper for odd k (K = 16 a step: 8 columns);
* ``cvt.rn.bf16x2.f32 d, a, b`` (and ``.f16x2``): a goes to the upper half of d, b to the lower.

``Tmem`` stores tagged values so that a test can follow each element from where the MMA wrote it to where the next MMA
reads it.
"""

from __future__ import annotations

LANES = 128
COLUMNS = 512
LANE_SHIFT = 16
COLUMN_MASK = (1 << LANE_SHIFT) - 1
WARP_LANES = 32


def split(address: int) -> tuple[int, int]:
    """(lane, column) of a TMEM address."""
    return address >> LANE_SHIFT, address & COLUMN_MASK


def warp_lane_quarter(warp: int) -> int:
    """The first lane warp ``warp`` of its warpgroup may access with tcgen05.ld / st."""
    return WARP_LANES * (warp % 4)


class Tmem:
    """Cells of 32 bits, each a pair of 16-bit halves (lower, upper) or one 32-bit value, keyed by (lane, column)."""

    def __init__(self, columns: int = COLUMNS):
        self.columns = columns
        self.cells: dict[tuple[int, int], object] = {}

    def _check(self, lane: int, column: int) -> None:
        if not (0 <= lane < LANES and 0 <= column < self.columns):
            raise AssertionError(f"TMEM cell (lane {lane}, column {column}) outside {LANES} x {self.columns}")

    def put(self, lane: int, column: int, value) -> None:
        self._check(lane, column)
        self.cells[(lane, column)] = value

    def get(self, lane: int, column: int):
        self._check(lane, column)
        if (lane, column) not in self.cells:
            raise AssertionError(f"TMEM cell (lane {lane}, column {column}) read before it was written")
        return self.cells[(lane, column)]

    # -- the MMA's accumulator and its A operand (M = 128, cta_group::1) --------------------------------------------
    def mma_write_d(self, address: int, d) -> None:
        """D (a 128 x N list of rows) written at ``address``: D[m][n] at lane + m, column + n."""
        lane0, col0 = split(address)
        for m, row in enumerate(d):
            for n, v in enumerate(row):
                self.put(lane0 + m, col0 + n, v)

    def mma_read_a16(self, address: int, rows: int = 128, k: int = 16) -> list[list]:
        """The rows x k 16-bit A matrix an MMA with A in TMEM reads at ``address``: A[m][k] in column k / 2 of lane m,
        the lower half for even k."""
        lane0, col0 = split(address)
        out = []
        for m in range(rows):
            row = []
            for kk in range(k):
                cell = self.get(lane0 + m, col0 + kk // 2)
                if not (isinstance(cell, tuple) and len(cell) == 2):
                    raise AssertionError(f"A element ({m}, {kk}) read from a cell that holds no 16-bit pair: {cell!r}")
                row.append(cell[kk % 2])  # (lower, upper)
            out.append(row)
        return out

    # -- a warp's loads and stores -------------------------------------------------------------------------------
    def _lanes(self, warp: int, address: int) -> tuple[int, int]:
        lane0, col0 = split(address)
        if lane0 != warp_lane_quarter(warp):
            raise AssertionError(f"warp {warp} addresses lane {lane0}: a warp may access lanes "
                                 f"{warp_lane_quarter(warp)}..{warp_lane_quarter(warp) + WARP_LANES - 1} only")
        return lane0, col0

    def ld_32x32b(self, warp: int, address: int, num: int) -> list[list]:
        """tcgen05.ld.32x32b.x``num`` by warp ``warp``: [thread t][register j] = cell (lane + t, column + j)."""
        lane0, col0 = self._lanes(warp, address)
        return [[self.get(lane0 + t, col0 + j) for j in range(num)] for t in range(WARP_LANES)]

    def st_32x32b(self, warp: int, address: int, registers: list[list]) -> None:
        """tcgen05.st.32x32b.xN by warp ``warp``: thread t's register j to cell (lane + t, column + j)."""
        lane0, col0 = self._lanes(warp, address)
        assert len(registers) == WARP_LANES
        for t, regs in enumerate(registers):
            for j, v in enumerate(regs):
                self.put(lane0 + t, col0 + j, v)


def cvt_bf16x2(a, b) -> tuple:
    """The register ``cvt.rn.bf16x2.f32 d, a, b`` (or ``.f16x2``) writes, as (lower half, upper half): b lower, a
    upper."""
    return (b, a)
