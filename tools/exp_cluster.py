"""Experiment (issue 9): do 2-CTA clusters with TMA multicast pay off on the tuned kernels? Measured.

For each shape, in one process with alternating rounds against cuBLAS (ptxgen.runtime.bench), the tuned
kernel (ptxgen.runtime.choose.choose_spec) as tuned (cluster 1x1) and with --cluster 2x1 (B multicast) and
--cluster 1x2 (A multicast), everything else equal. Each line: TFLOP/s of ours and cuBLAS, the ratio,
and whether the output matched.

--set FIELD=VALUE (repeatable) changes the tuned spec first (e.g. --set bn=128 --set raster_group=1), to see
whether multicast helps a kernel that leans harder on L2 than the tuned one.

Usage: python tools/exp_cluster.py [--dtype bf16] [--json OUT.jsonl] [--set F=V ...] 4096x4096x4096 8192x8192x1024 ...
"""

import argparse
import dataclasses
import json

from ptxgen.derive.spec import TileSpec
from ptxgen.isa.types import Cluster, SpecError
from ptxgen.runtime import bench
from ptxgen.runtime.choose import choose_spec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--json", default="")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    out = open(a.json, "a") if a.json else None
    for shape in a.shapes:
        m, n, k = map(int, shape.split("x"))
        spec, _ = choose_spec(a.dtype, "sm_90a", m, n, k)
        if a.set:
            d = spec.to_json()
            for kv in a.set:
                key, value = kv.split("=", 1)
                d[key] = int(value) if value.isdigit() else value
            spec = TileSpec.from_json(d)
        for c in (Cluster.C1X1, Cluster.C2X1, Cluster.C1X2):
            try:
                s = dataclasses.replace(spec, cluster=c)
            except SpecError as e:
                print(f"{shape} {c.value}: illegal: {e}", flush=True)
                continue
            try:
                r = bench.bench_spec(s, m, n, k, iters=a.iters)
                print(f"{shape} {c.value}: ours {r.ours_tflops:.1f} cuBLAS {r.cublas_tflops:.1f} ratio {r.ratio:.3f} "
                      f"err {r.rel_error:.1e} ok {r.checked_ok} [{r.kernel}]", flush=True)
                if out:
                    out.write(json.dumps({"shape": shape, "dtype": a.dtype, "cluster": c.value, "set": a.set, "kernel": r.kernel, "ours_tflops": r.ours_tflops,
                                          "cublas_tflops": r.cublas_tflops, "ratio": r.ratio, "ok": r.checked_ok}) + "\n")
                    out.flush()
            except Exception as e:  # noqa: BLE001 - report and go on to the next variant
                print(f"{shape} {c.value}: FAILED {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
