"""L1: the writer's store table against the independent read model.

A random tile is written into a shared-memory image through the derived store table (the loader's
view); every K-step descriptor (and, for wgmma's A, every 64-row slab) is then read back through
``ptxgen.readmodel`` (the tensor core's view). They must agree bit for bit.
"""

from __future__ import annotations

import numpy as np

from . import readmodel
from ..derive.layout import OperandLayout, TileLayout
from ..isa.numerics import CODE_DTYPE
from ..isa.types import Major


def random_tile(op: OperandLayout, rng: np.random.Generator) -> np.ndarray:
    """A random logical MN x K tile of raw element codes."""
    code = CODE_DTYPE[op.dtype.bytes]
    return rng.integers(0, np.iinfo(code).max, size=(op.mn, op.bk), dtype=np.uint64, endpoint=True).astype(code)


def write_stage(op: OperandLayout, tile: np.ndarray, base: int = 0, image_bytes: int | None = None) -> np.ndarray:
    """The shared-memory image the loader produces for ``tile`` (stage at byte ``base``)."""
    T = op.dtype.per_cell
    img = np.zeros(image_bytes or base + op.stage_bytes, dtype=np.uint8)
    cells = np.asarray(op.store.table(), dtype=np.int64) + base
    rows, cols = cells.shape
    if op.major is Major.K:  # cell (i, j) holds elements [i, j*T:(j+1)*T]
        data = tile.reshape(rows, cols, T)
    else:  # cell (k, j) holds elements [j*T:(j+1)*T, k]
        data = tile.T.reshape(rows, cols, T)
    data = np.ascontiguousarray(data).view(np.uint8).reshape(rows, cols, 16)
    idx = cells[:, :, None] + np.arange(16)[None, None, :]
    img[idx] = data
    return img


def check_operand(t: TileLayout, op: OperandLayout, rng: np.random.Generator) -> list[str]:
    problems = []
    tile = random_tile(op, rng)
    # the stage sits where the kernel puts it relative to an aligned base: same swizzle phase, same base offset
    base = op.ring_offset_bytes
    img = write_stage(op, tile, base=base)
    kmma = t.spec.k_per_mma
    for si, step in enumerate(op.k_steps):
        for slab in range(len(op.slab_offsets_bytes)):
            d = op.descriptor(si, slab)
            desc = d.with_start(d.start_address_bytes + base).encode()
            got = readmodel.read(t.spec.arch.value, desc, op.major.value, op.mma_mn, op.dtype.value, img)
            want = tile[slab * op.mma_mn : (slab + 1) * op.mma_mn, step.k : step.k + kmma]
            if not np.array_equal(got, want):
                bad = int(np.count_nonzero(got != want))
                problems.append(
                    f"{op.name.upper()} K-step {si} slab {slab} (desc {desc:#018x}): {bad} of {want.size} elements differ"
                )
    return problems


def check_tile(t: TileLayout, seed: int = 0) -> list[str]:
    """Every operand, every K-step, every slab: [] when the writer and the reader agree."""
    rng = np.random.default_rng(seed)
    return check_operand(t, t.a, rng) + check_operand(t, t.b, rng)
