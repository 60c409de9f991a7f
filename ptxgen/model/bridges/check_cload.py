"""Bridge: C through TMA (``--fuse c=tma``, ptxgen.derive.store.cload) against the independent models.

From the plan: C's tensor map (box, swizzle, copies), where each chunk's box starts (``box_origin``), the ldmatrix
addresses (the store's stmatrix addresses) and which accumulator elements each register feeds (the store's
``fragment_elements``), the mbarrier phase each load waits for, and the buffer each chunk uses. Independent: what a
TMA load writes (model.layouts.tmamodel.write), what ldmatrix reads and the wgmma D fragment (model.layouts.fragmodel), the
mbarrier (model.sim.mbarrier). Two checks:

* ``check_c_reads`` (wgmma) and ``check_c_reads_tmem`` (tcgen05): every accumulator element of every thread receives C
  at its own output element (global row, column), zero outside M x N, for every chunk of a tile at an arbitrary origin
  of an M x N problem;
* ``check_c_order``: one warpgroup's chunks in program order with the loads and stores in flight: no C load overwrites
  a buffer a TMA store still reads, no thread reads C before its load completed, no thread waits forever.
"""

from __future__ import annotations

import numpy as np

from ..layouts import fragmodel, tmamodel
from ..sim.mbarrier import MBarrier
from ...derive.store.cload import CLoadPlan
from ...derive.store.epilogue import SLAB_ROWS, StorePlan
from ...isa.tensormap import TMA_SWIZZLE_KEY

WARPS = SLAB_ROWS // 16
BASE = 1024  # a staging buffer's address in the model's image (the plan puts buffers on the 1024-byte repeat)


def check_c_reads(cplan: CLoadPlan, store: StorePlan, bn: int, m: int, n: int, m0: int, n0: int, slab_row0: int = 0,
                  seed: int = 0) -> list[str]:
    """Problems (empty when right): each chunk of the slab at tile rows ``slab_row0``.. of the tile at (m0, n0)."""
    rng = np.random.default_rng(seed)
    c = rng.permutation(np.arange(1, m * n + 1) % 65521 + 1).reshape(m, n).astype(np.uint16)  # distinct where m n < 65521
    tma = {"swizzle": cplan.tma.swizzle.json_name, "box": list(cplan.tma.box), "copies": [x.to_json() for x in cplan.tma.copies]}
    per_chunk = store.chunk_cols // 2
    problems = []
    for chunk in range(bn // store.chunk_cols):
        image = np.zeros(BASE + store.buffer_bytes, dtype=np.uint8)
        dx, dy = cplan.box_origin(chunk, slab_row0)
        tmamodel.write(tma, cplan.tma.element_bytes, BASE, (n0 + dx, m0 + dy), c, image, anchor=TMA_SWIZZLE_KEY)
        for warp in range(WARPS):
            for call in range(store.stmatrix_per_chunk):
                regs = fragmodel.ldmatrix_x4(image, [BASE + store.stmatrix_offset(warp, lane, call) for lane in range(32)])
                for lane in range(32):
                    for q in range(4):
                        i0, i1 = store.fragment_elements(call, q)
                        for half, i in ((0, i0), (1, i1)):
                            got = (regs[lane][q] >> (16 * half)) & 0xFFFF
                            r, col = fragmodel.wgmma_d_coords(warp, lane, chunk * per_chunk + i)
                            gr, gc = m0 + slab_row0 + r, n0 + col
                            want = int(c[gr, gc]) if gr < m and gc < n else 0
                            if got != want:
                                problems.append(f"chunk {chunk}, warp {warp}, lane {lane}, element {chunk * per_chunk + i} "
                                                f"(output ({gr}, {gc})): C register holds {got:#06x}, C there is {want:#06x}")
                                if len(problems) > 8:
                                    return problems
    return problems


def _warp_origin(expr: str, warp: int) -> int:
    """Evaluate one of the store plan's C/Python integer expressions in ``warp`` (``/`` is C's integer division)."""
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, {"warp": warp}))


