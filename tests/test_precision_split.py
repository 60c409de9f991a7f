"""The 3xTF32 split (ptxgen.api.arrays.precision) on the CPU: big is float32 rounded to tf32 (nearest, ties to even: checked
against float64 arithmetic, not against the bit trick), big + small is x exactly, and the three tf32 products give
float32 accuracy where plain tf32 does not (a control). The tensor cores are modelled as reading each factor with its
low 13 bits dropped (truncation, the worst case for ``small``), products and sums in float64."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptxgen.api.arrays import precision as p
from ptxgen.runtime.launch.arrays import ArgumentError

F32_MAX = float(np.finfo(np.float32).max)


def _values(seed: int = 1) -> np.ndarray:
    """Random float32 values of every magnitude, with the extremes: subnormals, the largest exponents, exact tf32
    rounding ties (low 13 bits 0x1000, with an even and an odd kept bit), one below and above a tie, signed zeros."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 0x7F800000, 20000, dtype=np.uint32)  # every finite positive float32 pattern
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    mant = rng.integers(0, 1 << 10, 2000, dtype=np.uint32) << 13
    exps = rng.integers(0, 255, 2000, dtype=np.uint32) << 23
    ties = np.concatenate([exps | mant | 0x1000, exps | mant | 0x0FFF, exps | mant | 0x1001])
    special = np.array([0, 0x80000000, 1, 0x1000, 0x3000, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F7FF000, 0x7F7FEFFF,
                        0x3F801000, 0x3F803000, 0x3F800FFF], dtype=np.uint32)
    return np.concatenate([bits, ties, ties | np.uint32(0x80000000), special]).astype(np.uint32).view(np.float32)


def _rne_tf32_reference(x: np.ndarray) -> np.ndarray:
    """x rounded to 10 mantissa bits, ties to even, in float64 arithmetic (np.round is half-to-even): the quantum is
    2^(e - 10) for x in [2^e, 2^(e+1)), 2^-136 for float32's subnormals."""
    x64 = x.astype(np.float64)
    mag = np.abs(x64)
    e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    q = np.exp2(np.maximum(e, -126.0) - 10)
    return np.round(x64 / q) * q


def test_big_is_tf32_exact_and_big_plus_small_is_x():
    x = _values()
    big, small = p.split_numpy(x)
    assert big.dtype == np.float32 and small.dtype == np.float32
    assert not np.any(big.view(np.uint32) & np.uint32(0x1FFF))  # the tensor cores read big exactly
    assert np.array_equal(big.astype(np.float64) + small.astype(np.float64), x.astype(np.float64))  # exact, no rounding
    assert np.array_equal(big + small, x)


def test_big_is_round_to_nearest_even():
    x = _values(2)
    big, _ = p.split_numpy(x)
    ref = _rne_tf32_reference(x)
    fits = np.abs(ref) <= F32_MAX  # rounding the largest float32 values up would overflow: those truncate (below)
    assert np.array_equal(big[fits].astype(np.float64), ref[fits])
    over = ~fits
    assert over.sum() > 0
    assert np.array_equal(big[over].view(np.uint32), x[over].view(np.uint32) & np.uint32(0xFFFFE000))
    assert np.all(np.isfinite(big))


def test_ties_go_to_even():
    one_tie = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11)], dtype=np.float32)
    big, small = p.split_numpy(one_tie)
    assert big.tolist() == [1.0, 1 + 2**-9, -1.0]
    assert small.tolist() == [2**-11, -(2**-11), -(2**-11)]


def test_non_finite():
    x = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    big, small = p.split_numpy(x)
    assert big[0] == np.inf and big[1] == -np.inf and np.isnan(big[2])
    assert small[0] == 0 and small[1] == 0 and np.isnan(small[2])


def test_torch_split_matches_numpy_bitwise():
    torch = pytest.importorskip("torch")
    x = _values(3)
    big, small = p.split_numpy(x)
    tb, ts = p.split_torch(torch.from_numpy(x.copy()))
    assert np.array_equal(tb.numpy().view(np.uint32), big.view(np.uint32))
    assert np.array_equal(ts.numpy().view(np.uint32), small.view(np.uint32), equal_nan=False)


