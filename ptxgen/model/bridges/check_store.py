"""Bridge: the TMA-store epilogue's staging plan (ptxgen.derive.store.epilogue) against the independent models.

The writer side is the plan: which shared-memory address each lane gives each ``stmatrix`` and which
accumulator elements each register packs. The reader side is independent: the wgmma D fragment and the
``stmatrix`` semantics (model.layouts.fragmodel), and what a TMA store of D's box reads (model.layouts.tmamodel.read).
The check: for every chunk, the box the TMA store reads is exactly that chunk of the tile the warpgroup
holds in registers.
"""

from __future__ import annotations

import numpy as np

from ..layouts import fragmodel, outmodel, pairmodel, tmamodel
from .check_dstore import c_eval, simulate as simulate_direct
from ...derive.store.epilogue import SLAB_ROWS, StorePlan
from ...derive.store.output import DirectStore
from ...isa.tensormap import TMA_SWIZZLE_KEY

WARPS = SLAB_ROWS // 16


def fragment_values(tile: np.ndarray, warp: int, lane: int) -> np.ndarray:
    """The accumulator registers of ``lane`` of ``warp`` for a 64 x N ``tile`` (16-bit codes), by the model."""
    n = tile.shape[1]
    return np.array([tile[fragmodel.wgmma_d_coords(warp, lane, i)] for i in range(n // 2)], dtype=np.uint32)


def stage_chunk(plan: StorePlan, tile: np.ndarray, chunk: int, image: np.ndarray, base: int) -> None:
    """Run the plan's stmatrix calls for one chunk into ``image`` at ``base`` (what the kernel does)."""
    per_chunk = plan.chunk_cols // 2
    for warp in range(WARPS):
        frags = [fragment_values(tile, warp, lane) for lane in range(32)]
        for call in range(plan.stmatrix_per_chunk):
            addresses = [base + plan.stmatrix_offset(warp, lane, call) for lane in range(32)]
            regs = []
            for lane in range(32):
                words = []
                for q in range(4):
                    i0, i1 = plan.fragment_elements(call, q)
                    lo, hi = frags[lane][chunk * per_chunk + i0], frags[lane][chunk * per_chunk + i1]
                    words.append(int(lo) | (int(hi) << 16))
                regs.append(tuple(words))
            fragmodel.stmatrix_x4(image, addresses, regs)


# The pair writers' instructions (PTX ISA 'st'): bytes of each of the two elements one store writes, lowest address first
# (st.shared.b16: two e4m3 bytes, the first in the low byte, little-endian; st.shared.v2.f32: two 4-byte words). A vector
# or b16 access must be aligned to its whole size (PTX ISA 'Vectors': "aligned to a multiple of the access size").
PAIR_STORE_ELEMENT_BYTES = {"st.shared.b16": 1, "st.shared.v2.f32": 4}


def stage_chunk_pairs(plan: StorePlan, tile: np.ndarray, chunk: int, image: np.ndarray, base: int) -> list[str]:
    """e4m3 (``st.shared.b16``) and f32 (``st.shared.v2.f32``) on wgmma: each thread stores each pair of its fragment
    elements (the first at the lower address) at the plan's byte address; the model's fragment map says which elements a
    thread holds, the instruction's semantics how many bytes land where. Problems: a misaligned store."""
    eb = PAIR_STORE_ELEMENT_BYTES[plan.writer]
    per_chunk = plan.chunk_cols // 2
    problems = []
    for warp in range(WARPS):
        for lane in range(32):
            frag = fragment_values(tile, warp, lane)
            for g in range(plan.chunk_cols // 8):
                for h in range(2):
                    i0 = chunk * per_chunk + 4 * g + 2 * h
                    addr = base + plan.pair_offset(warp, lane, g, h)
                    if addr % (2 * eb) and len(problems) < 4:
                        problems.append(f"{plan.writer} of warp {warp} lane {lane} (group {g}, half {h}) at byte {addr}: "
                                        f"not {2 * eb}-byte aligned")
                    for j in range(2):
                        word = int(frag[i0 + j])
                        image[addr + j * eb:addr + (j + 1) * eb] = [(word >> (8 * b)) & 0xFF for b in range(eb)]
    return problems


def stage_chunk_tmem(plan: StorePlan, tile: np.ndarray, chunk: int, image: np.ndarray, base: int, tmem_chunk: int) -> None:
    """The tcgen05 epilogue warps' writes for one chunk: each warp loads its rows out of TMEM ``tmem_chunk`` columns at a
    time (the model's 32x32b map) and stores each 16-byte cell of a row where the plan puts it."""
    for warp in range(plan.storers):
        for h in range(plan.chunk_cols // tmem_chunk):
            col0 = chunk * plan.chunk_cols + h * tmem_chunk
            for lane in range(32):
                regs = [tile[fragmodel.tmem_32x32b_coords(warp, lane, j, col0)] for j in range(tmem_chunk)]
                for q in range(tmem_chunk // 8):
                    cell = h * (tmem_chunk // 8) + q
                    words = [int(regs[8 * q + 2 * i]) | (int(regs[8 * q + 2 * i + 1]) << 16) for i in range(4)]
                    addr = base + warp * plan.storer_bytes + plan.row_cell_offset(lane, cell)
                    image[addr:addr + 16] = np.frombuffer(b"".join(w.to_bytes(4, "little") for w in words), dtype=np.uint8)


def check_store_plan(plan: StorePlan, bn: int, seed: int = 0, base: int = 0, tmem_chunk: int = 32) -> list[str]:
    """Problems (empty when the TMA store of every chunk reads back that chunk of a random tile: 64 x ``bn`` per
    wgmma warpgroup slab, or 128 x ``bn`` over the four tcgen05 epilogue warps)."""
    rng = np.random.default_rng(seed)
    tmem = not plan.wgmma
    rows = plan.rows * plan.storers if tmem else SLAB_ROWS
    tile = rng.integers(1, 1 << (8 * plan.tma.element_bytes), size=(rows, bn), dtype=np.uint32)
    tma = {"swizzle": plan.tma.swizzle.json_name, "box": list(plan.tma.box), "copies": [c.to_json() for c in plan.tma.copies]}
    problems = []
    for chunk in range(bn // plan.chunk_cols):
        image = np.zeros(base + plan.storer_bytes * (plan.storers if tmem else 1), dtype=np.uint8)
        if tmem:
            stage_chunk_tmem(plan, tile, chunk, image, base, tmem_chunk)
        elif plan.writer in PAIR_STORE_ELEMENT_BYTES:
            problems += stage_chunk_pairs(plan, tile, chunk, image, base)
        else:
            stage_chunk(plan, tile, chunk, image, base)
        for s in range(plan.storers if tmem else 1):
            got = tmamodel.read(tma, plan.tma.element_bytes, base + s * plan.storer_bytes, image, anchor=TMA_SWIZZLE_KEY)[0]
            r0 = s * plan.rows
            want = tile[r0:r0 + plan.rows, chunk * plan.chunk_cols:(chunk + 1) * plan.chunk_cols]
            problems += _compare(got, want, f"chunk {chunk}" + (f", warp {s}" if tmem else ""))
    return problems


def check_tma_store_problem(plan: StorePlan, direct: DirectStore, bm: int, bn: int, m: int, n: int, ldd: int,
                            base: int = 0) -> list[str]:
    """wgmma, row-major D (the row-major twin of model.bridges.check_mstore): problems, empty when every element of an ``m`` x
    ``n`` D (rows ``ldd`` elements apart) is stored exactly once, at its address, and nothing outside D is written.

    From the plan: the rule that sends a tile through TMA (``use_tma_c_expr``, the kernel's C condition), each chunk's
    staging writes (stmatrix or the pair stores), the tensor map, where each chunk's box goes ((n0 + chunk x C, m0 + 64 x
    slab), as the kernel issues it) and, for the other tiles, the direct stores (model.bridges.check_dstore.simulate). Independent:
    which element each register holds (each staged element carries a code naming its row and column in D), what a TMA
    store reads and writes, clipped at D's extents as the H200 was measured to clip (``tmamodel.store``: a box crossing
    column N also writes up to the next 16-byte boundary), and where each element belongs (``outmodel``)."""
    eb = plan.tma.element_bytes
    cols = -(-n // bn) * bn
    if (-(-m // bm) * bm) * cols + 1 >= 1 << (8 * eb):
        raise ValueError(f"{m} x {n} in {bm} x {bn} tiles: the element codes do not fit {eb}-byte outputs")
    tma = {"swizzle": plan.tma.swizzle.json_name, "box": list(plan.tma.box), "copies": [c.to_json() for c in plan.tma.copies]}
    cond = plan.use_tma_c_expr.replace("||", " or ")
    stores, problems, direct_stores = [], [], None
    for m0 in range(0, m, bm):
        for n0 in range(0, n, bn):
            if not c_eval(cond, m0=m0, n0=n0, M=m, N=n):
                if direct_stores is None:
                    direct_stores = simulate_direct(direct, bm, bn, m, n, ldd)
                stores += [s for s in direct_stores if m0 <= s[1][0] < m0 + bm and n0 <= s[1][1] < n0 + bn]
                continue
            rows = np.arange(m0, m0 + bm, dtype=np.int64)[:, None]
            codes = (rows * cols + np.arange(n0, n0 + bn, dtype=np.int64)[None, :] + 1).astype(np.uint32)
            for slab in range(bm // SLAB_ROWS):
                tile = codes[SLAB_ROWS * slab:SLAB_ROWS * (slab + 1)]
                for chunk in range(bn // plan.chunk_cols):
                    image = np.zeros(base + plan.storer_bytes, dtype=np.uint8)
                    if plan.writer in PAIR_STORE_ELEMENT_BYTES:
                        problems += stage_chunk_pairs(plan, tile, chunk, image, base)
                    else:
                        stage_chunk(plan, tile, chunk, image, base)
                    origin = (n0 + chunk * plan.chunk_cols, m0 + SLAB_ROWS * slab)  # the box's (inner, outer) coordinates
                    for off, code in tmamodel.store(tma, eb, base, image, origin, (n, m), ldd, anchor=TMA_SWIZZLE_KEY):
                        stores.append((off, divmod(code - 1, cols) if code else (-1, -1)))  # -1: staging nothing wrote
            if len(problems) > 8:
                return problems
    return problems + outmodel.check_stores("n", m, n, ldd, stores)[:8]


def _warp_origin(expr: str, warp: int) -> int:
    """Evaluate one of the plan's C/Python integer expressions in ``warp`` (``/`` is C's integer division)."""
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, {"warp": warp}))


def check_pair_store_plan(plan: StorePlan, bm: int, bn: int, seed: int = 0, base: int = 0, tmem_chunk: int = 32) -> list[str]:
    """The TMA-store epilogue of a CTA pair (``--cta-group 2``): problems, empty when the two CTAs' stores together
    write every element of a random ``bm`` x ``bn`` tile exactly once, with its value.

    Independent of the plan: where the pair MMA leaves each element of D (``pairmodel.d_home``: CTA, TMEM lane,
    column; Layouts A and B) and what a ``tcgen05.ld 32x32b`` of warp w reads (lanes 32w..32w+31,
    ``fragmodel``). From the plan: the staging writes, the tensor map, and where each warp's box goes (its first row
    within its CTA's rows, its first column)."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(1, 1 << 16, size=(bm, bn), dtype=np.uint32)
    ctas = 2
    tmem = np.zeros((ctas, 128, bn), dtype=np.uint32)  # 0: a TMEM cell the MMA did not write
    for row in range(bm):
        for col in range(bn):
            cta, lane, c = pairmodel.d_home(2, row, col, bm, bn)
            tmem[cta, lane, c] = tile[row, col]
    tma = {"swizzle": plan.tma.swizzle.json_name, "box": list(plan.tma.box), "copies": [c.to_json() for c in plan.tma.copies]}
    seen = np.zeros((bm, bn), dtype=np.int64)
    problems = []
    for cta in range(ctas):
        for chunk in range(plan.chunks_per_slab):
            image = np.zeros(base + plan.storer_bytes * plan.storers, dtype=np.uint8)
            stage_chunk_tmem(plan, tmem[cta], chunk, image, base, tmem_chunk)
            for w in range(plan.storers):
                got = tmamodel.read(tma, plan.tma.element_bytes, base + w * plan.storer_bytes, image, anchor=TMA_SWIZZLE_KEY)[0]
                r0 = cta * (bm // ctas) + _warp_origin(plan.warp_row0_expr, w)
                c0 = _warp_origin(plan.warp_col0_expr, w) + chunk * plan.chunk_cols
                where = f"CTA {cta}, warp {w}, chunk {chunk} (D rows {r0}.., columns {c0}..)"
                if r0 < 0 or c0 < 0 or r0 + got.shape[0] > bm or c0 + got.shape[1] > bn:
                    problems.append(f"{where}: the box lies outside the {bm} x {bn} tile")
                    continue
                problems += _compare(got, tile[r0:r0 + got.shape[0], c0:c0 + got.shape[1]], where)
                seen[r0:r0 + got.shape[0], c0:c0 + got.shape[1]] += 1
            if len(problems) > 8:
                return problems
    if not problems and not np.all(seen == 1):
        problems.append(f"{int(np.count_nonzero(seen == 0))} elements of D never stored, {int(np.count_nonzero(seen > 1))} stored twice")
    return problems


def _compare(got: np.ndarray, want: np.ndarray, where: str) -> list[str]:
    if got.shape != want.shape:
        return [f"{where}: the TMA store reads a {got.shape[0]} x {got.shape[1]} box, the chunk is {want.shape[0]} x {want.shape[1]}"]
    bad = np.argwhere(got != want)
    if not len(bad):
        return []
    r, c = bad[0]
    return [f"{where}: the TMA store reads {int(got[r, c]):#06x} at row {r}, column {c}, the tile holds {int(want[r, c]):#06x} "
            f"({len(bad)} of {want.size} elements differ)"]
