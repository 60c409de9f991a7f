"""Fit the cost model's constants from a calibration run, and summarize a validation run (issue 16 item 4).

  python tools/fit_cost.py fit runs/2026-12-01-cost-model/run1_cal.jsonl,runs/2026-12-01-cost-model/run3_cal2.jsonl
                     # the 16bit family of ptxgen/tuning/h200_calibration.json
  python tools/fit_cost.py fit runs/2026-12-01-fp8-shapes/run1/cal_e4m3.jsonl   # its e4m3 family
(``ptxgen tune --calibrate`` measures and fits a whole calibration on the GPU present, with the same fit.)
  python tools/fit_cost.py residuals CAL.jsonl[,CAL2.jsonl]                  # measured vs predicted per point
  python tools/fit_cost.py summary BENCH.jsonl COMPARE.jsonl                 # per-class table of a validation run
  python tools/fit_cost.py picks BENCH.jsonl COMPARE.jsonl                   # this checkout's picks, measured there
  python tools/fit_cost.py fitswap runs/2026-12-01-swap-waves/run1/swap.jsonl   # the swapped family (choose's swap rule
                                                                             # for M > 128): its "swap" entry, residuals

Per kernel, over its calibration points with rows on a 32-byte sector, least squares of the relative error of
    t = launch + rounds x tile + rounds x k_tiles x ktile        (all >= 0; ptxgen.runtime.choose.costmodel's formula)
(k_tiles = ceil(K / BK), BK = 128 bytes of K; a log's points carry their input type, ``dtype``, bf16 when absent: one
log fits one type's table)
then the off-sector factor = the median over its off-sector points of (t - launch - rounds x tile) / (rounds x k_tiles
x ktile). The bandwidth floor is the highest A + B + D rate any kernel reached in the run (TB/s).
"""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np

from ptxgen.runtime.choose.costmodel import BY_NAME, k_tiles, predict_us, rounds

SECTOR_BYTES = 32
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "e4m3": 1}


def _points(paths: str) -> list[dict]:
    """The measured points of one or more calibration logs (comma-separated paths)."""
    out = []
    for line in (ln for path in paths.split(",") for ln in open(path)):
        d = json.loads(line)
        if "ours_us" in d and d.get("ok") and d.get("cand") in BY_NAME:
            out.append(d)
    return out


def _dtype(p: dict) -> str:
    return p.get("dtype", "bf16")


def _off(k: int, element_bytes: int = 2) -> bool:
    return (k * element_bytes) % SECTOR_BYTES != 0


def fit(path: str) -> dict:
    """The family object of a calibration (ptxgen.runtime.choose.fit.fit_family) from one or more logs, on the H200's
    132 SMs (the logs this tool was written for); SystemExit for points of two input families."""
    from ptxgen.runtime.choose.fit import fit_family

    try:
        doc = fit_family(_points(path), 132, source="tools/fit_cost.py fit " + path)
    except ValueError as e:
        raise SystemExit(f"{path}: {e}") from None
    return {"device": "NVIDIA H200", **doc}


def residuals(path: str) -> None:
    from ptxgen.runtime.choose.costmodel import parse_costs

    costs = parse_costs(fit(path))
    errs = []
    for p in _points(path):
        if p["cand"] not in costs:
            continue
        eb = ELEMENT_BYTES[_dtype(p)]
        t = predict_us(BY_NAME[p["cand"]], costs[p["cand"]], p["m"], p["n"], p["k"], off_sector=_off(p["k"], eb),
                       element_bytes=eb)
        e = t / p["ours_us"] - 1
        errs.append(abs(e))
        print(f'{p["cand"]:11} {p["m"]}x{p["n"]}x{p["k"]:<6} measured {p["ours_us"]:8.1f} predicted {t:8.1f} us ({e:+.1%})')
    print(f"{len(errs)} points: median |error| {statistics.median(errs):.1%}, max {max(errs):.1%}")


def summary(bench_path: str, compare_path: str | None) -> None:
    for line in open(bench_path):
        d = json.loads(line)
        rs = (d["result"] or {}).get("shapes", [])
        for r in rs:
            print(f'{d["class"]:10} {r["m"]}x{r["n"]}x{r["k"]:<6} {r["ratio"]:.3f} ours {r["ours_ms"] * 1e3:8.1f} us cuBLAS '
                  f'{r["cublas_ms"] * 1e3:8.1f} us {r["ours_tbps"]:.2f}/{r["cublas_tbps"]:.2f} TB/s {r["chosen_by"]:24} '
                  f'ok={r["checked_ok"]} {r["kernel"][22:]}')
        if rs:
            g = math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs))
            print(f'{d["class"]}: geomean {g:.3f}, min {min(r["ratio"] for r in rs):.3f} over {len(rs)} shapes')
    if compare_path:
        by = {}
        for line in open(compare_path):
            d = json.loads(line)
            if "ratio" in d:
                key = (d.get("set", "issue16"), d["m"], d["n"], d["k"])
                by.setdefault(key, {}).setdefault(d["side"], []).append((d["ratio"], d["chosen_by"], d["kernel"][22:]))
        print("the chooser's pick (new) against its pick before the cost model (old) and the cost model's pick among run 1's "
              "candidates (first), where they differ; ratio to cuBLAS in the same process, two rounds each:")
        gains = {}
        for (tag, m, n, k), sides in by.items():
            parts = []
            for side in ("new", "old", "first"):
                v = sides.get(side)
                if v:
                    parts.append(f"{side} " + "/".join(f"{x[0]:.3f}" for x in v) + f" {v[0][1]} {v[0][2]}")
            print(f"  [{tag}] {m}x{n}x{k}: " + " | ".join(parts))
            if sides.get("new") and sides.get("old"):
                mean = lambda v: statistics.mean(x[0] for x in v)  # noqa: E731
                gains.setdefault(tag, []).append(mean(sides["new"]) / mean(sides["old"]))
        for tag, g in gains.items():
            gm = math.exp(sum(math.log(x) for x in g) / len(g))
            print(f"[{tag}] new / old over {len(g)} shapes: geomean {gm:.3f}, min {min(g):.3f}, max {max(g):.3f}, "
                  f"new better on {sum(x > 1 for x in g)}")

