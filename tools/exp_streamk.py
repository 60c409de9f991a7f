"""Stream-K for the last wave on the H200 (issue 16 item 3; tools/gpu_streamk.sh runs the modes with timeouts).

precompile:  compile every spec the other modes run, on every core (the timed processes then find them in the cache).
check:       the stream-K kernels on odd shapes against a float64 torch reference, each launched three times and
             compared bit for bit (the fixed-order reduction), and against the same kernel without stream-K.
sanitize:    one launch of one stream-K kernel (compute-sanitizer runs this mode).
compare S:   for each shape MxNxK of S: the chooser's pick and its pick with STREAM_K_RULE off, where they differ, and
             (unless $NOSWEEP) the sweep's stream-K variants (SWEEP), against cuBLAS in the same process, twice each.

Hypotheses written before the run (bf16, H200):
 H1 every stream-K kernel matches float64 (relative error <= 1e-2, as bench's check) and is bit-identical run to run.
 H2 2500 x 10000 x 4000 (1060 tiles of 128 x 192: 8 rounds + 4 tiles) gains >= 5% over the same kernel without
    stream-K (the model predicts 294 -> 274 us: -7%); 1500 x 9000 x 3000 (2x1 clusters, 282 cluster tiles on 66
    clusters: 4 rounds + 18) gains >= 5% (predicted 138 -> 124 us: -10%).
 H3 the assumed 100 GB/s per SM for the partial tiles is within 2x of what the split last round costs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

SEVEN = [(5000, 5000, 5000), (3000, 7000, 5000), (1500, 9000, 3000), (4096, 4096, 5000), (333, 8192, 8192),
         (12000, 1000, 6000), (2500, 10000, 4000)]
# (candidate, max splits, shape): odd shapes, partial tiles on both edges, K tails, an inactive cluster CTA
CHECKS = [("p128x192", 8, (2500, 10000, 4000)), ("p128x192", 3, (1000, 7000, 1000)), ("p128x192c2", 3, (1500, 9000, 3000)),
          ("p128x224", 5, (2777, 3333, 1112)), ("p128x224c2", 4, (1379, 5003, 2056)), ("p128x256", 16, (2000, 4100, 8200)),
          ("p128x160c2", 6, (4000, 4000, 520))]
# the sweep: stream-K variants beside the chooser's pick (for the model's fixup constant, H3)
SWEEP = {(2500, 10000, 4000): [("p128x192", 2), ("p128x192", 4), ("p128x192", 16), ("p128x256", 7)],
         (1500, 9000, 3000): [("p128x192c2", 2), ("p128x256c2", 3)],
         (5000, 5000, 5000): [("p128x256c2", 8), ("p128x192c2", 5)],
         (3000, 7000, 5000): [("p128x256c2", 8)]}


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _spec(name: str, s: int):
    from ptxgen.runtime.choose.costmodel import BY_NAME

    return dataclasses.replace(BY_NAME[name].spec(), stream_k=s)


def _shapes(arg: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in item.split("x")) for item in arg.split(",")]


def _picks(m, n, k):
    from ptxgen.runtime import choose as ch

    new = ch.choose("bf16", "sm_90a", m, n, k)
    ch.rules.STREAM_K_RULE = False
    try:
        old = ch.choose("bf16", "sm_90a", m, n, k)
    finally:
        ch.rules.STREAM_K_RULE = True
    return new, old


def all_specs(shapes) -> list:
    specs = [_spec(name, s) for name, s, _ in CHECKS] + [dataclasses.replace(_spec(name, s), stream_k=1) for name, s, _ in CHECKS]
    for m, n, k in shapes:
        new, old = _picks(m, n, k)
        specs += [new.spec, old.spec] + [_spec(name, s) for name, s in SWEEP.get((m, n, k), [])]
    return [s.to_json() for s in specs]


def _run_once(torch, spec, m, n, k, seed):
    """(D as float64, its bytes) of one launch of ``spec`` on fresh inputs from ``seed`` (bench's case)."""
    from ptxgen.runtime.bench import _Case

    case = _Case(torch, spec, m, n, k, seed, torch.cuda.get_device_properties(0).multi_processor_count)
    outs = []
    for _ in range(3):
        case.d.fill_(float("nan"))
        case.ours()
        torch.cuda.synchronize()
        outs.append(case.d.clone())
    return outs


def check() -> int:
    import torch

    bad = 0
    for name, s, (m, n, k) in CHECKS:
        spec = _spec(name, s)
        try:
            outs = _run_once(torch, spec, m, n, k, 7)
            plain = _run_once(torch, dataclasses.replace(spec, stream_k=1), m, n, k, 7)[0]
        except Exception as e:  # noqa: BLE001
            _emit({"kernel": spec.kernel_name, "m": m, "n": n, "k": k, "error": f"{type(e).__name__}: {e}"[:300]})
            bad += 1
            continue
        gen = torch.Generator(device="cuda").manual_seed(7)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        ref = a.double() @ b.double().t()
        d = outs[0].double()
        rel = float(torch.linalg.norm(d - ref) / torch.linalg.norm(ref)) if torch.isfinite(d).all() else float("inf")
        same = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs[1:])
        vs_plain = float(torch.linalg.norm(d - plain.double()) / torch.linalg.norm(ref))
        ok = rel <= 1e-2 and same
        bad += not ok
        _emit({"kernel": spec.kernel_name, "m": m, "n": n, "k": k, "rel_err_f64": rel, "bit_identical_x3": same,
               "rel_diff_vs_no_streamk": vs_plain, "nonfinite": int((~torch.isfinite(d)).sum()), "ok": ok})
    return 1 if bad else 0


