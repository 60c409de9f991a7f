"""L1: the loader's writes against the independent read model.

A random tile is written into a shared-memory image the way the loader writes it: through the derived
store table (cp.async), or through the independent TMA model ``tmamodel`` fed with the explain-JSON
"tma" object and a random global tensor (TMA). Every K-step descriptor (and, for wgmma's A, every
64-row slab) is then read back through ``readmodel`` (the tensor core's view). They must agree bit for
bit. For TMA, the first and last stage of the ring are checked, each with a whole tile and with a tile
that overhangs the global tensor in both dimensions (out-of-bounds elements must read as zero).
"""

from __future__ import annotations

import numpy as np

from ..layouts import readmodel, tmamodel
from .verify_pair import check_pair
from ...derive.tile.layout import TileLayout
from ...derive.operands.operand import OperandLayout
from ...isa.numerics import CODE_DTYPE, unpack_e2m1
from ...isa.tensormap import TMA_SWIZZLE_KEY
from ...isa.types import DType, Loader, Major

def random_tile(op: OperandLayout, rng: np.random.Generator) -> np.ndarray:
    """A random logical MN x K tile of raw element codes."""
    code = CODE_DTYPE[op.container_bits // 8]
    return rng.integers(0, np.iinfo(code).max, size=(op.mn, op.bk), dtype=np.uint64, endpoint=True).astype(code)


def write_stage(op: OperandLayout, tile: np.ndarray, base: int = 0, image_bytes: int | None = None) -> np.ndarray:
    """The shared-memory image the loader produces for ``tile`` (stage at byte ``base``)."""
    T = op.per_cell
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
            got = readmodel.read(t.spec.arch.value, desc, op.major.value, op.mma_mn, op.smem_element, img)
            want = tile[slab * op.mma_mn : (slab + 1) * op.mma_mn, step.k : step.k + kmma]
            if not np.array_equal(got, want):
                bad = int(np.count_nonzero(got != want))
                problems.append(
                    f"{op.name.upper()} K-step {si} slab {slab} (desc {desc:#018x}): {bad} of {want.size} elements differ"
                )
    return problems


def check_tile(t: TileLayout, seed: int = 0) -> list[str]:
    """Every operand, every K-step, every slab: [] when the writer and the reader agree."""
    if t.pair is not None:  # cta_group::2: both CTAs' images through the pair model (verify_pair)
        return check_pair(t.to_json(), seed)
    rng = np.random.default_rng(seed)
    if t.spec.loader is Loader.TMA:
        tj = t.to_json()
        return check_operand_tma(tj, "a", rng) + check_operand_tma(tj, "b", rng)
    return check_operand(t, t.a, rng) + check_operand(t, t.b, rng)


# ---- TMA: the explain JSON through tmamodel and readmodel ----------------------------------------


def check_operand_tma(tj: dict, name: str, rng: np.random.Generator, anchor: str = TMA_SWIZZLE_KEY) -> list[str]:
    """Operand ``name`` of the layout JSON ``tj``: first and last stage, whole and partial tile."""
    opj, stages = tj[name], tj["spec"]["stages"]
    if opj.get("loader") != "tma" or "tma" not in opj:
        return [f"{name.upper()}: loader {opj.get('loader')!r} without a 'tma' object"]
    problems = []
    for stage in sorted({0, stages - 1}):
        address = opj["ring_offset_bytes"] + stage * opj["stage_bytes"]
        for partial in (False, True):
            label = f"{name.upper()} stage {stage} at {address} B, {'partial' if partial else 'whole'} tile"
            problems += _check_tma_stage(tj, name, address, partial, rng, anchor, label)
    return problems


def _extents(tj: dict, name: str) -> tuple[int, int, int]:
    """(MN, K, MN of one MMA) of operand ``name``."""
    spec, opj = tj["spec"], tj[name]
    mn = spec["bm"] if name == "a" else spec["bn"]
    return mn, spec["bk"], opj.get("mma_mn", mn)


def tma_global_and_tile(tj: dict, name: str, partial: bool, rng: np.random.Generator):
    """(global tensor [outer, inner], tile origin (inner0, outer0), the logical MN x K tile it should give).

    A partial tile's global tensor ends inside the tile in both dimensions; the tile holds zeros there."""
    mn, bk, _ = _extents(tj, name)
    dt = DType(tj["spec"]["dtype"] if name == "a" else tj["spec"].get("b_dtype", tj["spec"]["dtype"]))
    k_major = tj[name]["major"] == "k"
    if "smem_element" in tj[name]:  # kind::mxf8f6f4's 6-/4-bit types: value codes per element, packed by the map
        return _unpacked_global_and_tile(dt, mn, bk, k_major, partial, rng)
    packed = dt.container_bits < 8  # e2m1 two a byte (K-major only): the global tensor and the map count bytes
    inner, outer = (dt.bytes_of(bk) if packed else bk, mn) if k_major else (mn, bk)
    i0, o0 = (int(x) for x in rng.integers(0, 40, size=2))
    if partial:
        ext = (o0 + int(rng.integers(1, outer)), i0 + int(rng.integers(1, inner)))
    else:
        ext = (o0 + outer + int(rng.integers(0, 9)), i0 + inner + int(rng.integers(0, 9)))
    code = CODE_DTYPE[1 if packed else dt.bytes]
    g = rng.integers(0, np.iinfo(code).max, size=ext, dtype=np.uint64, endpoint=True).astype(code)
    window = np.zeros((outer, inner), dtype=code)
    part = g[o0 : o0 + outer, i0 : i0 + inner]
    window[: part.shape[0], : part.shape[1]] = part
    if packed:
        window = unpack_e2m1(window)
    return g, (i0, o0), (window if k_major else window.T)


def _unpacked_global_and_tile(dt: DType, mn: int, bk: int, k_major: bool, partial: bool, rng: np.random.Generator):
    """tma_global_and_tile for an unpacking map: one value code (below 2^bits) per element, K counted in elements."""
    inner, outer = (bk, mn) if k_major else (mn, bk)
    i0, o0 = (int(x) for x in rng.integers(0, 40, size=2))
    if partial:
        ext = (o0 + int(rng.integers(1, outer)), i0 + int(rng.integers(1, inner)))
    else:
        ext = (o0 + outer + int(rng.integers(0, 9)), i0 + inner + int(rng.integers(0, 9)))
    g = rng.integers(0, 1 << dt.bits, size=ext, dtype=np.uint8)
    window = np.zeros((outer, inner), dtype=np.uint8)
    part = g[o0 : o0 + outer, i0 : i0 + inner]
    window[: part.shape[0], : part.shape[1]] = part
    return g, (i0, o0), (window if k_major else window.T)


def _check_tma_stage(tj, name, address, partial, rng, anchor, label) -> list[str]:
    opj = tj[name]
    g, origin, tile = tma_global_and_tile(tj, name, partial, rng)
    # garbage everywhere first: a byte no copy writes (or an out-of-bounds element left unfilled) shows up
    img = rng.integers(0, 256, size=address + 2 * opj["stage_bytes"] + 1024, dtype=np.uint8)
    try:
        tmamodel.write(opj["tma"], g.itemsize, address, origin, g, img, anchor=anchor)
    except (ValueError, IndexError) as e:
        return [f"{label}: TMA model refuses the copies: {e}"]
    return read_back(tj, name, address, img, tile, label)


def read_back(tj: dict, name: str, address: int, img: np.ndarray, tile: np.ndarray, label: str) -> list[str]:
    """Every K-step x slab descriptor of the JSON, moved to the stage at ``address``, against ``tile``."""
    spec, opj = tj["spec"], tj[name]
    _, _, mma_mn = _extents(tj, name)
    dtype = opj.get("smem_element") or (spec["dtype"] if name == "a" else spec.get("b_dtype", spec["dtype"]))
    problems = []
    for si, step in enumerate(opj["k_steps"]):
        for slab, slab_off in enumerate(opj.get("slab_offsets_bytes", [0])):
            desc = readmodel.moved(int(step["desc_hex"], 16), address + slab_off)
            try:
                got = readmodel.read(spec["arch"], desc, opj["major"], mma_mn, dtype, img)
            except (ValueError, IndexError) as e:
                problems.append(f"{label}: K-step {si} slab {slab} (desc {desc:#018x}): {e}")
                continue
            # K of one MMA is the read model's (256 bits of a row in shared memory), not the writer's
            want = tile[slab * mma_mn : (slab + 1) * mma_mn, step["k"] : step["k"] + got.shape[1]]
            if not np.array_equal(got, want):
                bad = int(np.count_nonzero(got != want))
                problems.append(f"{label}: K-step {si} slab {slab} (desc {desc:#018x}): {bad} of {want.size} elements differ")
    return problems


# ---- TMA, rank 3: a batched operand (the batch the map's outermost dimension) --------------------


def batched_memory(tj: dict, name: str, batches: int, rng: np.random.Generator, pad_rows: int = 3):
    """(flat memory, dims (inner, outer, batches), strides (ld, ld_batch), the logical tensor [batch, outer, inner]) for
    operand ``name``: ``batches`` batches whose row and K extents end inside a tile (so the tile's last rows and its K
    tail would reach into the next batch or row if TMA did not check each coordinate), rows padded past the inner
    extent and batches ``pad_rows`` rows apart more than they need, the padding full of random codes."""
    mn, bk, _ = _extents(tj, name)
    dt = DType(tj["spec"]["dtype"])
    k_major = tj[name]["major"] == "k"
    inner_tile, outer_tile = (bk, mn) if k_major else (mn, bk)
    inner = inner_tile + int(rng.integers(1, inner_tile))  # a tail in the second tile along each dimension
    outer = outer_tile + int(rng.integers(1, outer_tile))
    q = 16 // dt.bytes
    ld = -(-inner // q) * q + q  # 16-byte aligned rows, with padding
    ld_batch = (outer + pad_rows) * ld
    code = CODE_DTYPE[dt.bytes]
    flat = rng.integers(0, np.iinfo(code).max, size=batches * ld_batch, dtype=np.uint64, endpoint=True).astype(code)
    logical = np.stack([flat[z * ld_batch: z * ld_batch + outer * ld].reshape(outer, ld)[:, :inner] for z in range(batches)])
    return flat, (inner, outer, batches), (ld, ld_batch), logical


def check_operand_tma_3d(tj: dict, name: str, batches: int, rng: np.random.Generator, strides=None,
                         anchor: str = TMA_SWIZZLE_KEY) -> list[str]:
    """A rank-3 map of operand ``name`` (the explain JSON's "tma" object with rank 3): for every batch z and the tile
    at the batch's far corner (its last rows and K tail), the stage the 3-D copies write (tmamodel.write_3d over flat
    memory) must read back through every descriptor as batch z's own elements, zeros past its rows and K. ``strides``
    (a control) overrides the (ld, ld_batch) the map is given; the logical tensor keeps the true ones."""
    opj = tj[name]
    tma = opj["tma"]
    if tma.get("rank") != 3:
        return [f"{name.upper()}: the map is rank {tma.get('rank', 2)}, not 3"]
    flat, dims, true_strides, logical = batched_memory(tj, name, batches, rng)
    mn, bk, _ = _extents(tj, name)
    k_major = opj["major"] == "k"
    inner_tile, outer_tile = (bk, mn) if k_major else (mn, bk)
    i0, o0 = inner_tile, outer_tile  # the second tile along both dimensions: both tails
    address = opj["ring_offset_bytes"]
    problems = []
    for z in range(batches):
        img = rng.integers(0, 256, size=address + 2 * opj["stage_bytes"] + 1024, dtype=np.uint8)
        try:
            tmamodel.write_3d(tma, flat.itemsize, address, (i0, o0, z), flat, dims, strides or true_strides, img, anchor)
        except (ValueError, IndexError) as e:
            return [f"{name.upper()} batch {z}: TMA model refuses the copies: {e}"]
        window = np.zeros((outer_tile, inner_tile), dtype=flat.dtype)
        part = logical[z, o0: o0 + outer_tile, i0: i0 + inner_tile]
        window[: part.shape[0], : part.shape[1]] = part
        tile = window if k_major else window.T
        problems += read_back(tj, name, address, img, tile, f"{name.upper()} batch {z} of {batches}, tile at ({i0}, {o0})")
    return problems
