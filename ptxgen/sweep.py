"""``ptxgen sweep``: many configurations through the read-model check, NVRTC and the SASS check.

Grids are TOML files: each ``[[product]]`` table lists values per spec field and stands for their
cartesian product; combinations the validator refuses are dropped (and counted). ``ci`` and the
other named grids ship in ptxgen/grids/; ``full`` is generated: every legal configuration of the
domain in :data:`FULL_DOMAIN`.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .derive.spec import FIELDS as SPEC_FIELDS, TileSpec, make_spec
from .isa.types import SpecError

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


def _product(table: dict) -> list[dict]:
    keys = [k for k in FIELDS if k in table]
    unknown = set(table) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown grid field(s): {sorted(unknown)}; fields are {', '.join(FIELDS)}")
    values = [table[k] if isinstance(table[k], list) else [table[k]] for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _make(d: dict) -> TileSpec:
    d = {k: (None if v == "default" else v) for k, v in d.items()}
    return make_spec(**d)


def grid_from_tables(name: str, tables: list[dict]) -> Grid:
    seen: dict[str, TileSpec] = {}
    dropped = 0
    for table in tables:
        for combo in _product(table):
            try:
                spec = _make(combo)
            except SpecError:
                dropped += 1
                continue
            seen.setdefault(spec.kernel_name, spec)
    return Grid(name, sorted(seen.values(), key=lambda s: s.kernel_name), dropped)


def full_grid() -> Grid:
    tables = []
    for dtype in FULL_DOMAIN["dtype"]:
        esize = 4 if dtype == "tf32" else 2 if dtype in ("f16", "bf16") else 1
        t = {k: v for k, v in FULL_DOMAIN.items() if k != "bk_bytes"}
        t["dtype"] = [dtype]
        t["bk"] = [b // esize for b in FULL_DOMAIN["bk_bytes"]]
        tables.append(t)
    return grid_from_tables("full", tables)


def load_grid(which: str) -> Grid:
    """``ci``, ``full``, another grid shipped in ptxgen/grids, or a TOML file path."""
    if which == "full":
        return full_grid()
    path = Path(which)
    if path.suffix == ".toml" and path.exists():
        text, name = path.read_text(encoding="utf-8"), path.stem
    else:
        try:
            text = resources.files("ptxgen.grids").joinpath(f"{which}.toml").read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"no grid {which!r}: use ci, full, or a .toml file") from None
        name = which
    doc = tomllib.loads(text)
    return grid_from_tables(name, doc.get("product", []))


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
    from .derive.layout import derive
    from .model.verify import check_tile

    t0 = time.perf_counter()
    spec = TileSpec.from_json(spec_json)
    checks = {"model": "skipped", "compile": "skipped", "sass": "skipped", "run": "skipped"}
    errors = []
    try:
        problems = check_tile(derive(spec))
        checks["model"] = "fail" if problems else "pass"
        errors += problems
        if compile:
            from .runtime.artifacts import generate

            try:
                art = generate(spec)
                checks["compile"] = "pass"
                checks["sass"] = "pass" if art.sass.ok else "fail"
                errors += art.sass.problems
            except Exception as e:  # noqa: BLE001 - NVRTC errors are results here
                checks["compile"] = "fail"
                errors.append(str(e)[:2000])
        if run:
            from .runtime.validate import validate_spec

            v = validate_spec(spec)
            checks["run"] = "pass" if v.passed else "fail"
            if not v.passed:
                errors.append(v.verdict)
    except Exception as e:  # noqa: BLE001
        errors.append(f"{type(e).__name__}: {e}")
        if checks["model"] == "skipped":  # the derivation itself raised
            checks["model"] = "fail"
    return {
        "kernel_name": spec.kernel_name,
        "spec": {**spec.to_json(), "loader": spec.loader.value},  # the loader always recorded
        "checks": checks,
        "seconds": round(time.perf_counter() - t0, 3),
        "error": "; ".join(errors) if errors else None,
    }


def _status(r: dict) -> str:
    vals = r["checks"].values()
    return "fail" if "fail" in vals else "pass" if "pass" in vals else "skipped"


class Progress:
    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream
        self.tty = stream.isatty()
        self.last_print = 0.0

    def update(self, r: dict) -> None:
        self.done += 1
        self.failed += _status(r) == "fail"
        now = time.monotonic()
        if self.tty:
            width = 30
            filled = width * self.done // max(1, self.total)
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  failed {self.failed}  {r['kernel_name'][:60]:<60}"
            )
            self.stream.flush()
        elif now - self.last_print > 5 or self.done == self.total:
            self.stream.write(f"sweep: {self.done}/{self.total} done, {self.failed} failed\n")
            self.stream.flush()
            self.last_print = now

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def run_sweep(specs: list[TileSpec], jobs: int, compile: bool, run: bool, progress: bool = True) -> dict:
    bar = Progress(len(specs)) if progress else None
    results = []
    if jobs <= 1 or run:  # GPU runs stay in this process (one context)
        for s in specs:
            r = run_config(s.to_json(), compile, run)
            results.append(r)
            if bar:
                bar.update(r)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            futs = [ex.submit(run_config, s.to_json(), compile, run) for s in specs]
            for f in as_completed(futs):
                r = f.result()
                results.append(r)
                if bar:
                    bar.update(r)
    if bar:
        bar.close()
    results.sort(key=lambda r: r["kernel_name"])
    statuses = [_status(r) for r in results]
    summary = {
        "total": len(results),
        "passed": statuses.count("pass"),
        "failed": statuses.count("fail"),
        "skipped": statuses.count("skipped"),
    }
    return {"configs": results, "summary": summary}


def summary_table(report: dict) -> str:
    rows = {}
    for r in report["configs"]:
        key = (r["spec"]["arch"], r["spec"]["dtype"], r["spec"]["loader"])
        row = rows.setdefault(key, {"n": 0, **{c: [0, 0, 0] for c in ("model", "compile", "sass", "run")}})
        row["n"] += 1
        for c, v in r["checks"].items():
            row[c][("pass", "fail", "skipped").index(v)] += 1
    lines = [f"{'arch':<8} {'dtype':<6} {'loader':<8} {'configs':>7}   {'model':>12} {'compile':>12} {'sass':>12} {'run':>12}"]
    fmt = lambda p, f, s: f"{p}/{f}/{s}"  # noqa: E731
    for (arch, dtype, loader), row in sorted(rows.items()):
        lines.append(
            f"{arch:<8} {dtype:<6} {loader:<8} {row['n']:>7}   "
            + " ".join(f"{fmt(*row[c]):>12}" for c in ("model", "compile", "sass", "run"))
        )
    s = report["summary"]
    lines.append(f"(pass/fail/skipped)  total {s['total']}: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped")
    for r in report["configs"]:
        if _status(r) == "fail":
            lines.append(f"FAIL {r['kernel_name']}: {r['error']}")
    return "\n".join(lines)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def write_json(report: dict, path: str) -> None:
    Path(path).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