def sanitize() -> int:
    import torch

    spec = _spec("p128x192c2", 3)
    m, n, k = 1379, 5003, 1000  # 11 x 27 tiles = 6 x 27 = 162 cluster tiles on 66 clusters: 30 split 2 ways, an inactive row
    outs = _run_once(torch, spec, m, n, k, 3)
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    ref = a.double() @ b.double().t()
    rel = float(torch.linalg.norm(outs[0].double() - ref) / torch.linalg.norm(ref))
    _emit({"kernel": spec.kernel_name, "m": m, "n": n, "k": k, "rel_err_f64": rel})
    return 0 if rel <= 1e-2 else 1


def _bench(spec, m, n, k, iters, **extra):
    from ptxgen.runtime.bench import bench_spec

    try:
        r = bench_spec(spec, m, n, k, warmup=3, iters=iters)
    except Exception as e:  # noqa: BLE001
        _emit({**extra, "m": m, "n": n, "k": k, "kernel": spec.kernel_name, "error": f"{type(e).__name__}: {e}"[:300]})
        return
    _emit({**extra, "m": m, "n": n, "k": k, "kernel": spec.kernel_name, "ours_us": round(r.ours_ms * 1e3, 2),
           "cublas_us": round(r.cublas_ms * 1e3, 2), "ratio": round(r.ratio, 4), "ok": r.checked_ok})


def compare(shapes) -> int:
    for m, n, k in shapes:
        new, old = _picks(m, n, k)
        sides = [("new", new.spec, new.chosen_by), ("old", old.spec, old.chosen_by)] if new.spec != old.spec else []
        if not os.environ.get("NOSWEEP"):
            sides += [(f"sweep {name} S={s}", _spec(name, s), "sweep") for name, s in SWEEP.get((m, n, k), [])]
        for side, spec, rule in sides + sides:
            _bench(spec, m, n, k, 15, side=side, chosen_by=rule)
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "precompile":
        sys.path.insert(0, "tools")
        from exp_cost import precompile

        sys.exit(precompile(all_specs(_shapes(sys.argv[2]))))
    if mode == "check":
        sys.exit(check())
    if mode == "sanitize":
        sys.exit(sanitize())
    if mode == "compare":
        sys.exit(compare(_shapes(sys.argv[2])))
    sys.exit(f"unknown mode {mode}")
