"""The e4m3 cost model's device run (issue 16 item 5).

precompile: the e4m3 specs the run needs (every big candidate of ptxgen.runtime.choose.costmodel, and the chooser's picks for
            the bench shapes with the cost model off), into $PTXGEN_CACHE_DIR, on every core.
calibrate:  every big candidate (not the narrow small-M tiles: the small-m / split-k rules keep those) on calibration
            shapes that are none of issue 16's named shapes (bf16 or their e4m3 versions), the held-out 20 or the tuned
            shapes (checked here), against torch._scaled_mm in the same process (alternating rounds, outputs checked).
            One JSON object per (candidate, shape), with ``"dtype": "e4m3"``: tools/fit_cost.py fit turns them into
            ptxgen/tuning/h200_cost_e4m3.json.
compare:    for each shape given (MxNxK,...), the chooser's e4m3 pick (cost model on) against its pick with the cost
            model off (the rule before it: nearest-fit), where they differ, in one process, two rounds each.
summary BENCH.json [COMPARE.jsonl ...]: the tables docs/performance.md quotes (CPU only).
compare-smallm: the same for the small-m / split-k rule's e4m3 weight threshold: this checkout's
            FP8_SMALL_M_MIN_WEIGHT (4096 x 4096, the 16-bit rule's) against the fp8rules run's (7168 x 16384).

Rows off a 32-byte sector for e4m3 are K = 16 (mod 32): K x 1 byte. TMA needs 16-byte rows and torch._scaled_mm
dimensions that are multiples of 16, so every calibration K is a multiple of 16.

Hypotheses written before the run (e4m3, H200):
 E1 the bf16 formula fits e4m3 too: within 5% on the rows-on-a-sector points of the cooperative persistent kernels,
    with a per-K-tile cost (128 bytes of K: twice the MMA work of a bf16 K-tile at twice the MMA rate) of 1.0-1.25 x the
    bf16 kernel's (FP8 8192^3 runs at 1.75 x bf16's TFLOP/s, not 2 x).
 E2 rows off a sector cost the 1x1 kernels less than for bf16 (final/extra2: 0.85-0.87 of _scaled_mm with 128-byte
    promotion against bf16's 0.70-0.78), and the 2x1 multicast cluster lowers the factor further (as for bf16), so the
    model picks 2x1 kernels on the issue's off-sector shapes.
 E3 2512 x 10000 x 4000 (7 rounds of 128 x 256 tiles for 6.06 rounds of work) gains from 256 x 128 (790 tiles: 6 rounds).
Written after run 1, before run 2:
 E4 at small M against 4096 x 4096 and 16384 x 4096 weights the BM = 64 tiles (split-K where CTAs leave SMs idle) beat
    the table's 128 x 256 tile in e4m3 as they do in bf16: run 1 measured the 128 x 256 tile there at 22.6-28.6 us
    (0.72-2.68 TB/s, 0.76-0.88 of torch._scaled_mm), the fp8rules run 64 x 64 split 2 at 16 x 4096 x 4096 in 16.8 us
    and 64 x 128 at 64 x 16384 x 4096 in 22.3 us.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exp_cost import CAL_ALIGNED, _bench, _emit, _named  # noqa: E402

DTYPE = "e4m3"
ARCH = "sm_90a"
# rows 3088 B (phase 16 past a 128-byte line), 4496 B (phase 16), 3056 B (phase 112): 16 B past a 32-byte sector
CAL_OFF_E4M3 = [(3584, 6144, 3088), (6144, 2560, 4496), (2304, 7168, 3056)]
# issue 16's classes as the e4m3 bench runs them (dimensions multiples of 16, runs/2026-12-01-gpu-tier/extra2) and the
# FP8 shapes measured before (docs/performance.md): none of them is a calibration shape
FP8_NAMED = {(5120, 5120, 5120), (4096, 4096, 5008), (5120, 5120, 5008), (3008, 7008, 5008), (1504, 9008, 3024),
             (336, 8192, 8192), (12000, 1008, 6000), (2512, 10000, 4000), (8192, 8192, 8192), (4096, 4096, 4096),
             (6144, 6144, 6144), (16384, 16384, 4096), (8192, 8192, 1024)}
FP8_NAMED |= {(m, n, k) for m in (16, 64, 128) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))}
ISSUE16_E4M3 = {(5120, 5120, 5120), (4096, 4096, 5008), (5120, 5120, 5008), (3008, 7008, 5008), (1504, 9008, 3024),
                (336, 8192, 8192), (12000, 1008, 6000), (2512, 10000, 4000)}  # the 17 of extra2 with the 9 small-M ones
ISSUE16_E4M3 |= {(m, n, k) for m in (16, 64, 128) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))}


def calibration_shapes() -> list[tuple[int, int, int]]:
    shapes = CAL_ALIGNED + CAL_OFF_E4M3
    assert all(x % 16 == 0 for s in shapes for x in s), "torch._scaled_mm needs multiples of 16"
    assert not set(shapes) & (_named() | FP8_NAMED), "a calibration shape is a named, held-out or tuned one"
    return shapes


def big_candidates():
    from ptxgen.runtime.choose.costmodel import CANDIDATES

    return [c for c in CANDIDATES if not c.narrow]


def calibrate(iters: int = 10) -> int:
    shapes = calibration_shapes()
    for c in big_candidates():
        spec = c.spec(DTYPE, ARCH)
        for m, n, k in shapes:
            _bench(spec, m, n, k, iters, cand=c.name, dtype=DTYPE)
    return 0


def _picks(m: int, n: int, k: int):
    """(new, old): the chooser's pick with the cost model on and off."""
    from ptxgen.runtime import choose as ch

    new = ch.choose(DTYPE, ARCH, m, n, k)
    ch.rules.COST_MODEL = False
    try:
        old = ch.choose(DTYPE, ARCH, m, n, k)
    finally:
        ch.rules.COST_MODEL = True
    return new, old


