"""Bridge: the TMA-store epilogue's staging plan (ptxgen.derive.epilogue) against the independent models.

The writer side is the plan: which shared-memory address each lane gives each ``stmatrix`` and which
accumulator elements each register packs. The reader side is independent: the wgmma D fragment and the
``stmatrix`` semantics (model.fragmodel), and what a TMA store of D's box reads (model.tmamodel.read).
The check: for every chunk, the box the TMA store reads is exactly that chunk of the tile the warpgroup
holds in registers.
"""

from __future__ import annotations

import numpy as np

from . import fragmodel, tmamodel
from ..derive.epilogue import SLAB_ROWS, StorePlan
from ..isa.tensormap import TMA_SWIZZLE_KEY

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


def check_store_plan(plan: StorePlan, bn: int, seed: int = 0, base: int = 0) -> list[str]:
    """Problems (empty when the TMA store of every chunk reads back that chunk of a random 64 x ``bn`` tile)."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(1, 1 << 16, size=(SLAB_ROWS, bn), dtype=np.uint32)
    tma = {"swizzle": plan.tma.swizzle.json_name, "box": list(plan.tma.box), "copies": [c.to_json() for c in plan.tma.copies]}
    problems = []
    for chunk in range(bn // plan.chunk_cols):
        image = np.zeros(base + plan.buffer_bytes, dtype=np.uint8)
        stage_chunk(plan, tile, chunk, image, base)
        box = tmamodel.read(tma, plan.tma.element_bytes, base, image, anchor=TMA_SWIZZLE_KEY)[0]
        want = tile[:, chunk * plan.chunk_cols:(chunk + 1) * plan.chunk_cols]
        if box.shape != want.shape:
            problems.append(f"chunk {chunk}: the TMA store reads a {box.shape[0]} x {box.shape[1]} box, the chunk is "
                            f"{want.shape[0]} x {want.shape[1]}")
            continue
        bad = np.argwhere(box != want)
        if len(bad):
            r, c = bad[0]
            problems.append(f"chunk {chunk}: the TMA store reads {int(box[r, c]):#06x} at row {r}, column {c}, the tile holds "
                            f"{int(want[r, c]):#06x} ({len(bad)} of {want.size} elements differ)")
    return problems
