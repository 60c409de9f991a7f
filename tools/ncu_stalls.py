"""Where a kernel's warps stall, from an Nsight Compute source page exported as CSV (no GPU needed to read it).

Export on the device machine:  ncu --import REPORT.ncu-rep --page source --csv --print-source sass > k_sass.csv
Then:                          python tools/ncu_stalls.py k_sass.csv [--top 25]      (gzipped CSVs are read too)

Prints the total warp-state samples, the stall reasons summed over the kernel, and the SASS instructions with the
most samples, each with its three largest stall reasons (e.g. ``WARPGROUP.DEPBAR`` waiting on wgmma, a ``BRA`` spinning
on an mbarrier try_wait: the reading behind docs/attention.md's profile).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys


def read(path: str) -> tuple[list[str], list[list[str]]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    return rows[1], rows[2:]  # row 0 names the kernel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    hdr, data = read(a.csv)
    src, samples = hdr.index("Source"), hdr.index("Warp Stall Sampling (All Samples)")
    stalls = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda r, i: int(r[i] or 0)  # noqa: E731
    print("total samples", sum(num(r, samples) for r in data))
    totals = {hdr[i]: sum(num(r, i) for r in data) for i in stalls}
    print("by reason:", ", ".join(f"{k} {v}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1])[:8]))
    for r in sorted(data, key=lambda r: -num(r, samples))[:a.top]:
        big = sorted(((hdr[i], num(r, i)) for i in stalls if num(r, i)), key=lambda kv: -kv[1])[:3]
        print(f"{num(r, samples):7d} {r[0][-5:]} {r[src].strip()[:70]:70s} {big}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
