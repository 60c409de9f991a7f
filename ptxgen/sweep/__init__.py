"""``ptxgen sweep``: many configurations through the read-model check, NVRTC and the SASS check.

Grids are TOML files: each ``[[product]]`` table lists values per spec field and stands for their
cartesian product; combinations the validator refuses are dropped (and counted). ``ci`` and the
other named grids ship in ptxgen/grids/; ``full`` is generated: every legal configuration of the
domain in :data:`FULL_DOMAIN`. The package holds the sweep itself (this module), the reports it writes and reads
(``report``: entries, trust, merging), the epilogue checks it runs on each configuration (``checks``) and the
command's arguments to it (``command``).
"""

from __future__ import annotations

import hashlib
import contextlib
import itertools
import json
import math
import os
import signal
import sys
import threading
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterator

from ..derive.tile.fields import FIELD_BY_NAME as SPEC_FIELDS_BY_NAME, FIELDS as SPEC_FIELDS
from ..derive.tile.spec import OperandSpec, TileSpec, make_spec
from ..isa.types import SpecError, parse_enum
from ..outputs import read_text
from ..status import shown as _shown
from .report import JOURNAL_HEADER, seal, status_of, summarize

FIELDS = tuple(f.name for f in SPEC_FIELDS)
TOKENS = tuple(
    f"{m}-{s}" for m in ("kmajor", "mnmajor") for s in ("none", "sw32", "sw64", "sw128", "sw128b32")
)

# 'full': every legal configuration of this domain (BK = 32 B and 128 B of K per row, so that every
# K-major swizzle has a legal BK), with both loaders: FULL_SIZE configurations (pinned by tests/test_sweep.py).
FULL_DOMAIN = {
    "arch": ["sm_100a", "sm_90a"],
    "dtype": ["f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8"],
    "acc": ["f32", "f16", "s32"],
    "bm": [64, 128],
    "bn": [64, 128, 256],
    "bk_bytes": [32, 128],
    "a": list(TOKENS),
    "a_order": ["mn", "k"],
    "b": list(TOKENS),
    "b_order": ["mn", "k"],
    "stages": [2],
    "loader": ["tma", "cp.async"],
}
FULL_SIZE = 2 * 31344  # 31,344 legal tiles of the domain, each with both loaders


@dataclass
class Grid:
    name: str
    specs: list[TileSpec]
    dropped: int  # illegal combinations in the products
    dropped_reasons: list | None = None  # [(combination, SpecError text)] when asked for


INT_FIELDS = frozenset(f.name for f in SPEC_FIELDS if f.is_int)


def _check_value(key: str, v) -> None:
    """A grid value has the field's type (an integer, not a bool or float; or a string) and, for a field of named
    values, is one of them: a typo is an error naming it, not a combination dropped as illegal."""
    ok = v == "default" or ((type(v) is int) if key in INT_FIELDS else isinstance(v, str))
    if not ok:
        want = "an integer" if key in INT_FIELDS else "a string"
        raise ValueError(f"grid field {key} = {v!r}: must be {want} or a list of them")
    f = SPEC_FIELDS_BY_NAME[key]
    if v == "default" or f.is_int:
        return
    if key in ("a", "b"):
        OperandSpec.parse(v, None, f.flag)
    elif f.enum is not None:
        parse_enum(f.enum, v, f.flag)
    elif f.choices and v not in f.choices:
        raise SpecError(f.flag, v, "not one of its values", ", ".join(f.choices))


MAX_GRID_COMBINATIONS = 2_000_000  # the most combinations a grid may stand for: 'full' is 403,200 (FULL_DOMAIN)


def _fields(table) -> tuple[list[str], list[list]]:
    """A [[product]] table's fields (in FIELDS order) and each field's list of values, checked for shape only."""
    if not isinstance(table, dict):
        raise ValueError(f"a grid [[product]] must be a table of fields, not {type(table).__name__}")
    unknown = set(table) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown grid field(s): {_shown(sorted(map(str, unknown)))}; fields are {', '.join(FIELDS)}")
    keys = [k for k in FIELDS if k in table]
    return keys, [table[k] if isinstance(table[k], list) else [table[k]] for k in keys]


