"""An independent model of what a 2D TMA copy (``cp.async.bulk.tensor.2d``, tile mode) writes to shared memory,
and a 3D one whose outermost dimension is a batch (:func:`write_3d`, over flat memory with explicit strides).

This module is a check on the derivation, so it imports nothing from ptxgen and keeps its own
transcription of the swizzle (it does not reuse the read model's code either). It works from the
explain-JSON "tma" object only.

Facts it relies on (PTX ISA 'Tensors', 'Swizzling modes', 'cp.async.bulk.tensor'; CUDA driver API
cuTensorMapEncodeTiled):
  * A box of ``box_outer`` rows of ``box_inner`` elements is written densely: element (o, i) lands at
    ``dst + (o * box_inner + i) * element_bytes``; ``dst`` is 128-byte aligned.
  * Box element (o, i) of a copy with origin (inner, outer) is global element
    [outer0 + outer + o, inner0 + inner + i]; coordinates outside the tensor read as zero.
  * Swizzling then permutes, within every 128-byte line, the 16-byte chunk c to c XOR (key mod n),
    n = 2, 4, 8 for 32B, 64B, 128B; for 128B_ATOM_32B the 32-byte chunk c goes to c XOR (key mod 4).
    The key is a 128-byte line number: of the absolute address (anchor "address") or of the address
    relative to the copy's destination (anchor "destination"); the hardware question is which.
  * Box limits: each dimension 1..256 elements, inner extent a multiple of 16 bytes and, when
    swizzled, at most the swizzle span (32, 64, 128, 128 bytes).

  * The unpacking data types (``"data_type"`` in the object; CUDA Driver API cuTensorMapEncodeTiled):
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B "copies '16 x U4' packed values to memory aligned as 16 bytes. There are 8
    byte gaps between every 8 byte chunk of packed values"; 16U6_ALIGN16B likewise 12-byte chunks with 4-byte gaps;
    "Dimension for the packed data types must reflect the number of individual U# values"; boxDim[0] must be 128.
    Global memory holds the values packed little-endian (value j of a group of 16 at bits w*j ..); each group of
    16 values along the inner dimension lands in its own 16-byte cell, and the gap bytes are not written.

>>> import numpy as np
>>> img = np.zeros(256, dtype=np.uint8)
>>> g = np.arange(1, 9, dtype=np.uint8).reshape(1, 8)   # one row of 8 elements; a 16-wide box reads 8 zeros past it
>>> write({"swizzle": "none", "box": [16, 1], "copies": [{"smem_offset_bytes": 0, "inner": 0, "outer": 0}]},
...       1, 128, (0, 0), g, img)
>>> img[128:144].tolist()
[1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]
"""

from __future__ import annotations

import numpy as np

LINE = 128  # bytes in one swizzle line
# mode -> (chunk bytes, how many chunk-index values the key can flip: key mod this)
_PERMUTE = {"32B": (16, 2), "64B": (16, 4), "128B": (16, 8), "128B_ATOM_32B": (32, 4)}
_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128, "128B_ATOM_32B": 128}
_ANCHORS = ("address", "destination")
_CODE = {1: np.uint8, 2: np.uint16, 4: np.uint32}
DST_ALIGN = 128
MAX_BOX = 256
# unpacking type -> (bits per value, packed bytes per 16 values); a box row is exactly 128 values
_UNPACKING = {"16U4_ALIGN16B": (4, 8), "16U6_ALIGN16B": (6, 12)}
_UNPACKING_BOX_INNER = 128
_GROUP = 16


def _permute(mode: str, rel: np.ndarray) -> np.ndarray:
    """Swizzle byte offsets ``rel`` whose line number is the key (offsets counted from the anchor)."""
    chunk_bytes, n = _PERMUTE[mode]
    line, in_line = np.divmod(rel, LINE)
    chunk, in_chunk = np.divmod(in_line, chunk_bytes)
    return line * LINE + np.bitwise_xor(chunk, np.mod(line, n)) * chunk_bytes + in_chunk


def swizzle_address(mode: str, addr: np.ndarray, dst: np.ndarray | int, anchor: str) -> np.ndarray:
    """Where TMA puts the byte whose dense (unswizzled) shared address is ``addr``; ``dst`` is its copy's destination."""
    if anchor not in _ANCHORS:
        raise ValueError(f"anchor must be one of {_ANCHORS}, not {anchor!r}")
    if mode not in _SPAN:
        raise ValueError(f"unknown TMA swizzle {mode!r}; one of {sorted(_SPAN)}")
    addr = np.asarray(addr, dtype=np.int64)
    if mode == "none":
        return addr
    if anchor == "address":
        return _permute(mode, addr)
    origin = np.asarray(dst, dtype=np.int64)
    return origin + _permute(mode, addr - origin)


