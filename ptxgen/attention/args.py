"""The checks on ``ptxgen.attention``'s arguments (no GPU needed): ArgumentError / DTypeError naming the rule."""

from __future__ import annotations

from dataclasses import dataclass

from ..author import ArgumentError, DType, DTypeError
from .spec import HEAD_DIMS

TORCH_DTYPES = {"bfloat16": DType.BF16, "float16": DType.F16}


@dataclass(frozen=True)
class AttentionProblem:
    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    dtype: DType

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


def _dtype(t, name: str) -> DType:
    s = str(getattr(t, "dtype", "")).removeprefix("torch.")
    if s not in TORCH_DTYPES:
        raise DTypeError(f"{name}: ptxgen.attention takes bfloat16 or float16 tensors, not {s or type(t).__name__}")
    return TORCH_DTYPES[s]


def _layout(t, name: str) -> None:
    if t.stride(-1) != 1:
        raise ArgumentError(f"{name}: the head dim must be contiguous (stride(-1) = 1, got {t.stride(-1)}); "
                            "TMA reads rows of the head dim")
    esize = t.element_size()
    for dim in range(3):
        if t.shape[dim] > 1 and (t.stride(dim) * esize) % 16:
            raise ArgumentError(f"{name}: stride({dim}) = {t.stride(dim)} elements is not a multiple of 16 bytes "
                                "(a tensor map's global strides must be)")
    if t.data_ptr() % 16:
        raise ArgumentError(f"{name}: the data pointer {t.data_ptr():#x} is not 16-byte aligned")


def check_arguments(q, k, v, out=None, scale=None, device_types=("cuda",)) -> AttentionProblem:
    names = ("q", "k", "v")
    for t, n in zip((q, k, v), names):
        if not hasattr(t, "shape") or not hasattr(t, "stride"):
            raise ArgumentError(f"{n}: expected a torch tensor, got {type(t).__name__}")
    dts = [_dtype(t, n) for t, n in zip((q, k, v), names)]
    if len(set(dts)) != 1:
        raise DTypeError(f"q, k and v must share one dtype, got {', '.join(d.value for d in dts)}")
    for t, n in zip((q, k, v), names):
        if t.dim() != 4:
            raise ArgumentError(f"{n}: expected 4 dimensions (batch, heads, seqlen, head_dim), got shape {tuple(t.shape)}")
    b, h, sq, d = q.shape
    if k.shape != v.shape:
        raise ArgumentError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape")
    kb, hk, sk, kd = k.shape
    if kb != b:
        raise ArgumentError(f"batch: q has {b}, k and v have {kb}")
    if kd != d:
        raise ArgumentError(f"head_dim: q has {d}, k and v have {kd} (this kernel needs them equal)")
    if d not in HEAD_DIMS:
        raise ArgumentError(f"head_dim {d}: the kernel is built for {', '.join(map(str, HEAD_DIMS))}")
    if hk < 1 or h % hk:
        raise ArgumentError(f"heads: k and v have {hk} heads, which must divide q's {h} (grouped-query attention)")
    if sq < 1 or sk < 1:
        raise ArgumentError(f"seqlen: q has {sq}, k and v have {sk}; both must be at least 1")
    if scale is not None and not (isinstance(scale, (int, float)) and scale == scale and abs(scale) != float("inf")):
        raise ArgumentError(f"scale must be a finite number or None, not {scale!r}")
    for t, n in zip((q, k, v), names):
        _layout(t, n)
    if out is not None:
        if _dtype(out, "out") is not dts[0]:
            raise DTypeError(f"out: dtype {str(out.dtype).removeprefix('torch.')}, expected q's")
        if tuple(out.shape) != (b, h, sq, d):
            raise ArgumentError(f"out: shape {tuple(out.shape)}, expected {(b, h, sq, d)}")
        if out.stride(-1) != 1 or out.data_ptr() % 4:
            raise ArgumentError("out: the head dim must be contiguous and the pointer 4-byte aligned")
    devices = {str(t.device) for t in (q, k, v) + (() if out is None else (out,))}
    if len(devices) != 1 or not next(iter(devices)).startswith(device_types):  # ptxgen.api.plan: meta tensors too
        raise ArgumentError(f"q, k, v{' and out' if out is not None else ''} must be on one CUDA device, got {sorted(devices)}")
    return AttentionProblem(b, h, hk, sq, sk, d, dts[0])
