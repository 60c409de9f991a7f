"""Dense FP8 with row-wise scales, in ``torch._scaled_mm``'s row-wise layouts:

>>> out = ptxgen.scaled_gemm(a, b, scale_a, scale_b, out_dtype="bf16")        # doctest: +SKIP
>>> # == torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)

- ``a``: e4m3 or e5m2, M x K, K-major; ``b``: N x K, K-major (ptxgen's convention, as ``ptxgen.gemm``; torch's ``mat2``
  is ``b.t()``);
- ``scale_a``: f32, M x 1 (or M); ``scale_b``: f32, 1 x N (or N): ``out[r, n] = (a @ b.T)[r, n] x scale_a[r] x scale_b[n]``;
- ``out_dtype``: "bf16" (default), "f16" or "f32" (or the torch dtype); ``bias``: N values, added in f32 after the
  scaling, before the one output rounding (as torch does).

The kernel is the dense FP8 kernel ``ptxgen.gemm``'s chooser picks for the shape, which accumulates each K-step in
the tensor core's FP8 accumulator with no promotion, as torch._scaled_mm does with ``use_fast_accum=True``: measured on
the H100 (runs/2026-12-06-h100-doors-one-launch, run 4) its result is 1.0e-5 to 1.5e-5 (relative Frobenius) from torch's
fast-accumulation result and as far from float64 (2.1e-3 to 3.5e-3), where torch's default, which promotes, is 1.7e-3
from float64; the grouped kernel below accumulates the same way. It runs with the epilogue chain
``rowscale[,bias=col:<its type>]`` (ptxgen.derive.store.fusion: step 0 multiplies the f32 accumulator by scale_a[r] x
scale_b[n], then the bias, read in its own type (f32, bf16 or f16; another type is cast to f32 first), is added in f32):
one launch through ``ptxgen.api.fused.gemm``'s prepared launch. Scale vectors are read contiguous (a copy is made for
an M x 1 / 1 x N view whose elements are not 4 bytes apart, or a scale_b not 8-byte aligned).

Where the dense kernel cannot take the call, the grouped row-wise kernel (``--grouped offs_rowwise``,
``ptxgen.scaled_grouped_gemm``) runs it with one group of M rows, and a bias is added by a second element-wise kernel:
``a`` and ``b`` of different FP8 types (e4m3 x e5m2): ptxgen.gemm's chooser takes one input type
(api.select.check_operand_pair), the grouped kernel the mix. (On the H100 that path with a bias measured 4e-2 from
float64 at 8192^3, e4m3 x e4m3 forced through it, where the dense kernel is 2.6e-3: not understood, run 4.)
K = 0 gives zeros (plus the bias) without a kernel. torch tensors only.
"""


from __future__ import annotations

import sys

from .runtime.launch.arrays import ArgumentError, DTypeError

_OUT_NAMES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def _out_token(out_dtype) -> str:
    if out_dtype is None:
        return "bf16"
    if not isinstance(out_dtype, str):
        name = str(out_dtype).removeprefix("torch.")
        if name not in _OUT_NAMES:
            raise DTypeError(f"scaled_gemm's out_dtype is bf16, f16 or f32, not {name}")
        return _OUT_NAMES[name]
    return out_dtype


def check_scale_shapes(m: int, n: int, scale_a_shape, scale_b_shape) -> None:
    """torch._scaled_mm's row-wise scale shapes (the door's check, and ``ptxgen.api.plan``'s on array metadata)."""
    if tuple(scale_a_shape) not in ((m, 1), (m,)) or tuple(scale_b_shape) not in ((1, n), (n,)):
        raise ArgumentError(f"row-wise scales: scale_a M x 1 = {m} x 1 and scale_b 1 x N = 1 x {n}; got "
                            f"{tuple(scale_a_shape)} and {tuple(scale_b_shape)}")


