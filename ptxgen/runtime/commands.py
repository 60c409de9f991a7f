"""CLI commands that need a GPU: validate, probe, bench. Without one they exit 3 with a clear message."""

from __future__ import annotations

import json
import sys

from ..status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE


def _spec_for_gpu(args):
    """The spec for the GPU present: --arch defaults to the device's (sm_90a on 9.0, sm_100a on 10.x)."""
    from ..cli import spec_from_args
    from .gpu import require_gpu

    dev = require_gpu()
    if args.arch and args.arch != dev.arch.value:
        from .gpu import NoGPU

        raise NoGPU(
            f"--arch {args.arch} cannot run on {dev.name} (compute capability {dev.cc[0]}.{dev.cc[1]}), which runs "
            f"{dev.arch.value} kernels"
        )
    return spec_from_args(args, arch=dev.arch.value), dev


def cmd_validate(args) -> int:
    from .gpu import CudaError, NoGPU
    from .launch import ProblemError
    from .validate import validate_spec

    try:
        spec, _ = _spec_for_gpu(args)
        res = validate_spec(spec, args.m, args.n, args.k, args.seed)
    except NoGPU as e:
        print(f"ptxgen validate: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    except ProblemError as e:
        print(f"ptxgen validate: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CudaError as e:
        print(f"ptxgen validate: FAIL: {e}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    print(res.verdict)
    return EXIT_OK if res.passed else EXIT_CHECK_FAILED


def cmd_probe(args) -> int:
    from .gpu import NoGPU
    from .probe import run_probe, write_report

    try:
        report = run_probe(args.seed, tuple(args.category or ("derived", "strides", "base_offset")))
    except NoGPU as e:
        print(f"ptxgen probe: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    if args.json:
        write_report(report, args.json)
    s = report["summary"]
    print(f"probe on {report['device']}:")
    for cat, c in s["categories"].items():
        print(f"  {cat:<12} {c['cases']:>5} cases: read model agrees on {c['model_agrees']}, disagrees on {c['model_disagrees']}, declines {c['model_declines']}")
    for name, h in s["base_offset_hypotheses"].items():
        print(f"  base offset {name}: {h['all_cases']} cases ({h['nonzero_base_offset']} with a non-zero field)")
    bad = sum(c["model_disagrees"] for c in s["categories"].values())
    return EXIT_OK if bad == 0 else EXIT_CHECK_FAILED


def cmd_bench(args) -> int:
    from .bench import bench_spec
    from .gpu import NoGPU
    from .launch import ProblemError

    try:
        spec, _ = _spec_for_gpu(args)
        res = bench_spec(spec, args.m, args.n, args.k, args.warmup, args.iters)
    except NoGPU as e:
        print(f"ptxgen bench: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    except (ProblemError, ValueError) as e:
        print(f"ptxgen bench: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(res.to_json()) if args.json else res.line())
    return EXIT_OK


def add(sub, add_spec_flags) -> None:
    v = sub.add_parser("validate", help="run the kernel on the GPU present and compare with numpy (float64)")
    add_spec_flags(v, arch_default=None)
    v.add_argument("--m", type=int, help="problem M (default 3 x BM)")
    v.add_argument("--n", type=int, help="problem N (default 2 x BN)")
    v.add_argument("--k", type=int, help="problem K (default (2 x stages + 1) x BK)")
    v.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    v.set_defaults(func=cmd_validate)

    p = sub.add_parser("probe", help="show what the tensor core reads through descriptors (Hopper) vs the read model")
    p.add_argument("--json", metavar="OUT", help="write every case to OUT")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--category", action="append", choices=("derived", "strides", "base_offset"))
    p.set_defaults(func=cmd_probe)

    b = sub.add_parser("bench", help="time the kernel against cuBLAS (torch) in the same process")
    add_spec_flags(b, arch_default=None)
    b.add_argument("--m", type=int, default=8192)
    b.add_argument("--n", type=int, default=8192)
    b.add_argument("--k", type=int, default=8192)
    b.add_argument("--warmup", type=int, default=10)
    b.add_argument("--iters", type=int, default=50)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
