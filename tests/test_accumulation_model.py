"""tools/accumulation_model.py: its probe inputs tell the two roundings apart, and its model's chains round as named
(CPU only)."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import accumulation_model as model  # noqa: E402


def test_the_probe_separates_rounding_to_nearest_from_rounding_toward_zero():
    a, b, near, zero = model.probe_inputs(8, 0.75 * 2.0 ** -23, rows=2)
    assert near == 1.0 + model.PROBE_STEPS * 2.0 ** -23 and zero == 1.0  # each 0.75-spacing step rounds up, or is lost
    assert float(model.chain(a, b, "rn")[0]) == near and float(model.chain(a, b, "rz")[0]) == zero
    assert model.verdict(near, near, zero) == "to nearest" and model.verdict(zero, near, zero) == "toward zero"
    assert model.verdict(1.5, near, zero).startswith("neither")  # control: a third answer is not forced into a class


def test_the_split_is_exact_and_the_rounded_chain_loses_more_than_the_nearest_one():
    rng = np.random.default_rng(1)
    a = rng.uniform(-9, 9, (8, 512)).astype(np.float32)
    b = rng.uniform(-9, 9, (8, 512)).astype(np.float32)
    big = model.tf32_round(a)
    assert not (big.view(np.uint32) & ~model.KEEP_TF32).any() and np.array_equal(big + (a - big), a)
    wa, wb = model.split_operands(a, b)
    ref = (a.astype(np.float64) * b).sum(1)
    rn = np.abs(model.chain(wa, wb, "rn") - ref).max()
    rz = np.abs(model.chain(wa, wb, "rz") - ref).max()
    assert rz > rn