def _check(torch, a, b, scale_a, scale_b, bias) -> tuple[int, int]:
    """(M, N) after the checks torch._scaled_mm's row-wise recipe makes (shapes, dtypes)."""
    if not all(isinstance(t, torch.Tensor) for t in (a, b, scale_a, scale_b)):
        raise ArgumentError("scaled_gemm takes torch tensors (a, b, scale_a, scale_b)")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ArgumentError(f"a must be M x K and b N x K (a @ b.T); got {tuple(a.shape)} and {tuple(b.shape)}")
    m, n = a.shape[0], b.shape[0]
    check_scale_shapes(m, n, scale_a.shape, scale_b.shape)
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise DTypeError(f"scale_a and scale_b are float32; got {scale_a.dtype} and {scale_b.dtype}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (n,)):
        raise ArgumentError(f"bias holds N = {n} values; got {getattr(bias, 'shape', type(bias).__name__)}")
    if any(t.device.type != "cuda" for t in (a, b, scale_a, scale_b)):
        raise ArgumentError("scaled_gemm runs on CUDA tensors; got "
                            f"{', '.join(str(t.device) for t in (a, b, scale_a, scale_b))}")
    return m, n


def dense_takes(a, b) -> bool:
    """Whether the dense fused kernel takes the call (else the grouped row-wise kernel; see the module)."""
    return a.dtype == b.dtype


def _vector(torch, x, length: int, align: int):
    """``x`` (length x 1, 1 x length or length) as a contiguous f32 vector starting ``align``-byte aligned (a view when
    it is one already, else a copy)."""
    v = x.reshape(length)
    if (length > 1 and v.stride(0) != 1) or v.data_ptr() % align:
        v = v.clone(memory_format=torch.contiguous_format)
    return v


def scaled_gemm(a, b, scale_a, scale_b, out_dtype=None, bias=None, *, stream=None):
    """``(a @ b.T) x scale_a x scale_b (+ bias)`` for FP8 ``a`` (M x K) and ``b`` (N x K); see the module. Returns
    an M x N tensor (rows padded to 16 bytes) without synchronizing; raises NoGPU without a usable GPU."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise ArgumentError("scaled_gemm takes torch tensors (import torch)")
    m, n = _check(torch, a, b, scale_a, scale_b, bias)
    token = _out_token(out_dtype)
    if token not in _TORCH_OUT:
        raise DTypeError(f"scaled_gemm's out_dtype is bf16, f16 or f32, not {token}")
    if a.shape[1] == 0 or m == 0 or n == 0:
        return _empty_k(torch, a, m, n, scale_a, bias, token)
    if not dense_takes(a, b):
        return _grouped(torch, a, b, scale_a, scale_b, bias, token, m, n, stream)
    from .api import fused

    fb = None
    if bias is not None:
        fb = _vector(torch, bias if bias.dtype in (torch.float32, torch.bfloat16, torch.float16) else bias.to(torch.float32),
                     n, 8)
    return fused.gemm(a, b, bias=fb, scale_a=_vector(torch, scale_a, m, 4), scale_b=_vector(torch, scale_b, n, 8),
                      out_dtype=token, stream=stream)


_TORCH_OUT = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def _empty_k(torch, a, m, n, scale_a, bias, token):
    """K = 0: the product is zeros (plus the bias, rounded once); M or N = 0: an empty result."""
    dt = getattr(torch, _TORCH_OUT.get(token, "bfloat16"))
    out = torch.zeros((m, n), dtype=torch.float32, device=a.device)
    if bias is not None and m and n:
        out += bias.to(torch.float32)
    return out.to(dt)


def _grouped(torch, a, b, scale_a, scale_b, bias, token, m, n, stream):
    """The grouped row-wise kernel with one group of M rows (``offs = [M]`` made once per M and device); the bias by
    a second, element-wise kernel on the stream the product ran on (rounded twice: once to the output type by the GEMM,
    once by the add)."""
    from .grouped import batch_offs, scaled_grouped_gemm

    offs = batch_offs(1, m, a.device)
    out = scaled_grouped_gemm(a, b.unsqueeze(0), scale_a.reshape(m), scale_b.reshape(1, n), offs, out_dtype=token,
                              stream=stream)
    if bias is not None:
        from .api.launch.streams import stream_handle

        with torch.cuda.stream(torch.cuda.ExternalStream(stream_handle(stream, a), device=a.device)):
            out.add_(bias.to(out.dtype))
    return out
