"""Building a TMA tensor map (``CUtensorMap``) from a derived :class:`~ptxgen.derive.operands.tma.TmaPlan`.

:func:`tensormap_args` is pure Python: it fills in the pointer, the problem extents and the row
stride, and checks every rule of ``cuTensorMapEncodeTiled`` that can be checked without a driver,
raising :class:`~ptxgen.runtime.launch.errors.ProblemError` that names the rule. :func:`encode` then asks the
driver for the 128 opaque bytes (it needs ``libcuda``; the bytes are passed to a kernel as a
``__grid_constant__`` parameter through :class:`~ptxgen.runtime.launch.gpu.KernelArgs` kind ``"tensormap"``).

The binding used (cuda-python ``cuda.bindings.driver``, 12.x and 13.x)::

    cuTensorMapEncodeTiled(tensorDataType: CUtensorMapDataType, tensorRank: int, globalAddress: int,
                           globalDim: list[cuuint64_t], globalStrides: list[cuuint64_t],
                           boxDim: list[cuuint32_t], elementStrides: list[cuuint32_t],
                           interleave: CUtensorMapInterleave, swizzle: CUtensorMapSwizzle,
                           l2Promotion: CUtensorMapL2promotion, oobFill: CUtensorMapFloatOOBfill)
        -> (CUresult, CUtensorMap)

``CUtensorMap.opaque`` is a list of 16 ``cuuint64_t``: the map's 128 bytes, little-endian words.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ...isa.tensormap import (
    UNPACKED_BOX_INNER_ELEMENTS,
    UNPACKED_GLOBAL_ADDRESS_ALIGN,
    UNPACKED_GLOBAL_DIM0_MULTIPLE,
    UNPACKED_GLOBAL_STRIDE_ALIGN,
    UNPACKING_DATA_TYPES,
    TmaDataType,
    BOX_INNER_BYTES_ALIGN,
    GLOBAL_ADDRESS_ALIGN,
    GLOBAL_DIM_LIMIT,
    GLOBAL_STRIDE_ALIGN,
    GLOBAL_STRIDE_LIMIT,
    INTERLEAVE_NONE,
    MAX_BOX_ELEMENTS,
    TENSOR_MAP_BYTES,
    TmaSwizzle,
)
from .errors import ProblemError

MAX_ELEMENT_STRIDE = 8  # elementStrides[i] is 1..8


@dataclass(frozen=True)
class TensorMapArgs:
    """The arguments of ``cuTensorMapEncodeTiled`` (rank 2 or 3, dimension 0 contiguous), as plain integers."""

    data_type: int  # CUtensorMapDataType value
    element_bytes: int
    rank: int
    global_address: int
    global_dims: tuple[int, ...]  # elements, inner (contiguous) first
    global_strides: tuple[int, ...]  # bytes, of dimensions 1.. (rank - 1 values)
    box: tuple[int, ...]  # elements, inner first
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int  # CUtensorMapSwizzle value
    l2_promotion: int
    oob_fill: int

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * self.element_bytes

    def to_json(self) -> dict:
        return {
            "data_type": self.data_type,
            "rank": self.rank,
            "global_address": f"{self.global_address:#x}",
            "global_dims": list(self.global_dims),
            "global_strides": list(self.global_strides),
            "box": list(self.box),
            "element_strides": list(self.element_strides),
            "interleave": self.interleave,
            "swizzle": self.swizzle,
            "l2_promotion": self.l2_promotion,
            "oob_fill": self.oob_fill,
        }


def _value(x) -> int:
    return int(x.value) if hasattr(x, "value") else int(x)


def _unpacking_rules(plan, global_address: int, dims, box, rank: int, ld_elements: int, errs: list[str]) -> int:
    """16U4_ALIGN16B / 16U6_ALIGN16B (cuTensorMapEncodeTiled): dimensions count 4-/6-bit elements of a packed global
    tensor; globalAddress 32-byte aligned, globalDim[0] a multiple of 128, globalStrides multiples of 32 B, boxDim[0]
    128. The row stride in bytes is the packed bytes: ld elements x 4 or 6 bits."""
    bits = 4 if _value(plan.data_type) == TmaDataType.U4X16_ALIGN16B.value else 6
    if ld_elements * bits % 8:
        errs.append(f"ld {ld_elements} x {bits} bits is not a whole number of bytes")
    stride = ld_elements * bits // 8
    if global_address % UNPACKED_GLOBAL_ADDRESS_ALIGN:
        errs.append(f"globalAddress {global_address:#x} must be {UNPACKED_GLOBAL_ADDRESS_ALIGN}-byte aligned (unpacking types)")
    if dims and dims[0] % UNPACKED_GLOBAL_DIM0_MULTIPLE:
        errs.append(f"globalDim[0] = {dims[0]} must be a multiple of {UNPACKED_GLOBAL_DIM0_MULTIPLE} (unpacking types)")
    if stride % UNPACKED_GLOBAL_STRIDE_ALIGN:
        errs.append(f"globalStrides[0] = ld {ld_elements} x {bits} bits = {stride} B must be a multiple of "
                    f"{UNPACKED_GLOBAL_STRIDE_ALIGN} B (unpacking types)")
    if box and box[0] != UNPACKED_BOX_INNER_ELEMENTS:
        errs.append(f"boxDim[0] = {box[0]} must be {UNPACKED_BOX_INNER_ELEMENTS} (unpacking types)")
    if rank != 2:
        errs.append("the unpacking types are built as rank-2 maps only here")
    return stride


def _global_rules(esize: int, interleave: int, global_address: int, dims, rank: int, lds, stride: int, unpacking: bool,
                  errs: list[str]) -> None:
    """The map's rank, element size, address, dimensions and row stride."""
    ld_elements = lds[0]
    if rank not in (2, 3):
        errs.append(f"rank {rank}: ptxgen builds rank-2 and rank-3 maps only")
    if len(lds) != rank - 1:
        errs.append(f"{len(lds)} stride(s) given for a rank-{rank} map (it takes {rank - 1})")
    if esize not in (1, 2, 4, 8):
        errs.append(f"element size {esize} B is not 1, 2, 4 or 8")
    if interleave != INTERLEAVE_NONE:
        errs.append(f"interleave {interleave}: only INTERLEAVE_NONE (0) is supported here")
    if global_address % GLOBAL_ADDRESS_ALIGN:
        errs.append(f"globalAddress {global_address:#x} must be {GLOBAL_ADDRESS_ALIGN}-byte aligned")
    if len(dims) != rank:
        errs.append(f"globalDim has {len(dims)} values, not {rank}")
    for i, d in enumerate(dims):
        if not 1 <= d <= GLOBAL_DIM_LIMIT:
            errs.append(f"globalDim[{i}] = {d} must be in 1..2^32")
    if ld_elements < (dims[0] if dims else 0):
        errs.append(f"ld {ld_elements} is smaller than the contiguous extent globalDim[0] = {dims[0]}")
    if stride % GLOBAL_STRIDE_ALIGN and not unpacking:
        errs.append(f"globalStrides[0] = ld {ld_elements} x {esize} B = {stride} B must be a multiple of {GLOBAL_STRIDE_ALIGN} B")
    if not 0 < stride < GLOBAL_STRIDE_LIMIT:
        errs.append(f"globalStrides[0] = {stride} B must be positive and below 2^40")


