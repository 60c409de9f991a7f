"""Element encodings in numpy: random inputs as raw codes, and raw codes back to float64.

numpy has f16 but no bf16, tf32 or fp8; these are done with bit operations and 256-entry tables.

>>> decode(np.array([0x38, 0xB8, 0x7E], dtype=np.uint8), "e4m3").tolist()   # 1.0, -1.0, 448 (max)
[1.0, -1.0, 448.0]
>>> decode(np.array([0x3F80], dtype=np.uint16), "bf16").tolist()
[1.0]
"""

from __future__ import annotations

import numpy as np

CODE_DTYPE = {1: np.uint8, 2: np.uint16, 4: np.uint32}
BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "f32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "s32": 4}


def _fp8_table(exp_bits: int, man_bits: int, bias: int, ieee_inf: bool) -> np.ndarray:
    vals = np.empty(256, dtype=np.float64)
    for code in range(256):
        s = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        top = (1 << exp_bits) - 1
        if ieee_inf and e == top:
            vals[code] = s * np.inf if m == 0 else np.nan
        elif not ieee_inf and e == top and m == (1 << man_bits) - 1:
            vals[code] = np.nan  # e4m3: S.1111.111 is NaN, there is no infinity
        elif e == 0:
            vals[code] = s * (m / (1 << man_bits)) * 2.0 ** (1 - bias)
        else:
            vals[code] = s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return vals


E4M3 = _fp8_table(4, 3, 7, ieee_inf=False)
E5M2 = _fp8_table(5, 2, 15, ieee_inf=True)


def _mx_narrow_table(exp_bits: int, man_bits: int, bias: int) -> np.ndarray:
    """OCP MX v1.0 FP6/FP4: sign, exponent, mantissa; subnormals at exponent 0; no infinity, no NaN."""
    n = 1 + exp_bits + man_bits
    vals = np.empty(1 << n, dtype=np.float64)
    for code in range(1 << n):
        s = -1.0 if code >> (n - 1) & 1 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        frac = m / (1 << man_bits)
        vals[code] = s * (frac * 2.0 ** (1 - bias) if e == 0 else (1 + frac) * 2.0 ** (e - bias))
    return vals


