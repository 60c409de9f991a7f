"""CLI commands that need a GPU: validate, probe, bench. Without one they exit 3 with a clear message."""

from __future__ import annotations

import json
import sys

from ..cliargs import UsageError, add_spec_flags, int_at_least, spec_from_args
from ..status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, clipped


def _spec_for_gpu(args):
    """The spec for the GPU present: --arch defaults to the device's (sm_90a on 9.0, sm_100a on 10.x)."""
    from .launch.gpu import require_gpu

    dev = require_gpu()
    if args.arch and args.arch != dev.arch.value:
        from .launch.gpu import NoGPU

        raise NoGPU(
            f"--arch {args.arch} cannot run on {dev.name} (compute capability {dev.cc[0]}.{dev.cc[1]}), which runs "
            f"{dev.arch.value} kernels"
        )
    from ..isa.types import Arch, SpecError

    try:
        return spec_from_args(args, arch=dev.arch.value), dev
    except SpecError as e:  # legal on the other arch (check_before_gpu passed): this GPU cannot run it -> exit 3
        others = [a.value for a in Arch if a is not dev.arch and _legal_on(args, a.value)]
        if args.arch or not others:
            raise
        from .launch.gpu import NoGPU

        need = "compute capability 10.x" if others[0] == "sm_100a" else "compute capability 9.0"
        raise NoGPU(f"the spec is {others[0]} only ({e}); {dev.name} (compute capability {dev.cc[0]}.{dev.cc[1]}) runs "
                    f"{dev.arch.value} kernels: needs {need}") from None


def _legal_on(args, arch: str) -> bool:
    from ..isa.types import SpecError

    try:
        spec_from_args(args, arch=arch)
        return True
    except SpecError:
        return False


def check_before_gpu(args, shapes: list[tuple[int | None, int | None, int | None]]) -> None:
    """Every spec and problem check that needs no GPU, before looking for one (the same exit 2 with or without a GPU):
    the spec on --arch, or (no --arch) on some arch; each problem shape against that spec. SpecError, ProblemError."""
    from ..isa.types import Arch, SpecError
    from .launch.launch import Problem, check_problem
    from .check.vresult import default_problem

    archs = [args.arch] if args.arch else [a.value for a in Arch]
    specs, errors = [], []
    for arch in archs:
        try:
            specs.append(spec_from_args(args, arch=arch))
        except SpecError as e:
            errors.append(e)
    if not specs:
        raise errors[0] if len(errors) == 1 else _on_no_arch(dict(zip(archs, errors)))
    spec = specs[0]
    for m, n, k in shapes:
        dm, dn, dk = default_problem(spec)
        check_problem(spec, Problem.padded(spec, dm if m is None else m, dn if n is None else n, dk if k is None else k))


def _on_no_arch(errors: dict):
    """One SpecError for a spec no arch takes (no --arch given): the first arch's field and value, a message naming each
    arch's own refusal (on an H200 the sm_90a one is the one that matters, and it may be another field's)."""
    from ..isa.types import SpecError

    first = next(iter(errors.values()))
    e = SpecError(first.field, first.value, first.rule, first.legal, first.ref)
    e.args = ("no --arch takes this spec: " + "; ".join(f"on {arch}, {err}" for arch, err in errors.items()),)
    return e


def check_dims(shapes: list[tuple[int, int, int]]) -> None:
    """Problem sizes every kernel needs (M, N, K in 1..2^31-1), before a spec is chosen for them."""
    from .launch.launch import MAX_DIM

    for shape in shapes:
        for dim, size in zip("MNK", shape):
            if not 1 <= size <= MAX_DIM:
                raise UsageError(f"{dim}={size} must be in 1..{MAX_DIM} (shape {'x'.join(map(str, shape))})")


def check_arch(arch: str | None) -> None:
    from ..isa.types import Arch, parse_enum

    if arch is not None:
        parse_enum(Arch, arch, "--arch")


def refuse_block_scaled(args, command: str) -> bool:
    """Block-scaled specs are not benchmarked: exit 2 before looking for a GPU (the same answer with or without one)."""
    from .launch.launch import BLOCK_SCALED_BENCH_REFUSAL

    if getattr(args, "scale", None) not in (None, "none"):
        print(f"ptxgen {command}: {BLOCK_SCALED_BENCH_REFUSAL}", file=sys.stderr)
        return True
    return False