def grid_size(tables: list) -> int:
    """The combinations the [[product]] tables stand for: the sum over the tables of the product of their lists' lengths
    (computed, nothing built)."""
    total = 0
    for table in tables:
        _, values = _fields(table)
        total += math.prod(len(vs) for vs in values)
    return total


def _product(table: dict) -> Iterator[dict]:
    """The table's combinations, one at a time (its values checked first)."""
    keys, values = _fields(table)
    for k, vs in zip(keys, values):
        if not vs:
            raise ValueError(f"grid field {k} is an empty list")
        for v in vs:
            try:
                _check_value(k, v)
            except SpecError as e:
                raise ValueError(f"grid field {k}: {e}") from None
    return (dict(zip(keys, combo)) for combo in itertools.product(*values))


def _make(d: dict) -> TileSpec:
    d = {k: (None if v == "default" else v) for k, v in d.items()}
    return make_spec(**d)


def grid_from_tables(name: str, tables: list[dict], keep_dropped: bool = False) -> Grid:
    if not isinstance(tables, list):
        raise ValueError(f"grid {name}: 'product' must be a list of [[product]] tables")
    size = grid_size(tables)
    if size > MAX_GRID_COMBINATIONS:
        raise ValueError(f"grid {name}: {size} combinations, more than the {MAX_GRID_COMBINATIONS} a sweep takes "
                         f"(the product of each [[product]] table's list lengths, summed): split it into smaller grids")
    tables = [_product(t) for t in tables]  # every table's values checked before any combination is built
    seen: dict[str, TileSpec] = {}
    dropped, reasons = 0, []
    for combos in tables:
        for combo in combos:
            try:
                spec = _make(combo)
            except SpecError as e:
                dropped += 1
                if keep_dropped:
                    reasons.append((combo, str(e)))
                continue
            seen.setdefault(spec.kernel_name, spec)
    specs = sorted(seen.values(), key=lambda s: s.kernel_name)
    return Grid(name, specs, dropped, reasons if keep_dropped else None)


def full_grid(keep_dropped: bool = False) -> Grid:
    tables = []
    for dtype in FULL_DOMAIN["dtype"]:
        esize = 4 if dtype == "tf32" else 2 if dtype in ("f16", "bf16") else 1
        t = {k: v for k, v in FULL_DOMAIN.items() if k != "bk_bytes"}
        t["dtype"] = [dtype]
        t["bk"] = [b // esize for b in FULL_DOMAIN["bk_bytes"]]
        tables.append(t)
    return grid_from_tables("full", tables, keep_dropped)


def load_grid(which: str, keep_dropped: bool = False) -> Grid:
    """``ci``, ``full``, another grid shipped in ptxgen/grids, or a TOML file path."""
    if which == "full":
        return full_grid(keep_dropped)
    path = Path(which)
    if path.suffix == ".toml" and path.exists():
        try:
            text, name = read_text(path), path.stem
        except (OSError, ValueError) as e:
            raise ValueError(f"grid {which}: cannot read it: {e}") from None
    else:
        try:
            text = resources.files("ptxgen.grids").joinpath(f"{which}.toml").read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"no grid {which!r}: use ci, full, or a .toml file") from None
        name = which
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"grid {which}: not valid TOML: {e}") from None
    unknown = sorted(set(doc) - {"product"})
    if unknown:
        raise ValueError(f"grid {which}: unknown top-level key(s) {unknown}; a grid holds [[product]] tables")
    grid = grid_from_tables(name, doc.get("product", []), keep_dropped)
    if not grid.specs:
        raise ValueError(f"grid {which}: no legal configuration ({grid.dropped} illegal combinations dropped)")
    return grid


def grid_sha256(specs: list[TileSpec]) -> str:
    """The grid's content: sha256 of its configurations' specs (the loader included), in kernel-name order."""
    h = hashlib.sha256()
    for spec in sorted(specs, key=lambda s: s.kernel_name):
        h.update(json.dumps({**spec.to_json(), "loader": spec.loader.value}, sort_keys=True).encode() + b"\n")
    return h.hexdigest()


