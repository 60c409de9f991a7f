"""Sweep reports: the entries a sweep writes (sealed with their sha256), which of them can be trusted, the summary
and its table, reading a report or a killed sweep's journal, and merging shard reports into one.

ptxgen.sweep runs the configurations and writes these; ``ptxgen sweep --resume`` and ``--merge`` read them.
"""

from __future__ import annotations

import hashlib
import json

from ..derive.tile.spec import TileSpec
from ..isa.types import SpecError
from ..outputs import read_text, write_text_atomic

MAX_REPORT_BYTES = 1 << 30  # a report of the whole 'full' grid is ~60 MB
from ..status import shown


CHECKS = ("model", "compile", "sass", "run")


VERDICTS = ("pass", "fail", "skipped")


def _digest(entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def seal(entry: dict) -> dict:
    """A report entry with the sha256 of its content: an entry changed after the sweep wrote it is not trusted."""
    return {**entry, "sha256": _digest(entry)}


def entry_problem(c) -> str | None:
    """Why a report entry cannot be trusted (None: it can): the schema, the spec it names, its checksum."""
    if not isinstance(c, dict):
        return f"not an object but {type(c).__name__}"
    if UNREADABLE in c:
        return str(c[UNREADABLE])
    name, checks = c.get("kernel_name"), c.get("checks")
    if not isinstance(name, str):
        return "no kernel_name"
    if not isinstance(checks, dict) or set(checks) != set(CHECKS) or not all(v in VERDICTS for v in checks.values()):
        return f"'checks' must give each of {', '.join(CHECKS)} one of {'/'.join(VERDICTS)}"
    if not (c.get("error") is None or isinstance(c.get("error"), str)):
        return "'error' must be text or null"
    if not isinstance(c.get("spec"), dict):
        return "no 'spec' object"
    try:
        spec = TileSpec.from_json(c["spec"])
    except (SpecError, ValueError, TypeError, KeyError) as e:
        return f"its spec cannot be rebuilt: {e}"
    if spec.kernel_name != name or c["spec"].get("loader") != spec.loader.value:
        return f"its spec is kernel {spec.kernel_name}, not {name}"
    if c.get("sha256") != _digest(c):
        return "its content does not match its sha256 (edited or damaged after the sweep wrote it)"
    return None


def trusted_entries(path: str, configs: list) -> tuple[list[dict], list[str]]:
    """The entries that pass :func:`entry_problem` (the first of each kernel name), and one line per other entry."""
    good, bad, seen = [], [], set()
    for i, c in enumerate(configs):
        why = entry_problem(c)
        name = c.get("kernel_name") if isinstance(c, dict) and isinstance(c.get("kernel_name"), str) else "?"
        if why is None and name in seen:
            why = "a second entry for this kernel"
        if why is None:
            seen.add(name)
            good.append(c)
        else:
            bad.append(f"{path}: configs[{i}] ({name[:80]}): {why}; skipped")
    return good, bad


def status_of(r: dict) -> str:
    vals = r["checks"].values()
    return "fail" if "fail" in vals else "pass" if "pass" in vals else "skipped"


def summarize(results: list[dict]) -> dict:
    statuses = [status_of(r) for r in results]
    return {
        "total": len(results),
        "passed": statuses.count("pass"),
        "failed": statuses.count("fail"),
        "skipped": statuses.count("skipped"),
    }


JOURNAL_SUFFIX = ".journal"
JOURNAL_HEADER = "sweep"  # a journal's first line: {"sweep": the sweep's identity}
# What a report's verdicts belong to: the grid's configurations (sha256 of their specs, whatever the file's name or
# layout), the ptxgen version and the generator's sources (the ptxgen package and its templates). --resume and --merge
# refuse a report whose identity differs from the sweep's or the other reports'.
IDENTITY = ("grid_sha256", "ptxgen_version", "generator_sha256")


def identity_problems(r: dict, want: dict) -> list[str]:
    """How report ``r``'s identity differs from ``want`` (empty: it is the same grid, version and generator)."""
    probs = []
    for key in IDENTITY:
        got = r.get(key)
        if not isinstance(got, str):
            probs.append(f"it has no {key} (written by an older ptxgen, or edited)")
        elif got != want.get(key):
            probs.append(f"its {key} is {shown(got, 80)}, not {shown(want.get(key), 80)}")
    return probs


def check_identity(path: str, r: dict, want: dict, what: str) -> None:
    """ValueError naming the file and every difference when ``r`` is not of ``want``'s grid, version and generator."""
    probs = identity_problems(r, want)
    if probs:
        raise ValueError(f"{path}: not a report of {what} ({'; '.join(probs)}): its verdicts cannot be combined with "
                         "this one's; run the sweep again without it")


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
        if status_of(r) == "fail":
            lines.append(f"FAIL {r['kernel_name']}: {r['error']}")
    return "\n".join(lines)


def write_json(report: dict, path: str) -> None:
    write_text_atomic(path, json.dumps(report, indent=1) + "\n")


# ------------------------------------------------------------------------------------------------
def read_report(path: str) -> dict:
    """A sweep report, or ValueError naming the file and what is wrong with it. A ``.journal`` file (the results of
    a sweep that was killed, a JSON line each) reads as a partial report; a line that is not JSON (the one being
    written when it died) becomes an entry that :func:`trusted_entries` refuses."""
    try:
        text = read_text(path, MAX_REPORT_BYTES)
        if path.endswith(JOURNAL_SUFFIX):
            return _journal(text)
        r = json.loads(text)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read a sweep report: {e}" if str(e).startswith(path) else
                         f"{path}: cannot read a sweep report: {e}") from None
    if not isinstance(r, dict) or not isinstance(r.get("configs"), list):
        raise ValueError(f"{path}: not a ptxgen sweep report (no list of configs)")
    return r


