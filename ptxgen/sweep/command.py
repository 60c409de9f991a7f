"""``ptxgen sweep``'s command: the grid (or a shard of it) from the arguments, a partial report to resume from, the
run, and the report written and summed up; ``--merge`` joins the reports of shards. Exit status as the ``ptxgen``
command's (ptxgen.cli): 0 every configuration passed, 1 one failed (or the sweep stopped), 2 bad usage, 3 ``--run``
without a GPU, 130 interrupted."""

from __future__ import annotations

import sys

from ..cliargs import UsageError
from ..status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK, clipped

def _sweep_merge(args) -> int:
    from ..outputs import check_output_path
    from .report import merge_reports, summary_table, write_json

    try:
        if args.json:
            check_output_path(args.json)
        report, problems = merge_reports(args.merge)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json:
        write_json(report, args.json)
    print(summary_table(report))
    for p in problems:
        print(f"ptxgen sweep --merge: {clipped(p)}", file=sys.stderr)
    ok = not problems and report["summary"]["failed"] == 0
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def _sweep_resume(path: str | None, ident: dict) -> list[dict]:
    """The trusted entries of a partial report of this grid, version and generator (a damaged or edited entry is
    named and run again; a report of another grid or generator is refused)."""
    from .report import check_identity, read_report, trusted_entries

    if not path:
        return []
    try:
        r = read_report(path)
        check_identity(path, r, ident, f"grid {ident['grid']} by this ptxgen")
    except ValueError as e:
        raise UsageError(f"--resume {e}") from None
    good, bad = trusted_entries(path, r["configs"])
    for line in bad:
        print(f"ptxgen sweep --resume: {clipped(line)} (run again)", file=sys.stderr)
    return good


def _sweep_prepare(args):
    from ..outputs import check_output_path
    from . import load_grid, shard

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    try:
        if args.json:
            check_output_path(args.json)
        grid = load_grid(args.grid, keep_dropped=args.list_dropped)
        specs = shard(grid.specs, args.shard)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return grid, specs


def _list_dropped(grid) -> int:
    for combo, reason in grid.dropped_reasons:
        print(" ".join(f"{k}={v}" for k, v in combo.items()) + f": {reason}")
    print(f"{len(grid.dropped_reasons)} illegal combinations dropped", file=sys.stderr)
    return EXIT_OK


def cmd_sweep(args) -> int:
    from pathlib import Path

    from . import identity, run_sweep, worker_count
    from .report import JOURNAL_SUFFIX, summary_table, write_json

    if args.merge:
        return _sweep_merge(args)
    grid, specs = _sweep_prepare(args)
    if args.list_dropped:
        return _list_dropped(grid)
    if args.list:
        for sp in specs:
            print(sp.cli_args())
        return EXIT_OK
    ident = identity(grid)
    done = _sweep_resume(args.resume, ident)
    if args.run:
        from ..runtime.launch.gpu import NoGPU, require_gpu

        try:
            require_gpu()
        except NoGPU as e:
            print(f"ptxgen: {clipped(e)}", file=sys.stderr)
            return EXIT_NO_GPU
    names = {s.kernel_name for s in specs}
    done = [r for r in done if r["kernel_name"] in names]
    print(
        f"sweep grid {grid.name}: {len(specs)} configurations"
        + (f" (shard {args.shard} of {len(grid.specs)})" if args.shard else "")
        + (f", {len(done)} already in {args.resume}" if args.resume else "")
        + f", {grid.dropped} illegal combinations dropped",
        file=sys.stderr,
    )
    jobs, clamped = worker_count(args.jobs, len(specs) - len(done))
    if clamped:
        print(f"ptxgen sweep: {clamped}", file=sys.stderr)
    journal = args.json + JOURNAL_SUFFIX if args.json else None  # a sweep killed outright: --resume OUT.journal
    report = run_sweep(specs, jobs, compile=not args.no_compile, run=args.run, done=done, journal=journal, header=ident)
    report.update(**ident, grid_size=len(grid.specs), shard=args.shard or "1/1",
                  kernel_names=sorted(names))
    if args.json:  # first: the report is never lost to a problem in printing it
        write_json(report, args.json)
        if not report.get("stopped"):
            Path(journal).unlink(missing_ok=True)
    print(summary_table(report))
    if report.get("stopped"):
        where = (f"; the results so far are in the journal {journal} and the partial report {args.json} (continue with "
                 f"--resume {journal})" if args.json else "; run with --json OUT to keep a journal of the results")
        print(f"ptxgen sweep: {report['stopped']}, after {len(report['configs'])} of {len(specs)} configurations"
              + where, file=sys.stderr)
        return EXIT_CHECK_FAILED
    if report["partial"]:
        print(f"ptxgen sweep: interrupted after {len(report['configs'])} of {len(specs)} configurations"
              + (f"; partial report in {args.json} (continue with --resume {args.json})" if args.json else ""),
              file=sys.stderr)
        return 130
    return EXIT_OK if report["summary"]["failed"] == 0 else EXIT_CHECK_FAILED