def _shapes(arg: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in item.split("x")) for item in arg.split(",") if item]


def compare(shapes_arg: str, iters: int = 15) -> int:
    for m, n, k in _shapes(shapes_arg):
        new, old = _picks(m, n, k)
        if new.spec == old.spec:
            _emit({"m": m, "n": n, "k": k, "same": new.spec.kernel_name, "chosen_by": new.chosen_by})
            continue
        for side, c in (("new", new), ("old", old), ("new", new), ("old", old)):
            _bench(c.spec, m, n, k, iters, side=side, chosen_by=c.chosen_by, set="e4m3")
    return 0


OLD_FP8_SMALL_M_MIN_WEIGHT = 7168 * 16384  # the fp8rules run's threshold, before run 2


def _smallm_picks(m: int, n: int, k: int):
    """(new, old): the chooser's pick with this checkout's FP8_SMALL_M_MIN_WEIGHT and with the fp8rules run's."""
    from ptxgen.runtime import choose as ch

    new = ch.choose(DTYPE, ARCH, m, n, k)
    saved, ch.rules.FP8_SMALL_M_MIN_WEIGHT = ch.rules.FP8_SMALL_M_MIN_WEIGHT, OLD_FP8_SMALL_M_MIN_WEIGHT
    try:
        old = ch.choose(DTYPE, ARCH, m, n, k)
    finally:
        ch.rules.FP8_SMALL_M_MIN_WEIGHT = saved
    return new, old


def compare_smallm(shapes_arg: str, iters: int = 20) -> int:
    """Small M in e4m3: the small-m / split-k rule at this checkout's weight threshold against the threshold before
    (where the picks differ), in one process, two rounds each."""
    for m, n, k in _shapes(shapes_arg):
        new, old = _smallm_picks(m, n, k)
        if new.spec == old.spec:
            _emit({"m": m, "n": n, "k": k, "same": new.spec.kernel_name, "chosen_by": new.chosen_by})
            continue
        for side, c in (("new", new), ("old", old), ("new", new), ("old", old)):
            _bench(c.spec, m, n, k, iters, side=side, chosen_by=c.chosen_by, set="e4m3-smallm")
    return 0