def identity(grid: Grid) -> dict:
    """What the sweep's verdicts belong to (ptxgen.sweep.report.IDENTITY), with the grid's name."""
    from ..runtime.compile.buildmemo import generator_roots, tree_sha256
    from ..version import __version__

    return {"grid": grid.name, "grid_sha256": grid_sha256(grid.specs), "ptxgen_version": __version__,
            "generator_sha256": tree_sha256(generator_roots())}


def shard(specs: list, shard_spec: str | None) -> list:
    """``I/N`` (1-based): every N-th configuration starting at the I-th, in kernel-name order."""
    if not shard_spec:
        return specs
    try:
        i, n = (int(x) for x in shard_spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard {shard_spec!r}: expected I/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {shard_spec}: I must be in 1..N")
    return specs[i - 1 :: n]


# ------------------------------------------------------------------------------------------------
def run_config(spec_json: dict, compile: bool, run: bool) -> dict:
    """One configuration through every check; runs in a worker process."""
    from ..derive.tile.layout import derive
    from ..model.bridges.verify import check_tile
    from ..model.bridges.verify_scales import check_scales
    from .checks import store_problems

    t0 = time.perf_counter()
    spec = TileSpec.from_json(spec_json)
    checks = {"model": "skipped", "compile": "skipped", "sass": "skipped", "run": "skipped"}
    errors = []
    try:
        t = derive(spec)
        problems = check_tile(t) + (check_scales(t) if t.scales is not None else []) + store_problems(spec)
        checks["model"] = "fail" if problems else "pass"
        errors += problems
        if compile:
            from ..runtime.compile.artifacts import generate

            try:
                art = generate(spec)
                checks["compile"] = "pass"
                checks["sass"] = "pass" if art.sass.ok else "fail"
                errors += art.sass.problems
            except Exception as e:  # noqa: BLE001 - NVRTC errors are results here
                checks["compile"] = "fail"
                errors.append(str(e)[:2000])
        if run:
            from ..runtime.check.validate import validate_spec

            v = validate_spec(spec)
            checks["run"] = "pass" if v.passed else "fail"
            if not v.passed:
                errors.append(v.verdict)
    except Exception as e:  # noqa: BLE001
        errors.append(f"{type(e).__name__}: {e}")
        if checks["model"] == "skipped":  # the derivation itself raised
            checks["model"] = "fail"
    return seal({
        "kernel_name": spec.kernel_name,
        "spec": {**spec.to_json(), "loader": spec.loader.value},  # the loader always recorded
        "checks": checks,
        "seconds": round(time.perf_counter() - t0, 3),
        "error": "; ".join(errors) if errors else None,
    })


class Progress:
    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream
        self.tty = stream.isatty()
        self.last_print = 0.0
        self.t0 = time.monotonic()

    def eta(self) -> str:
        """Time left at the rate so far, ``m:ss`` (``?`` before the first result)."""
        if not self.done:
            return "?"
        left = (time.monotonic() - self.t0) / self.done * (self.total - self.done)
        return f"{int(left) // 60}:{int(left) % 60:02d}"

    def update(self, r: dict) -> None:
        self.done += 1
        self.failed += status_of(r) == "fail"
        now = time.monotonic()
        if self.tty:
            width = 30
            filled = width * self.done // max(1, self.total)
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  failed {self.failed}  ETA {self.eta()}  {r['kernel_name'][:50]:<50}"
            )
            self.stream.flush()
        elif now - self.last_print > 5 or self.done == self.total:
            self.stream.write(f"sweep: {self.done}/{self.total} done, {self.failed} failed, ETA {self.eta()}\n")
            self.stream.flush()
            self.last_print = now

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel sends this worker SIGKILL when its parent dies, however it dies (the OOM killer's SIGKILL
    runs no handler in the parent). The parent may have died before the request: then exit now."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _worker_init(parent: int) -> None:
    """Worker initializer: Ctrl-C goes to the parent, which stops the workers itself; the worker dies with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """The sweep's worker processes (forked from this process: the death signal is tied to it)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),))


