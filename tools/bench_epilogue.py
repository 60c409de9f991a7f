"""Benchmark (issue 17): the fused epilogue chain on the H200, in one process, alternating rounds, medians.

Per shape (bf16 in, f32 accumulate, the tuned kernel of ``ptxgen.runtime.choose.choose_spec`` for that shape):

* ``plain``:       the tuned kernel, D = bf16(A B^T)
* ``plain_twin``:  the same kernel loaded a second time: a control, its ratio to ``plain`` is the method's noise
* ``fused``:       the same kernel with --fuse bias=col:bf16,act=gelu_tanh: D = bf16(gelu(A B^T + bias))
* ``torch_eager``: torch.nn.functional.gelu(torch.matmul(A, B.t()) + bias, approximate="tanh")  (three kernels)
* ``torch_linear``: gelu(F.linear(A, B, bias)), the bias in cuBLAS's epilogue, the gelu a second kernel
* ``cublas``:      torch.matmul(A, B.t()) alone

with --epilogue-order alternate (or alternate-uniform) also (ptxgen.derive.roles.epiorder: the consumer warpgroups'
epilogues in turn)

* ``plain_ordered``: the tuned kernel with that --epilogue-order
* ``fused_ordered``: the fused kernel with that --epilogue-order

(fused/plain stays against today's unordered plain kernel; a pick the order does not apply to is refused, exit 2), and,
with --plain-only, only plain, plain_twin, plain_ordered and cublas (a chooser pick the order does not apply to, ping-pong
or one tile per CTA, is replaced by the persistent cooperative 128 x 256 TMA-store kernel, for both plain variants).
--compile-only compiles every kernel the run would launch (in parallel, no GPU needed) and exits.

and, with --fp8, the FP8-output chain with per-row scales (--fuse scale=row --out-dtype e4m3, writing amax)
against torch eager doing the same: y = A B^T (bf16), amax = |y|.amax(1), q = (y x scale[:, None]).to(e4m3).

Every variant runs once per round, in a random order each round (seeded); ratios are reported two ways: ratio of the
medians, and the median of the per-round ratios (paired). The fused outputs are checked against torch's.
Writes one JSON line per shape to --json (and prints a table).

    python tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --json $OUT/bench_epilogue.jsonl
    python tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --epilogue-order alternate --rounds 20
    python tools/bench_epilogue.py 8192x8192x1024 2048x2048x8192 --plain-only --epilogue-order alternate
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from ptxgen.derive.store.chainspec import parse_chain
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.api.fused import fused_spec
from ptxgen.runtime.launch.gpu import Kernel, require_gpu
from ptxgen.runtime.launch.launch import Problem, check_problem, gemm_args, launch_geometry
from ptxgen.runtime.compile.cache import compile_cached  # $PTXGEN_CACHE_DIR: --compile-only fills it for the run
from ptxgen.runtime.check.bench import _batch  # the event-timed batch ptxgen bench uses
from ptxgen.runtime.choose import choose_spec

BATCH_MS = 25.0
FUSE = "bias=col:bf16,act=gelu_tanh"
# --plain-only: the kernel compared with and without the order where the chooser's pick cannot take it
COOPERATIVE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", stages=4,
                   out_dtype="bf16", schedule="persistent", epilogue="tma")


def ordered(spec, order: str):
    """``spec`` with --epilogue-order ``order`` (a SpecError, exit 2, where the order does not apply)."""
    from ptxgen.derive.tile.spec import make_spec

    return make_spec(**{**spec.to_json(), "epilogue_order": order})


def shape_specs(m: int, n: int, k: int, order: str, fp8: bool, plain_only: bool) -> tuple[dict, str]:
    """The kernels of one shape's run: name -> spec (launcher variants only), and why the base kernel was picked."""
    from ptxgen.derive.tile.spec import make_spec

    spec, why = choose_spec("bf16", "sm_90a", m, n, k)
    if plain_only:
        try:
            ordered(spec, order)
        except Exception as e:  # the order does not apply to this pick: compare on the cooperative kernel
            spec, why = make_spec(**COOPERATIVE), f"cooperative 128x256 (the pick {spec.kernel_name} takes no order: {e})"
        return {"plain": spec, "plain_twin": spec, "plain_ordered": ordered(spec, order)}, why
    fspec = fused_spec(spec, parse_chain(FUSE), "bf16")
    out = {"plain": spec, "plain_twin": spec, "fused": fspec}
    if order != "none":
        out["plain_ordered"] = ordered(spec, order)
        out["fused_ordered"] = ordered(fspec, order)
    if fp8:
        out["fp8_fused"] = fused_spec(spec, parse_chain("scale=row"), "e4m3")
    return out, why