def _check_box(mode: str, box: list, element_bytes: int) -> tuple[int, int]:
    if mode not in _SPAN:
        raise ValueError(f"unknown TMA swizzle {mode!r}; one of {sorted(_SPAN)}")
    if element_bytes not in _CODE:
        raise ValueError(f"element size {element_bytes} B is not 1, 2 or 4")
    inner, outer = int(box[0]), int(box[1])
    if not (1 <= inner <= MAX_BOX and 1 <= outer <= MAX_BOX):
        raise ValueError(f"box {box}: each dimension must be 1..{MAX_BOX}")
    inner_bytes = inner * element_bytes
    if inner_bytes % 16:
        raise ValueError(f"box inner extent {inner_bytes} B is not a multiple of 16 B")
    span = _SPAN[mode]
    if span is not None and inner_bytes > span:
        raise ValueError(f"box inner extent {inner_bytes} B exceeds the {mode} swizzle span {span} B")
    return inner, outer


def _box_values(global_tensor: np.ndarray, rows: np.ndarray, cols: np.ndarray, element_bytes: int) -> np.ndarray:
    """Global elements at [rows, cols] (broadcast), zero outside the tensor, as little-endian bytes."""
    g = np.asarray(global_tensor)
    if g.ndim != 2:
        raise ValueError(f"the global tensor must be 2D [outer, inner], not {g.shape}")
    code = _CODE[element_bytes]
    n_out, n_in = g.shape
    rows, cols = np.broadcast_arrays(rows, cols)
    inside = (rows >= 0) & (rows < n_out) & (cols >= 0) & (cols < n_in)
    vals = np.zeros(rows.shape, dtype=code)
    vals[inside] = g.astype(code)[rows[inside], cols[inside]]
    return vals.astype(np.dtype(code).newbyteorder("<")).view(np.uint8)  # (..., inner x element_bytes)


def write(
    tma: dict,
    element_bytes: int,
    stage_address: int,
    tile_origin: tuple[int, int],
    global_tensor: np.ndarray,
    image: np.ndarray,
    anchor: str = "address",
) -> None:
    """Perform every copy of ``tma`` for one stage at ``stage_address`` into the byte image ``image``.

    ``tile_origin`` is (inner0, outer0) in elements; ``global_tensor`` is indexed [outer, inner].
    """
    if anchor not in _ANCHORS:
        raise ValueError(f"anchor must be one of {_ANCHORS}, not {anchor!r}")
    if "data_type" in tma:
        return _write_unpacking(tma, stage_address, tile_origin, global_tensor, image, anchor)
    mode = tma["swizzle"]
    inner, outer = _check_box(mode, tma["box"], element_bytes)
    copies = tma["copies"]
    if not copies:
        return
    dst = np.array([stage_address + int(c["smem_offset_bytes"]) for c in copies], dtype=np.int64)
    if np.any(dst % DST_ALIGN):
        raise ValueError(f"copy destinations {dst[dst % DST_ALIGN != 0].tolist()} are not {DST_ALIGN}-byte aligned")
    c_in = np.array([int(c["inner"]) for c in copies], dtype=np.int64)[:, None, None]
    c_out = np.array([int(c["outer"]) for c in copies], dtype=np.int64)[:, None, None]
    o = np.arange(outer, dtype=np.int64)[None, :, None]
    i = np.arange(inner, dtype=np.int64)[None, None, :]
    data = _box_values(global_tensor, tile_origin[1] + c_out + o, tile_origin[0] + c_in + i, element_bytes)
    data = data.reshape(len(copies), outer * inner * element_bytes)  # each box, densely, byte by byte
    dense = dst[:, None] + np.arange(outer * inner * element_bytes, dtype=np.int64)[None, :]
    where = swizzle_address(mode, dense, dst[:, None], anchor)
    if where.min() < 0 or where.max() >= image.size:
        raise IndexError(f"the copies write bytes {where.min()}..{where.max()}, outside a {image.size} B image")
    image[where.ravel()] = data.ravel()


def read(
    tma: dict,
    element_bytes: int,
    stage_address: int,
    image: np.ndarray,
    anchor: str = "address",
) -> np.ndarray:
    """What a TMA *store* (``cp.async.bulk.tensor.2d.global.shared::cta``) of every copy of ``tma`` reads from the
    byte image: an array [copy, box_outer, box_inner] of element codes. A store reads the box from the same
    swizzled places a load of that box writes (one tensor map, one swizzle, either direction)."""
    mode = tma["swizzle"]
    inner, outer = _check_box(mode, tma["box"], element_bytes)
    dst = np.array([stage_address + int(c["smem_offset_bytes"]) for c in tma["copies"]], dtype=np.int64)
    if np.any(dst % DST_ALIGN):
        raise ValueError(f"copy sources {dst[dst % DST_ALIGN != 0].tolist()} are not {DST_ALIGN}-byte aligned")
    dense = dst[:, None] + np.arange(outer * inner * element_bytes, dtype=np.int64)[None, :]
    where = swizzle_address(mode, dense, dst[:, None], anchor)
    if where.min() < 0 or where.max() >= image.size:
        raise IndexError(f"the copies read bytes {where.min()}..{where.max()}, outside a {image.size} B image")
    raw = np.ascontiguousarray(image[where.ravel()]).view(np.dtype(_CODE[element_bytes]).newbyteorder("<"))
    return raw.reshape(len(dst), outer, inner)


