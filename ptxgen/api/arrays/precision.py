"""Float32 inputs: tf32 on the tensor cores, or 3xTF32 (float32 accuracy) with the same kernels.

wgmma and tcgen05 read a float32 operand as tf32: 8 exponent bits and the top 10 mantissa bits; the low 13 bits of
each element are not used. ``precision="3xtf32"`` computes float32 products to about float32 accuracy with the tf32
kernels as they are: each operand x is split into ``big`` (x rounded to the nearest tf32 value, ties to even: its low
13 bits zero, so the tensor cores read it exactly) and ``small = x - big`` (exact in float32, at most half a tf32 ulp
of x), and one GEMM runs over a K three times as long (rounded up to a multiple of 4 with zero columns, so rows stay
16-byte aligned)::

    [a_small | a_big | a_big] @ [b_big | b_small | b_big].T = a_small b_big + a_big b_small + a_big b_big

dropping ``a_small b_small`` (below 2^-22 of |a b|). The correction terms come first along K, so the float32
accumulator sums them while it is small (CUTLASS orders its three MMAs so too): in a CPU model of the kernel's
float32 accumulation (tests/test_precision_split.py's _accumulate_f32; K = 10000, inputs uniform in [0, 1), seeds
0-2) the largest relative error was 1.3-1.8e-6 this way, 4.3-5.6e-6 with the big products first. The tensor cores
read ``small`` with its low 13 bits dropped: a relative error of at most 2^-10 of small, 2^-21 of x. Accumulation
is float32 in the kernel; an epilogue chain (bias, activation, c, residual) applies once, to the one GEMM's result.

The accumulation: the tensor core adds each K-step's products to its f32 accumulator rounded toward zero (the model of
``tools/accumulation_model.py``, fitted to two H100 measurements: ptxgen's tf32 kernel over the 3 K columns lands 0.38
from float64 on PyTorch's ``test_cublas_addmm`` at K = 10,000, values in [-9, 9], where torch lands 0.031; the model
says 0.30 and 0.033). So on sm_90a a 3xTF32 call runs the promoting form of the tf32 kernel (``--promote 4``,
``ptxgen.derive.tile.rules_promote``; the doors call with the split operands inside ``api.select.promoting``): each 4
K-tiles of 32 (128 of K) multiplied into a fresh partial, added to the f32 accumulator in registers rounded to nearest,
as block-FP8 kernels promote. The model predicts 0.0040 for that case (0.0035 with a promotion every K-tile of 32; 400
outputs, seed 0; seeds 0-2: 0.0036-0.0047 and 0.0035-0.0059, torch's chain 0.025-0.033; ``python
tools/accumulation_model.py``): a model (L1), not a GPU result. The chooser's tf32 tiles are restricted to those the
partial's registers fit (128 x 128 where tf32 takes 128 x 256); tf32 calls keep their kernels; sm_100a has no promoting
form and runs the tf32 kernel. (CUTLASS's 3xTF32 "fast accurate" GEMM splits the same way inside its kernel: ``big`` rounded,
``small = x - big``, three tf32 MMAs.) The cost: element-wise passes over both operands, their joined copies, and a
GEMM over 3 K.

Which precision a call computes with (float32 inputs only; other types ignore ``precision``):

- ``precision="tf32"`` or ``"3xtf32"``: as said;
- ``precision=None`` with torch tensors: torch's float32 matmul setting, as ``torch.mm`` follows it:
  ``torch.backends.cuda.matmul.fp32_precision`` "ieee" (``torch.get_float32_matmul_precision()`` "highest", torch's
  default) is 3xTF32, "tf32" ("high" or "medium") is tf32;
- ``precision=None`` with other arrays (CuPy, ...): tf32, as before this mode existed.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace

import numpy as np

from ...runtime.launch.arrays import ArgumentError

TF32 = "tf32"
THREE = "3xtf32"
PRECISIONS = (TF32, THREE)
DROPPED_BITS = 13  # tf32 keeps 10 of float32's 23 mantissa bits
_LOW = (1 << DROPPED_BITS) - 1  # 0x1FFF
_EXP = 0x7F800000
F32 = [None]  # torch.float32 once torch is imported: the doors' test for "a float32 tensor, maybe 3xTF32"


def check(precision) -> None:
    if precision is not None and precision not in PRECISIONS:
        raise ArgumentError(f"precision {precision!r}: one of {', '.join(map(repr, PRECISIONS))}, or None (torch tensors: "
                            "torch's float32 matmul precision; other arrays: tf32)")


def torch_precision(torch) -> str:
    """3xtf32 where torch computes float32 matmuls in full float32, tf32 where it allows tf32. The legacy getter first
    (a C call, about 0.5 us; the new ``fp32_precision`` attributes cost several): it raises where the new API set tf32,
    and then the new API answers ("none" inherits the global setting)."""
    try:
        return THREE if torch.get_float32_matmul_precision() == "highest" else TF32
    except RuntimeError:
        p = torch.backends.cuda.matmul.fp32_precision
        if p == "none":
            p = torch.backends.fp32_precision
        return TF32 if p == "tf32" else THREE


def is_f32(x) -> bool:
    return str(getattr(x, "dtype", "")).removeprefix("torch.") == "float32"


def resolve(precision, a) -> str:
    """The precision a float32 call with ``a`` computes with (see the module)."""
    check(precision)
    if precision is not None:
        return precision
    torch = sys.modules.get("torch")
    return torch_precision(torch) if torch is not None and isinstance(a, torch.Tensor) else TF32


def note_torch() -> None:
    if F32[0] is None and "torch" in sys.modules:
        F32[0] = sys.modules["torch"].float32


def k_split(k: int) -> int:
    """The K of the 3xTF32 GEMM: 3 K rounded up to a multiple of 4 (rows of 16 bytes)."""
    return -(-3 * k // 4) * 4


# ------------------------------------------------------------------------------------------------
# the split: big = x rounded to tf32 (ties to even), small = x - big
# ------------------------------------------------------------------------------------------------
def _round_bits(bits, low_mask, keep_mask):
    """Round-to-nearest-even of float32 bit patterns to tf32 (works on numpy/CuPy uint32 and torch int32 alike: two's
    complement addition is the same); where that reaches the all-ones exponent (x non-finite, or rounding up past the
    largest tf32 value) the bits are truncated instead, so big stays finite for finite x."""
    r = (bits + ((bits >> DROPPED_BITS) & 1) + (low_mask >> 1)) & keep_mask
    over = (r & _EXP) == _EXP
    return r, over


def split_numpy(x, xp=np):
    """(big, small) of a float32 numpy (or CuPy, ``xp=cupy``) array."""
    x = xp.ascontiguousarray(x, dtype=xp.float32)
    bits = x.view(xp.uint32)
    r, over = _round_bits(bits, xp.uint32(_LOW), xp.uint32(0xFFFFFFFF ^ _LOW))
    big = xp.where(over, bits & xp.uint32(0xFFFFFFFF ^ _LOW), r).view(xp.float32)
    with np.errstate(invalid="ignore"):  # NaN - NaN
        small = xp.where(xp.isinf(x), xp.float32(0), x - big)
    return big, small


def split_torch(x):
    """(big, small) of a float32 torch tensor, on its device."""
    torch = sys.modules["torch"]
    x = x.detach()  # the split is data, not part of an autograd graph
    bits = x.contiguous().view(torch.int32)
    r, over = _round_bits(bits, _LOW, ~_LOW)
    big = torch.where(over, bits & ~_LOW, r).view(torch.float32)
    small = (x - big).masked_fill_(x.isinf(), 0.0)
    return big, small


def _joined(parts, pad: int, like, xp):
    """The parts side by side along K, with ``pad`` zero columns."""
    if xp is None:
        torch = sys.modules["torch"]
        if pad:
            parts = parts + (torch.zeros(*like.shape[:-1], pad, dtype=like.dtype, device=like.device),)
        return torch.cat(parts, dim=-1)
    if pad:
        parts = parts + (xp.zeros(like.shape[:-1] + (pad,), dtype=xp.float32),)
    return xp.concatenate(parts, axis=-1)


def split_operands(a, b, stream=None):
    """([a_small | a_big | a_big], [b_big | b_small | b_big]) along K, zero-padded to :func:`k_split` columns; queued
    on ``stream`` (None: the library's current stream), the stream the GEMM reads them on, so the copies' memory is
    not reused before it has."""
    xp = None if _is_torch(a) else sys.modules["cupy"]
    split = split_torch if xp is None else (lambda x: split_numpy(x, xp))
    with _on_stream(a, xp, stream):
        (ab, as_), (bb, bs) = split(a), split(b)
        pad = k_split(a.shape[-1]) - 3 * a.shape[-1]
        return _joined((as_, ab, ab), pad, ab, xp), _joined((bb, bs, bb), pad, bb, xp)


def _on_stream(x, xp, stream):
    if stream is None:
        return contextlib.nullcontext()
    from ..launch.streams import stream_handle

    handle = stream_handle(stream)
    if xp is not None:
        return xp.cuda.ExternalStream(handle)
    torch = sys.modules["torch"]
    s = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(handle, device=x.device)
    return torch.cuda.stream(s)


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _device_array(x) -> str | None:
    """"torch" or "cupy" for a float32 array on a GPU the split can be computed for, else None."""
    if _is_torch(x):
        return "torch" if x.device.type == "cuda" else None
    cupy = sys.modules.get("cupy")
    return "cupy" if cupy is not None and isinstance(x, cupy.ndarray) else None


def splittable(a, b, out=None, grouped: bool = False) -> bool:
    """Whether a 3xTF32 call can split these operands: float32 torch tensors on a GPU (or CuPy arrays) of 2 or 3
    dimensions with the same K (and an ``out`` of the product's M x N). Anything else goes on unsplit, to the door's own
    checks, so a refusal speaks of the arrays as passed; float32 arrays of another library are refused here (3xTF32
    computes its split with torch or CuPy)."""
    sa, sb = tuple(getattr(a, "shape", ())), tuple(getattr(b, "shape", ()))
    if len(sa) not in (2, 3) or len(sb) not in (2, 3) or sa[-1] != sb[-1] or not (is_f32(a) and is_f32(b)):
        return False
    if len(sa) < len(sb) and not grouped:  # ptxgen.gemm takes no 2-D a with a 3-D b (grouped_gemm does)
        return False
    lib = _device_array(a)
    if lib is None and not _is_torch(a):
        raise ArgumentError(f"precision 3xtf32 splits float32 operands with torch or CuPy; a is {type(a).__name__} "
                            "(pass precision='tf32', or torch tensors / CuPy arrays)")
    if lib is None or _device_array(b) != lib:
        return False
    return out is None or tuple(getattr(out, "shape", ()))[-2:] == (sa[-2], sb[-2])


def operands(a, b, out, precision, stream=None, grouped: bool = False):
    """The door's operands: the split ones (:func:`split_operands`) where the call computes 3xTF32, else a and b."""
    note_torch()
    if not is_f32(a):
        check(precision)
        return a, b
    if resolve(precision, a) != THREE or not splittable(a, b, out, grouped):
        return a, b
    return split_operands(a, b, stream)


def split_infos(ai, bi, oi, a, precision, grouped: bool = False):
    """For ``ptxgen.api.plan``: (precision, ai, bi) as the door computes: for a 3xTF32 call the ArrayInfos of the split
    operands (contiguous, K = :func:`k_split`, fresh allocations) in place of a and b; the precision is None for
    inputs that are not float32."""
    if ai.dtype != "f32":
        check(precision)
        return None, ai, bi
    p = resolve(precision, a)
    if precision is None and ai.library == "torch" and not _is_torch(a):  # metadata standing for a torch tensor (ptxgen plan)
        torch = sys.modules.get("torch")
        p = THREE if torch is None else torch_precision(torch)  # torch's default is "highest"
    if p != THREE or ai.ndim not in (2, 3) or bi.ndim not in (2, 3) or ai.shape[-1] != bi.shape[-1] or bi.dtype != "f32" \
            or (ai.ndim < bi.ndim and not grouped):
        return p, ai, bi
    if ai.library not in ("torch", "cupy") or bi.library != ai.library:
        raise ArgumentError(f"precision 3xtf32 splits float32 operands with torch or CuPy; a is a {ai.library!r} array "
                            "(pass precision='tf32', or torch tensors / CuPy arrays)")
    if oi is not None and oi.shape[-2:] != (ai.shape[-2], bi.shape[-2]):
        return p, ai, bi
    k = k_split(ai.shape[-1])
    return p, _split_info(ai, k), _split_info(bi, k)


def _split_info(info, k: int):
    shape = (*info.shape[:-1], k)
    strides = (k, 1) if len(shape) == 2 else (shape[1] * k, k, 1)
    return replace(info, shape=shape, strides=strides, ptr=(info.ptr | 0xFFFF) + 1)
