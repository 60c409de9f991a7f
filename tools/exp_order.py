"""MN-major operands: the atom order of the smem layout decides the TMA boxes (order mn: 64 x 8 boxes, 32 copies a stage
at BN = 256; order k: 64 x 64 boxes, 4 copies). Both orders of the same tile against cuBLAS on the same inputs, in one
process (ptxgen.runtime.bench.bench_spec: alternating rounds, medians, outputs checked), twice each, interleaved.

    python tools/exp_order.py
"""

import json
import sys

from ptxgen.derive.spec import make_spec
from ptxgen.runtime.bench import bench_spec

BASE = dict(bm=128, bn=256, bk=64, dtype="bf16", out_dtype="bf16", arch="sm_90a", stages=4, schedule="persistent",
            epilogue="tma")
CASES = [  # (label, operands, shape)
    ("B N-major", dict(a="kmajor-sw128", b="mnmajor-sw128"), (4096, 4096, 4096)),
    ("B N-major", dict(a="kmajor-sw128", b="mnmajor-sw128"), (8192, 8192, 8192)),
    ("A M-major", dict(a="mnmajor-sw128", b="kmajor-sw128"), (4096, 4096, 4096)),
]


def main() -> int:
    for label, ops, (m, n, k) in CASES:
        mn = "a" if ops["a"].startswith("mn") else "b"
        for rep in range(2):
            for order in ("mn", "k"):
                spec = make_spec(**BASE, **ops, **{f"{mn}_order": order})
                r = bench_spec(spec, m, n, k, warmup=5, iters=20)
                print(json.dumps({"case": label, "m": m, "n": n, "k": k, "order": order, "rep": rep, "kernel": spec.kernel_name,
                                  "ours_tflops": round(r.ours_tflops, 1), "cublas_tflops": round(r.cublas_tflops, 1),
                                  "ratio": round(r.ratio, 4), "checked_ok": r.checked_ok, "rel_error": r.rel_error}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