def cmd_validate(args) -> int:
    from .launch.gpu import CudaError, NoGPU
    from .launch.errors import ProblemError
    from .check.validate import validate_spec

    try:
        check_before_gpu(args, [(args.m, args.n, args.k)])
        spec, _ = _spec_for_gpu(args)
        res = validate_spec(spec, args.m, args.n, args.k, args.seed)
    except NoGPU as e:
        print(f"ptxgen validate: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    except ProblemError as e:
        print(f"ptxgen validate: {clipped(e)}", file=sys.stderr)
        return EXIT_USAGE
    except CudaError as e:
        print(f"ptxgen validate: FAIL: {clipped(e)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    print(res.verdict)
    return EXIT_OK if res.passed else EXIT_CHECK_FAILED


def cmd_selftest(args) -> int:
    from .launch.gpu import NoGPU
    from .check.selftest import run_selftest, write_json

    _check_out(args.json)
    try:
        rep = run_selftest()
    except NoGPU as e:
        print(f"ptxgen selftest: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    print(rep.text())
    if args.json:
        write_json(rep, args.json)
    return EXIT_CHECK_FAILED if rep.failed else EXIT_OK


WGMMA_PROBE_CATEGORIES = ("derived", "strides", "base_offset")
PROBE_CATEGORIES = (*WGMMA_PROBE_CATEGORIES, "tma")


def _print_tma_summary(report: dict) -> bool:
    s = report["summary"]
    print(f"TMA probe on {report['device']} ({report['arch']}):")
    for cat, c in s["categories"].items():
        anchors = ", ".join(f"{a} {c[a]}" for a in ("address", "destination"))
        print(f"  {cat:<7} {c['cases']:>4} cases: matched an anchor {c['matched_some_anchor']} ({anchors}), errors {c['errors']}")
    for swz, by_dst in s["by_swizzle_and_dst_offset"].items():
        cells = " ".join(f"{dst}:{'A' if e['address'] == e['cases'] else '-'}{'D' if e['destination'] == e['cases'] else '-'}" for dst, e in by_dst.items())
        print(f"  {swz:>4} dst offset -> anchors explaining every case (A address, D destination): {cells}")
    print(f"  every case matched some anchor: {'yes' if s['every_case_matched_some_anchor'] else 'NO'}")
    explains = s["anchors_explaining_every_aligned_case"]
    print(f"  anchor explaining every 128-byte-aligned case: {', '.join(explains) or 'none'}")
    print(f"  MMA base offset: {s['mma_base_offset_rule']}")
    for a in s["alignment"]:
        what = "ran" if a["launched"] else f"refused at {a['failed_at']}: {a['error']}"
        also = [h for h, ok in (a.get("misaligned_hypotheses") or {}).items() if ok]
        seen = f"; matches {', '.join(a['anchors_matched']) or 'no anchor'}" if a["launched"] else ""
        print(f"  align {a['swizzle']:>4} dst {a['dst_offset']:>3}: {what}{seen}" + (f" (but: {'; '.join(also)})" if also else ""))
    return bool(s["ok"])


def _check_out(path: str | None) -> None:
    """An output file that cannot be written is a usage error, found before any GPU work."""
    from ..outputs import check_output_path

    if path:
        try:
            check_output_path(path)
        except ValueError as e:
            raise UsageError(str(e)) from None


def cmd_probe(args) -> int:
    from .launch.gpu import NoGPU

    _check_out(args.json)
    cats = tuple(args.category or PROBE_CATEGORIES)
    wgmma_cats = tuple(c for c in cats if c in WGMMA_PROBE_CATEGORIES)
    report: dict = {}
    ok = True
    try:
        if wgmma_cats:
            from .check.probe import run_probe

            report = run_probe(args.seed, wgmma_cats)
        if "tma" in cats:
            from .check.probe_tma import run_tma_probe

            tma_report = run_tma_probe(args.seed)
            if wgmma_cats:
                report["tma"] = tma_report
            else:
                report = tma_report
    except NoGPU as e:
        print(f"ptxgen probe: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    if args.json:
        from .check.probe_tma import write_report  # the same JSON writer as probe.write_report

        write_report(report, args.json)
    if wgmma_cats:
        s = report["summary"]
        print(f"probe on {report['device']}:")
        for cat, c in s["categories"].items():
            print(f"  {cat:<12} {c['cases']:>5} cases: read model agrees on {c['model_agrees']}, disagrees on {c['model_disagrees']}, declines {c['model_declines']}")
        for name, h in s["base_offset_hypotheses"].items():
            print(f"  base offset {name}: {h['all_cases']} cases ({h['nonzero_base_offset']} with a non-zero field)")
        ok = sum(c["model_disagrees"] for c in s["categories"].values()) == 0
    if "tma" in cats:
        ok = _print_tma_summary(report["tma"] if wgmma_cats else report) and ok
    return EXIT_OK if ok else EXIT_CHECK_FAILED


TILE_FLAGS = ("bm", "bn", "bk", "a")


def _shapes(args) -> list[tuple[int, int, int]]:

    if not args.shapes:
        return [(args.m, args.n, args.k)]
    out = []
    for item in args.shapes.split(","):
        try:
            m, n, k = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise UsageError(f"--shapes {item!r}: expected MxNxK, e.g. 4096x4096x4096") from None
        out.append((m, n, k))
    return out


def _bench_specs(args, shapes):
    """(spec, why) per shape: exactly the spec the tile flags give, or the tuned choice when none are given."""
    from .launch.gpu import require_gpu
    from .choose import Problem, choose
    from .choose.calibrate import device_key
    from .choose.tune import check_tunable, table_entries

    given = [f for f in TILE_FLAGS if getattr(args, f) is not None]
    if given and len(given) < len(TILE_FLAGS):
        raise UsageError("give all of --bm --bn --bk --a to bench one spec, or none of them to use the tuned kernels")
    check_dims(shapes)
    check_arch(args.arch)
    if given:
        check_before_gpu(args, shapes)
    else:
        check_tunable(args.dtype)
        table_entries()  # a tuning table named in $PTXGEN_TUNING that cannot be read is bad usage, before any GPU work
    dev = require_gpu()
    arch = args.arch or dev.arch.value
    if arch != dev.arch.value:
        from .launch.gpu import NoGPU

        raise NoGPU(f"--arch {arch} cannot run on {dev.name}, which runs {dev.arch.value} kernels")
    if given:
        spec = spec_from_args(args, arch=arch)
        if spec.d_major.value == "m":  # an M-major D is swap-AB's: run D^T = B A^T into the row-major D
            return [(spec, "the spec given, swapped (M-major D: D^T = B A^T)", "flags+swap-ab", True) for _ in shapes]
        return [(spec, "the spec given", "flags", False) for _ in shapes]
    key = device_key()  # the chooser takes this GPU's calibration, tuning table and SM count
    return [(c.spec, c.why, c.chosen_by, c.swap_ab) for c in (choose(Problem(args.dtype, arch, m, n, k), key)
                                                              for m, n, k in shapes)]


def cmd_bench(args) -> int:
    from ..isa.types import SpecError
    from .check.bench import BaselineError, bench_spec, geomean
    from .launch.gpu import NoGPU
    from .launch.errors import ProblemError

    if refuse_block_scaled(args, "bench"):
        return EXIT_USAGE
    try:
        shapes = _shapes(args)
        chosen = _bench_specs(args, shapes)
        results, uncompared = [], []
        for (m, n, k), (spec, why, chosen_by, swap_ab) in zip(shapes, chosen):
            try:
                r = bench_spec(spec, m, n, k, args.warmup, args.iters, **({"swap_ab": True} if swap_ab else {}))
            except BaselineError as e:
                print(f"ptxgen bench: {clipped(e)}; shape skipped", file=sys.stderr)
                uncompared.append(str(e))
                continue
            r.chosen_by, r.why = chosen_by, why
            results.append(r)
            if not args.json:
                print(f"{r.line()}  [{chosen_by}: {why}]")
    except NoGPU as e:
        print(f"ptxgen bench: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    except (ProblemError, ValueError, SpecError, UsageError) as e:
        print(f"ptxgen bench: {clipped(e)}", file=sys.stderr)
        return EXIT_USAGE
    if not results:
        print("ptxgen bench: no shape could be compared with the baseline", file=sys.stderr)
        return EXIT_CHECK_FAILED
    g = geomean([r.ratio for r in results])
    if args.json:
        body = results[0].to_json() if len(results) == 1 else {"shapes": [r.to_json() for r in results], "geomean_ratio": g}
        print(json.dumps(body))
    elif len(results) > 1:
        print(f"geometric mean of the ratio over {len(results)} shapes: {g:.3f}")
    bad = [r for r in results if not r.checked_ok]
    for r in bad:
        print(f"ptxgen bench: {r.kernel} output check FAILED (rel error {r.rel_error:.2e})", file=sys.stderr)
    # a shape the baseline refused is reported, not silently dropped: the run did not compare everything it was asked to
    return EXIT_CHECK_FAILED if bad or uncompared else EXIT_OK


def _tuning_to_merge(path: str | None) -> list[dict]:
    """The entries of the table ``tune --merge`` adds to (none if it does not exist yet), each checked as
    ``ptxgen bench`` checks a table; UsageError naming the file and the problem otherwise."""
    from pathlib import Path

    from .choose.tune import load_table, table_problem

    if not path or not Path(path).exists():
        return []
    try:
        entries = load_table(path)
        why = table_problem(entries)
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"{type(e).__name__}: {e}"
    if why:
        raise UsageError(f"--merge {path}: not a tuning table ptxgen can add to ({why})")
    return entries


def cmd_tune(args) -> int:
    from .launch.gpu import NoGPU, require_gpu
    from .choose.tune import tune_shape

    from .choose import calibrate

    calibrate.check_flags(args)
    if args.calibrate:
        _check_out(args.out)
        return calibrate.run(args)
    shapes = _shapes(args)  # usage errors before any GPU work
    check_dims(shapes)
    check_arch(args.arch)
    _check_out(args.json)
    old = _tuning_to_merge(args.json) if args.merge else []  # a table that cannot be merged: exit 2 before the work
    try:
        dev = require_gpu()
        arch = args.arch or dev.arch.value
        entries = []
        for m, n, k in shapes:
            print(f"tuning {args.dtype} {m}x{n}x{k} on {dev.name} ({arch}):", flush=True)
            e = tune_shape(args.dtype, arch, m, n, k, rounds=args.iters)
            print(f"  -> {e['kernel']}: ratio {e['ratio']}", flush=True)
            entries.append(e)
    except NoGPU as e:
        print(f"ptxgen tune: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    if args.json:
        from ..outputs import write_text_atomic

        keep = [e for e in old if (e["dtype"], e["arch"], e["m"], e["n"], e["k"]) not in
                {(x["dtype"], x["arch"], x["m"], x["n"], x["k"]) for x in entries}]
        write_text_atomic(args.json, json.dumps({"device": dev.name, "entries": keep + entries}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return EXIT_OK


def add(sub) -> None:
    v = sub.add_parser("validate", help="run the kernel on the GPU present and compare with numpy (float64)")
    add_spec_flags(v, arch_default=None)
    v.add_argument("--m", type=int, help="problem M (default 3 x BM)")
    v.add_argument("--n", type=int, help="problem N (default 2 x BN)")
    v.add_argument("--k", type=int, help="problem K (default (2 x stages + 1) x BK)")
    v.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    v.set_defaults(func=cmd_validate)

    p = sub.add_parser("probe", help="show what the tensor core reads through descriptors (Hopper) vs the read model, and where TMA writes (--category tma)")
    p.add_argument("--json", metavar="OUT", help="write every case to OUT")
    p.add_argument("--seed", type=int, default=0, help="random seed of the probe cases (default 0)")
    p.add_argument("--category", action="append", choices=PROBE_CATEGORIES,
                   help="which cases (repeatable; default all): wgmma reads (derived, strides, base_offset) or TMA writes (tma)")
    p.set_defaults(func=cmd_probe)

    st = sub.add_parser("selftest", help="climb the truth ladder on the GPU present (probes, then GEMMs from simple to "
                        "cluster / CTA pair) and print a report to paste into an issue; exit 1 on any disagreement")
    st.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    st.set_defaults(func=cmd_selftest)

    b = sub.add_parser("bench", help="time kernels against cuBLAS (torch) in the same process, alternating rounds")
    add_spec_flags(b, arch_default=None, required=False)
    _shape_flags(b)
    b.add_argument("--warmup", type=int_at_least(0), default=10, help="untimed launches of each side first (default 10)")
    b.add_argument("--iters", type=int_at_least(1), default=50, help="timed rounds per side; the median is reported (default 50)")
    b.add_argument("--json", action="store_true", help="print JSON: one object per shape, or shapes + geomean_ratio")
    b.set_defaults(func=cmd_bench)

    t = sub.add_parser("tune", help="search tiles, stages and schedules for each shape on the GPU; write the winners "
                       "(--calibrate: measure the chooser's cost model on this GPU)")
    t.add_argument("--dtype", default="bf16", choices=("f16", "bf16", "e4m3"), help="input type (default bf16)")
    t.add_argument("--arch", default=None, help="default: the GPU's")
    _shape_flags(t)
    t.add_argument("--iters", type=int_at_least(1), default=20, help="timed rounds per side and candidate (default 20)")
    t.add_argument("--json", metavar="OUT", help="write the table of winners to OUT")
    t.add_argument("--merge", action="store_true", help="keep OUT's entries for other shapes")
    t.add_argument("--calibrate", action="store_true", help="measure the cost model's constants on this GPU (at most 5 "
                   "minutes) and write a calibration for it into the cache folder (and --out FILE)")
    t.add_argument("--out", metavar="FILE", help="with --calibrate: also write the calibration to FILE")
    t.add_argument("--budget-s", type=float, default=None, help="with --calibrate: seconds of measuring, at most 300 "
                   "(default 300)")
    t.set_defaults(func=cmd_tune)


def _shape_flags(p) -> None:
    p.add_argument("--m", type=int, default=8192, help="problem M (default 8192)")
    p.add_argument("--n", type=int, default=8192, help="problem N (default 8192)")
    p.add_argument("--k", type=int, default=8192, help="problem K (default 8192)")
    p.add_argument("--shapes", metavar="MxNxK,...", help="several problem shapes (instead of --m --n --k)")