E2M1 = _mx_narrow_table(2, 1, 1)  # 16 codes, +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}
E2M3 = _mx_narrow_table(2, 3, 1)  # 64 codes, max 7.5
E3M2 = _mx_narrow_table(3, 2, 3)  # 64 codes, max 28
# Scale types. UE8M0 (OCP MX 'E8M0'): 2^(code - 127), 0xFF is NaN, no zero and no sign.
UE8M0 = np.array([np.nan if c == 0xFF else 2.0 ** (c - 127) for c in range(256)], dtype=np.float64)
# UE4M3 (NVFP4's scale): e4m3 without its sign bit; codes 0x00-0x7F as e4m3 (0x7F NaN), bit 7 must be 0.
UE4M3 = np.concatenate([E4M3[:128], np.full(128, np.nan)])
NARROW_TABLES = {"e2m1": E2M1, "e2m3": E2M3, "e3m2": E3M2, "ue8m0": UE8M0, "ue4m3": UE4M3}


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """[..., K] e2m1 codes (0-15) -> [..., K/2] bytes: element 2i in bits 0-3, element 2i+1 in bits 4-7
    (two to a byte, no padding: what kind::mxf4/mxf4nvf4 read; sub-byte element i at bit 4i, CUTLASS's order)."""
    c = np.asarray(codes).astype(np.uint8)
    if c.shape[-1] % 2 or (c > 15).any():
        raise ValueError("pack_e2m1 takes 4-bit codes along an even last dimension")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    p = np.asarray(packed).astype(np.uint8)
    out = np.empty(p.shape[:-1] + (2 * p.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


def encode_nearest(values: np.ndarray, dtype: str) -> np.ndarray:
    """float -> the code of the nearest finite value of ``dtype`` (ties to the lower code), for test data."""
    table = NARROW_TABLES.get(dtype) if dtype in NARROW_TABLES else {"e4m3": E4M3, "e5m2": E5M2}[dtype]
    ok = np.flatnonzero(np.isfinite(table))
    v = np.asarray(values, dtype=np.float64)
    idx = np.abs(v[..., None] - table[ok]).argmin(axis=-1)
    return ok[idx].astype(np.uint8)


def block_scaled_reference(a: np.ndarray, sfa: np.ndarray, b: np.ndarray, sfb: np.ndarray, vec: int) -> np.ndarray:
    """D[m, n] = sum_k (A[m, k] * SFA[m, k // vec]) * (B[n, k] * SFB[n, k // vec]) in float64.

    ``a`` is M x K and ``b`` N x K (decoded values), ``sfa`` M x ceil(K / vec) and ``sfb`` N x ceil(K / vec)
    (decoded scale values): PTX '(A * scale_A) * (B * scale_B) + D', each chunk of ``vec`` elements of a row
    along K multiplied by its own scale factor (#tcgen05-block-scaling).
    """
    k = a.shape[1]
    sa = np.repeat(sfa, vec, axis=1)[:, :k]
    sb = np.repeat(sfb, vec, axis=1)[:, :k]
    return (a * sa) @ (b * sb).T


def decode(codes: np.ndarray, dtype: str) -> np.ndarray:
    """Raw element codes -> float64 (integers stay exact). tf32 drops the 13 low mantissa bits, as the MMA does."""
    c = np.asarray(codes)
    if dtype == "f16":
        return c.astype(np.uint16).view(np.float16).astype(np.float64)
    if dtype == "bf16":
        return (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "tf32":
        return (c.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if dtype == "f32":
        return c.astype(np.uint32).view(np.float32).astype(np.float64)
    if dtype == "e4m3":
        return E4M3[c.astype(np.uint8)]
    if dtype == "e5m2":
        return E5M2[c.astype(np.uint8)]
    if dtype == "s8":
        return c.astype(np.uint8).view(np.int8).astype(np.float64)
    if dtype == "u8":
        return c.astype(np.uint8).astype(np.float64)
    if dtype == "s32":
        return c.astype(np.uint32).view(np.int32).astype(np.float64)
    if dtype in NARROW_TABLES:
        return NARROW_TABLES[dtype][c.astype(np.uint8)]
    raise ValueError(dtype)


def random_codes(dtype: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Fresh random finite inputs as raw codes: never zeros, never NaN/inf, magnitudes that keep any
    accumulator type far from overflow."""
    n = int(np.prod(shape))
    if dtype in ("f16", "bf16", "tf32"):
        x = rng.standard_normal(n).astype(np.float32)
        x[x == 0] = 0.5
        if dtype == "f16":
            codes = x.astype(np.float16).view(np.uint16)
        elif dtype == "bf16":
            b = x.view(np.uint32)
            codes = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        else:
            codes = x.view(np.uint32) & np.uint32(0xFFFFE000)  # exactly representable in tf32
    elif dtype in ("e4m3", "e5m2"):
        table = E4M3 if dtype == "e4m3" else E5M2
        ok = np.flatnonzero(np.isfinite(table) & (np.abs(table) <= 4.0) & (table != 0))
        codes = ok[rng.integers(0, ok.size, n)].astype(np.uint8)
    elif dtype in ("e2m1", "e2m3", "e3m2"):
        table = NARROW_TABLES[dtype]
        ok = np.flatnonzero(table != 0)
        codes = ok[rng.integers(0, ok.size, n)].astype(np.uint8)
    elif dtype == "ue8m0":
        codes = rng.integers(127 - 4, 127 + 5, n).astype(np.uint8)  # 2^-4 .. 2^4
    elif dtype == "ue4m3":
        ok = np.flatnonzero((UE4M3 >= 0.25) & (UE4M3 <= 4.0))
        codes = ok[rng.integers(0, ok.size, n)].astype(np.uint8)
    elif dtype == "s8":
        codes = rng.integers(-128, 128, n).astype(np.int8).view(np.uint8)
    elif dtype == "u8":
        codes = rng.integers(0, 256, n).astype(np.uint8)
    else:
        raise ValueError(dtype)
    return codes.reshape(shape)


def poison_code(dtype: str) -> int:
    """A value a kernel never writes legitimately: NaN for floats, INT32_MIN for s32."""
    return {"f32": 0xFFFFFFFF, "f16": 0xFFFF, "bf16": 0xFFFF, "s32": 0x80000000}[dtype]


def input_poison_code(dtype: str) -> int:
    """What fills input memory a kernel must never read (row padding, rows past the end): NaN for floats,
    the largest magnitude for integers, so that reading it spoils the result visibly."""
    return {"f16": 0x7E00, "bf16": 0x7FC0, "tf32": 0x7FC00000, "e4m3": 0x7F, "e5m2": 0x7E, "s8": 0x7F, "u8": 0xFF}[dtype]


# Relative-error tolerances (||out - ref||_F / ||ref||_F) for validation. Inputs are exactly
# representable, so products are exact; what remains is accumulation order and precision and the
# output rounding. A layout bug gives errors of order 1.
# Mixed inputs (``b_dtype`` differs from ``dtype``: e4m3 x e5m2, u8 x s8) take the looser of the two types.
def tolerance(dtype: str, acc: str, out: str, b_dtype: str | None = None) -> float:
    if acc == "s32":
        return 0.0
    per_type = {"f16": 1e-4, "bf16": 1e-4, "tf32": 1e-4, "e4m3": 1e-3, "e5m2": 1e-3}
    tol = max(per_type[dtype], per_type[b_dtype or dtype])
    if acc == "f16":
        tol = max(tol, 1e-2)  # f16 accumulation: about 2^-11 per add
    if out == "f16":
        tol += 1e-3  # 2^-11 output rounding
    elif out == "bf16":
        tol += 8e-3  # 2^-8 output rounding
    return tol
