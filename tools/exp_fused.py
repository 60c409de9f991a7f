"""Experiment (issue 17, part 1): what the fused bias + gelu epilogue costs over the plain GEMM, variant by variant,
on the H200, in one process, alternating rounds, medians (the timing of tools/bench_epilogue.py: runs 1-3 of
runs/2026-12-01-fused-bias-gelu rotated the order cyclically, later runs shuffle it each round).

Per shape, the tuned plain kernel (``choose_spec``) and these variants of it, each checked against torch in float32:

* ``fused_main``:       the fused kernel as main rendered it before this change (``--old-src``, from ``--write-src``)
* ``fused``:            the fused kernel as this tree renders it (the shipped code)
* ``fused_start`` / ``fused_late`` / ``fused_noprefetch``: the column biases loaded before the tile's main loop, after
  its last MMAs are issued, or after the main loop (``ChainView.bias_prefetch`` "start", "late", "after")
* ``fused_sigmoid``:    the gelu as y sigmoid(2u) (EX2 + RCP, ``chain.gelu_tanh_sigmoid_c_expr``) instead of TANH
* ``alpha``, ``bias``, ``bias_late``, ``bias_relu``: the chains alpha (no loads), bias=col:bf16 (its loads "start" or
  "late") and bias=col:bf16,act=relu: what the chain costs without the gelu
* ``pp128_plain`` / ``pp128_fused``: ping-pong consumers, 128x128x64, 6 stages (one warpgroup's epilogue under the
  other's main loop), plain and fused
* ``pp64_plain`` / ``pp64_fused``: ping-pong, 64x256x64, 4 stages, raster group 16
* ``plain_twin``: the plain kernel again, a second module (a control: its gap to ``plain`` is the method's noise)
* ``torch_eager`` (matmul + bias + gelu), ``torch_linear`` (F.linear + gelu), ``cublas`` (matmul alone)

    # main's fused sources (run with main's tree on PYTHONPATH), then the experiment with this tree:
    PYTHONPATH=/path/to/main python tools/exp_fused.py --write-src /tmp/old 8192x8192x8192 4096x4096x4096
    PYTHONPATH=$PWD python tools/exp_fused.py --old-src /tmp/old 8192x8192x8192 4096x4096x4096 --json exp.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHAIN = "bias=col:bf16,act=gelu_tanh"
VARIANT_CHAINS = {"fused": CHAIN, "fused_start": CHAIN, "fused_late": CHAIN, "fused_noprefetch": CHAIN, "fused_sigmoid": CHAIN,
                  "alpha": "alpha", "bias": "bias=col:bf16", "bias_late": "bias=col:bf16", "bias_relu": "bias=col:bf16,act=relu",
                  "pp128_fused": CHAIN, "pp64_fused": CHAIN}
RESHAPE = {"pp128": {"bm": 128, "bn": 128, "stages": 6, "consumers": "pingpong", "raster_group": 8, "schedule": "persistent"},
           "pp64": {"bm": 64, "bn": 256, "stages": 4, "consumers": "pingpong", "raster_group": 16, "schedule": "persistent"}}
# run 1 (runs/2026-12-01-fused-bias-gelu/run1/exp_fused.log): every variant but fused_start, fused_late, alpha and bias_late
DEFAULT_VARIANTS = "plain,fused,fused_start,fused_late,fused_noprefetch,alpha,bias,bias_late,bias_relu,fused_main"


def _shape(s: str) -> tuple[int, int, int]:
    m, n, k = map(int, s.split("x"))
    return m, n, k


def _specs(m: int, n: int, k: int, variants: list[str]) -> dict:
    """name -> (spec, chain token or None, the variant's name)."""
    from ptxgen.api.fused import fused_spec
    from ptxgen.derive.store.chainspec import parse_chain
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.choose import choose_spec

    spec, _ = choose_spec("bf16", "sm_90a", m, n, k)
    out = {"plain": (spec, None, "plain")}
    if "plain_twin" in variants:  # the control: the same kernel, loaded again (any gap to plain is the method's)
        out["plain_twin"] = (spec, None, "plain_twin")
    for name, token in VARIANT_CHAINS.items():
        if name not in variants:
            continue
        base = spec
        for prefix, fields in RESHAPE.items():
            if name.startswith(prefix):
                base = make_spec(**{**spec.to_json(), **fields})
        out[name] = (fused_spec(base, parse_chain(token), "bf16"), token, name)
    for prefix, fields in RESHAPE.items():
        if f"{prefix}_plain" in variants:
            out[f"{prefix}_plain"] = (make_spec(**{**spec.to_json(), **fields}), None, f"{prefix}_plain")
    return out


def _render(spec, variant: str) -> str:
    """The kernel's source; fused_noprefetch and fused_sigmoid change one field of the chain's view."""
    import ptxgen.emit.render as render_mod
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.views.chain import gelu_tanh_sigmoid_c_expr

    change = {"fused_noprefetch": {"bias_prefetch": "after"}, "fused_late": {"bias_prefetch": "late"},
              "bias_late": {"bias_prefetch": "late"}, "fused_start": {"bias_prefetch": "start"},
              "fused_sigmoid": {"act_expr": gelu_tanh_sigmoid_c_expr()}}.get(variant)
    if not change:
        return render_mod.render_kernel(plan_kernel(spec))
    orig = render_mod.chain_view
    render_mod.chain_view = lambda plan: None if plan is None else dataclasses.replace(orig(plan), **change)
    try:
        return render_mod.render_kernel(plan_kernel(spec))
    finally:
        render_mod.chain_view = orig


def _compile(job: tuple[str, str, str]) -> bytes:
    from ptxgen.runtime.compile.toolchain import compile_cuda

    src, name, arch = job
    return compile_cuda(src, name, arch).cubin


def write_src(shapes: list[str], folder: str) -> int:
    """The fused bias+gelu kernel of the tuned spec of each shape, as the ptxgen on PYTHONPATH renders it."""
    from ptxgen.api.fused import fused_spec
    from ptxgen.derive.store.chainspec import parse_chain
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.choose import choose_spec

    os.makedirs(folder, exist_ok=True)
    for s in shapes:
        spec, _ = choose_spec("bf16", "sm_90a", *_shape(s))
        fspec = fused_spec(spec, parse_chain(CHAIN), "bf16")
        Path(folder, f"{s}.cu").write_text(render_kernel(plan_kernel(fspec)))
        Path(folder, f"{s}.name").write_text(fspec.kernel_name)
    print(f"wrote main's fused sources of {shapes} to {folder}")
    return 0


def run(shapes: list[str], rounds: int, old_src: str | None, json_path: str | None, jobs: int, variants: list[str]) -> int:
    import torch
    import torch.nn.functional as F

    from bench_epilogue import paired, rotate
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.runtime.launch.gpu import Kernel, require_gpu
    from ptxgen.runtime.launch.launch import Problem, check_problem, gemm_args, launch_geometry

    dev = require_gpu()
    # every kernel of every shape compiled first, in parallel
    todo = {}
    for s in shapes:
        for name, (spec, token, variant) in _specs(*_shape(s), variants).items():
            todo[(s, name)] = (_render(spec, variant), spec.kernel_name, spec.arch.value)
        if old_src and "fused_main" in variants:
            todo[(s, "fused_main")] = (Path(old_src, f"{s}.cu").read_text(), Path(old_src, f"{s}.name").read_text().strip(), "sm_90a")
    keys = list(todo)
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        cubins = dict(zip(keys, ex.map(_compile, [todo[k_] for k_ in keys])))
    print(f"compiled {len(keys)} kernels", flush=True)

    ok = True
    for s in shapes:
        m, n, k = _shape(s)
        specs = _specs(m, n, k, variants)
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
        p = Problem(m, n, k, k, k, n)
        outs, fns, kernels = {}, {}, {}
        names = list(specs) + (["fused_main"] if old_src and "fused_main" in variants else [])
        for name in names:
            spec = specs["fused" if name == "fused_main" else name][0]
            check_problem(spec, p)
            plan = plan_kernel(spec)
            kern = Kernel(cubins[(s, name)], todo[(s, name)][1], plan.abi.dynamic_smem_bytes)
            kernels[name] = kern
            grid, block, _ = launch_geometry(plan, p, dev.sm_count, kern)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            outs[name] = d
            token = specs["fused" if name == "fused_main" else name][1]
            extra = None if not token else {"alpha": 1.0} if token == "alpha" else {"alpha": 1.0, "BIAS": bias.data_ptr()}
            args = gemm_args(plan, a.data_ptr(), b.data_ptr(), d.data_ptr(), p, extra=extra)
            fns[name] = (lambda kk, g, bl, ar: (lambda: kk.launch(g, bl, ar)))(kern, grid, block, args)
        fns["torch_eager"] = lambda: F.gelu(torch.matmul(a, b.t()) + bias, approximate="tanh")
        fns["torch_linear"] = lambda: F.gelu(F.linear(a, b, bias), approximate="tanh")
        fns["cublas"] = lambda: torch.matmul(a, b.t())
        ms, times = rotate(torch, fns, rounds)
        prod = a.float() @ b.float().t()
        refs = {None: prod, "alpha": prod, "bias=col:bf16": prod + bias.float(), "bias=col:bf16,act=relu": torch.relu(prod + bias.float()),
                CHAIN: F.gelu(prod + bias.float(), approximate="tanh")}
        err = {}
        for name in names:
            ref = refs[specs["fused" if name == "fused_main" else name][1]]
            err[name] = float(torch.linalg.norm(outs[name].float() - ref) / torch.linalg.norm(ref))
        flops = 2.0 * m * n * k
        row = {"shape": s, "device": dev.name, "kernels": {nm: todo[(s, nm)][1] for nm in names}, "rounds": rounds, "ms": ms,
               "tflops": {v: flops / t / 1e9 for v, t in ms.items()},
               "over_plain": {v: ms["plain"] / t for v, t in ms.items()},
               "over_plain_paired": {v: 1.0 / paired(times, v, "plain") for v in ms},
               "rel_error": err, "checked_ok": all(e < 1e-2 for e in err.values())}
        ok &= row["checked_ok"]
        print(f"{s} ({rounds} rounds, medians; over_plain = plain ms / variant ms):", flush=True)
        for v in ms:
            print(f"  {v:17s} {ms[v]:.4f} ms  {row['tflops'][v]:6.1f} TFLOP/s  over_plain {row['over_plain'][v]:.3f}"
                  f" (paired {row['over_plain_paired'][v]:.3f})"
                  + (f"  rel error {err[v]:.1e}" if v in err else ""), flush=True)
        if json_path:
            with open(json_path, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0 if ok else 1


def ncu_launches(shape: str, variants: list[str], jobs: int) -> int:
    """For ncu --profile-from-start off: each variant warmed up, then launched once between profiler start and stop."""
    import torch

    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.runtime.launch.gpu import Kernel, require_gpu
    from ptxgen.runtime.launch.launch import Problem, gemm_args, launch_geometry

    dev = require_gpu()
    m, n, k = _shape(shape)
    specs = _specs(m, n, k, variants)
    jobs_ = [(_render(sp, v), sp.kernel_name, sp.arch.value) for sp, _, v in specs.values()]
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        cubins = list(ex.map(_compile, jobs_))
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    p = Problem(m, n, k, k, k, n)
    fns = []
    for (name, (spec, token, _)), cubin in zip(specs.items(), cubins):
        plan = plan_kernel(spec)
        kern = Kernel(cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
        grid, block, _ = launch_geometry(plan, p, dev.sm_count, kern)
        extra = None if not token else {"alpha": 1.0} if token == "alpha" else {"alpha": 1.0, "BIAS": bias.data_ptr()}
        args = gemm_args(plan, a.data_ptr(), b.data_ptr(), d.data_ptr(), p, extra=extra)
        fns.append((name, spec.kernel_name, (lambda kk, g, bl, ar: (lambda: kk.launch(g, bl, ar)))(kern, grid, block, args)))
    for _ in range(5):
        for _, _, f in fns:
            f()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _, _, f in fns:
        f()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("ncu order: " + ", ".join(f"{nm} ({kn})" for nm, kn, _ in fns))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["8192x8192x8192", "4096x4096x4096"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--write-src", help="write the fused kernels' sources here (with main's tree on PYTHONPATH) and stop")
    ap.add_argument("--old-src", help="folder from --write-src: bench those kernels as fused_main")
    ap.add_argument("--json")
    ap.add_argument("--ncu", action="store_true", help="launch each variant once between cudaProfilerStart/Stop (first shape)")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, help="comma-separated; all: " + ",".join(
        ["plain", "plain_twin", *VARIANT_CHAINS, *(f"{p}_plain" for p in RESHAPE), "fused_main"]))
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    args = ap.parse_args()
    if args.write_src:
        return write_src(args.shapes, args.write_src)
    if args.ncu:
        return ncu_launches(args.shapes[0], args.variants.split(","), args.jobs)
    return run(args.shapes, args.rounds, args.old_src, args.json, args.jobs, args.variants.split(","))


if __name__ == "__main__":
    sys.exit(main())
