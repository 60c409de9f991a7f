"""Dense FP8 with row-wise scales, in ``torch._scaled_mm``'s row-wise layouts:

>>> out = ptxgen.scaled_gemm(a, b, scale_a, scale_b, out_dtype="bf16")        # doctest: +SKIP
>>> # == torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)

- ``a``: e4m3 or e5m2, M x K, K-major; ``b``: the same type, N x K, K-major (ptxgen's convention, as ``ptxgen.gemm``;
  torch's ``mat2`` is ``b.t()``);
- ``scale_a``: f32, M x 1 (or M); ``scale_b``: f32, 1 x N (or N): ``out[r, n] = (a @ b.T)[r, n] x scale_a[r] x scale_b[n]``;
- ``out_dtype``: "bf16" (default), "f16" or "f32" (or the torch dtype); ``bias``: N values, added after the scaling.

The kernel is the grouped row-wise kernel (``--grouped offs_rowwise``, ``ptxgen.scaled_grouped_gemm``) with one group
of M rows (``offs = [M]`` made once per M and device): the scales multiply the f32 accumulator after the main loop,
before the epilogue. Grouped kernels have no fused epilogue chain (ptxgen.derive.tile.rules), so ``bias`` is added by a
second, element-wise kernel (torch's ``add_`` on the output, in the output's type) rather than fused; the chain itself
has no per-row x per-column scale step (ptxgen.derive.store.fusion: alpha is one scalar, the FP8 output scale quantizes).
torch tensors only (the offsets are made with torch); one launch without bias.
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


def _check(torch, a, b, scale_a, scale_b, bias) -> tuple[int, int]:
    """(M, N) after the checks torch._scaled_mm's row-wise recipe makes (shapes, dtypes)."""
    if not all(isinstance(t, torch.Tensor) for t in (a, b, scale_a, scale_b)):
        raise ArgumentError("scaled_gemm takes torch tensors (a, b, scale_a, scale_b)")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ArgumentError(f"a must be M x K and b N x K (a @ b.T); got {tuple(a.shape)} and {tuple(b.shape)}")
    m, n = a.shape[0], b.shape[0]
    if tuple(scale_a.shape) not in ((m, 1), (m,)) or tuple(scale_b.shape) not in ((1, n), (n,)):
        raise ArgumentError(f"row-wise scales: scale_a M x 1 = {m} x 1 and scale_b 1 x N = 1 x {n}; got "
                            f"{tuple(scale_a.shape)} and {tuple(scale_b.shape)}")
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise DTypeError(f"scale_a and scale_b are float32; got {scale_a.dtype} and {scale_b.dtype}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (n,)):
        raise ArgumentError(f"bias holds N = {n} values; got {getattr(bias, 'shape', type(bias).__name__)}")
    if any(t.device.type != "cuda" for t in (a, b, scale_a, scale_b)):
        raise ArgumentError("scaled_gemm runs on CUDA tensors; got "
                            f"{', '.join(str(t.device) for t in (a, b, scale_a, scale_b))}")
    return m, n


def scaled_gemm(a, b, scale_a, scale_b, out_dtype=None, bias=None, *, stream=None):
    """``(a @ b.T) x scale_a x scale_b (+ bias)`` for FP8 ``a`` (M x K) and ``b`` (N x K); see the module. Returns
    an M x N tensor (rows padded to 16 bytes) without synchronizing; raises NoGPU without a usable GPU."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise ArgumentError("scaled_gemm takes torch tensors (import torch)")
    m, n = _check(torch, a, b, scale_a, scale_b, bias)
    from .grouped import batch_offs, scaled_grouped_gemm

    offs = batch_offs(1, m, a.device)
    out = scaled_grouped_gemm(a, b.unsqueeze(0), scale_a.reshape(m), scale_b.reshape(1, n), offs,
                              out_dtype=_out_token(out_dtype), stream=stream)
    if bias is not None:  # on the stream the product ran on
        from .api.launch.streams import stream_handle

        with torch.cuda.stream(torch.cuda.ExternalStream(stream_handle(stream, a), device=a.device)):
            out.add_(bias.to(out.dtype))
    return out
