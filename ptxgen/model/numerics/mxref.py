"""An independent float64 reference for block-scaled GEMMs: its own decoders of the element and scale formats,
written from the OCP Microscaling Formats (MX) Specification v1.0 (section 5: FP8 E4M3/E5M2, FP6 E2M3/E3M2, FP4
E2M1, the E8M0 scale) and the PTX ISA (#tcgen05-block-scaling: ue4m3, NVFP4's scale, is e4m3 without the sign bit), and the
product PTX defines: D = (A * scale_A) * (B * scale_B), every chunk of V consecutive elements of a row along K
multiplied by that row's scale factor for the chunk.

Imports nothing from ptxgen (the runner's inputs are generated and packed by ptxgen.runtime; this module only
reads codes and returns numbers), so a wrong table on the writer side (ptxgen.isa.numerics) cannot hide here.

>>> decode_mx([0b0111, 0b1001, 0b0001], "e2m1").tolist()   # 6, -0.5, 0.5 (subnormal)
[6.0, -0.5, 0.5]
>>> decode_mx([127, 0, 254, 255], "ue8m0").tolist()[:3], bool(np.isnan(decode_mx([255], "ue8m0"))[0])
([1.0, 5.877471754111438e-39, 1.7014118346046923e+38], True)
"""

from __future__ import annotations

import math

import numpy as np

# OCP MX v1.0, Table 5 (FP4 E2M1): the eight magnitudes of codes 0b0000..0b0111, written out; bit 3 is the sign.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _minifloat(code: int, exp_bits: int, man_bits: int, bias: int, signed: bool) -> float:
    """Sign (if ``signed``), exponent, mantissa; exponent field 0 is subnormal (2^(1 - bias) x 0.m)."""
    man = code & ((1 << man_bits) - 1)
    exp = (code >> man_bits) & ((1 << exp_bits) - 1)
    neg = signed and (code >> (exp_bits + man_bits)) & 1
    mag = math.ldexp(man, 1 - bias - man_bits) if exp == 0 else math.ldexp((1 << man_bits) + man, exp - bias - man_bits)
    return -mag if neg else mag


def _e4m3(code: int) -> float:
    # OCP MX 5.3.3 (FP8 E4M3): bias 7, no infinities, S.1111.111 is NaN; max normal 448.
    if code & 0x7F == 0x7F:
        return math.nan
    return _minifloat(code, 4, 3, 7, True)


def _e5m2(code: int) -> float:
    # OCP MX 5.3.3 (FP8 E5M2): bias 15, IEEE 754 conventions: exponent 11111 is inf (mantissa 0) or NaN.
    if (code >> 2) & 0x1F == 0x1F:
        return math.nan if code & 0x3 else (-math.inf if code & 0x80 else math.inf)
    return _minifloat(code, 5, 2, 15, True)


def _e2m1(code: int) -> float:
    mag = E2M1_MAGNITUDES[code & 0x7]
    return -mag if code & 0x8 else mag


def _e2m3(code: int) -> float:
    # OCP MX 5.3.2 (FP6 E2M3): S EE MMM, bias 1, subnormals at exponent 0, no infinity or NaN; max 7.5.
    return _minifloat(code, 2, 3, 1, True)


def _e3m2(code: int) -> float:
    # OCP MX 5.3.2 (FP6 E3M2): S EEE MM, bias 3, subnormals at exponent 0, no infinity or NaN; max 28.
    return _minifloat(code, 3, 2, 3, True)


def _ue8m0(code: int) -> float:
    # OCP MX 5.4 (E8M0 scale): 2^(code - 127), no sign, no zero, 0xFF is NaN.
    return math.nan if code == 0xFF else math.ldexp(1.0, code - 127)


def _ue4m3(code: int) -> float:
    # PTX (#tcgen05-block-scaling, kind::mxf4nvf4 with .scale_vec::4X): ue4m3, an unsigned e4m3 (bias 7); the sign
    # bit does not exist, so a code with bit 7 set is not a ue4m3 value (NaN here); 0x7F is NaN as in e4m3.
    if code & 0x80 or code == 0x7F:
        return math.nan
    return _minifloat(code, 4, 3, 7, False)


_DECODERS = {"e4m3": (_e4m3, 256), "e5m2": (_e5m2, 256), "e2m1": (_e2m1, 16), "e2m3": (_e2m3, 64), "e3m2": (_e3m2, 64),
             "ue8m0": (_ue8m0, 256), "ue4m3": (_ue4m3, 256)}
TABLES = {name: np.array([f(c) for c in range(n)], dtype=np.float64) for name, (f, n) in _DECODERS.items()}


def decode_mx(codes, fmt: str) -> np.ndarray:
    """Codes (one per element, unpacked: e2m1 codes 0..15) -> float64 values."""
    table = TABLES[fmt]
    c = np.asarray(codes).astype(np.int64)
    if c.size and (c.min() < 0 or c.max() >= table.size):
        raise ValueError(f"{fmt} codes are 0..{table.size - 1}")
    return table[c]


def unpack_nibbles(packed: np.ndarray, k: int) -> np.ndarray:
    """Rows of bytes holding two 4-bit codes each, the element with the lower index in the low nibble (PTX
    #tcgen05-packing-formats: for kind::mxf4/mxf4nvf4 two e2m1 a byte, element 2i at bits 0-3) -> rows of ``k``
    codes."""
    p = np.asarray(packed, dtype=np.uint8)
    lo, hi = p & 0x0F, p >> 4
    return np.stack([lo, hi], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])[..., :k]


def block_scaled_gemm(a: np.ndarray, a_fmt: str, sfa: np.ndarray, b: np.ndarray, b_fmt: str, sfb: np.ndarray,
                      sf_fmt: str, vec: int) -> np.ndarray:
    """D = sum_k (A[m, k] x SFA[m, k // vec]) (B[n, k] x SFB[n, k // vec]) in float64, from codes: ``a`` M x K and
    ``b`` N x K element codes (unpacked), ``sfa`` M x ceil(K / vec), ``sfb`` N x ceil(K / vec) scale codes.

    Every product of two decoded elements and two scales is exact in float64 (at most 4 significant bits each: e4m3 and
    e2m3 4, e5m2 and e3m2 3, e2m1 2, UE8M0 1, UE4M3 4; exponents within +-300), so the only rounding is the sum's, far below any tolerance the runner uses."""
    k = a.shape[1]
    if b.shape[1] != k or sfa.shape[1] * vec < k or sfb.shape[1] * vec < k:
        raise ValueError("A and B need the same K and ceil(K / vec) scale factors per row")
    sa = np.repeat(decode_mx(sfa, sf_fmt), vec, axis=1)[:, :k]
    sb = np.repeat(decode_mx(sfb, sf_fmt), vec, axis=1)[:, :k]
    return (decode_mx(a, a_fmt) * sa) @ (decode_mx(b, b_fmt) * sb).T
