"""The held-out shapes of issue 16: 20 random GEMM shapes that no kernel was tuned on and no rule was fitted to.

Committed before any tuning or measurement that uses them (issue 16, "a kernel choice that generalizes").
Seeded, so the set is fixed: M and N log-uniform in 1..16384, K log-uniform in 16..16384 and a multiple of 8
(bf16 rows must start 16-byte aligned for the dense tensors ``ptxgen bench`` hands to both sides); shapes
alternate between the two row-pitch classes: K a multiple of 64 (rows start on a 128-byte line) and K not a
multiple of 64 (rows start 16..112 B past one).

The held-out 30 of issue 35 (``heldout30``, committed as tools/heldout30.json before any tuning of that issue,
used only to measure): seed 35; even positions draw M, N and K log-uniform in 1..16384 (skinny, decode and few-wave
shapes), odd positions uniform in 1..16384 (mostly large shapes, both dimensions past 2000); K is then rounded up to
a multiple of 16 so that one
list serves bf16 and e4m3 (both need rows that start 16-byte aligned for TMA and for the dense tensors of
``ptxgen bench``). The row-pitch classes follow from K: bf16 rows are on a 128-byte line where K % 64 == 0; e4m3 rows
are off a 32-byte sector where K % 32 == 16.

Its e4m3 form (``--set 30 --e4m3``): the same 30 draws with N rounded up to a multiple of 16 as well, because the
baseline, torch._scaled_mm, refuses a B whose N is not (measured on the H100, 2026-12-07: it refused 27 of the 30 as
drawn). The draws are not redone, so the form is as held out as the set.

Usage: python tools/heldout_shapes.py            # prints MxNxK,MxNxK,... for ptxgen bench --shapes
       python tools/heldout_shapes.py --set 30   # the held-out 30 (the same list as tools/heldout30.json)
       python tools/heldout_shapes.py --set 30 --e4m3   # its e4m3 form: N rounded up to a multiple of 16
       python tools/heldout_shapes.py --set 30 --json > tools/heldout30.json
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


SEED30 = 35
COUNT30 = 30
DIM_MAX = 16384
K_MULTIPLE30 = 16


def heldout30(seed: int = SEED30, count: int = COUNT30) -> list[tuple[int, int, int]]:
    """The held-out 30 of issue 35: M, N, K in 1..DIM_MAX, log-uniform at even positions and uniform at odd ones; K
    rounded up to a multiple of K_MULTIPLE30."""
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < count:
        draw = (lambda: _log_uniform(rng, 1, DIM_MAX)) if len(shapes) % 2 == 0 else (lambda: rng.randint(1, DIM_MAX))
        m, n, k = draw(), draw(), draw()
        k = min(DIM_MAX, -(-k // K_MULTIPLE30) * K_MULTIPLE30)
        if (m, n, k) not in shapes:
            shapes.append((m, n, k))
    return shapes


def heldout30_e4m3(shapes: list[tuple[int, int, int]] | None = None) -> list[tuple[int, int, int]]:
    """The e4m3 form of the held-out 30: each shape with N rounded up to a multiple of K_MULTIPLE30 (torch._scaled_mm's
    B must have both dimensions multiples of 16); K is one already. Order kept; a shape that meets an earlier one after
    rounding is kept once."""
    out = []
    for m, n, k in heldout30() if shapes is None else shapes:
        s = (m, -(-n // K_MULTIPLE30) * K_MULTIPLE30, k)
        if s not in out:
            out.append(s)
    return out


def heldout30_doc() -> dict:
    """tools/heldout30.json's content: the generator and its seed in the header, then the shapes."""
    return {"name": "heldout30", "issue": 35, "use": "measurement only: never tuned on, never fitted to",
            "generator": "tools/heldout_shapes.py heldout30(seed=35, count=30), random.Random(35), M, N, K drawn in "
                         "that order: even positions round(exp(uniform(log 1, log 16384))), odd positions "
                         "randint(1, 16384); K rounded up to a multiple of 16; a repeated shape is drawn again",
            "seed": SEED30, "count": COUNT30, "shapes": [list(s) for s in heldout30()]}


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="print a held-out shape set")
    ap.add_argument("--set", choices=("20", "30"), default="20", help="20: issue 16's set (default); 30: issue 35's")
    ap.add_argument("--json", action="store_true", help="the set as JSON with its generator (--set 30 only)")
    ap.add_argument("--e4m3", action="store_true", help="--set 30 with N rounded up to a multiple of 16 (the form "
                    "torch._scaled_mm accepts)")
    args = ap.parse_args()
    if args.e4m3 and (args.set != "30" or args.json):
        ap.error("--e4m3 is for --set 30 without --json")
    if args.json:
        if args.set != "30":
            ap.error("--json is for --set 30")
        print(json.dumps(heldout30_doc(), indent=1))
    else:
        shapes = heldout30_e4m3() if args.e4m3 else heldout30() if args.set == "30" else heldout_shapes()
        print(",".join(f"{m}x{n}x{k}" for m, n, k in shapes))
