"""Fit the cost model's constants from a calibration run, and summarize a validation run (issue 16 item 4).

  python tools/fit_cost.py fit runs/2026-12-01-cost-model/run1_cal.jsonl,runs/2026-12-01-cost-model/run3_cal2.jsonl \
      > ptxgen/tuning/h200_cost.json
  python tools/fit_cost.py fit runs/2026-12-01-fp8-shapes/run1/cal_e4m3.jsonl > ptxgen/tuning/h200_cost_e4m3.json
  python tools/fit_cost.py residuals CAL.jsonl[,CAL2.jsonl]                  # measured vs predicted per point
  python tools/fit_cost.py summary BENCH.jsonl COMPARE.jsonl                 # per-class table of a validation run
  python tools/fit_cost.py picks BENCH.jsonl COMPARE.jsonl                   # this checkout's picks, measured there
  python tools/fit_cost.py fitswap runs/2026-12-01-swap-waves/run1/swap.jsonl   # the swapped family (choose's swap rule
                                                                             # for M > 128): its "swap" entry, residuals

Per kernel, over its calibration points with rows on a 32-byte sector, least squares of the relative error of
    t = launch + rounds x tile + rounds x k_tiles x ktile        (all >= 0; ptxgen.runtime.costmodel's formula)
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

from ptxgen.runtime.costmodel import BY_NAME, COST_FAMILY, k_tiles, predict_us, rounds, tile_grid

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
    pts = _points(path)
    types = {_dtype(p) for p in pts}
    if len({COST_FAMILY[t] for t in types}) != 1:
        raise SystemExit(f"{path}: points of {sorted(types)}: one input family per fit")
    eb = ELEMENT_BYTES[next(iter(types))]
    bw = max(p["ours_tbps"] for p in pts)
    kernels = {}
    for name, c in BY_NAME.items():
        mine = [p for p in pts if p["cand"] == name]
        on = [p for p in mine if not _off(p["k"], eb)]
        if len(on) < 3:
            continue
        rows = []
        for p in on:
            r = rounds(tile_grid(p["m"], p["n"], c.bm, c.bn, c.cluster_m), 132)
            rows.append((1.0, r, r * k_tiles(p["k"], eb)))
        t = np.array([p["ours_us"] for p in on])
        x, *_ = np.linalg.lstsq(np.array(rows) / t[:, None], np.ones_like(t), rcond=None)  # relative errors weigh alike
        launch, tile, ktile = (max(0.0, float(v)) for v in x)
        offs = []
        for p in mine:
            if _off(p["k"], eb):
                r = rounds(tile_grid(p["m"], p["n"], c.bm, c.bn, c.cluster_m), 132)
                offs.append((p["ours_us"] - launch - r * tile) / (r * k_tiles(p["k"], eb) * ktile))
        kernels[name] = {"launch_us": round(launch, 2), "tile_us": round(tile, 3), "ktile_us": round(ktile, 4),
                         "off_sector": round(statistics.median(offs), 3) if offs else 1.0,
                         "bandwidth_tbps": round(bw, 2), "slots_per_sm": 1, "points": len(mine)}
    return {"device": "NVIDIA H200", "dtype": COST_FAMILY[next(iter(types))], "arch": "sm_90a", "sm_count": 132,
            "source": "tools/fit_cost.py fit " + path, "kernels": kernels}


def residuals(path: str) -> None:
    from ptxgen.runtime.costmodel import parse_costs

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
    from ptxgen.runtime.costmodel import SWAP_BM, SWAP_FAMILY_BN

    sys.path.insert(0, "tools")
    from exp_cost import _named

    named = _named()
    pts = [json.loads(ln) for ln in open(path)]
    pts = [d for d in pts if d.get("swap_ab") and d.get("ok") and "ours_us" in d and not _off(d["k"])]

    def row(d):
        bn = int(d["kernel"].split("_obf16_")[1].split("x")[1])
        r = rounds(-(-d["n"] // SWAP_BM) * -(-d["m"] // bn), 132)
        return [1.0, r, r * k_tiles(d["k"]) * bn / SWAP_FAMILY_BN]

    fit_pts = [d for d in pts if (d["m"], d["n"], d["k"]) not in named]
    a = np.array([row(d) for d in fit_pts])
    y = np.array([d["ours_us"] for d in fit_pts])
    x, *_ = np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)
    x = np.maximum(x, 0.0)
    for d in pts:
        pred = float(np.dot(row(d), x))
        tag = "named, not fitted" if (d["m"], d["n"], d["k"]) in named else "fitted"
        print(f"{d['m']}x{d['n']}x{d['k']} {d['kernel'][28:40]} measured {d['ours_us']:.1f} predicted {pred:.1f} "
              f"({(pred - d['ours_us']) / d['ours_us'] * 100:+.1f}%) {tag}", file=sys.stderr)
    return {"family": f"s{SWAP_BM}xN (swap-AB, tile schedule, direct M-major stores)", "per_bn": SWAP_FAMILY_BN,
            "launch_us": round(float(x[0]), 2), "tile_us": round(float(x[1]), 3), "ktile_us": round(float(x[2]), 4),
            "points": len(fit_pts), "source": f"tools/fit_cost.py fitswap {path}"}


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
