"""What the kernels cannot read as it is, and the packed copies that make it readable: shared by every door
(``dispatch`` for the plain and batched GEMM, ``fused`` for the fused epilogue).

An operand the kernels cannot read as it is (rows not 16-byte aligned, neither dimension contiguous, a broadcast view)
is either read by a cp.async kernel whose copies narrow to the rows' alignment (4 or 8 bytes: :func:`narrow_copy_bytes`)
or copied once into a packed K-major buffer (torch and CuPy; said once per reason with ``warnings.warn``).
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import replace

from ...isa.types import Major
from ...runtime.launch.arrays import ArgumentError, ArrayInfo
from ...runtime.launch.launch import ROW_ALIGN_BYTES
from .binding import operand_major
from ..select import _INPUT_ARRAY_DTYPES

PACKABLE = ("torch", "cupy")
_WARNED: set = set()


def major_of(info: ArrayInfo) -> Major | None:
    """``binding.operand_major``, None where neither dimension is contiguous."""
    try:
        return operand_major(info)
    except ArgumentError:
        return None


def operand_problem(info: ArrayInfo) -> str | None:
    """Why the kernels cannot read this operand as it is (None: they can, or it is not ours to judge)."""
    if info.ndim != 2 or info.dtype not in _INPUT_ARRAY_DTYPES or 0 in info.shape:
        return None
    rows, cols = info.shape
    if any(size > 1 and stride <= 0 for size, stride in zip(info.shape, info.strides)):
        return "a broadcast view (stride 0)"
    major = major_of(info)
    if major is None:
        return "neither dimension is contiguous"
    ld = (info.strides[0] if rows > 1 else cols) if major is Major.K else (info.strides[1] if cols > 1 else rows)
    if rows > 1 if major is Major.K else cols > 1:
        if ld * info.itemsize % ROW_ALIGN_BYTES:
            return f"its rows start {ld * info.itemsize} B apart, not a multiple of 16 B"
    if info.ptr % ROW_ALIGN_BYTES:
        return "its data does not start 16-byte aligned"
    return None


def out_problem(oi: ArrayInfo, m: int, n: int) -> str | None:
    if oi.ndim != 2 or oi.shape != (m, n) or 0 in oi.shape:
        return None
    s0, s1 = oi.strides
    if n > 1 and s1 != 1:
        return "it is not row-major"
    if m > 1 and (s0 < n or s0 * oi.itemsize % ROW_ALIGN_BYTES):
        return f"its rows start {s0 * oi.itemsize} B apart, not a multiple of 16 B"
    if oi.ptr % ROW_ALIGN_BYTES:
        return "its data does not start 16-byte aligned"
    return None


def row_align(info: ArrayInfo, with_pointer: bool = True) -> int:
    """The largest of 16, 8, 4, 2, 1 bytes that the operand's rows (and its data pointer) start on."""
    rows, cols = info.shape
    major = major_of(info)
    ld = (info.strides[0] if rows > 1 else 0) if major is Major.K else (info.strides[1] if cols > 1 else 0)
    x = (ld * info.itemsize) | (info.ptr if with_pointer else 0) | ROW_ALIGN_BYTES
    return x & -x


def narrow_copy_bytes(ai: ArrayInfo, bi: ArrayInfo, packed: dict) -> tuple[int, bool] | None:
    """(copy bytes, whether a data pointer lowered them) when every operand gemm would pack is refused only for
    the alignment of its rows or data, and both are at least 4-byte aligned: a cp.async kernel with copies that
    narrow reads them as they are. None otherwise."""
    for info in (ai, bi):
        why = packed.get(info.name)
        if why is not None and not why.startswith(("its rows start", "its data does not start")):
            return None
    w = min(row_align(ai), row_align(bi))
    by_pointer = w < min(row_align(ai, False), row_align(bi, False))
    return (w, by_pointer) if w in (4, 8) else None


def pack_plan(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None) -> dict:
    """{argument name: why} for the torch/CuPy arrays that need a packed copy (inputs) or a staging output."""
    plan = {}
    if ai.ndim != 2 or bi.ndim != 2 or ai.shape[1] != bi.shape[1] or ai.dtype != bi.dtype:
        return plan  # the checks that follow say what is wrong
    for info in (ai, bi):
        why = operand_problem(info) if info.library in PACKABLE else None
        if why:
            plan[info.name] = why
    if oi is not None and oi.library in PACKABLE:
        why = out_problem(oi, ai.shape[0], bi.shape[0])
        if why:
            plan["out"] = why
    return plan


ADVICE = "pass an array with 16-byte aligned rows, one dimension contiguous, to avoid the copy"


def warn_once(name: str, why: str, what: str, door: str = "gemm", advice: str = ADVICE) -> None:
    """``warnings.warn`` once per (door, argument, reason with its numbers left out)."""
    key = (door, name, re.sub(r"\d+", "#", why))
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"ptxgen.{door}: {name}: {why}; {what} (said once; {advice})", stacklevel=4)


def padded_ld(info: ArrayInfo) -> int:
    """The row pitch (elements) of a packed copy: the rows padded to 16 bytes."""
    q = ROW_ALIGN_BYTES // info.itemsize
    return max(q, -(-info.shape[-1] // q) * q)


def packed_info(info: ArrayInfo) -> ArrayInfo:
    """The ArrayInfo of :func:`packed_copy`'s result: K-major, rows padded to 16 bytes, batches one after another, the
    data 16-byte aligned (its pointer stands for a buffer not yet allocated)."""
    ld = padded_ld(info)
    strides = (ld, 1) if info.ndim == 2 else (info.shape[1] * ld, ld, 1)
    return replace(info, strides=strides, ptr=(info.ptr | 0xFF) + 1)


def packed_copy(x, info: ArrayInfo):
    """A K-major copy of a 2-D or 3-D operand with rows padded to 16 bytes (a view of the padded buffer's first K)."""
    ld = padded_ld(info)
    shape = (*info.shape[:-1], ld)
    k = info.shape[-1]
    if info.library == "torch":
        buf = x.new_empty(shape)
        view = buf[..., :k]
        view.copy_(x)
        return view
    cupy = sys.modules["cupy"]
    buf = cupy.empty(shape, dtype=x.dtype)
    view = buf[..., :k]
    view[...] = x
    return view


def copy_into(out, info: ArrayInfo, result) -> None:
    """out[...] = result (torch or CuPy), queued on the current stream."""
    if info.library == "torch":
        out.copy_(result)
    else:
        out[...] = result
