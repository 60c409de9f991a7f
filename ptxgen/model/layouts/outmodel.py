"""An independent model of where the direct epilogue must store every accumulator element of D.

Imports nothing from ptxgen but its sibling ``fragmodel`` (the wgmma D fragment, transcribed from the PTX ISA).
Transcribed from what D means, not from the generator:

* D is the kernel's M x N result; row-major ("n"): element (i, j) lives at ``i * ldd + j``; M-major ("m",
  column-major, the memory of a row-major N x M matrix read transposed): at ``j * ldd + i``;
* a CTA's tile starts at (m0, n0); consumer warpgroup g holds rows 64 g .. 64 g + 63 of it, and its warp w, lane t,
  accumulator register i hold the element ``fragmodel.wgmma_d_coords(w, t, i)`` of that slab;
* elements with i >= M or j >= N are not part of D and must not be stored.

:func:`check_stores` takes what a kernel stores as plain data, ``(address, (row, col) of the register's element)``
per store, and reports every element of D that is missing, stored twice, stored at the wrong address, and every
store outside D.
"""

from __future__ import annotations

from . import fragmodel

SLAB_ROWS = 64  # rows of a wgmma m64nN accumulator: one consumer warpgroup
WARPS = 4  # warps of a warpgroup
LANES = 32


def address(d_major: str, row: int, col: int, ldd: int) -> int:
    """Element offset of D[row, col] by the layout's meaning."""
    if d_major == "n":
        return row * ldd + col
    if d_major == "m":
        return col * ldd + row
    raise ValueError(d_major)


def fragment_elements(bm: int, bn: int, m0: int, n0: int):
    """Every (slab, warp, lane, register i, (row, col) in D) of a BM x BN tile at (m0, n0): the register holdings."""
    for slab in range(bm // SLAB_ROWS):
        for warp in range(WARPS):
            for lane in range(LANES):
                for i in range(bn // 2):
                    r, c = fragmodel.wgmma_d_coords(warp, lane, i)
                    yield slab, warp, lane, i, (m0 + SLAB_ROWS * slab + r, n0 + c)


def check_stores(d_major: str, m: int, n: int, ldd: int, stores: list) -> list[str]:
    """Problems with ``stores`` (a list of (address, (row, col))) for an M x N D of layout ``d_major``: empty when every
    element of D is stored exactly once, at its address, and nothing else is stored."""
    problems = []
    seen: dict = {}
    for addr, (row, col) in stores:
        if not (0 <= row < m and 0 <= col < n):
            problems.append(f"stored element ({row}, {col}) outside the {m} x {n} D (at {addr})")
            continue
        want = address(d_major, row, col, ldd)
        if addr != want:
            problems.append(f"element ({row}, {col}) stored at {addr}, belongs at {want}")
        if (row, col) in seen:
            problems.append(f"element ({row}, {col}) stored twice")
        seen[(row, col)] = addr
    missing = m * n - len(seen)
    if missing:
        problems.append(f"{missing} of the {m * n} elements of D never stored")
    return problems
