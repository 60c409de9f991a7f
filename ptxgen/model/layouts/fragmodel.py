"""An independent model of the register <-> matrix maps the TMA-store epilogues rely on.

It imports nothing from ptxgen. Transcribed from the PTX ISA:
  * the wgmma D fragment ('Matrix fragments for wgmma.mma_async .m64nNk*', accumulator D): in a warpgroup,
    warp w holds rows 16w..16w+15; thread t (lane) holds, for each group g of 8 columns, elements
    d[4g + 0], d[4g + 1] at row 16w + t/4, columns 8g + 2(t%4) + {0, 1}, and d[4g + 2], d[4g + 3] eight rows down;
  * stmatrix.sync.aligned.m8n8.x4.shared.b16 ('stmatrix'): four 8x8 matrices of 16-bit elements; thread t
    of the warp supplies the shared address of row t%8 of matrix t/8; its source register q holds the two
    elements of matrix q at row t/4, columns 2(t%4) and 2(t%4)+1 (the lower half is the first column);
  * stmatrix ... .trans ('stmatrix': "the matrix is stored in column-major format"): the same register map (register q of
    thread t: row t/4, columns 2(t%4), 2(t%4)+1 of matrix q), but lane 8q + c gives the address of *column* c of matrix q,
    and that column's 8 elements (rows 0..7) lie there 2 bytes apart; .x2 takes addresses from lanes 0..15, .x1 0..7;
  * ldmatrix.sync.aligned.m8n8.x4.shared.b16 ('ldmatrix'): the same matrices, addresses and register map, loading;
  * tcgen05.ld.sync.aligned.32x32b.xN ('tcgen05 Matrix fragments', shape 32x32b): warp w of the warpgroup
    accesses TMEM lanes 32w..32w+31; thread t reads lane 32w + t, register j holding column base + j; with
    an M=128 cta_group::1 accumulator, TMEM lane m holds row m of D ('Data path layout', layout D).

>>> wgmma_d_coords(warp=1, lane=5, i=7)    # group 1, second pair (8 rows down), second element
(25, 11)
>>> stmatrix_row_of_address(lane=13), stmatrix_register_cells(lane=13)
((1, 5), (3, 2))
"""

from __future__ import annotations

import numpy as np


def wgmma_d_coords(warp: int, lane: int, i: int) -> tuple[int, int]:
    """(row, column) of accumulator element d[i] of ``lane`` in warp ``warp`` of the warpgroup (64 x N tile)."""
    group, e = divmod(i, 4)
    row = 16 * warp + lane // 4 + (8 if e >= 2 else 0)
    col = 8 * group + 2 * (lane % 4) + (e % 2)
    return row, col


def stmatrix_row_of_address(lane: int) -> tuple[int, int]:
    """(matrix, row) whose 16-byte row address ``lane`` supplies to a .x4 stmatrix."""
    return lane // 8, lane % 8


def stmatrix_register_cells(lane: int) -> tuple[int, int]:
    """(row, first column) of the two elements that ``lane``'s source register q places in matrix q."""
    return lane // 4, 2 * (lane % 4)


def stmatrix_x4(image: np.ndarray, addresses: list[int], registers: list[tuple[int, int, int, int]]) -> None:
    """Perform one warp's ``stmatrix .x4``: ``addresses[t]`` from lane t, ``registers[t]`` its four 32-bit sources.
    Writes 4 matrices x 8 rows x 16 bytes into the byte image (little-endian 16-bit elements)."""
    rows = {}
    for lane in range(32):
        rows[stmatrix_row_of_address(lane)] = addresses[lane]
    for lane in range(32):
        r, c = stmatrix_register_cells(lane)
        for q in range(4):
            word = registers[lane][q] & 0xFFFFFFFF
            base = rows[(q, r)] + 2 * c
            image[base:base + 4] = np.frombuffer(word.to_bytes(4, "little"), dtype=np.uint8)


def stmatrix(image: np.ndarray, addresses: list[int], registers: list[tuple[int, ...]], matrices: int = 4,
             trans: bool = False) -> None:
    """One warp's ``stmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16``: lanes 0 .. 8 x matrices - 1 give the
    addresses (of rows, or with ``trans`` of columns); ``registers[t]`` holds lane t's ``matrices`` 32-bit sources."""
    if matrices not in (1, 2, 4):
        raise ValueError(f"stmatrix stores 1, 2 or 4 matrices, not {matrices}")
    where = {stmatrix_row_of_address(lane): addresses[lane] for lane in range(8 * matrices)}
    for lane in range(32):
        r, c = stmatrix_register_cells(lane)
        for q in range(matrices):
            word = registers[lane][q] & 0xFFFFFFFF
            for k, half in enumerate((word & 0xFFFF, word >> 16)):
                base = where[(q, c + k)] + 2 * r if trans else where[(q, r)] + 2 * (c + k)
                image[base:base + 2] = np.frombuffer(half.to_bytes(2, "little"), dtype=np.uint8)


def ldmatrix_x4(image: np.ndarray, addresses: list[int]) -> list[tuple[int, int, int, int]]:
    """Perform one warp's ``ldmatrix .x4`` (PTX 'ldmatrix': the same matrices and lane roles as stmatrix, the other
    direction): lane t supplies the address of row t%8 of matrix t/8; its destination register q receives the two
    elements of matrix q at row t/4, columns 2(t%4) and 2(t%4)+1 (the first column in the lower half)."""
    rows = {}
    for lane in range(32):
        rows[stmatrix_row_of_address(lane)] = addresses[lane]
    out = []
    for lane in range(32):
        r, c = stmatrix_register_cells(lane)
        out.append(tuple(int.from_bytes(image[rows[(q, r)] + 2 * c:rows[(q, r)] + 2 * c + 4].tobytes(), "little") for q in range(4)))
    return out


def tmem_32x32b_coords(warp: int, lane: int, reg: int, column0: int) -> tuple[int, int]:
    """(row of D, column) that register ``reg`` of ``lane`` holds after a 32x32b load at column ``column0`` (M=128)."""
    return 32 * warp + lane, column0 + reg