# Measured on an H200 (runs/2026-11-30-12-tma-store, docs/hardware-layout.md): a TMA store whose box crosses the end of the
# inner dimension, where that dimension's bytes are not a multiple of 16, also wrote the elements up to the next 16-byte
# boundary. The store model writes what the hardware was seen to write, so a plan that lets a box cross such an end fails.
STORE_OVERRUN_BYTES = 16


def store(tma: dict, element_bytes: int, stage_address: int, image: np.ndarray, box_origin: tuple[int, int],
          dims: tuple[int, int], ld: int, anchor: str = "address", overrun_bytes: int = STORE_OVERRUN_BYTES) -> list:
    """What a TMA store (``cp.async.bulk.tensor.2d.global.shared::cta``) of every copy of ``tma`` at ``box_origin``
    (inner0, outer0) writes into a 2-D global tensor of ``dims`` (inner, outer) elements whose rows are ``ld`` elements
    apart: a list of (element offset from the tensor's start, element code). It reads the box as :func:`read` does;
    element (o, i) of a copy goes to [outer0 + outer + o, inner0 + inner + i]; rows past the outer extent are dropped,
    and columns from the inner extent on, except (``overrun_bytes``) those up to the next multiple of that many bytes."""
    n_in, n_out = (int(d) for d in dims)
    if ld * element_bytes % 16:
        raise ValueError(f"a tensor map's row stride must be a multiple of 16 B, not {ld} x {element_bytes} B")
    if ld < n_in:
        raise ValueError(f"rows {ld} elements apart overlap the inner extent {n_in}")
    boxes = read(tma, element_bytes, stage_address, image, anchor)
    step = max(1, overrun_bytes // element_bytes) if overrun_bytes else 1
    limit = -(-n_in // step) * step if overrun_bytes else n_in
    out = []
    for c, box in zip(tma["copies"], boxes):
        r0, i0 = box_origin[1] + int(c["outer"]), box_origin[0] + int(c["inner"])
        for o in range(box.shape[0]):
            row = r0 + o
            if not 0 <= row < n_out:
                continue
            for i in range(box.shape[1]):
                col = i0 + i
                if 0 <= col < limit:
                    out.append((row * ld + col, int(box[o, i])))
    return out


# ------------------------------------------------------------------------------------------------
# 3-D maps: the batch (or group) as the outermost dimension
# ------------------------------------------------------------------------------------------------
def gather_3d(memory: np.ndarray, dims: tuple[int, int, int], strides: tuple[int, int], z: int,
              rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Elements of a rank-3 map over flat ``memory`` (one element per entry) at coordinates (cols, rows, z):
    ``dims`` = (inner, outer, batch) extents, ``strides`` = (row stride, batch stride) in elements (dimension 0
    is contiguous). Each coordinate is checked against its own extent: outside any of them the element reads as
    zero, whatever lies in memory there (the next batch's rows, the next row's K)."""
    n_in, n_out, n_b = (int(d) for d in dims)
    ld, ld_batch = (int(s) for s in strides)
    rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
    inside = (rows >= 0) & (rows < n_out) & (cols >= 0) & (cols < n_in) & (0 <= z < n_b)
    flat = np.asarray(memory).reshape(-1)
    vals = np.zeros(rows.shape, dtype=flat.dtype)
    where = z * ld_batch + rows * ld + cols
    vals[inside] = flat[where[inside]]
    return vals


def write_3d(
    tma: dict,
    element_bytes: int,
    stage_address: int,
    tile_origin: tuple[int, int, int],
    memory: np.ndarray,
    dims: tuple[int, int, int],
    strides: tuple[int, int],
    image: np.ndarray,
    anchor: str = "address",
) -> None:
    """Every copy of a rank-3 ``tma`` (box [inner, outer, 1]) for one stage: which global element of flat ``memory``
    lands at each shared-memory byte of ``image`` when the tile's origin is (inner0, outer0, z).

    A box one batch deep is written densely exactly as a 2-D box (the batch plane is the whole box): element
    (o, i) of a copy with origin (inner, outer) is global element (inner0 + inner + i, outer0 + outer + o, z), then
    the swizzle permutes it as for 2-D copies."""
    box = list(tma["box"])
    if len(box) != 3 or int(box[2]) != 1:
        raise ValueError(f"a rank-3 map here has a box one batch deep, [inner, outer, 1]; got {box}")
    inner0, outer0, z = (int(v) for v in tile_origin)
    mode = tma["swizzle"]
    inner, outer = _check_box(mode, box[:2], element_bytes)
    code = _CODE[element_bytes]
    # the plane of batch z as the 2-D write sees it: exactly the box's reach, OOB rows and columns zero
    lo_r = min(outer0 + int(c["outer"]) for c in tma["copies"])
    hi_r = max(outer0 + int(c["outer"]) for c in tma["copies"]) + outer
    lo_c = min(inner0 + int(c["inner"]) for c in tma["copies"])
    hi_c = max(inner0 + int(c["inner"]) for c in tma["copies"]) + inner
    rr = np.arange(lo_r, hi_r, dtype=np.int64)[:, None]
    cc = np.arange(lo_c, hi_c, dtype=np.int64)[None, :]
    window = gather_3d(memory, dims, strides, z, rr, cc).astype(code)
    # shift the window into a zero-padded 2-D tensor indexed [row - lo_r, col - lo_c] (coordinates already clipped)
    write({**tma, "box": box[:2]}, element_bytes, stage_address, (inner0 - lo_c, outer0 - lo_r), window, image, anchor)


def _write_unpacking(tma: dict, stage_address: int, tile_origin: tuple[int, int], global_tensor: np.ndarray,
                     image: np.ndarray, anchor: str) -> None:
    """``write`` for the 16U4_ALIGN16B / 16U6_ALIGN16B types. ``global_tensor`` holds one value code per element
    ([outer, inner], codes below 2^bits); the copy engine reads them packed and writes each 16 of a box row into a
    16-byte cell: the packed bytes first, the gap left as it was."""
    kind = tma["data_type"]
    if kind not in _UNPACKING:
        raise ValueError(f"unknown unpacking type {kind!r}; one of {sorted(_UNPACKING)}")
    bits, packed = _UNPACKING[kind]
    mode = tma["swizzle"]
    if mode not in ("none", "128B", "128B_ATOM_32B"):
        raise ValueError(f"{kind} loads with swizzle none, 128B or 128B_ATOM_32B only, not {mode}")
    inner, outer = int(tma["box"][0]), int(tma["box"][1])
    if inner != _UNPACKING_BOX_INNER or not 1 <= outer <= MAX_BOX:
        raise ValueError(f"{kind}: box {tma['box']}: the inner dimension must be {_UNPACKING_BOX_INNER} values")
    g = np.asarray(global_tensor)
    if g.ndim != 2 or (g.size and int(g.max()) >> bits):
        raise ValueError(f"{kind}: the global tensor must be 2D value codes below 2^{bits}")
    copies = tma["copies"]
    if not copies:
        return
    dst = np.array([stage_address + int(c["smem_offset_bytes"]) for c in copies], dtype=np.int64)
    if np.any(dst % DST_ALIGN):
        raise ValueError(f"copy destinations {dst[dst % DST_ALIGN != 0].tolist()} are not {DST_ALIGN}-byte aligned")
    n_out, n_in = g.shape
    for ci, c in enumerate(copies):
        rows = tile_origin[1] + int(c["outer"]) + np.arange(outer)[:, None]
        cols = tile_origin[0] + int(c["inner"]) + np.arange(inner)[None, :]
        rows, cols = np.broadcast_arrays(rows, cols)
        inside = (rows >= 0) & (rows < n_out) & (cols >= 0) & (cols < n_in)
        vals = np.zeros(rows.shape, dtype=np.uint64)
        vals[inside] = g[rows[inside], cols[inside]].astype(np.uint64)
        # pack each group of 16 values little-endian into `packed` bytes
        groups = vals.reshape(outer, inner // _GROUP, _GROUP)
        word = np.zeros(groups.shape[:2], dtype=object)
        for j in range(_GROUP):
            word = word + (groups[:, :, j].astype(object) << (bits * j))
        cell_bytes = np.array([[[(int(w) >> (8 * b)) & 0xFF for b in range(packed)] for w in row] for row in word],
                              dtype=np.uint8)  # (outer, cells, packed)
        o = np.arange(outer)[:, None, None]
        cell = np.arange(inner // _GROUP)[None, :, None]
        b = np.arange(packed)[None, None, :]
        dense = dst[ci] + o * (inner * 1) + cell * 16 + b  # one byte of shared memory per value: a row is 128 B
        where = swizzle_address(mode, dense, dst[ci], anchor)
        if where.min() < 0 or where.max() >= image.size:
            raise IndexError(f"the copies write bytes {where.min()}..{where.max()}, outside a {image.size} B image")
        image[where.ravel()] = cell_bytes.ravel()