# ---- the product ---------------------------------------------------------------------------------------------------
def _tc(x: np.ndarray) -> np.ndarray:
    """What the tensor cores read of float32 x (modelled): its low 13 bits dropped, as float64."""
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _operands(seed: int, m=16, n=24, k=512):
    rng = np.random.default_rng(seed)
    scale_a = np.exp2(rng.integers(-60, 60, (m, 1)))  # rows of very different magnitudes
    a = (rng.standard_normal((m, k)) * scale_a).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    return a, b


def _rel_err(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    return float(np.max(np.abs(c - exact) / scale))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_tf32_products_are_float32_accurate(seed):
    a, b = _operands(seed)
    (ab, as_), (bb, bs) = p.split_numpy(a), p.split_numpy(b)
    three = _tc(ab) @ _tc(bb).T + _tc(ab) @ _tc(bs).T + _tc(as_) @ _tc(bb).T
    assert _rel_err(three, a, b) < 1e-6
    plain = _tc(a) @ _tc(b).T  # control: plain tf32 is not float32-accurate
    assert _rel_err(plain, a, b) > 1e-5
    big_only = _tc(ab) @ _tc(bb).T  # control: without the small parts, the split does nothing
    assert _rel_err(big_only, a, b) > 1e-5


def test_joined_operands_give_the_three_terms():
    """split_operands' layout: [a_small | a_big | a_big] . [b_big | b_small | b_big] along K, zero columns to a multiple
    of 4: their product (modelled as the tensor cores read it) is the three-term sum, for 2-D and 3-D operands."""
    torch = pytest.importorskip("torch")
    for shape_a, shape_b in (((16, 37), (24, 37)), ((3, 8, 5), (3, 6, 5)), ((4, 1), (2, 1))):
        rng = np.random.default_rng(4)
        a = rng.standard_normal(shape_a).astype(np.float32)
        b = rng.standard_normal(shape_b).astype(np.float32)
        a3, b3 = p.split_operands(torch.from_numpy(a), torch.from_numpy(b))
        k = shape_a[-1]
        assert a3.shape[-1] == b3.shape[-1] == p.k_split(k) and p.k_split(k) % 4 == 0 and p.k_split(k) >= 3 * k
        assert a3.is_contiguous() and b3.is_contiguous()
        got = np.einsum("...ik,...jk->...ij", _tc(a3.numpy()), _tc(b3.numpy()))
        exact = np.einsum("...ik,...jk->...ij", a.astype(np.float64), b.astype(np.float64))
        scale = np.einsum("...ik,...jk->...ij", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        assert np.max(np.abs(got - exact) / scale) < 1e-6


# ---- which precision a call computes with --------------------------------------------------------------------------
def test_none_follows_torch_float32_matmul_precision():
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 2)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert p.resolve(None, t) == p.THREE
        torch.set_float32_matmul_precision("high")
        assert p.resolve(None, t) == p.TF32
        torch.set_float32_matmul_precision("medium")
        assert p.resolve(None, t) == p.TF32
        assert p.resolve("3xtf32", t) == p.THREE  # an explicit precision wins
        torch.set_float32_matmul_precision("highest")
        assert p.resolve("tf32", t) == p.TF32
    finally:
        torch.set_float32_matmul_precision(before)
    assert p.resolve(None, np.zeros((2, 2), np.float32)) == p.TF32  # other arrays: tf32, as before


def test_bad_precision_and_arrays_the_split_cannot_take():
    with pytest.raises(ArgumentError, match="precision 'fp64'"):
        p.check("fp64")
    a = np.zeros((4, 8), np.float32)
    with pytest.raises(ArgumentError, match="torch or CuPy"):
        p.operands(a, a, None, "3xtf32")
    assert p.operands(a, a, None, None) == (a, a)  # tf32 for numpy: unsplit
    h = np.zeros((4, 8), np.float16)
    assert p.operands(h, h, None, "3xtf32") == (h, h)  # not float32: precision does not apply


def test_unsplittable_calls_go_on_unsplit():
    """Shapes that do not agree (the door refuses them in the caller's terms) and CPU tensors are not split."""
    torch = pytest.importorskip("torch")
    a, b = torch.zeros(4, 8), torch.zeros(5, 7)
    assert p.operands(a, b, None, "3xtf32") == (a, b)
    b = torch.zeros(5, 8)
    assert p.operands(a, b, None, "3xtf32") == (a, b)  # on the CPU: the door says so


def test_plan_reports_the_split():
    """ptxgen.api.plan on meta tensors: a grouped float32 call with precision='3xtf32' runs the tf32 kernel over K' = 3 K
    rounded up to 4; with precision='tf32' the same call is not split; bf16 has no float32 precision."""
    torch = pytest.importorskip("torch")
    import ptxgen.api as api

    a, b = torch.empty(256, 50, device="meta"), torch.empty(4, 96, 50, device="meta")
    offs = torch.empty(4, dtype=torch.int32, device="meta")
    three = api.plan("grouped", a, b, offs, device="h100", precision="3xtf32")
    assert three.precision == "3xtf32" and "K = 152 (3 x 50" in three.why and three.path.value == "hot", three
    plain = api.plan("grouped", a, b, offs, device="h100", precision="tf32")
    assert plain.precision == "tf32" and "3xTF32" not in plain.why
    assert three.to_json()["precision"] == "3xtf32"
    h = api.plan("gemm", a.bfloat16(), b[0].bfloat16(), device="h100", precision="3xtf32")
    assert h.precision is None and "3xTF32" not in h.why
    bad = api.plan("gemm", a, b[0], device="h100", precision="fp64")
    assert bad.path.value == "refused" and "precision 'fp64'" in bad.why


def _accumulate_f32(a3: np.ndarray, b3: np.ndarray, step: int = 8) -> np.ndarray:
    """A model of the kernel's accumulation: K steps of ``step`` (a tf32 wgmma's K), each step's products summed exactly
    and added to a float32 accumulator; every factor read as the tensor cores read it (_tc)."""
    ta, tb = _tc(np.ascontiguousarray(a3)), _tc(np.ascontiguousarray(b3))
    acc = np.zeros((a3.shape[0], b3.shape[0]), np.float32)
    for k0 in range(0, a3.shape[1], step):
        part = ta[:, k0:k0 + step] @ tb[:, k0:k0 + step].T
        acc = (acc.astype(np.float64) + part).astype(np.float32)
    return acc


def test_long_k_within_torchs_float32_tolerance():
    """The referee's tightest float32 case (test_cublas_baddbmm_large_input: K = 10000, inputs uniform in [0, 1), atol
    1e-5, rtol 1.1e-5) in the model of the kernel's float32 accumulation: the joined operands (correction terms first)
    are within it with margin; control: plain tf32 is not."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    k = 10000
    a, b = rng.random((8, k), dtype=np.float32), rng.random((16, k), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    a3, b3 = (x.numpy() for x in p.split_operands(torch.from_numpy(a), torch.from_numpy(b)))
    three = _accumulate_f32(a3, b3)
    assert np.max(np.abs(three - ref) / np.abs(ref)) < 1.1e-5 / 3
    assert np.all(np.abs(three - ref) <= 1e-5 + 1.1e-5 * np.abs(ref))
    plain = _accumulate_f32(a, b)
    assert not np.all(np.abs(plain - ref) <= 1e-5 + 1.1e-5 * np.abs(ref))


def test_torch_new_fp32_precision_api():
    """torch's newer setting (torch.backends.cuda.matmul.fp32_precision), after which the legacy getter raises: "tf32"
    is tf32, "ieee" is 3xtf32 (each in a fresh interpreter: the two APIs do not mix back)."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    code = ("import torch; from ptxgen.api.arrays import precision as p; t = torch.zeros(1); "
            "torch.backends.cuda.matmul.fp32_precision = {!r}; print(p.resolve(None, t))")
    for setting, want in (("tf32", "tf32"), ("ieee", "3xtf32")):
        r = subprocess.run([sys.executable, "-c", code.format(setting)], capture_output=True, text=True, timeout=300,
                           cwd=Path(__file__).resolve().parent.parent)  # this checkout's ptxgen
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want, (setting, r.stdout)
