"""Probe (issue 17, s7): does compute-sanitizer racecheck accept the block-FP8 consumers' per-warp stage release, and
what does a per-thread release cost?

s6 found racecheck hazards between the consumers' ld.shared of a stage's scale slots and the scale warp's st.shared
(runs/2026-12-02-s6-final); the per-warp release (93334b3: __syncwarp, then lane 0 arrives on empty[s]) left them
as they were (runs/2026-12-02-s7-first). A per-thread release (every consumer thread arrives, empty[s] counts them)
is the form a tool that tracks each thread's arrive can check without crediting __syncwarp. This probe makes that form
by rewriting the rendered default kernel's source (two lines, asserted) - a diagnostic, not a code path of ptxgen:

    python tools/probe_release.py case warp|thread [tmasf] M N K    # one launch, output vs the float64 recipe
    compute-sanitizer --tool racecheck python tools/probe_release.py case thread 1500 3000 400
    python tools/probe_release.py bench 4096x7168x16384 ... [--rounds 8]   # warp vs thread vs torch, alternating rounds
"""

from __future__ import annotations

import json
import re
import statistics
import sys

import numpy as np

import ptxgen.api.fp8blocks
from ptxgen.derive.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.model import bfp8model
from ptxgen.runtime.bench import _batch
from ptxgen.runtime.cache import compile_cached
from ptxgen.runtime.gpu import Kernel, require_gpu
from ptxgen.runtime.launch import Problem, check_problem, gemm_args, launch_geometry

from bench_blockfp8 import inputs  # tools/ (the script's folder) is on sys.path

SYNCWARP = re.compile(r"^\s*__syncwarp\(\);  // this warp's lanes have read the stage's scales.*\n", re.M)
LANE0 = re.compile(r"if \(lane == 0\) (mbar_arrive\(empty_bar)")
INIT = re.compile(r"mbar_init\(empty_bar \+ s \* 8u, (\d+)\);")


def per_thread(source: str, consumer_threads: int) -> str:
    """The per-warp release rewritten per thread: no __syncwarp, every consumer thread arrives, empty[s] counts them."""
    out, n_sync = SYNCWARP.subn("", source)
    out, n_arrive = LANE0.subn(r"\1", out)
    out, n_init = INIT.subn(f"mbar_init(empty_bar + s * 8u, {consumer_threads});", out)
    assert n_sync == n_arrive >= 1 and n_init == 1, (n_sync, n_arrive, n_init)
    return out.replace("_bs128", "_bs128_relthread")  # a kernel name of its own (the cache keys on the source anyway)


def kernel(mode: str, tmasf: bool):
    spec = ptxgen.api.fp8blocks.default_spec(**({"fp8_scale_load": "tma"} if tmasf else {}))
    plan = plan_kernel(spec)
    src, name = render_kernel(plan), spec.kernel_name
    if mode == "thread":
        src, name = per_thread(src, 128 * spec.consumer_warpgroups), name.replace("_bs128", "_bs128_relthread")
    cubin = compile_cached(src, name, "sm_90a").compiled.cubin
    return spec, plan, Kernel(cubin, name, plan.abi.dynamic_smem_bytes), name


def launcher(torch, dev, built, a, b, sa, sb, kb4, d):
    spec, plan, kern, _ = built
    m, k = a.shape
    n = b.shape[0]
    p = Problem(m, n, k, k, k, n)
    check_problem(spec, p)
    grid, block, _ = launch_geometry(plan, p, dev.sm_count, kern)
    argv = gemm_args(plan, a.data_ptr(), b.data_ptr(), d.data_ptr(), p,
                     extra={"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4})
    return lambda: kern.launch(grid, block, argv)


def case(mode: str, tmasf: bool, m: int, n: int, k: int) -> int:
    import torch

    dev = require_gpu()
    a, b, sa, sb, kb4 = inputs(torch, m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    built = kernel(mode, tmasf)
    launcher(torch, dev, built, a, b, sa, sb, kb4, d)()
    torch.cuda.synchronize()
    f64 = lambda t: t.float().cpu().numpy().astype(np.float64)  # noqa: E731
    bad = bfp8model.outside_bound(f64(d), f64(a), f64(sa), f64(b), f64(sb), 2.0 ** -7)  # the gpu tests' check
    same = not bad.any()
    print(json.dumps({"kernel": built[3], "release": mode, "tmasf": tmasf, "shape": [m, n, k],
                      "outside_recipe_bound": int(bad.sum()), "passed": same}), flush=True)
    return 0 if same else 1


def bench(shapes: list[str], rounds: int) -> int:
    import torch

    dev = require_gpu()
    ok = True
    built = {mode: kernel(mode, False) for mode in ("warp", "thread")}
    for shape in shapes:
        m, n, k = map(int, shape.split("x"))
        a, b, sa, sb, kb4 = inputs(torch, m, n, k)
        outs = {mode: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for mode in built}
        fns = {mode: launcher(torch, dev, built[mode], a, b, sa, sb, kb4, outs[mode]) for mode in built}
        fns["torch"] = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        reps = {nm: max(1, int(25.0 / max(1e-3, _batch(torch, f, 3)))) for nm, f in fns.items()}
        times = {nm: [] for nm in fns}
        order = list(fns)
        for r in range(rounds):
            for nm in order[r % len(order):] + order[:r % len(order)]:  # rotate the order each round
                times[nm].append(_batch(torch, fns[nm], reps[nm]))
        ms = {nm: statistics.median(t) for nm, t in times.items()}
        ref = fns["torch"]()
        same = {mode: bool(torch.equal(outs[mode], ref)) for mode in built}
        ok &= all(same.values())
        tf = {nm: 2.0 * m * n * k / t / 1e9 for nm, t in ms.items()}
        print(json.dumps({"shape": shape, "tflops": {nm: round(v, 1) for nm, v in tf.items()},
                          "ratio_vs_torch": {mode: round(ms["torch"] / ms[mode], 4) for mode in built},
                          "thread_over_warp": round(ms["warp"] / ms["thread"], 4), "bit_identical_to_torch": same,
                          "rounds": rounds}), flush=True)
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["case"] and len(argv) in (5, 6) and argv[1] in ("warp", "thread"):
        tmasf = argv[2] == "tmasf"
        m, n, k = map(int, argv[3 if tmasf else 2:])
        return case(argv[1], tmasf, m, n, k)
    if argv[:1] == ["bench"]:
        rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 8
        shapes = [s for s in argv[1:] if "x" in s]
        return bench(shapes, rounds)
    print(__doc__.strip().splitlines()[-3:], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