def worker_count(jobs: int | None, configs: int) -> tuple[int, str | None]:
    """Workers for ``configs`` configurations: ``jobs`` (default all CPUs), never more than the CPUs or the
    configurations; the second item says why a larger ``--jobs`` was clamped."""
    cpus = default_jobs()
    n = max(1, min(jobs or cpus, cpus, configs))
    if jobs is not None and jobs > n:
        why = "CPUs" if cpus <= configs else "configurations"
        return n, f"--jobs {jobs}: more than the {min(cpus, configs)} {why}; using {n} worker(s)"
    return n, None


def _run_serial(specs, compile: bool, run: bool, on_result) -> None:
    for s in specs:
        on_result(run_config(s.to_json(), compile, run))


def _stop_pool(ex: ProcessPoolExecutor) -> None:
    """Cancel what has not started and kill the workers (a compile may take seconds)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=2)


def _hold_sigint() -> None:
    """After a Ctrl-C: further ones wait until the partial report is written (the command then exits 130)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _sigint_deferred():
    """While the workers are forked: a Ctrl-C (sent to the whole process group) is noted, then raised here once they
    are; a forked worker inherits the noting handler until its initializer ignores SIGINT, never a KeyboardInterrupt
    (which would print a traceback from the worker's start)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    seen = []
    old = signal.signal(signal.SIGINT, lambda *_: seen.append(1))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if seen:
        raise KeyboardInterrupt


def _run_parallel(specs, jobs: int, compile: bool, run: bool, on_result) -> None:
    ex = worker_pool(jobs)
    try:
        with _sigint_deferred():
            futs = [ex.submit(run_config, s.to_json(), compile, run) for s in specs]
        for f in as_completed(futs):
            on_result(f.result())
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            _hold_sigint()
        _stop_pool(ex)
        raise
    ex.shutdown(wait=True)


def run_sweep(specs: list[TileSpec], jobs: int, compile: bool, run: bool, progress: bool = True,
              done: list[dict] | None = None, journal: str | None = None, header: dict | None = None) -> dict:
    """Every spec through :func:`run_config`. ``done``: results of an earlier partial run, kept as they are
    (their specs are skipped). Ctrl-C stops the sweep and returns what finished, marked ``partial``; so does a worker
    that dies (its reason in ``stopped``).
    ``journal``: a file each result is appended to (a JSON line) as it arrives, so that a sweep killed outright
    (SIGKILL, the OOM killer, a lost machine) loses only the configurations in flight: ``--resume`` reads it. Its first
    line is ``{"sweep": header}``, the sweep's identity (ptxgen.sweep.report.IDENTITY)."""
    results = list(done or [])
    skip = {r["kernel_name"] for r in results}
    todo = [s for s in specs if s.kernel_name not in skip]
    jobs = max(1, min(jobs, len(todo), default_jobs()))
    bar = Progress(len(todo)) if progress else None
    log = open(journal, "w", encoding="utf-8") if journal else None  # noqa: SIM115 - closed below
    if log:  # the results kept from an earlier run first: the journal alone holds everything done
        log.write(json.dumps({JOURNAL_HEADER: header or {}}) + "\n")
        log.writelines(json.dumps(r) + "\n" for r in results)
        log.flush()

    def on_result(r: dict) -> None:
        results.append(r)
        if log:
            log.write(json.dumps(r) + "\n")
            log.flush()
        if bar:
            bar.update(r)

    partial, stopped = False, None
    try:
        if jobs <= 1 or run:  # GPU runs stay in this process (one context)
            _run_serial(todo, compile, run, on_result)
        else:
            _run_parallel(todo, jobs, compile, run, on_result)
    except KeyboardInterrupt:
        partial = True
        _hold_sigint()
    except BrokenProcessPool:  # a worker killed outright (the OOM killer, SIGKILL): the others are stopped too
        partial, stopped = True, WORKER_DIED
    finally:
        if log:
            log.close()
    if bar:
        bar.close()
    results.sort(key=lambda r: r["kernel_name"])
    return {"configs": results, "summary": summarize(results), "partial": partial,
            **({"stopped": stopped} if stopped else {})}


WORKER_DIED = ("a worker process died (killed by a signal: the out-of-memory killer, or SIGKILL), so the sweep stopped; "
               "the configuration it was checking is not known")


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


