"""Energy per GEMM (issue 17): is the H200 power-capped while block-FP8 GEMMs run back to back, and how much energy does
each kernel spend per call? One shape; each entry (torch's blockwise ``_scaled_mm``, torch's per-tensor one, and
tools/bench_blockfp8.py's variants) runs alone for ``--seconds`` of back-to-back 25 ms batches while ``nvidia-smi``
samples SM clock and board power every 50 ms; then, after a second of idle each time, one launch alone between events
(the clock unthrottled). Entries run in turn, twice (the order reversed the second time), so drift hits all alike.

Per entry and pass, one JSON line: ms per call back to back (median of the batches after the first second), TFLOP/s,
the median SM clock and power of the samples inside that window, energy per call (power x time, mJ), and the median
of five lone launches (ms). Outputs are checked against torch's blockwise call.

    python tools/power_probe.py 4096x7168x16384 --variants m192-n128-s4-tma-tmasf,m256-n128-s3-tma-tmasf-cs2 --json out.jsonl

A variant ending in ``-nopromo`` (2026-12-02) is a diagnostic, not the recipe: the block kernel's rendered source without the
promotion (the tensor core accumulates all of K, as the per-tensor kernel does; ptxas then drops the scale reads too;
every per-K-block wait and release stays; the output, unscaled, is not checked), to tell the promotion arithmetic's
energy from the rest of the block structure's.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime

from bench_blockfp8 import Launch, flops_tf, inputs, parse_variant, variant_spec  # this script's folder (tools/) is on sys.path
from ptxgen.runtime.check.bench import _batch
from ptxgen.runtime.launch.gpu import require_gpu
from ptxgen.runtime.compile.toolchain import compile_cuda
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel

SMI_FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu"
BATCH_MS = 25.0  # as tools/bench_blockfp8.py
NOPROMO = "-nopromo"
PROMOTION = re.compile(r"acc0\[i( \+ \d)?\] \+= part0\[i( \+ \d)?\] \* bfp8_s(lo|hi)0;")


def nopromo_cubin(spec) -> bytes:
    """The block kernel without its promotion (the diagnostic above): the partial accumulates over all of K in the
    tensor core (scale_d 0 only at the tile's first K block, so no MMA is dead code) and becomes the output after the
    loop; every wait and release stays (ptxas drops the scale reads nothing uses). Asserts each rewrite applies."""
    src = render_kernel(plan_kernel(spec))
    out, n = PROMOTION.subn("", src)
    assert n == 4, n  # the four statements of the unrolled-by-4 promotion loop
    out, n = re.subn(r", 0u\);  // K 0\.\.31", ", kt == 0 ? 0u : 1u);  // K 0..31", out)
    assert n == 1, n
    tail = "    if (n0 + " + str(spec.bn) + " <= N"
    assert out.count(tail) == 1, tail
    out = out.replace(tail, "#pragma unroll\n    for (int i = 0; i < 64; ++i) acc0[i] = part0[i];\n" + tail)
    return compile_cuda(out, spec.kernel_name, "sm_90a").cubin


def smi_samples(path: str) -> list[tuple[float, float, float]]:
    """(unix time, SM MHz, W) of each nvidia-smi line written so far."""
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, float(parts[1].split()[0]), float(parts[2].split()[0])))
        except (ValueError, IndexError):
            continue
    return out


def sustained(torch, fn, seconds: float) -> tuple[float, float, float]:
    """Back-to-back batches for ``seconds``: (median ms per call of the batches after the first second, window start,
    window end) in unix time."""
    reps = max(1, int(BATCH_MS / max(1e-3, _batch(torch, fn, 3))))
    t0, times, start = time.time(), [], None
    while time.time() - t0 < seconds:
        ms = _batch(torch, fn, reps)
        if time.time() - t0 > 1.0:
            start = start or time.time()
            times.append(ms)
    return statistics.median(times), start, time.time()


def lone(torch, fn, tries: int = 3) -> float:
    """Median ms of one launch between events, each after a second of idle."""
    out = []
    for _ in range(tries):
        time.sleep(1.0)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        out.append(e0.elapsed_time(e1))
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shape")
    ap.add_argument("--variants", default="m192-n128-s4-tma-tmasf")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--json")
    ap.add_argument("--smi-log", default="/tmp/power_probe_smi.csv")
    args = ap.parse_args()
    import torch

    dev = require_gpu()
    m, n, k = map(int, args.shape.split("x"))
    a, b, sa, sb, kb4 = inputs(torch, m, n, k)
    one = torch.ones((), device="cuda")
    fns = {"torch_blockwise": lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
           "torch_per_tensor": lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)}
    ref = fns["torch_blockwise"]().float()
    outs = {}
    refs = {True: fns["torch_per_tensor"]().float(), False: ref}
    plains = {}
    for v in args.variants.split(","):
        _, plains[v], _, fields = parse_variant(v.removesuffix(NOPROMO))
        spec = variant_spec(fields, plains[v])  # plain-: the per-tensor twin of the same tile
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        if not v.endswith(NOPROMO):
            outs[v] = d
        extra = {} if plains[v] else {"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4}
        cubin = nopromo_cubin(spec) if v.endswith(NOPROMO) else None
        fns[v] = Launch(spec, m, n, k, a, b, d, extra, dev, torch, cubin=cubin).run
        fns[v]()
    torch.cuda.synchronize()
    ok = True
    for v, d in outs.items():
        r = refs[plains[v]]
        err = float(torch.linalg.norm(d.float() - r) / torch.linalg.norm(r))
        print(f"{v}: rel error vs torch's {'per-tensor' if plains[v] else 'blockwise'} call {err:.1e}", flush=True)
        ok &= err < 1e-2
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader", "-lms", "50"],
                           stdout=open(args.smi_log, "w"), stderr=subprocess.DEVNULL)
    try:
        order = list(fns)
        for pss, names in enumerate((order, order[::-1])):
            for nm in names:
                ms, t0, t1 = sustained(torch, fns[nm], args.seconds)
                time.sleep(0.2)  # the sampler's lines of the window are written
                inside = [s for s in smi_samples(args.smi_log) if t0 <= s[0] <= t1]
                mhz = statistics.median(s[1] for s in inside) if inside else float("nan")
                watts = statistics.median(s[2] for s in inside) if inside else float("nan")
                row = {"shape": args.shape, "entry": nm, "pass": pss, "ms": ms, "tflops": flops_tf(m, n, k, ms),
                       "sm_mhz": mhz, "watts": watts, "mj_per_call": watts * ms, "samples": len(inside),
                       "lone_ms": lone(torch, fns[nm]), "device": dev.name}
                row["lone_tflops"] = flops_tf(m, n, k, row["lone_ms"])
                print(f"{args.shape} {nm} pass {pss}: {row['tflops']:.0f} TFLOP/s back to back at {mhz:.0f} MHz, {watts:.0f} W, "
                      f"{row['mj_per_call']:.0f} mJ a call; alone after idle {row['lone_tflops']:.0f} TFLOP/s", flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
    finally:
        smi.terminate()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
