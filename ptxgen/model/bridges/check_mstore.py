"""Bridge: the TMA-store epilogue of an M-major D (``derive.store.epilogue``, writer ``stmatrix.trans``) against the
independent models, over a whole problem.

The writer side is the plan: the address expressions each lane gives each ``stmatrix.trans`` call (evaluated here as
Python), which accumulator elements each register packs, the staging layout's swizzled cell offsets, the tensor map's
box and swizzle, where each chunk's box goes (``(m0 + 64 x slab, n0 + chunk x C)``), the rule that sends a tile through
TMA (``use_tma_c_expr``) and, for the other tiles, the direct M-major stores (``check_dstore``). The reader side is
independent: which element each register holds (``fragmodel.wgmma_d_coords``), what ``stmatrix .trans`` writes
(``fragmodel.stmatrix``), what a TMA store reads and writes, clipped at D's extents as the hardware was measured to
clip (``tmamodel.store``), and where each element of the user's row-major D belongs (``outmodel.address``, "m").

Every staged element carries a code naming it (1 + its index in the chunk), so each element the TMA store writes says
which accumulator element it is; code 0 is staging the chunk never wrote.

The controls a test runs (each must produce problems): ``trans=False`` (the plain stmatrix: the chunk lands
untransposed), ``box_order="swapped"`` (the box's dimensions and coordinates the other way round: a row-major map),
``edge_rule=False`` (every tile through TMA: the measured overrun past a non-16-byte inner end lands outside D).
"""

from __future__ import annotations

import numpy as np

from ..layouts import fragmodel, outmodel, tmamodel
from .check_dstore import c_eval, simulate as simulate_direct
from ...derive.store.epilogue import StorePlan
from ...derive.store.output import DirectStore
from ...isa.tensormap import TMA_SWIZZLE_KEY

SLAB_ROWS = outmodel.SLAB_ROWS
WARPS = outmodel.WARPS
LANES = outmodel.LANES


def _tma_dict(plan: StorePlan, box_order: str) -> dict:
    box = list(plan.tma.box)
    if box_order == "swapped":
        box = box[::-1]
    return {"swizzle": plan.tma.swizzle.json_name, "box": box, "copies": [c.to_json() for c in plan.tma.copies]}


def stage_chunk(plan: StorePlan, chunk: int, trans: bool = True) -> np.ndarray:
    """The staging buffer after every warp's stmatrix.trans calls for ``chunk`` of a slab, each element coded
    1 + (slab row) x C + (column in the chunk) by the fragment model."""
    image = np.zeros(plan.buffer_bytes, dtype=np.uint8)
    per_chunk = plan.fragment_elements_per_chunk
    c0 = chunk * plan.chunk_cols
    for warp in range(WARPS):
        for call in plan.trans_calls:
            addresses = [plan.staging.physical(c_eval(call.row_expr, warp=warp, lane=lane), c_eval(call.cell_expr, warp=warp, lane=lane))
                         if lane < 8 * call.matrices else -1 for lane in range(LANES)]
            regs = []
            for lane in range(LANES):
                words = []
                for q in range(call.matrices):
                    codes = []
                    for i in call.elements(q):
                        r, c = fragmodel.wgmma_d_coords(warp, lane, chunk * per_chunk + i)
                        codes.append(1 + r * plan.chunk_cols + (c - c0) if c0 <= c < c0 + plan.chunk_cols else 0xFFFF)
                    words.append(codes[0] | (codes[1] << 16))
                regs.append(tuple(words))
            fragmodel.stmatrix(image, addresses, regs, call.matrices, trans=trans)
    return image


def simulate(plan: StorePlan, direct: DirectStore, bm: int, bn: int, m: int, n: int, ldd: int, *, trans: bool = True,
             box_order: str = "plan", edge_rule: bool = True) -> list:
    """What the kernel stores for an M x N problem (the kernel's M and N; D M-major, columns ``ldd`` apart): a list of
    (element offset, (row, col) of the accumulator element stored there; (-1, -1) for unwritten staging)."""
    assert plan.m_major, "an M-major store plan"
    tma = _tma_dict(plan, box_order)
    eb = plan.tma.element_bytes
    direct_stores = None
    stores = []
    cond = plan.use_tma_c_expr.replace("||", " or ")
    for m0 in range(0, m, bm):
        for n0 in range(0, n, bn):
            if edge_rule and not c_eval(cond, m0=m0, n0=n0, M=m, N=n):
                if direct_stores is None:
                    direct_stores = simulate_direct(direct, bm, bn, m, n, ldd)
                stores += [s for s in direct_stores if m0 <= s[1][0] < m0 + bm and n0 <= s[1][1] < n0 + bn]
                continue
            for slab in range(bm // SLAB_ROWS):
                for chunk in range(plan.chunks_per_slab):
                    image = stage_chunk(plan, chunk, trans)
                    first = (m0 + SLAB_ROWS * slab, n0 + chunk * plan.chunk_cols)  # the chunk's first (row, col)
                    origin = first[::-1] if box_order == "swapped" else first  # the box's (inner, outer) coordinates
                    for off, code in tmamodel.store(tma, eb, 0, image, origin, (m, n), ldd, anchor=TMA_SWIZZLE_KEY):
                        if code == 0 or code == 0xFFFF:
                            stores.append((off, (-1, -1)))
                            continue
                        r, c = divmod(code - 1, plan.chunk_cols)
                        stores.append((off, (first[0] + r, first[1] + c)))
    return stores


def check_m_major_store(plan: StorePlan, direct: DirectStore, bm: int, bn: int, m: int, n: int, ldd: int, **controls) -> list[str]:
    """Problems (empty: none): every element of the kernel's M x N D stored exactly once, at ``col x ldd + row`` (the
    user's row-major D), nothing else written."""
    try:
        stores = simulate(plan, direct, bm, bn, m, n, ldd, **controls)
    except ValueError as e:  # the TMA model refuses the map or box (e.g. a box wider than its swizzle span)
        return [f"the TMA store cannot be made: {e}"]
    return outmodel.check_stores("m", m, n, ldd, stores)
