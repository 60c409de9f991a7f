"""The held-out shapes of issue 16: 20 random GEMM shapes that no kernel was tuned on and no rule was fitted to.

Committed before any tuning or measurement that uses them (issue 16, "a kernel choice that generalizes").
Seeded, so the set is fixed: M and N log-uniform in 1..16384, K log-uniform in 16..16384 and a multiple of 8
(bf16 rows must start 16-byte aligned for the dense tensors ``ptxgen bench`` hands to both sides); shapes
alternate between the two row-pitch classes: K a multiple of 64 (rows start on a 128-byte line) and K not a
multiple of 64 (rows start 16..112 B past one).

Usage: python tools/heldout_shapes.py            # prints MxNxK,MxNxK,... for ptxgen bench --shapes
"""

import math
import random

SEED = 16
COUNT = 20


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def heldout_shapes(seed: int = SEED, count: int = COUNT) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < count:
        m, n = _log_uniform(rng, 1, 16384), _log_uniform(rng, 1, 16384)
        k = max(16, min(16384, _log_uniform(rng, 16, 16384) // 8 * 8))
        aligned = len(shapes) % 2 == 0  # even positions: rows on a 128-byte line; odd: off it
        if aligned:
            k = max(64, k // 64 * 64)
        elif k % 64 == 0:
            k = k - 8 if k > 16 else k + 8
        shapes.append((m, n, k))
    return shapes


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    print(",".join(f"{m}x{n}x{k}" for m, n, k in heldout_shapes()))
