"""Diagnostic (issue 9): what the epilogue costs the tuned kernels, measured.

For each shape, in one process with alternating rounds against cuBLAS (ptxgen.runtime.bench), three
variants of the tuned kernel: as tuned ("direct": every thread stores its fragment), the same with
--epilogue tma (stmatrix -> swizzled staging -> TMA store; one stage fewer if shared memory is short),
and "nostore": the direct kernel with its global stores switched off by a run-time condition that is
never true (K < 0), an upper bound on what any epilogue could give back. nostore's output check fails
by construction; only its time is of interest.

Usage: python tools/exp_epilogue.py [--dtype bf16] 4096x4096x4096 8192x8192x1024 ...
"""

import argparse

from ptxgen.runtime import bench
from ptxgen.runtime.choose import choose_spec
from ptxgen.runtime.choose.tune import store_variant

_orig = bench.render_kernel


def nostore(plan):
    src = _orig(plan)
    assert "if (row < M) {" in src, "no epilogue store guard found"
    return src.replace("if (row < M) {", "if (row < M && K < 0) {")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--no-nostore", action="store_true")
    a = ap.parse_args()
    for shape in a.shapes:
        m, n, k = map(int, shape.split("x"))
        spec, _ = choose_spec(a.dtype, "sm_90a", m, n, k)
        variants = [("direct", spec, _orig), ("tma", store_variant(spec), _orig)]
        if not a.no_nostore:
            variants.append(("nostore", spec, nostore))
        for label, s, render in variants:
            if s is None:
                print(f"{shape} {label}: no legal variant", flush=True)
                continue
            bench.render_kernel = render
            try:
                r = bench.bench_spec(s, m, n, k, iters=a.iters)
                print(f"{shape} {label}: ours {r.ours_tflops:.1f} cuBLAS {r.cublas_tflops:.1f} ratio {r.ratio:.3f} "
                      f"err {r.rel_error:.1e} ok {r.checked_ok} [{r.kernel}]", flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on to the next variant
                print(f"{shape} {label}: FAILED {type(e).__name__}: {e}", flush=True)
            finally:
                bench.render_kernel = _orig


if __name__ == "__main__":
    main()
