"""Profile block-scaled FP8 kernels under ncu (issue 17): each variant (tools/bench_blockfp8.py's names) launched once on
one shape after a warm-up of the others, so that ``ncu -k regex:ptxgen --launch-skip S`` can pick the timed launches.

    ncu --section SourceCounters ... -k regex:ptxgen python tools/ncu_blockfp8.py 4096x7168x16384 n192-s4-tma n192-s4-tma-ahead

Then ``python tools/ncu_blockfp8.py --summarize report.csv`` reads ``ncu --import R --page source --csv --print-source
sass`` output and prints, per kernel, the instructions with the most warp-stall samples and their reasons.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict


def launch(shape: str, variants: list[str]) -> int:
    import torch

    import ptxgen.api.fp8blocks as fb
    from bench_blockfp8 import inputs, parse_variant  # this script's folder (tools/) is on sys.path
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.cache import compile_cached
    from ptxgen.runtime.launch.gpu import Kernel, require_gpu
    from ptxgen.runtime.launch.launch import Problem, gemm_args, launch_geometry

    dev = require_gpu()
    m, n, k = map(int, shape.split("x"))
    a, b, sa, sb, kb4 = inputs(torch, m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for v in variants:
        fields = parse_variant(v)[3]  # tools/bench_blockfp8.py's names, [mBM-] included
        fields.pop("stream_k", None)  # launched without a workspace: the whole-tile kernel
        spec = fb.default_spec(**fields)
        plan = plan_kernel(spec)
        kern = Kernel(compile_cached(render_kernel(plan), spec.kernel_name, "sm_90a").compiled.cubin, spec.kernel_name,
                      plan.abi.dynamic_smem_bytes)
        p = Problem(m, n, k, k, k, n)
        argv = gemm_args(plan, a.data_ptr(), b.data_ptr(), d.data_ptr(), p,
                         extra={"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4})
        grid, block, _ = launch_geometry(plan, p, dev.sm_count, kern)
        for _ in range(2):  # the first launch warms caches and clocks, the second is the one to profile
            kern.launch(grid, block, argv)
        torch.cuda.synchronize()
        print(f"{v}: {spec.kernel_name} grid {grid} block {block}", flush=True)
    return 0


def summarize(path: str, top: int = 30) -> int:
    """Per kernel in the CSV (ncu's source page, one block per kernel): the ``top`` instructions by warp-stall samples."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    blocks, cur = [], None
    for r in rows:
        if r and any("Source" == c or c == "# Address" or c == "Address" for c in r[:3]):
            cur = {"header": r, "rows": []}
            blocks.append(cur)
        elif cur is not None and len(r) == len(cur["header"]):
            cur["rows"].append(r)
        elif r:
            print("|", ",".join(r)[:200])
    for blk in blocks:
        h = blk["header"]
        src = next(i for i, c in enumerate(h) if c == "Source")
        samp = [i for i, c in enumerate(h) if "Warp Stall Sampling (All" in c]
        if not samp:
            print("columns:", h)
            continue
        si = samp[0]
        stall_cols = [i for i, c in enumerate(h) if c.startswith("stall_") or "Stall" in c and i != si and "Sampling" not in c]

        def num(x):
            try:
                return float(x.replace(",", ""))
            except ValueError:
                return 0.0
        total = sum(num(r[si]) for r in blk["rows"]) or 1.0
        print(f"--- {len(blk['rows'])} instructions, {total:.0f} stall samples; columns with stalls: "
              f"{[h[i] for i in stall_cols][:40]}")
        by_kind = defaultdict(float)
        for r in blk["rows"]:
            op = r[src].split()[0] if r[src].split() else "?"
            op = r[src].split()[1] if op.startswith("@") and len(r[src].split()) > 1 else op
            by_kind[op.split(".")[0]] += num(r[si])
        print("samples by opcode:", ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(by_kind.items(), key=lambda x: -x[1])[:14]))
        for r in sorted(blk["rows"], key=lambda r: -num(r[si]))[:top]:
            reasons = sorted(((h[i], num(r[i])) for i in stall_cols if num(r[i]) > 0), key=lambda x: -x[1])[:4]
            print(f"{num(r[si]) / total:6.1%}  {r[0][:8]:>8}  {r[src][:70]:70}  " + ", ".join(f"{n} {v:.0f}" for n, v in reasons))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    if sys.argv[1] == "--summarize":
        sys.exit(summarize(sys.argv[2]))
    sys.exit(launch(sys.argv[1], sys.argv[2:]))