def _batch_stride(esize: int, dims, rank: int, lds, stride: int, errs: list[str]) -> tuple[int, ...]:
    """globalStrides: the row stride, and a rank-3 map's batch stride (which must not overlap the batches)."""
    strides = (stride,)
    if rank == 3 and len(lds) == 2 and len(dims) == 3:
        bstride = lds[1] * esize
        strides = (stride, bstride)
        if bstride % GLOBAL_STRIDE_ALIGN:
            errs.append(f"globalStrides[1] = ld_batch {lds[1]} x {esize} B = {bstride} B must be a multiple of {GLOBAL_STRIDE_ALIGN} B")
        if not 0 < bstride < GLOBAL_STRIDE_LIMIT:
            errs.append(f"globalStrides[1] = {bstride} B must be positive and below 2^40")
        if dims[2] > 1 and bstride < stride * dims[1]:
            errs.append(f"globalStrides[1] = {bstride} B is smaller than globalDim[1] x globalStrides[0] = {dims[1]} x {stride} B: "
                        "the batches would overlap (ptxgen keeps the dimensions ordered by stride)")
    return strides


def _box_rules(box, esize: int, swz: TmaSwizzle, estr, rank: int, errs: list[str]) -> None:
    """boxDim (against the swizzle span) and elementStrides."""
    if len(box) != rank:
        errs.append(f"boxDim has {len(box)} values, not {rank}")
    for i, b in enumerate(box):
        if not 1 <= b <= MAX_BOX_ELEMENTS:
            errs.append(f"boxDim[{i}] = {b} must be in 1..{MAX_BOX_ELEMENTS}")
    inner_bytes = box[0] * esize if box else 0
    if inner_bytes % BOX_INNER_BYTES_ALIGN:
        errs.append(f"boxDim[0] x element size = {box[0]} x {esize} B = {inner_bytes} B must be a multiple of {BOX_INNER_BYTES_ALIGN} B")
    if swz is not TmaSwizzle.NONE and inner_bytes > swz.span_bytes:
        errs.append(f"boxDim[0] x element size = {inner_bytes} B exceeds the {swz.json_name} swizzle span of {swz.span_bytes} B")
    for i, s in enumerate(estr):
        if not 1 <= s <= MAX_ELEMENT_STRIDE:
            errs.append(f"elementStrides[{i}] = {s} must be in 1..{MAX_ELEMENT_STRIDE}")