def check_c_reads_tmem(cplan: CLoadPlan, store: StorePlan, bn: int, m: int, n: int, m0: int, n0: int, tmem_chunk: int = 32,
                       seed: int = 0) -> list[str]:
    """tcgen05 (epilogue warps, ``tcgen05.ld 32x32b``): problems (empty when right). Per chunk and warp: the C box at the
    plan's origin for the warp's first row (the store plan's ``warp_row0_expr``), written by the TMA model; each thread
    reads its row's cells at the store plan's addresses into words (cell q = words 4q..4q+3); register i of TMEM load h
    takes the word ``row_word(h x tmem_chunk + i)``; the model's 32x32b map says which element of D that register is."""
    rng = np.random.default_rng(seed)
    c = rng.permutation(np.arange(1, m * n + 1) % 65521 + 1).reshape(m, n).astype(np.uint16)
    tma = {"swizzle": cplan.tma.swizzle.json_name, "box": list(cplan.tma.box), "copies": [x.to_json() for x in cplan.tma.copies]}
    problems = []
    for chunk in range(bn // store.chunk_cols):
        for warp in range(store.storers):
            row0 = _warp_origin(store.warp_row0_expr, warp)
            image = np.zeros(BASE + store.buffer_bytes, dtype=np.uint8)
            dx, dy = cplan.box_origin(chunk, row0)
            tmamodel.write(tma, cplan.tma.element_bytes, BASE, (n0 + dx, m0 + dy), c, image, anchor=TMA_SWIZZLE_KEY)
            for lane in range(32):
                words = []
                for cell in range(store.staging.cols):
                    at = BASE + store.row_cell_offset(lane, cell)
                    words += [int.from_bytes(image[at + 4 * w:at + 4 * w + 4].tobytes(), "little") for w in range(4)]
                for h in range(store.chunk_cols // tmem_chunk):
                    for i in range(tmem_chunk):
                        got = (words[cplan.row_word(h * tmem_chunk + i)] >> (16 * (i % 2))) & 0xFFFF
                        r, col = fragmodel.tmem_32x32b_coords(warp, lane, i, chunk * store.chunk_cols + h * tmem_chunk)
                        gr, gc = m0 + r, n0 + col
                        want = int(c[gr, gc]) if gr < m and gc < n else 0
                        if got != want:
                            problems.append(f"chunk {chunk}, warp {warp}, lane {lane}, load {h} register {i} (output ({gr}, {gc})): "
                                            f"C holds {got:#06x}, C there is {want:#06x}")
                            if len(problems) > 8:
                                return problems
    return problems


def check_c_order(cplan: CLoadPlan, store: StorePlan, chunks: int, parity=None, wait_read: int | None = None) -> list[str]:
    """Problems in one storer's sequence of ``chunks`` TMA-path chunks (several tiles' worth), with the plan's parity rule
    and buffer choice; ``wait_read``: how many of the thread's bulk stores may still read after its wait (the store
    plan's rule: buffers - 1). ``parity``: a replacement for the plan's wait parity (controls)."""
    parity = parity or cplan.wait_parity
    wait_read = store.buffers_per_storer - 1 if wait_read is None else wait_read
    bar = MBarrier("c_full", 1)
    stores: list[int] = []  # buffers of the bulk stores still reading, oldest first
    problems = []
    for j in range(chunks):
        buf = j % store.buffers_per_storer
        del stores[:max(0, len(stores) - wait_read)]  # cp.async.bulk.wait_group.read wait_read
        if buf in stores:
            problems.append(f"chunk {j}: the C load overwrites buffer {buf} while a TMA store still reads it")
        bar.arrive_expect_tx(cplan.expect_tx_bytes)  # thread 0 arms the barrier and issues the load ...
        if bar.test_wait(parity(j)):
            problems.append(f"chunk {j}: the wait for parity {parity(j)} passes before the chunk's C load has landed")
        bar.complete_tx(cplan.expect_tx_bytes)  # ... which lands
        if not bar.test_wait(parity(j)):
            problems.append(f"chunk {j}: the wait for parity {parity(j)} never passes ({bar.state()})")
        stores.append(buf)  # ldmatrix, chain, stmatrix, fence, TMA store of the same buffer
        if len(problems) > 8:
            break
    return problems + bar.misuse
