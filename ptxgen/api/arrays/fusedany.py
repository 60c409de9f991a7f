"""The fused door takes every tensor the plain door takes: what ``fused.gemm``'s slow path does with arrays its
kernels cannot read as they are (the plain path's rules, ``api.arrays.packing``, applied to the fused call too).

* Operand rows aligned to 8 or 4 bytes only (K = 1, 10, 50 ... in bf16): the cp.async kernel copying that many bytes,
  with the chain (``narrow_spec``); no copy.
* Anything else the kernels cannot read (a transposed view of a type the tensor cores read only K-major, such as
  float32 / tf32; neither dimension contiguous; a broadcast view; rows not 4-byte aligned): a packed K-major copy,
  said once with ``warnings.warn`` (``pack_operands``).
* An ``out`` with N = 1, an odd or unaligned row stride, or not row-major: computed into a packed output, then copied
  into ``out`` (``pack_operands``).
* ``c`` or ``residual`` that is not row-major with an even row stride (N = 1 included), or a ``bias`` that is not
  contiguous or 8-byte aligned: a packed copy with an even row stride (``readable_aux``).
* 3-D ``a`` (torch.baddbmm's B x M x K, with a B x N x K or shared N x K ``b``): one fused launch per batch
  (``per_batch``: the batched kernels are derived without the chain, derive.tile.rules).
"""

from __future__ import annotations

import sys

from ...runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from .packing import PACKABLE, narrow_copy_bytes, packed_copy, warn_once
from ..select import narrow_spec_for_arrays

DOOR = "gemm (fused epilogue)"


def narrow_spec(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, plan: dict,
                arch: str | None = None):
    """(plain spec, whether only a data pointer lowered the alignment) for operands a cp.async kernel with narrower
    copies reads as they are, else None (the caller packs). ``arch``: the GPU's (None: the one present)."""
    if "out" in plan:
        return None
    narrow = narrow_copy_bytes(ai, bi, plan)
    if narrow is None:
        return None
    try:
        spec, _ = narrow_spec_for_arrays(ai, bi, oi, out_dtype, narrow[0], arch=arch)
    except (ArgumentError, DTypeError):
        return None
    return spec, narrow[1]


def pack_operands(call, a, b, out, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, plan: dict):
    """``call(a, b, out)`` (the fused gemm with every other argument bound) on packed copies of the operands ``plan``
    names; an ``out`` it names gets the result copied in."""
    if "a" in plan:
        warn_once("a", plan["a"], "computing with a packed K-major copy", DOOR)
        a = packed_copy(a, ai)
    if "b" in plan:
        warn_once("b", plan["b"], "computing with a packed K-major copy", DOOR)
        b = packed_copy(b, bi)
    if "out" not in plan:
        return call(a, b, out)
    warn_once("out", plan["out"], "computing into a packed output and copying it into out", DOOR)
    result = call(a, b, None)
    y = result[0] if isinstance(result, tuple) else result
    if oi.library == "torch":
        out.copy_(y)
    else:
        out[...] = y
    return (out, *result[1:]) if isinstance(result, tuple) else out


def matrix_problem(info: ArrayInfo, m: int, n: int) -> str | None:
    """Why the epilogue cannot read an M x N ``c`` or ``residual`` as it is (None: it can, or the checks will say)."""
    if info.ndim != 2 or info.shape != (m, n) or info.library not in PACKABLE:
        return None
    if n > 1 and info.strides[1] != 1:
        return "it is not row-major"
    ld = info.strides[0] if m > 1 else n + n % 2
    if ld % 2 or info.ptr % (2 * info.itemsize):
        return f"its rows are {ld} elements apart (the epilogue reads column pairs: an even stride)"
    return None


def vector_problem(info: ArrayInfo) -> str | None:
    """Why the epilogue cannot read a vector argument (bias) as it is."""
    if info.library not in PACKABLE or info.ndim != 1:
        return None
    if info.shape[0] > 1 and info.strides[0] != 1:
        return "it is not contiguous"
    if info.ptr % 8:
        return "it does not start 8-byte aligned"
    return None


def readable_aux(name: str, x, info: ArrayInfo, m: int, n: int):
    """``x``, or a copy the epilogue can read (rows an even number of elements apart, or a contiguous vector)."""
    why = vector_problem(info) if name == "bias" else matrix_problem(info, m, n)
    if why is None:
        return x
    warn_once(name, why, "computing with a packed copy", DOOR)
    if info.ndim == 1:
        if info.library == "torch":
            return x.clone(memory_format=sys.modules["torch"].contiguous_format)
        return sys.modules["cupy"].ascontiguousarray(x)
    ld = n + n % 2
    if info.library == "torch":
        buf = x.new_empty((m, ld))
        view = buf[:, :n]
        view.copy_(x)
        return view
    buf = sys.modules["cupy"].empty((m, ld), dtype=x.dtype)
    view = buf[:, :n]
    view[...] = x
    return view


CONVERTIBLE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}  # ptxgen dtype -> torch / CuPy name


def type_problem(info: ArrayInfo, want: str) -> str | None:
    """Why the epilogue cannot read ``c`` or ``residual`` in its type (the chain reads them in the output's type, bf16
    for an FP8 output): None where it is that type, or not a float array ptxgen can convert."""
    if info.dtype == want or info.library not in PACKABLE or info.dtype not in CONVERTIBLE or want not in CONVERTIBLE:
        return None
    return f"it is {info.dtype} and the epilogue reads it as the output's type, {want}"


def converted(name: str, x, info: ArrayInfo, want: str):
    """A copy of ``x`` in type ``want`` (said once with warnings.warn), as torch.addmm reads a C of another type."""
    warn_once(name, type_problem(info, want), f"computing with a {want} copy", DOOR)
    if info.library == "torch":
        torch = sys.modules["torch"]
        return x.to(getattr(torch, CONVERTIBLE[want]))
    return x.astype(CONVERTIBLE[want])


def per_batch(call, a, b, out, ai: ArrayInfo, bi: ArrayInfo, c, residual):
    """A B x M x K ``a`` (torch.baddbmm's form): ``call(a_i, b_i, out_i, c_i, residual_i)`` per batch, ``b``, ``c`` and
    ``residual`` batched (leading B) or shared. Returns ``out`` (B x M x N; allocated by torch when not given)."""
    if ai.ndim != 3 or bi.ndim not in (2, 3) or (bi.ndim == 3 and bi.shape[0] != ai.shape[0]):
        raise ArgumentError(f"a is {ai.shape} and b is {bi.shape}: a batched fused call takes a B x M x K a with a B x N x K "
                            "(or a shared N x K) b")
    batch = ai.shape[0]

    def part(x, i):
        return x[i] if x is not None and len(x.shape) == 3 else x

    if out is None and ai.library != "torch":
        raise ArgumentError("pass out= (B x M x N): a batched fused call allocates outputs only for torch tensors")
    if batch == 0 and out is None:
        return a.new_empty((0, ai.shape[1], bi.shape[-2]))
    for i in range(batch):
        r = call(a[i], part(b, i), None if out is None else out[i], part(c, i), part(residual, i))
        if out is None:  # the output's type is the first slice's: allocate the batch, keep slice 0
            out = r.new_empty((batch, *r.shape))
            out[0].copy_(r)
    return out
