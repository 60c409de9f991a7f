"""Probe (issue 17, 2026-12-02): the block-FP8 consumers' stage release under compute-sanitizer racecheck, and what it costs.

Racecheck found hazards between the consumers' ld.shared of a stage's scale slots and the scale warp's st.shared
(runs/2026-12-02-gpu-tier-scale-warp); the per-warp release (93334b3: __syncwarp, then lane 0 arrives on empty[s]) left them as
they were (runs/2026-12-02-stage-release-f32-store/run1, run3); the per-thread release (every consumer thread arrives, empty[s]
counts them) was clean at the same speed, and is the template's since 7977181. At that time this probe made the
per-thread form from the rendered source; now it makes the per-warp form (two lines rewritten, asserted), the control
that shows racecheck can fail on this kernel - a diagnostic, not a code path of ptxgen:

    python tools/probe_release.py case warp|thread [tmasf] M N K    # one launch, output vs the float64 recipe
    compute-sanitizer --tool racecheck python tools/probe_release.py case warp 1500 3000 400   # 2026-12-02: 3 hazards
    python tools/probe_release.py bench 4096x7168x16384 ... [--rounds 8]   # warp vs thread vs torch, rotating rounds
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np

import ptxgen.api.fp8blocks
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.isa.shapes import WARP_THREADS
from ptxgen.model.numerics import bfp8model
from ptxgen.runtime.compile.cache import compile_cached
from ptxgen.runtime.launch.gpu import require_gpu

from bench_blockfp8 import Launch, inputs, race  # tools/ (the script's folder) is on sys.path

RELEASE = re.compile(r"^(\s*)(mbar_arrive\(empty_bar[^;]*;)  // every thread, after its ld.shared of the stage's scales.*$", re.M)
INIT = re.compile(r"mbar_init\(empty_bar \+ s \* 8u, (\d+)\);")


def per_warp(source: str) -> str:
    """The per-thread release rewritten per warp (the earlier form): __syncwarp, then lane 0 arrives; empty[s] counts the warps."""
    out, n_release = RELEASE.subn(r"\1__syncwarp();  // this warp's lanes have read the stage's scales (ld.shared above)\n\1if (lane == 0) \2",
                                  source)
    out, n_init = INIT.subn(lambda m: f"mbar_init(empty_bar + s * 8u, {int(m.group(1)) // WARP_THREADS});", out)
    assert n_release >= 1 and n_init == 1, (n_release, n_init)
    return out.replace("_bs128", "_bs128_relwarp")  # a kernel name of its own (the cache keys on the source anyway)


def kernel(mode: str, tmasf: bool) -> tuple:
    """(spec, cubin, kernel name) of the default block-FP8 kernel (TMA-loaded A scales with ``tmasf``), its release as
    rendered (``thread``) or rewritten per warp (``warp``)."""
    spec = ptxgen.api.fp8blocks.default_spec(**({"fp8_scale_load": "tma"} if tmasf else {}))
    src, name = render_kernel(plan_kernel(spec)), spec.kernel_name
    if mode == "warp":
        src, name = per_warp(src), name.replace("_bs128", "_bs128_relwarp")
    return spec, compile_cached(src, name, "sm_90a").compiled.cubin, name


def launch(torch, dev, built, a, b, sa, sb, kb4, d) -> Launch:
    spec, cubin, name = built
    m, k = a.shape
    return Launch(spec, m, b.shape[0], k, a, b, d, {"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4},
                  dev, torch, cubin=cubin, name=name)


def case(mode: str, tmasf: bool, m: int, n: int, k: int) -> int:
    import torch

    dev = require_gpu()
    a, b, sa, sb, kb4 = inputs(torch, m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    built = kernel(mode, tmasf)
    launch(torch, dev, built, a, b, sa, sb, kb4, d).run()
    torch.cuda.synchronize()
    f64 = lambda t: t.float().cpu().numpy().astype(np.float64)  # noqa: E731
    bad = bfp8model.outside_bound(f64(d), f64(a), f64(sa), f64(b), f64(sb), 2.0 ** -7)  # the gpu tests' check
    same = not bad.any()
    print(json.dumps({"kernel": built[2], "release": mode, "tmasf": tmasf, "shape": [m, n, k],
                      "outside_recipe_bound": int(bad.sum()), "passed": same}), flush=True)
    return 0 if same else 1


def bench(shapes: list[str], rounds: int) -> int:
    import torch

    dev = require_gpu()
    ok = True
    built = {mode: kernel(mode, False) for mode in ("warp", "thread")}
    for shape in shapes:
        m, n, k = map(int, shape.split("x"))
        ms, outs, ref = race(torch, dev, built, launch, shape, rounds)
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
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main(sys.argv[1:]))
