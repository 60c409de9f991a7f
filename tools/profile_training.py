"""Where a training step's time goes: torch.profiler over a few steps of tools/bench_training.py's MLP and MoE models,
ptxgen's modules against torch eager, the GPU time per step by kernel category, the step's wall time and its gaps
(issue 33).

For each model (the same sizes and builders as tools/bench_training.py: ``mlp`` 4 x (4096 -> 14336 -> 4096) bf16 with
bias and gelu, ``moe`` 8 experts 4096 -> 2 x 14336 -> 4096, top-2; ``--tokens`` rows) and each variant (``ptxgen``:
ptxgen.nn's modules; ``torch``: torch eager), from the same weights, input and output gradient:
  wall_ms     one step, CUDA events around --steps steps queued back to back (no synchronisation between them, as
              bench_training's batches run), the median of --reps such batches, no profiler running;
  host_ms     the host's time to queue one step (the same batches: until the last step's backward returns, before the
              synchronisation); well below wall_ms, the host keeps ahead and the GPU waits on it only at a batch's start
              and where a step synchronises;
  busy_ms     the union of the GPU's kernel, memcpy and memset intervals per step, from torch.profiler over --steps
              steps queued back to back;
  gaps_ms     wall_ms - busy_ms: the time per step the GPU runs nothing (launch latency, host work the GPU waits for);
  per category, GPU time per step: "ptxgen GEMM" (kernels named ptxgen_*), "cuBLAS GEMM" (torch's GEMM kernels:
              cuBLAS/cuBLASLt, nvjet, and the CUTLASS kernels of torch._grouped_mm), "elementwise", "reduction",
              "copy/memset" (memcpy, memset, copy and fill kernels), "other" (sort, top-k, scatter, index kernels...);
  kernels     launches per step, and the kernels that take the most time (name, launches and ms per step).
Written to DIR/profile_training.json and DIR/profile_training.txt (the same table as printed); --trace also writes
each variant's Chrome trace (DIR/trace_MODEL_VARIANT.json). About 60-90 s on an H100 with compiled kernels cached
(the first ptxgen step of a process compiles its kernels). --compile adds the variants "torch.compile" (torch's model,
default mode) and "ptxgen+compile" (ptxgen's, fullgraph=True), as tools/bench_training.py compiles them.

Usage: python tools/profile_training.py --out DIR [--model mlp,moe] [--tokens 8192] [--steps 5] [--reps 3] [--trace]
       [--compile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CATEGORIES = ("ptxgen GEMM", "cuBLAS GEMM", "elementwise", "reduction", "copy/memset", "other")
# (category, substrings of the lower-cased kernel name), first match wins
_RULES = (("elementwise", ("triton_poi_",)),  # Inductor's names hold the ops they fuse ("..._grouped_gemm_index_5")
          ("reduction", ("triton_red_", "triton_per_")),
          ("ptxgen GEMM", ("ptxgen_",)),
          ("cuBLAS GEMM", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "splitkreduce")),
          ("copy/memset", ("memcpy", "memset", "copy_kernel", "direct_copy", "fillfunctor", "fill_kernel")),
          ("reduction", ("reduce_kernel", "devicereduce", "softmax", "scan")),
          ("elementwise", ("elementwise",)))
TOP = 16


def classify(name: str) -> str:
    """The category of a GPU kernel (or memcpy/memset) by its name."""
    low = name.lower()
    for cat, keys in _RULES:
        if any(k in low for k in keys):
            return cat
    return "other"


def union_us(intervals) -> float:
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def summarize(events, steps: int) -> dict:
    """Per-step GPU time by category, busy time, span and launches from ``events``: (name, start_us, end_us) of every
    GPU activity of ``steps`` steps."""
    cat = dict.fromkeys(CATEGORIES, 0.0)
    kernels: dict = {}
    for name, s, e in events:
        c = classify(name)
        cat[c] += e - s
        k = kernels.setdefault(name, [0, 0.0, c])
        k[0] += 1
        k[1] += e - s
    span = (max(e for _, _, e in events) - min(s for _, s, _ in events)) if events else 0.0
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:TOP]
    return {"category_ms": {c: v / steps / 1e3 for c, v in cat.items()},
            "busy_ms": union_us([(s, e) for _, s, e in events]) / steps / 1e3,
            "profiled_span_ms": span / steps / 1e3,
            "launches": len(events) / steps,
            "top": [{"kernel": n[:160], "category": c, "launches": cnt / steps, "ms": t / steps / 1e3}
                    for n, (cnt, t, c) in top]}


def gpu_events(prof, torch) -> list:
    """(name, start_us, end_us) of the profile's GPU activities (kernels, memcpy, memset)."""
    cuda = torch.autograd.DeviceType.CUDA
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == cuda]


def time_steps(torch, step, steps: int, reps: int) -> tuple[float, float]:
    """(wall ms, host ms) per step: medians over ``reps`` batches of ``steps`` steps queued back to back."""
    walls, hosts = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(steps):
            step()
        end.record()
        hosts.append((time.perf_counter() - t0) * 1e3 / steps)
        end.synchronize()
        walls.append(start.elapsed_time(end) / steps)
    return statistics.median(walls), statistics.median(hosts)


def profile_step(torch, step, steps: int, trace: Path | None) -> dict:
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    events = gpu_events(prof, torch)
    if not events:
        raise RuntimeError("torch.profiler recorded no GPU activity (is CUPTI available?)")
    return summarize(events, steps)