def _compile_one(spec) -> str:
    plan = plan_kernel(spec)
    compile_cached(render_kernel(plan), spec.kernel_name, spec.arch.value)
    return spec.kernel_name


def compile_all(specs, jobs: int) -> None:
    """Compile ``specs`` into the kernel cache, ``jobs`` processes at a time (NVRTC only, no GPU)."""
    from concurrent.futures import ProcessPoolExecutor

    unique = list({s.kernel_name: s for s in specs}.values())
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for name in pool.map(_compile_one, unique):
            print(f"compiled {name}", flush=True)


def _launcher(torch, spec, p, dev, a, b, d, extra=None):
    plan = plan_kernel(spec)
    compiled = compile_cached(render_kernel(plan), spec.kernel_name, spec.arch.value).compiled
    k = Kernel(compiled.cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
    grid, block, _ = launch_geometry(plan, p, dev.sm_count, k)
    args = gemm_args(plan, a.data_ptr(), b.data_ptr(), d.data_ptr(), p, extra=extra)
    return lambda: k.launch(grid, block, args)



def rotate(torch, fns: dict, rounds: int, warmup: int = 5, seed: int = 0,
           batch_ms: float = BATCH_MS) -> tuple[dict, dict]:
    """Median ms per variant over ``rounds`` rounds, and the per-round times; each round runs every variant once (a
    batch of launches, about ``batch_ms`` long) in a fresh random order (seeded). A fixed cyclic rotation kept every
    variant behind the same predecessor, and that alone moved a kernel by 1.6-3.6% against a second copy of itself
    (runs/2026-12-01-fused-bias-gelu/run3: ``plain_twin``); in a random order each variant follows each of the others."""
    import random

    for _ in range(warmup):
        for f in fns.values():
            f()
    torch.cuda.synchronize()
    reps = {n: max(1, int(batch_ms / max(1e-3, _batch(torch, f, 3)))) for n, f in fns.items()}
    names = list(fns)
    times = {n: [] for n in names}
    rng = random.Random(seed)
    for _ in range(rounds):
        order = names[:]
        rng.shuffle(order)
        for n in order:
            times[n].append(_batch(torch, fns[n], reps[n]))
    return {n: statistics.median(t) for n, t in times.items()}, times


def paired(times: dict, num: str, den: str) -> float:
    """The median over rounds of (num's ms / den's ms) in the same round."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def bench_shape(torch, m: int, n: int, k: int, rounds: int, fp8: bool, order: str = "none", plain_only: bool = False) -> dict:
    import torch.nn.functional as F

    dev = require_gpu()
    specs, why = shape_specs(m, n, k, order, fp8, plain_only)
    spec = specs["plain"]
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
    p = Problem(m, n, k, k, k, n)
    check_problem(spec, p)
    outs = {v: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for v in specs if v != "fp8_fused"}  # kept alive
    fused_extra = {"alpha": 1.0, "BIAS": bias.data_ptr()}
    fns = {v: _launcher(torch, specs[v], p, dev, a, b, outs[v], extra=fused_extra if v.startswith("fused") else None)
           for v in specs if v != "fp8_fused"}
    if not plain_only:
        fns["torch_eager"] = lambda: F.gelu(torch.matmul(a, b.t()) + bias, approximate="tanh")
        fns["torch_linear"] = lambda: F.gelu(F.linear(a, b, bias), approximate="tanh")
    fns["cublas"] = lambda: torch.matmul(a, b.t())
    q8 = None
    if fp8:
        scale = (torch.rand(m, device="cuda", generator=gen) * 0.05 + 0.01).float()
        q8 = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
        amax = torch.zeros(m, device="cuda", dtype=torch.float32)
        fns["fp8_fused"] = _launcher(torch, specs["fp8_fused"], Problem(m, n, k, k, k, n), dev, a, b, q8,
                                     extra={"alpha": 1.0, "SCALE": scale.data_ptr(), "AMAX": amax.data_ptr()})

        def fp8_torch():
            y = torch.matmul(a, b.t())
            am = y.abs().amax(dim=1)
            return (y.float() * scale[:, None]).to(torch.float8_e4m3fn), am

        fns["fp8_torch"] = fp8_torch
    ms, times = rotate(torch, fns, rounds)
    exact = a.float() @ b.float().t()
    d_plain = outs["plain"]
    err_plain = float(torch.linalg.norm(d_plain.float() - exact) / torch.linalg.norm(exact))
    same = {v: bool(torch.equal(outs[v], d_plain)) for v in outs if v.startswith("plain_")}  # bitwise: twin, ordered
    flops = 2.0 * m * n * k
    row = {"shape": f"{m}x{n}x{k}", "device": dev.name, "kernel": spec.kernel_name, "why": why, "order": order,
           "ms": ms, "tflops": {v: flops / t / 1e9 for v, t in ms.items()}, "rounds": rounds,
           "twin_over_plain": ms["plain"] / ms["plain_twin"], "twin_over_plain_paired": 1.0 / paired(times, "plain_twin", "plain"),
           "plain_over_cublas": ms["cublas"] / ms["plain"], "rel_error_plain": err_plain, "bitwise_equal_to_plain": same,
           "checked_ok": err_plain < 1e-2 and all(same.values())}
    if "plain_ordered" in ms:  # time ratios: > 1 means the ordered kernel is faster
        row["ordered_over_plain"] = ms["plain"] / ms["plain_ordered"]
        row["ordered_over_plain_paired"] = 1.0 / paired(times, "plain_ordered", "plain")
    if not plain_only:
        ref = F.gelu(exact + bias.float(), approximate="tanh")
        err = float(torch.linalg.norm(outs["fused"].float() - ref) / torch.linalg.norm(ref))
        row.update({"fused_kernel": specs["fused"].kernel_name,
                    "fused_over_plain": ms["plain"] / ms["fused"], "fused_over_plain_paired": 1.0 / paired(times, "fused", "plain"),
                    "fused_over_torch_eager": ms["torch_eager"] / ms["fused"],
                    "fused_over_torch_linear": ms["torch_linear"] / ms["fused"], "rel_error_fused": err})
        row["checked_ok"] = row["checked_ok"] and err < 1e-2
        if "fused_ordered" in ms:  # against today's unordered plain kernel, and against the unordered fused one
            row["fused_ordered_over_plain"] = ms["plain"] / ms["fused_ordered"]
            row["fused_ordered_over_plain_paired"] = 1.0 / paired(times, "fused_ordered", "plain")
            row["fused_ordered_over_fused"] = ms["fused"] / ms["fused_ordered"]
            row["fused_ordered_over_fused_paired"] = 1.0 / paired(times, "fused_ordered", "fused")
            row["fused_ordered_over_plain_ordered"] = ms["plain_ordered"] / ms["fused_ordered"]
            row["fused_ordered_bitwise_equal_to_fused"] = bool(torch.equal(outs["fused_ordered"], outs["fused"]))
            row["checked_ok"] = row["checked_ok"] and row["fused_ordered_bitwise_equal_to_fused"]
    if fp8:
        q_t, am_t = fns["fp8_torch"]()
        y = exact
        deq = q8.float() / scale[:, None]
        row["fp8_over_torch"] = ms["fp8_torch"] / ms["fp8_fused"]
        row["fp8_rel_error"] = float(torch.linalg.norm(deq - y) / torch.linalg.norm(y))
        row["fp8_amax_rel_error"] = float(((amax - y.abs().amax(dim=1)).abs() / y.abs().amax(dim=1)).max())  # amax: every round raised it
        row["fp8_same_code_as_torch"] = float((q8.view(torch.uint8) == q_t.view(torch.uint8)).float().mean())
        row["checked_ok"] = row["checked_ok"] and row["fp8_rel_error"] < 5e-2 and row["fp8_amax_rel_error"] < 1e-2
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["8192x8192x8192", "4096x4096x4096"])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--fp8", action="store_true", help="also the FP8-output chain with per-row scales against torch eager")
    ap.add_argument("--epilogue-order", default="none", choices=("none", "alternate", "alternate-uniform"),
                    help="alternate or alternate-uniform: also plain_ordered and fused_ordered with that order (the consumer "
                    "warpgroups' epilogues in turn)")
    ap.add_argument("--plain-only", action="store_true", help="only plain, plain_twin, plain_ordered and cublas")
    ap.add_argument("--compile-only", action="store_true", help="compile every kernel of the run into the cache and exit")
    ap.add_argument("--jobs", type=int, default=4, help="--compile-only: compiler processes")
    ap.add_argument("--json", help="append one JSON line per shape here")
    args = ap.parse_args()
    if args.plain_only and args.epilogue_order == "none":
        ap.error("--plain-only compares plain with plain_ordered: add --epilogue-order alternate")
    shapes = [tuple(map(int, shape.split("x"))) for shape in args.shapes]
    if args.compile_only:
        compile_all([s for m, n, k in shapes for s in shape_specs(m, n, k, args.epilogue_order, args.fp8, args.plain_only)[0].values()],
                    args.jobs)
        return 0
    import torch

    ok = True
    for m, n, k in shapes:
        row = bench_shape(torch, m, n, k, args.rounds, args.fp8, args.epilogue_order, args.plain_only)
        ok &= row["checked_ok"]
        t = row["tflops"]
        print(f"{row['shape']}: " + ", ".join(f"{v} {t[v]:.0f} TFLOP/s ({row['ms'][v]:.3f} ms)" for v in t), flush=True)
        print(f"  control plain_twin/plain {row['twin_over_plain']:.3f} (paired {row['twin_over_plain_paired']:.3f}), plain/cuBLAS "
              f"{row['plain_over_cublas']:.3f}"
              + (f", ordered/plain {row['ordered_over_plain']:.3f} (paired {row['ordered_over_plain_paired']:.3f})"
                 if "ordered_over_plain" in row else "")
              + (f"; fused/plain {row['fused_over_plain']:.3f} (time ratio, 1 = free; paired {row['fused_over_plain_paired']:.3f}), "
                 f"fused vs torch eager {row['fused_over_torch_eager']:.2f}x, vs torch linear+gelu "
                 f"{row['fused_over_torch_linear']:.2f}x; rel error {row['rel_error_fused']:.1e}" if "fused_over_plain" in row else "")
              + (f"; fused_ordered/plain {row['fused_ordered_over_plain']:.3f} (paired {row['fused_ordered_over_plain_paired']:.3f}), "
                 f"fused_ordered/fused {row['fused_ordered_over_fused']:.3f} (paired {row['fused_ordered_over_fused_paired']:.3f}), "
                 f"fused_ordered/plain_ordered {row['fused_ordered_over_plain_ordered']:.3f}" if "fused_ordered_over_plain" in row else "")
              + (f"; FP8 out: {row['fp8_over_torch']:.2f}x torch eager, rel error {row['fp8_rel_error']:.1e}, amax "
                 f"{row['fp8_amax_rel_error']:.1e}, same code as torch {row['fp8_same_code_as_torch']:.3f}" if args.fp8 else "")
              + f"; kernel {row['kernel']} ({row['why']}); ok {row['checked_ok']}", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