def _journal(text: str) -> dict:
    """A journal as a partial report: its header's identity (the first line), then its entries."""
    lines = [_json_line(line) for line in text.splitlines() if line.strip()]
    head = lines[0] if lines and isinstance(lines[0], dict) and set(lines[0]) == {JOURNAL_HEADER} else None
    ident = head[JOURNAL_HEADER] if head is not None and isinstance(head[JOURNAL_HEADER], dict) else {}
    return {**{k: ident.get(k) for k in ("grid", *IDENTITY)}, "configs": lines[1 if head else 0:], "partial": True}


def _json_line(line: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return {UNREADABLE: "a torn line, not JSON (the one being written when the sweep died?)"}


UNREADABLE = "_unreadable"


def _shard_of(path: str, r: dict) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in str(r.get("shard", "")).split("/"))
        assert 1 <= i <= n
    except (ValueError, AssertionError):
        raise ValueError(f"{path}: no valid 'shard' I/N in the report (written by an older ptxgen?)") from None
    return i, n


def _check_shards(grid: str, shards: dict[int, list], n: int) -> list[str]:
    probs = []
    for i in range(1, n + 1):
        if i not in shards:
            probs.append(f"grid {grid}: shard {i}/{n} is missing")
        elif len(shards[i]) > 1:
            probs.append(f"grid {grid}: shard {i}/{n} appears {len(shards[i])} times ({', '.join(shards[i])})")
    return probs


def _check_report(path: str, r: dict) -> list[str]:
    probs = []
    if r.get("partial"):
        probs.append(f"{path}: a partial report (the sweep was interrupted)")
    names = r.get("kernel_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return probs + [f"{path}: no 'kernel_names' list"]
    got = {c["kernel_name"] for c in r["configs"]}
    if set(names) != got:
        probs.append(f"{path}: {len(set(names) - got)} of its configurations have no result")
    return probs


def merge_reports(paths: list[str]) -> tuple[dict, list[str]]:
    """Shard reports into one report, and the problems: missing, duplicated or partial shards, a union that is not
    the whole grid. ValueError (nothing merged) for reports of several grids, ptxgen versions or generators."""
    reports = [(p, read_report(p)) for p in paths]
    first = reports[0][1]
    for p, r in reports:  # one grid, one version, one generator: else a ValueError (exit 2)
        check_identity(p, r, first, f"the grid, ptxgen version and generator of {reports[0][0]}")
    probs: list[str] = []
    for p, r in reports:  # an entry that cannot be trusted is named and left out (and the merge fails)
        r["configs"], bad = trusted_entries(p, r["configs"])
        probs += bad
    by_grid: dict[str, dict] = {}
    for p, r in reports:
        i, n = _shard_of(p, r)
        g = by_grid.setdefault(str(first.get("grid")), {"n": n, "size": r.get("grid_size"), "shards": {}})
        if n != g["n"]:
            probs.append(f"{p}: shard {i}/{n}, but other reports of grid {r.get('grid')} have N={g['n']}")
        g["shards"].setdefault(i, []).append(p)
        probs += _check_report(p, r)
    if len(by_grid) > 1:
        probs.append(f"reports of several grids: {', '.join(sorted(by_grid))}")
    configs: dict[str, dict] = {}
    for p, r in reports:
        dups = sum(c["kernel_name"] in configs for c in r["configs"])
        if dups:
            probs.append(f"{p}: {dups} configurations are also in another report")
        configs.update((c["kernel_name"], c) for c in r["configs"])
    for name, g in by_grid.items():
        probs += _check_shards(name, g["shards"], g["n"])
        if isinstance(g["size"], int) and g["size"] != len(configs) and len(by_grid) == 1:
            probs.append(f"grid {name}: the reports hold {len(configs)} configurations, the grid has {g['size']}")
    results = sorted(configs.values(), key=lambda c: c["kernel_name"])
    return ({"grid": ",".join(sorted(by_grid)), **{k: first[k] for k in IDENTITY}, "configs": results,
             "summary": summarize(results)}, probs)