def tensormap_args(plan, global_address: int, dims: tuple[int, ...], ld_elements) -> TensorMapArgs:
    """The encode arguments for ``plan`` (a TmaPlan, or anything with its fields) over a global tensor at
    ``global_address`` of ``dims = (inner, outer)`` elements whose rows are ``ld_elements`` apart; rank 3:
    ``dims = (inner, outer, batch)`` and ``ld_elements = (row stride, batch stride)`` in elements.

    Raises ProblemError naming every cuTensorMapEncodeTiled rule the arguments break."""
    esize = int(plan.element_bytes)
    swz = plan.swizzle if isinstance(plan.swizzle, TmaSwizzle) else TmaSwizzle(_value(plan.swizzle))
    box = tuple(int(b) for b in plan.box)
    estr = tuple(int(s) for s in plan.element_strides)
    dims = tuple(int(d) for d in dims)
    rank = int(plan.rank)
    interleave = _value(plan.interleave)
    lds = tuple(int(x) for x in ld_elements) if isinstance(ld_elements, (tuple, list)) else (int(ld_elements),)
    errs: list[str] = []
    unpacking = _value(plan.data_type) in UNPACKING_DATA_TYPES
    stride = _unpacking_rules(plan, global_address, dims, box, rank, lds[0], errs) if unpacking else lds[0] * esize
    _global_rules(esize, interleave, global_address, dims, rank, lds, stride, unpacking, errs)
    strides = _batch_stride(esize, dims, rank, lds, stride, errs)
    _box_rules(box, esize, swz, estr, rank, errs)
    if errs:
        raise ProblemError("cuTensorMapEncodeTiled would refuse this tensor map: " + "; ".join(errs))
    return TensorMapArgs(
        data_type=_value(plan.data_type),
        element_bytes=esize,
        rank=rank,
        global_address=int(global_address),
        global_dims=dims,
        global_strides=strides,
        box=box,
        element_strides=estr,
        interleave=interleave,
        swizzle=swz.value,
        l2_promotion=_value(plan.l2_promotion),
        oob_fill=_value(plan.oob_fill),
    )


def map_bytes(tensor_map) -> bytes:
    """The 128 bytes of a ``cuda.bindings.driver.CUtensorMap`` (its ``opaque`` words, little-endian)."""
    words = list(tensor_map.opaque)
    if len(words) * 8 != TENSOR_MAP_BYTES:
        raise RuntimeError(f"CUtensorMap.opaque has {len(words)} words, expected {TENSOR_MAP_BYTES // 8}")
    raw = b"".join(int(w).to_bytes(8, "little") for w in words)
    ptr = int(tensor_map.getPtr()) if hasattr(tensor_map, "getPtr") else 0
    if ptr and ctypes.string_at(ptr, TENSOR_MAP_BYTES) != raw:  # the two views of the struct must agree
        raise RuntimeError("CUtensorMap.opaque and the struct's memory disagree; cannot extract the map")
    return raw


def call_encode_tiled(cu, args: TensorMapArgs):
    """The binding call itself: every argument converted to the type the binding wants (plain ints are
    refused for the cuuint32_t lists), returning the binding's ``(CUresult, CUtensorMap)``."""
    return cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(args.data_type),
        args.rank,
        args.global_address,
        [cu.cuuint64_t(d) for d in args.global_dims],
        [cu.cuuint64_t(s) for s in args.global_strides],
        [cu.cuuint32_t(b) for b in args.box],
        [cu.cuuint32_t(s) for s in args.element_strides],
        cu.CUtensorMapInterleave(args.interleave),
        cu.CUtensorMapSwizzle(args.swizzle),
        cu.CUtensorMapL2promotion(args.l2_promotion),
        cu.CUtensorMapFloatOOBfill(args.oob_fill),
    )


def encode(args: TensorMapArgs) -> bytes:
    """``cuTensorMapEncodeTiled`` -> the 128-byte map. Initialises the driver first (NoGPU without one);
    a refused map raises CudaError naming the call, its status and its arguments."""
    from .gpu import _driver, check, init_driver

    init_driver()  # cuInit and a current context (the encoder returns NOT_INITIALIZED before cuInit)
    cu = _driver()
    tensor_map = check(call_encode_tiled(cu, args), f"cuTensorMapEncodeTiled({args.to_json()})")
    return map_bytes(tensor_map)
