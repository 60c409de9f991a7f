"""A float64 numpy reference of the fused epilogue chain (imports nothing from ptxgen).

Transcribed from the chain's definition (docs/epilogue-chain.md), not from the kernel: the product in float64,
then alpha, beta x C, bias, activation, residual, and the output rounding (f16/bf16/f32 by numpy/bit rounding
to nearest even; e4m3 to the nearest of its 254 finite values, ties to the even code, saturating at +-448).

>>> import numpy as np
>>> round_e4m3(np.array([1.0, 1.06, 1.07, 1.1875, 500.0, -0.0019])).tolist()   # 1.1875: a tie, to the even code (1.25)
[1.0, 1.0, 1.125, 1.25, 448.0, -0.001953125]
"""

from __future__ import annotations

import math

import numpy as np


def _e4m3_grid() -> np.ndarray:
    """The non-negative finite e4m3 values, code 0x00..0x7E in order (0x7F is NaN): subnormals m/8 x 2^-6,
    normals (1 + m/8) x 2^(e - 7)."""
    vals = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        vals.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(vals)


E4M3_GRID = _e4m3_grid()


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to nearest e4m3 value, ties to the even code; |x| > 448 saturates (cvt.rn.satfinite)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), E4M3_GRID[-1])
    hi = np.clip(np.searchsorted(E4M3_GRID, a), 0, len(E4M3_GRID) - 1)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - E4M3_GRID[lo], E4M3_GRID[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    out = np.sign(x) * E4M3_GRID[pick]
    return np.where(np.isnan(x), np.nan, out)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> the nearest bf16 (via f32; round to nearest even on the 16 dropped bits), as float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def round_to(x: np.ndarray, out: str) -> np.ndarray:
    if out == "f32":
        return np.asarray(x, dtype=np.float32).astype(np.float64)
    if out == "f16":
        return np.asarray(x, dtype=np.float16).astype(np.float64)
    if out == "bf16":
        return round_bf16(x)
    if out == "e4m3":
        return round_e4m3(x)
    raise ValueError(out)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def activation(y: np.ndarray, act: str) -> np.ndarray:
    if act == "none":
        return y
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "gelu_tanh":
        return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    if act == "gelu_erf":
        return 0.5 * y * (1.0 + _erf(y / math.sqrt(2.0)))
    if act == "silu":
        return y / (1.0 + np.exp(-y))
    raise ValueError(act)


def activation_grad(z: np.ndarray, act: str) -> np.ndarray:
    """act'(z) in float64, differentiated by hand from :func:`activation` (the chain's ``dact`` step multiplies by it):
    gelu_tanh: 0.5 (1 + t) + 0.5 z (1 - t^2) k0 (1 + 3 k1 z^2), t = tanh(k0 (z + k1 z^3)); gelu_erf: Phi(z) + z phi(z);
    silu: s (1 + z (1 - s)), s the logistic function; relu: 1 where z > 0, else 0 (torch's threshold_backward)."""
    z = np.asarray(z, dtype=np.float64)
    if act == "none":
        return np.ones_like(z)
    if act == "relu":
        return (z > 0).astype(np.float64)
    if act == "gelu_tanh":
        k0, k1 = math.sqrt(2.0 / math.pi), 0.044715
        t = np.tanh(k0 * (z + k1 * z ** 3))
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * z * z)
    if act == "gelu_erf":
        return 0.5 * (1.0 + _erf(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    if act == "silu":
        with np.errstate(over="ignore"):
            s = 1.0 / (1.0 + np.exp(-z))
        return s * (1.0 + z * (1.0 - s))
    raise ValueError(act)


def chain(acc: np.ndarray, *, alpha: float = 1.0, beta: float = 0.0, c=None, bias=None, bias_axis: str = "col",
          act: str = "none", residual=None, scale=None, scale_mode: str | None = None, out: str = "bf16",
          dact: str = "none", aux=None, scale_a=None, scale_b=None):
    """The chain on an M x N float64 ``acc`` (= A @ B^T in float64). Returns (y, d, amax): y before the output
    rounding, d the output values (rounded to ``out``; for e4m3 the quantized values q = e4m3(y x s)), amax
    (per tensor: a 1-element array; per row: M; None without FP8 output). ``dact`` with ``aux`` (the saved
    pre-activation z, M x N): y x act'(z) in the activation's place. The pre-activation a chain with ``aux`` writes is
    this function's y with ``act="none"`` (and no residual), rounded to ``out``. ``scale_a`` (M) and ``scale_b`` (N):
    the row-wise FP8 dequantization ``acc x scale_a[r] x scale_b[n]``, first (torch._scaled_mm's row-wise recipe)."""
    y = np.asarray(acc, dtype=np.float64)
    if scale_a is not None:
        y = y * np.asarray(scale_a, dtype=np.float64).reshape(-1)[:, None] * np.asarray(scale_b, dtype=np.float64).reshape(-1)[None, :]
    y = alpha * y
    if c is not None:
        y = y + beta * np.asarray(c, dtype=np.float64)
    if bias is not None:
        b = np.asarray(bias, dtype=np.float64)
        y = y + (b[None, :] if bias_axis == "col" else b[:, None])
    y = activation(y, act)
    if dact != "none":
        y = y * activation_grad(aux, dact)
    if residual is not None:
        y = y + np.asarray(residual, dtype=np.float64)
    if scale_mode is None:
        return y, round_to(y, out), None
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    if scale_mode == "tensor":
        return y, round_e4m3(y * s[0]), np.array([np.abs(y).max() if y.size else 0.0])
    return y, round_e4m3(y * s[:, None]), np.abs(y).max(axis=1) if y.shape[1] else np.zeros(y.shape[0])
