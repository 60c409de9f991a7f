"""Diagnostic: for shapes that are not in the tuning table, the kernel of the single nearest tuned shape against
the one ``choose_spec`` picks (the best tile fit among the nearest three), each against cuBLAS in the same process
(ptxgen.runtime.bench: alternating rounds, medians, the output checked every round).

Usage: python tools/exp_choose.py 12000x1000x6000 3000x7000x5000 ...
"""

import math
import sys

from ptxgen.derive.spec import TileSpec
from ptxgen.runtime import bench
from ptxgen.runtime.choose import choose_spec
from ptxgen.runtime.choose.tune import load_table


def nearest(m: int, n: int, k: int) -> TileSpec:
    entries = [e for e in load_table() if e["dtype"] == "bf16" and e["arch"] == "sm_90a"]
    best = min(entries, key=lambda e: sum(abs(math.log(x) - math.log(e[d])) for x, d in ((m, "m"), (n, "n"), (k, "k"))))
    return TileSpec.from_json(best["spec"])


def main() -> None:
    for shape in sys.argv[1:]:
        m, n, k = map(int, shape.split("x"))
        old, (new, why) = nearest(m, n, k), choose_spec("bf16", "sm_90a", m, n, k)
        picks = [("nearest", old)] + ([("fit", new)] if new != old else [])
        for label, spec in picks:
            r = bench.bench_spec(spec, m, n, k, iters=30)
            print(f"{shape} {label}: ratio {r.ratio:.3f} ours {r.ours_tflops:.1f} cuBLAS {r.cublas_tflops:.1f} ok {r.checked_ok} "
                  f"[{spec.kernel_name}]" + (f" ({why})" if label == "fit" or new == old else ""), flush=True)


if __name__ == "__main__":
    main()