def _compile(d: dict) -> str:
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import TileSpec
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.cache import compile_cached

    spec = TileSpec.from_json(d)
    try:
        compile_cached(render_kernel(plan_kernel(spec)), spec.kernel_name, spec.arch.value)
        return "ok " + spec.kernel_name
    except Exception as e:  # noqa: BLE001 - reported; the timed run then compiles (or fails) itself
        return f"FAIL {spec.kernel_name}: {type(e).__name__}: {str(e)[:200]}"


def precompile(shapes_arg: str) -> int:
    from multiprocessing import Pool

    specs = [c.spec(DTYPE, ARCH).to_json() for c in big_candidates()]
    for m, n, k in _shapes(shapes_arg):
        specs += [c.spec.to_json() for c in _picks(m, n, k) + _smallm_picks(m, n, k)]
    uniq = list({json.dumps(s, sort_keys=True): s for s in specs}.values())
    with Pool(min(14, max(1, len(uniq)))) as pool:
        for line in pool.imap_unordered(_compile, uniq):
            print(line, flush=True)
    return 0


def summary(bench_path: str, *compare_paths: str) -> int:
    """Per shape of a bench JSON: ratio, times, TB/s, rule, kernel; per compared shape the rounds of each side and the
    mean new / old; geometric means of issue 16's 17 e4m3 shapes and of the rest."""
    import math
    import statistics

    rs = json.load(open(bench_path))["shapes"]
    for r in rs:
        print(f'{r["m"]}x{r["n"]}x{r["k"]:<6} {r["ratio"]:.3f} ours {r["ours_ms"] * 1e3:7.1f} us _scaled_mm '
              f'{r["cublas_ms"] * 1e3:7.1f} us {r["ours_tbps"]:.2f}/{r["cublas_tbps"]:.2f} TB/s {r["chosen_by"]:22} '
              f'ok={r["checked_ok"]} {r["kernel"][22:]}')
    gm = lambda v: math.exp(sum(math.log(x) for x in v) / len(v))  # noqa: E731
    issue = [r["ratio"] for r in rs if (r["m"], r["n"], r["k"]) in ISSUE16_E4M3]
    print(f"issue 16's e4m3 classes: {len(issue)} shapes, geomean {gm(issue):.3f}, min {min(issue):.3f}")
    for path in compare_paths:
        by = {}
        for line in open(path):
            d = json.loads(line)
            if "ratio" in d:
                by.setdefault((d["m"], d["n"], d["k"]), {}).setdefault(d["side"], []).append(d)
        print(f"== {path}: new / old in one process (ratio to torch._scaled_mm per round; us)")
        for (m, n, k), sides in by.items():
            new, old = sides.get("new", []), sides.get("old", [])
            if not new or not old:
                continue
            f = lambda v: "/".join(f'{d["ratio"]:.3f} ({d["ours_us"]:.1f})' for d in v)  # noqa: E731
            gain = statistics.mean(d["ours_us"] for d in old) / statistics.mean(d["ours_us"] for d in new)
            print(f'  {m}x{n}x{k}: new {f(new)} {new[0]["chosen_by"]} {new[0]["kernel"][28:]} | old {f(old)} '
                  f'{old[0]["chosen_by"]} {old[0]["kernel"][28:]} | old us / new us {gain:.3f}')
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    mode = sys.argv[1]
    if mode == "calibrate":
        sys.exit(calibrate())
    if mode == "compare":
        sys.exit(compare(sys.argv[2]))
    if mode == "compare-smallm":
        sys.exit(compare_smallm(sys.argv[2]))
    if mode == "precompile":
        sys.exit(precompile(sys.argv[2] if len(sys.argv) > 2 else ""))
    if mode == "summary":
        sys.exit(summary(*sys.argv[2:]))
    if mode == "shapes":
        print(",".join("%dx%dx%d" % s for s in calibration_shapes()))
        sys.exit(0)
    sys.exit(2)