def picks(bench_path: str, compare_path: str) -> None:
    """For each shape of a validation run: the kernel this checkout's chooser picks, and that kernel's ratios to cuBLAS
    in the run (the bench's, else the comparison's two rounds), per class with the geometric mean."""
    from ptxgen.runtime.choose import choose

    seen = {}
    for line in open(compare_path):
        d = json.loads(line)
        if "ratio" in d:
            seen.setdefault((d["m"], d["n"], d["k"], d["kernel"]), []).append(d["ratio"])
    for line in open(bench_path):
        d = json.loads(line)
        rs = (d["result"] or {}).get("shapes", [])
        got = []
        for r in rs:
            c = choose("bf16", "sm_90a", r["m"], r["n"], r["k"])
            if c.spec.kernel_name == r["kernel"]:
                ratio, src = r["ratio"], "bench"
            elif (r["m"], r["n"], r["k"], c.spec.kernel_name) in seen:
                v = seen[(r["m"], r["n"], r["k"], c.spec.kernel_name)]
                ratio, src = statistics.mean(v), "compare " + "/".join(f"{x:.3f}" for x in v)
            else:
                print(f'{d["class"]:10} {r["m"]}x{r["n"]}x{r["k"]}: {c.chosen_by} {c.spec.kernel_name[22:]} not measured in this run')
                continue
            got.append(ratio)
            print(f'{d["class"]:10} {r["m"]}x{r["n"]}x{r["k"]:<6} {ratio:.3f} ({src}) {c.chosen_by:22} {c.spec.kernel_name[22:]}')
        if got:
            print(f'{d["class"]}: geomean {math.exp(sum(map(math.log, got)) / len(got)):.3f}, min {min(got):.3f}, {len(got)} of {len(rs)} shapes')


def fitswap(path: str) -> dict:
    """The swapped 128 x BN' family (costmodel.predict_swap) from tools/exp_waves.py swap: every swapped point whose shape
    is none of issue 16's named or held-out shapes, least squares of the relative error of
        t = launch + rounds x tile + rounds x k_tiles x ktile x BN' / 192
    (rows on a sector only; the off-sector factor is not measured for this family: t128x192's is kept). Prints the
    residuals of every swapped point, the named ones included (not fitted), to stderr."""
    from ptxgen.runtime.choose.costmodel import SWAP_BM, SWAP_FAMILY_BN

    sys.path.insert(0, "tools")
    from exp_cost import _named

    named = _named()
    pts = [json.loads(ln) for ln in open(path)]
    pts = [d for d in pts if d.get("swap_ab") and d.get("ok") and "ours_us" in d and not _off(d["k"])]

    def row(d):
        bn = int(d["kernel"].split("_obf16_")[1].split("x")[1])
        r = rounds(-(-d["n"] // SWAP_BM) * -(-d["m"] // bn), 132)
        return [1.0, r, r * k_tiles(d["k"]) * bn / SWAP_FAMILY_BN]

    from ptxgen.runtime.choose.fit import fit_swap

    for d in pts:
        d["swap_bn"] = int(d["kernel"].split("_obf16_")[1].split("x")[1])
    fit_pts = [d for d in pts if (d["m"], d["n"], d["k"]) not in named]
    doc = fit_swap(fit_pts, 132, f"tools/fit_cost.py fitswap {path}")
    doc["family"] = f"s{SWAP_BM}xN (swap-AB, tile schedule, direct M-major stores)"
    x = (doc["launch_us"], doc["tile_us"], doc["ktile_us"])
    for d in pts:
        pred = float(np.dot(row(d), x))
        tag = "named, not fitted" if (d["m"], d["n"], d["k"]) in named else "fitted"
        print(f"{d['m']}x{d['n']}x{d['k']} {d['kernel'][28:40]} measured {d['ours_us']:.1f} predicted {pred:.1f} "
              f"({(pred - d['ours_us']) / d['ours_us'] * 100:+.1f}%) {tag}", file=sys.stderr)
    return doc


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    mode = sys.argv[1]
    if mode == "fitswap":
        print(json.dumps(fitswap(sys.argv[2]), indent=1))
        sys.exit(0)
    if mode == "fit":
        print(json.dumps(fit(sys.argv[2]), indent=1))
    elif mode == "residuals":
        residuals(sys.argv[2])
    elif mode == "picks":
        picks(sys.argv[2], sys.argv[3])
    elif mode == "summary":
        summary(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