def run_model(name: str, args, torch) -> dict:
    from bench_training import build, make_step

    torch.manual_seed(0)
    base, d = build(name, args, False, torch.bfloat16)
    ours, _ = build(name, args, True, torch.bfloat16)
    ours.load_state_dict(base.state_dict())
    x = torch.randn(args.tokens, d, dtype=torch.bfloat16, device="cuda")
    dy = torch.randn(args.tokens, d, dtype=torch.bfloat16, device="cuda")
    models = {"ptxgen": ours, "torch": base}
    fns = dict(models)
    if args.compile:  # as tools/bench_training.py compiles them
        fns["torch.compile"], models["torch.compile"] = torch.compile(base), base
        fns["ptxgen+compile"], models["ptxgen+compile"] = torch.compile(ours, fullgraph=True), ours
    steps = {v: make_step(models[v], fns[v], x.clone().requires_grad_(), dy) for v in fns}
    for _ in range(args.warmup):  # the first ptxgen step compiles and prepares its kernels
        for s in steps.values():
            s()
    out = {}
    for v, s in steps.items():
        wall, host = time_steps(torch, s, args.steps, args.reps)
        trace = Path(args.out) / f"trace_{name}_{v}.json" if args.trace else None
        row = profile_step(torch, s, args.steps, trace)
        out[v] = {"wall_ms": wall, "host_ms": host, **row, "gaps_ms": wall - row["busy_ms"]}
    del steps, models, fns, ours, base
    torch.cuda.empty_cache()
    return out


COLUMNS = (*CATEGORIES, "busy", "wall", "gaps", "host", "launches")
# the difference rows of the table: (variant, its baseline, label)
DIFFS = (("ptxgen", "torch", "ptx-torch"), ("ptxgen+compile", "torch.compile", "ptx-tc (comp)"))


def table(results: dict) -> str:
    """The text table: ms per step by category, busy, wall, gaps and host, launches per step; a ptxgen - torch row."""
    w = 12
    lines = [f"{'model/variant':<16}" + "".join(f"{c:>{w}}" for c in COLUMNS)]

    def cells(r):
        vals = [r["category_ms"][c] for c in CATEGORIES] + [r["busy_ms"], r["wall_ms"], r["gaps_ms"], r["host_ms"]]
        return vals + [r["launches"]]
    for model, rows in results.items():
        for v, r in rows.items():
            lines.append(f"{model + '/' + v:<16}" + "".join(f"{x:>{w}.3f}" for x in cells(r)[:-1]) + f"{cells(r)[-1]:>{w}.0f}")
        for ours, theirs, label in DIFFS:
            if {ours, theirs} <= set(rows):
                diff = [a - b for a, b in zip(cells(rows[ours]), cells(rows[theirs]))]
                lines.append(f"{model + ' ' + label:<16}" + "".join(f"{x:>+{w}.3f}" for x in diff[:-1]) + f"{diff[-1]:>+{w}.0f}")
        for v, r in rows.items():
            lines.append(f"  {model}/{v}: top kernels (ms per step, launches per step, category)")
            lines += [f"    {k['ms']:8.3f} {k['launches']:5.1f}  {k['category']:<12} {k['kernel'][:110]}" for k in r["top"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    head, rest = __doc__.split("\n\n", 1)
    ap = argparse.ArgumentParser(description=head, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    ap.add_argument("--out", required=True, help="folder for profile_training.json and profile_training.txt")
    ap.add_argument("--model", default="mlp,moe")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=5, help="steps per profiled (and per timed) batch")
    ap.add_argument("--reps", type=int, default=3, help="timed batches (median)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--small", action="store_true", help="64/96-wide models (a dry run)")
    ap.add_argument("--trace", action="store_true", help="also write each variant's Chrome trace")
    ap.add_argument("--compile", action="store_true",
                    help="also torch.compile of each model (torch's: default mode; ptxgen's: fullgraph=True)")
    args = ap.parse_args(argv)
    models = args.model.split(",")
    bad = [m for m in models if m not in ("mlp", "moe")]
    if bad or args.steps < 1 or args.reps < 1 or args.warmup < 0 or args.tokens < 1:
        print(f"bad usage: models mlp or moe (got {bad or models}); --steps, --reps, --tokens >= 1, --warmup >= 0",
              file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("no usable GPU: torch sees no CUDA device", file=sys.stderr)
        return 3
    import ptxgen

    ptxgen.register_torch_ops()
    args.device = "cuda"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = {m: run_model(m, args, torch) for m in models}
    ratio = {m: rows["torch"]["wall_ms"] / rows["ptxgen"]["wall_ms"] for m, rows in results.items()}
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "ptxgen": ptxgen.__version__,
           "tokens": args.tokens, "steps": args.steps, "reps": args.reps, "categories": list(CATEGORIES), "models": results,
           "torch_wall_over_ptxgen_wall": ratio}
    text = (f"{doc['device']}, torch {doc['torch']}, ptxgen {doc['ptxgen']}, {args.tokens} tokens; ms per step\n"
            + table(results) + "\ntorch eager wall / ptxgen wall: " + ", ".join(f"{m} {r:.3f}x" for m, r in ratio.items()))
    (Path(args.out) / "profile_training.json").write_text(json.dumps(doc, indent=1) + "\n")
    (Path(args.out) / "profile_training.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
