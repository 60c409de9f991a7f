"""Hostile input: every command refuses bad values, wrong types, unwritable outputs and typos with one clear line and
exit 2 (usage) or 1 (a failed check), never a traceback, never exit 0 on failure, never a half-written file."""

import argparse
import contextlib
import hashlib
import io
import json
import math
import multiprocessing
import os
import random
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ptxgen.cli import build_parser, main
from ptxgen.derive.spec import TileSpec
from ptxgen.isa.types import SpecError
from ptxgen.sweep import grid_from_tables, load_grid

SEED = ["--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
GOOD_GRID = 'bm = 128\nbn = 128\nbk = 32\na = "kmajor-sw64"\n'


def run(argv) -> tuple[int, str, str]:
    """main(argv) -> (exit code, stdout, stderr); argparse's SystemExit counts as an exit code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _grid(tmp, body, name="g.toml"):
    p = tmp / name
    p.write_text(body)
    return p


def _setup(tmp):
    """Paths the table refers to: a file, a folder, a kernel folder without layout.json, a corrupt layout.json."""
    (tmp / "afile").write_text("x")
    (tmp / "badtable.json").write_text('{"entries": [{"dtype": "bf16", "arch": "sm_90a", "spec": {}}]}')
    (tmp / "orphan" / "k1").mkdir(parents=True)
    (tmp / "orphan" / "k1" / "kernel.cu").write_text("// hand written\n")
    (tmp / "corrupt" / "k1").mkdir(parents=True)
    (tmp / "corrupt" / "k1" / "layout.json").write_text("{not json")
    (tmp / "badspec" / "k1").mkdir(parents=True)
    (tmp / "badspec" / "k1" / "layout.json").write_text(json.dumps({"spec": {"bm": "x"}}))
    for name, body in {
        "str.toml": '[[product]]\nbm = "x"\nbn = 128\nbk = 32\na = "kmajor-sw64"\n',
        "float.toml": f"[[product]]\n{GOOD_GRID}stages = 1.5\n",
        "dicts.toml": "[[product]]\nbn = 128\nbk = 32\na = \"kmajor-sw64\"\nbm = [{x = 1}]\n",
        "unknown.toml": f"[[product]]\n{GOOD_GRID}bogus = 1\n",
        "empty.toml": "",
        "illegal.toml": '[[product]]\nbm = 128\nbn = 100\nbk = 32\na = "kmajor-sw64"\n',
        "typo_swizzle.toml": '[[product]]\nbm = 128\nbn = 128\nbk = 32\na = "kmajor-sw999"\n',
        "broken.toml": "[[product]\nbm = ",
        "toplevel.toml": f"bm = 128\n[[product]]\n{GOOD_GRID}",
        "emptylist.toml": f"[[product]]\n{GOOD_GRID}stages = []\n",
        "typo_dtype.toml": f'[[product]]\n{GOOD_GRID}dtype = ["f16", "fp16"]\n',
        "typo_a.toml": '[[product]]\nbm = 128\nbn = 128\nbk = 32\na = ["kmajor-sw64", "kmajr-sw64"]\n',
        "typo_loader.toml": f'[[product]]\n{GOOD_GRID}loader = ["tma", "cpasync"]\n',
    }.items():
        _grid(tmp, body, name)


CASES = [
    # (argv, exit code, message fragment); T is the temporary folder
    (["build", *SEED, "--out", "T/afile"], 2, "is not a folder"),
    (["show", *SEED, "--svg", "T/missing/x.svg"], 2, "does not exist"),
    (["show", *SEED, "--html", "T"], 2, "is a directory"),
    (["show", *SEED, "--decode", "zz"], 2, "not a hexadecimal number"),
    (["show", *SEED, "--decode", "0x1" + "0" * 17], 2, "does not fit in 64 bits"),
    (["show", *SEED, "--decode", "0xffffffffffffffff", "--svg", "T/d.svg"], 1, "PROBLEM"),
    (["check", "T/orphan"], 1, "without a layout.json"),
    (["check", "T/corrupt"], 1, "cannot rebuild the spec"),
    (["check", "T/badspec"], 1, "cannot rebuild the spec"),
    (["check", "T/missing"], 1, "no such folder"),
    (["check", "T/afile"], 1, "not a folder"),
    (["sweep", "--grid", "T/str.toml"], 2, "bm = 'x': must be an integer"),
    (["sweep", "--grid", "T/float.toml"], 2, "stages = 1.5: must be an integer"),
    (["sweep", "--grid", "T/dicts.toml"], 2, "must be an integer"),
    (["sweep", "--grid", "T/unknown.toml"], 2, "unknown grid field"),
    (["sweep", "--grid", "T/empty.toml"], 2, "no legal configuration"),
    (["sweep", "--grid", "T/illegal.toml"], 2, "no legal configuration"),
    (["sweep", "--grid", "T/broken.toml"], 2, "not valid TOML"),
    (["sweep", "--grid", "T/toplevel.toml"], 2, "unknown top-level key"),
    (["sweep", "--grid", "T/emptylist.toml"], 2, "empty list"),
    (["sweep", "--grid", "nosuchgrid"], 2, "no grid 'nosuchgrid'"),
    (["sweep", "--jobs", "0"], 2, "--jobs 0"),
    (["sweep", "--shard", "3/2"], 2, "I must be in 1..N"),
    (["sweep", "--shard", "x"], 2, "expected I/N"),
    (["sweep", "--json", "T"], 2, "is a directory"),
    (["sweep", "--json", "T/missing/r.json"], 2, "does not exist"),
    (["sweep", "--resume", "T/afile"], 2, "cannot read a sweep report"),
    (["sweep", "--merge", "T/afile"], 2, "cannot read a sweep report"),
    (["sweep", "--merge", "T/missing.json"], 2, "cannot read a sweep report"),
    (["sweep", "--jobz", "2"], 2, "unrecognized arguments: --jobz"),
    (["explain", "--bm", "x", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "invalid int value: 'x'"),
    (["explain", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw999"], 2, "--a"),
    (["explain", *SEED, "--stages", "0"], 2, "stages"),
    (["explain", *SEED, "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["decode"], 2, "give either"),
    (["decode", "0xzz"], 2, "not a hexadecimal number"),
    (["decode", "--idesc", "0x1ffffffff"], 2, "does not fit in 32 bits"),
    (["probe", "--json", "T/missing/p.json"], 2, "does not exist"),
    (["tune", "--json", "T"], 2, "is a directory"),
    (["bench", "--bm", "128"], 2, "give all of"),
    (["nosuchcommand"], 2, "invalid choice"),
    # issue 21 item 6: every spec and problem check before any GPU work (the same answer with or without a GPU)
    (["validate", "--bm", "7", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "--bm=7 is illegal"),
    (["validate", *SEED, "--arch", "sm_80"], 2, "--arch=sm_80 is illegal"),
    (["validate", *SEED, "--m", "-5"], 2, "M=-5 must be in 1.."),
    (["validate", *SEED, "--arch", "sm_90a", "--k", "0"], 2, "K=0 must be in 1.."),
    (["bench", "--bm", "7", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "--bm=7 is illegal"),
    (["bench", "--m", "-5"], 2, "M=-5 must be in 1.."),
    (["bench", "--shapes", "0x10x10"], 2, "M=0 must be in 1.."),
    (["bench", "--arch", "sm_80"], 2, "--arch=sm_80 is illegal"),
    # s7: a spec no arch takes (no --arch) names each arch's own refusal: on an H200 the sm_90a one (another field here)
    (["bench", "--bm", "256", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16",
      "--stages", "4", "--epilogue", "tma", "--shapes", "4000x4000x4000"], 2,
     "no --arch takes this spec: on sm_100a, --bm=256 is illegal"),
    (["validate", "--bm", "256", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16",
      "--stages", "4", "--epilogue", "tma"], 2, "; on sm_90a, --stages=4 is illegal"),
    (["tune", "--arch", "foo"], 2, "--arch=foo is illegal"),
    (["tune", "--m", "0"], 2, "M=0 must be in 1.."),
    (["tune", "--json", "T/badtable.json", "--merge"], 2, "not a tuning table ptxgen can add to"),
    (["tune", "--json", "T/afile", "--merge"], 2, "not a tuning table ptxgen can add to"),
    # item 9: a typo in a grid is refused, naming the value, not dropped as an illegal combination
    (["sweep", "--grid", "T/typo_dtype.toml", "--list"], 2, "--dtype=fp16"),
    (["sweep", "--grid", "T/typo_a.toml", "--list"], 2, "kmajr-sw64"),
    (["sweep", "--grid", "T/typo_swizzle.toml"], 2, "grid field a: --a=kmajor-sw999 is illegal"),
    (["sweep", "--grid", "T/typo_loader.toml", "--list"], 2, "--loader=cpasync"),
    (["sweep", "--grid", "T/typo_dtype.toml", "--list-dropped"], 2, "--dtype=fp16"),
    # item 10: messages that said something else than what is wrong
    (["explain", *SEED, "--out-dtype", "s32"], 2, "a f32 accumulator converts to f32, f16 or bf16"),
    (["explain", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw256"], 2, "--a=kmajor-sw256 is illegal"),
    (["explain", *SEED[:4], "--bk", "1048576", "--a", "kmajor-sw64"], 2, "--bm/--bn/--bk=128x128x1048576 is illegal"),
    (["explain", *SEED, "--dtype", "foo"], 2, "Legal: f16, bf16, tf32, e4m3, e5m2, s8, u8, e2m3, e3m2, e2m1 (the last three with --scale)"),
    (["show", *SEED, "--operand", "d", "--svg", "T/d.svg"], 2, "--operand d"),
]


@pytest.mark.parametrize("argv, code, fragment", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_hostile_table(tmp_path, argv, code, fragment):
    _setup(tmp_path)
    got, out, err = run([a.replace("T", str(tmp_path), 1) if a.startswith("T") else a for a in argv])
    assert got == code, (got, out[-500:], err[-2000:])
    assert fragment in err, err[-2000:]
    assert "Traceback" not in err
    if code == 2:
        assert not (tmp_path / "missing").exists() and not list(tmp_path.glob("**/*.tmp*"))


def test_unknown_dtype_lists_only_input_types():
    code, _, err = run(["explain", *SEED, "--dtype", "foo"])
    assert code == 2 and "ue8m0" not in err and "s32" not in err.split("Legal:")[1], err


def test_epilogue_help_names_both_archs():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = [a.help for a in sub.choices["explain"]._actions if "--epilogue" in a.option_strings]
    assert "sm_90a only" not in helps[0] and "sm_100a" in helps[0], helps


def test_show_decode_lints_a_good_descriptor(tmp_path):
    code, out, err = run(["show", *SEED, "--decode", "0x8000402000010002", "--svg", tmp_path / "d.svg"])
    assert code == 0 and "PROBLEM" not in err and (tmp_path / "d.svg").read_text().startswith("<")


def test_every_flag_has_help():
    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, f"{path} {name}")
            elif not isinstance(a, argparse._HelpAction):
                yield path, a

    missing = [f"{path} {a.option_strings or a.dest}" for path, a in walk(build_parser(), "ptxgen") if not (a.help or "").strip()]
    assert not missing, missing


def test_bench_extra_declares_torch_and_test_does_not():
    with open("pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert extras["bench"] == ["torch>=2.1"]
    assert not any(d.startswith("torch") for d in extras["test"])


# ------------------------------------------------------------------------------------------------
# fuzzing
def _flags() -> dict[str, list[str]]:
    """Every real flag of each command (the fuzzed commands do no compile and no long sweep)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [o for a in p._actions for o in a.option_strings if o not in ("-h", "--help")]
            for name, p in sub.choices.items()}


FLAGS = _flags()
FUZZED = ("explain", "decode", "show", "validate", "bench", "tune", "probe", "sweep", "cache", "check")
JUNK = st.sampled_from(["128", "64", "32", "0", "-1", "1.5", "x", "", "kmajor-sw64", "mnmajor-sw128", "sm_90a", "f16",
                        "0x8000402000010002", "zz", "1/2", "9/2", "nan", "1e9", "ci", "T/nope/x", "T", "info", "clear",
                        "sm_80", "kmajr-sw64", "-5", "2147483648", "e2m1", "ue8m0", "tma", "pingpong", "2x1"])


@st.composite
def argvs(draw):
    cmd = draw(st.sampled_from(FUZZED))
    argv = [cmd]
    for _ in range(draw(st.integers(0, 8))):
        argv.append(draw(st.one_of(st.sampled_from(FLAGS[cmd]), JUNK) if FLAGS[cmd] else JUNK))
    if cmd == "sweep":
        argv.append("--list")  # the grid is read and checked; nothing runs
    if cmd == "show" and "--svg" not in argv and "--html" not in argv:
        argv += ["--svg", "T/out.svg"]
    if cmd == "check":
        argv.append("T")  # never the checked-in generated/ (a regeneration of every kernel)
    return argv


def _fuzz_cli(tmp_path, argv):
    argv = [str(tmp_path) + a[1:] if a.startswith("T") else a for a in argv]
    old = os.environ.get("PTXGEN_CACHE_DIR")
    os.environ["PTXGEN_CACHE_DIR"] = str(tmp_path / "cache")  # `cache clear` empties a private cache
    try:
        code, _, err = run(argv)
    finally:
        if old is None:
            os.environ.pop("PTXGEN_CACHE_DIR")
        else:
            os.environ["PTXGEN_CACHE_DIR"] = old
    assert code in (0, 1, 2, 3), (argv, code)
    assert "Traceback" not in err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_fuzz_cli(tmp_path, argv):
    _fuzz_cli(tmp_path, argv)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_fuzz_cli_long(tmp_path, argv):
    _fuzz_cli(tmp_path, argv)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)
FIELD_NAMES = ("bm", "bn", "bk", "a", "b", "a_order", "dtype", "acc", "arch", "stages", "loader", "smem_offset")
SPECLIKE = st.dictionaries(st.sampled_from(FIELD_NAMES), JSON | st.sampled_from([128, 64, 32, "kmajor-sw64", "sm_90a"]),
                           max_size=6)


def _spec_from_json(d):
    try:
        TileSpec.from_json(d)
    except (SpecError, ValueError):
        pass


@settings(max_examples=100, deadline=None)
@given(d=st.one_of(JSON, SPECLIKE))
def test_fuzz_spec_from_json(d):
    _spec_from_json(d)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(d=st.one_of(JSON, SPECLIKE))
def test_fuzz_spec_from_json_long(d):
    _spec_from_json(d)


@settings(max_examples=100, deadline=None)
@given(tables=st.one_of(JSON, st.lists(SPECLIKE, max_size=2)))
def test_fuzz_grid_from_tables(tables):
    try:
        grid_from_tables("fuzz", tables)
    except (SpecError, ValueError):
        pass


TOML_VALUE = st.one_of(st.integers(-5, 300), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                       st.sampled_from(['"x"', '"kmajor-sw64"', "[]", "[1, 2]", '[{x = 1}]', '["tma", 3]', "{y = 2}"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(FIELD_NAMES + ("bogus",)), TOML_VALUE, max_size=5))
def test_fuzz_load_grid(tmp_path, body):
    lines = []
    for k, v in body.items():
        v = str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) and math.isfinite(v) else v
        lines.append(f"{k} = {v}")
    path = tmp_path / "fuzz.toml"
    path.write_text("[[product]]\n" + "\n".join(lines) + "\n")
    try:
        tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError:
        pass
    try:
        load_grid(str(path))
    except (SpecError, ValueError):
        pass


# ================================================================================================
# Faults: nothing lost, nothing trusted that can lie, no runaway processes (issue 21)
ROOT = Path(__file__).resolve().parent.parent
TINY = '[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = 128\nbn = 128\nbk = 32\na = "kmajor-sw64"\nb = "kmajor-sw32"\n'


def _env(**kw) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **kw}


def _ptxgen(*argv, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptxgen", *map(str, argv)], capture_output=True, text=True,
                          env=env or _env(), cwd=ROOT, **kw)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# -- 1. workers: capped, and they die with their parent ------------------------------------------
def test_jobs_are_capped_by_cpus_and_configurations_and_said_once(tmp_path, monkeypatch):
    import ptxgen.sweep as sweep

    made = []
    real = sweep.ProcessPoolExecutor

    def recording(max_workers, **kw):
        made.append(max_workers)
        return real(max_workers=max_workers, **kw)

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", recording)
    grid = _grid(tmp_path, TINY)
    code, _, err = run(["sweep", "--grid", grid, "--no-compile", "--jobs", "10000", "--json", tmp_path / "r.json"])
    assert code == 0, err
    assert made and max(made) <= min(2, sweep.default_jobs()), made  # 2 configurations
    assert err.count("--jobs 10000") == 1 and "using" in err, err
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["passed"] == 2


WORKERS_SCRIPT = """
import sys, time
from ptxgen.sweep import worker_pool
ex = worker_pool(2)
futs = [ex.submit(time.sleep, 300) for _ in range(2)]
time.sleep(1.5)
print(" ".join(str(p) for p in ex._processes), flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_sweep_workers_die_when_the_parent_is_killed():
    import signal

    proc = subprocess.Popen([sys.executable, "-c", WORKERS_SCRIPT], stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(map(_alive, pids)), pids
        os.kill(proc.pid, signal.SIGKILL)  # as the OOM killer does: no handler runs in the parent
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        orphans = [p for p in pids if _alive(p)]
        assert not orphans, f"workers {orphans} outlived their parent"
    finally:
        for p in pids if "pids" in locals() else []:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


# -- 2. reports read back are checked, entry by entry ---------------------------------------------
def _report(tmp_path, name="full.json", grid_text=TINY, extra=()) -> tuple[Path, dict]:
    out = tmp_path / name
    code, _, err = run(["sweep", "--grid", _grid(tmp_path, grid_text, "tiny.toml"), "--no-compile", "--jobs", "1",
                        "--json", out, *extra])
    assert code == 0, err
    return out, json.loads(out.read_text())


def _checks(report: dict) -> dict:
    return {c["kernel_name"]: c["checks"] for c in report["configs"]}


@pytest.mark.parametrize("damage", ["empty spec", "flipped check", "unknown check value", "wrong name", "spec not a dict"])
def test_resume_reruns_a_damaged_entry_and_always_writes_the_report(tmp_path, damage):
    path, fresh = _report(tmp_path)
    r = json.loads(path.read_text())
    c = r["configs"][0]
    if damage == "empty spec":
        c["spec"] = {}  # issue 21: ran everything, then KeyError 'arch' in summary_table, no report
    elif damage == "flipped check":
        c["checks"]["model"] = "fail"  # schema-valid, but not what the sweep found
    elif damage == "unknown check value":
        c["checks"]["model"] = "maybe"
    elif damage == "wrong name":
        c["kernel_name"] = r["configs"][1]["kernel_name"]
    else:
        c["spec"] = "sm_90a"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**r, "partial": True}))
    out = tmp_path / "out.json"
    code, _, err = run(["sweep", "--grid", tmp_path / "tiny.toml", "--no-compile", "--jobs", "1", "--resume", forged,
                        "--json", out])
    assert code == 0, err
    assert "Traceback" not in err and "skipped" in err and "config" in err, err
    assert _checks(json.loads(out.read_text())) == _checks(fresh)


@pytest.mark.parametrize("damage", ["missing arch", "unknown check value", "flipped check", "configs not a list"])
def test_merge_names_a_damaged_entry_and_writes_the_merged_report(tmp_path, damage):
    path, _ = _report(tmp_path)
    r = json.loads(path.read_text())
    if damage == "missing arch":
        del r["configs"][0]["spec"]["arch"]
    elif damage == "unknown check value":
        r["configs"][0]["checks"]["compile"] = "sometimes"
    elif damage == "flipped check":
        r["configs"][0]["checks"]["model"] = "fail"
    else:
        r["configs"] = {"a": 1}
    path.write_text(json.dumps(r))
    merged = tmp_path / "merged.json"
    code, out, err = run(["sweep", "--merge", path, "--json", merged])
    assert "Traceback" not in err
    if damage == "configs not a list":
        assert code == 2 and "not a ptxgen sweep report" in err
        return
    assert code == 1 and r["configs"][0]["kernel_name"] in err, err
    assert merged.exists() and r["configs"][0]["kernel_name"] not in merged.read_text()


def _damage_json(doc, rng: random.Random, junk):
    """A copy of ``doc`` with one random place replaced, deleted or retyped."""
    doc = json.loads(json.dumps(doc))
    parent, key, node = None, None, doc
    for _ in range(rng.randrange(1, 6)):
        if isinstance(node, dict) and node:
            parent, key = node, rng.choice(sorted(node))
        elif isinstance(node, list) and node:
            parent, key = node, rng.randrange(len(node))
        else:
            break
        node = parent[key]
    if parent is None:
        return junk
    if isinstance(parent, dict) and rng.random() < 0.3:
        del parent[key]
    else:
        parent[key] = junk
    return doc


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return _report(tmp)[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), junk=JSON | st.sampled_from(["fail", "pass", "skipped", "sm_90a", 128, {}, []]))
def test_fuzz_damaged_reports_are_rerun_or_refused_never_trusted(tmp_path, tiny_report, seed, junk):
    damaged = _damage_json(tiny_report, random.Random(seed), junk)
    (tmp_path / "tiny.toml").write_text(TINY)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(damaged))
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    code, _, err = run(["sweep", "--grid", tmp_path / "tiny.toml", "--no-compile", "--jobs", "1", "--resume", bad,
                        "--json", out])
    assert code in (0, 2) and "Traceback" not in err, (code, err)
    if code == 0:
        assert _checks(json.loads(out.read_text())) == _checks(tiny_report)
    else:
        assert not out.exists()
    code, _, err = run(["sweep", "--merge", bad, "--json", out])
    assert code in (0, 1, 2) and "Traceback" not in err, (code, err)
    if code == 0:
        assert _checks(json.loads(out.read_text())) == _checks(tiny_report)


# -- 3. and 4.: cache entries and generated files are checked against their content ---------------
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One compiled kernel in a private cache, its fresh artifacts, and a generated/ folder of it."""
    from ptxgen.derive.spec import make_spec
    from ptxgen.runtime.artifacts import build

    tmp = tmp_path_factory.mktemp("cache")
    old = os.environ.get("PTXGEN_CACHE_DIR")
    os.environ["PTXGEN_CACHE_DIR"] = str(tmp / "cache")
    try:
        spec = make_spec(bm=128, bn=64, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="f16", arch="sm_90a")
        path, art = build(spec, tmp / "gen")
        yield spec, art, tmp / "cache", path
    finally:
        if old is None:
            os.environ.pop("PTXGEN_CACHE_DIR", None)
        else:
            os.environ["PTXGEN_CACHE_DIR"] = old


def _sass_fields(rep) -> tuple:
    return rep.ok, rep.opcode, rep.mma_in_loop, rep.registers, rep.local_bytes, tuple(rep.problems)


def _regenerate(built, damage_file: str, damage):
    from ptxgen.runtime.artifacts import generate

    spec, fresh, cache, _ = built
    [entry] = cache.glob(f"*{damage_file}")
    good = entry.read_bytes()
    try:
        entry.write_bytes(damage(good))
        art = generate(spec)
        assert _sass_fields(art.sass) == _sass_fields(fresh.sass)
        assert art.compiled.cubin == fresh.compiled.cubin and art.files == fresh.files
    finally:
        entry.write_bytes(good)


SASS_DAMAGE = {
    "sass not text": lambda b: json.dumps({**json.loads(b), "sass": 5}).encode(),
    "UTCHMMA/HGMMA to NOP": lambda b: b.replace(b"HGMMA", b"NOP  ").replace(b"UTCHMMA", b"NOP    "),
    "REG:n to REG:255": lambda b: __import__("re").sub(rb"REG:\d+", b"REG:255", b),
    "truncated": lambda b: b[: len(b) // 2],
    "not json": lambda b: b"\x00\xff" + b,
    "a list": lambda b: b"[]",
}


@pytest.mark.parametrize("damage", list(SASS_DAMAGE))
def test_a_damaged_sass_side_file_is_recomputed(built, damage):
    _regenerate(built, ".sass.json", SASS_DAMAGE[damage])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255), cut=st.booleans())
def test_fuzz_sass_side_file_damage(built, where, byte, cut):
    def damage(b: bytes) -> bytes:
        i = int(where * len(b))
        return b[:i] if cut else b[:i] + bytes([byte ^ b[i] or 1]) + b[i + 1:]

    _regenerate(built, ".sass.json", damage)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), byte=st.integers(1, 255), cut=st.booleans())
def test_fuzz_cubin_entry_damage(built, where, byte, cut):
    def damage(b: bytes) -> bytes:
        i = int(where * len(b))
        return b[:i] if cut else b[:i] + bytes([byte ^ b[i]]) + b[i + 1:]

    _regenerate(built, ".cubin", damage)


def test_check_compares_the_ptx_whatever_its_header_says(built, tmp_path):
    import shutil

    _, _, _, kdir = built
    gen = tmp_path / "gen"
    shutil.copytree(kdir, gen / kdir.name)
    ptx = gen / kdir.name / "kernel.ptx"
    lines = ptx.read_text().splitlines(keepends=True)
    lines[1] = "// NVRTC 99.9 PTX for sm_90a\n"
    lines[-1] = lines[-1].replace("}", "} // edited")
    ptx.write_text("".join(lines))
    code, out, err = run(["check", gen])
    assert code == 1 and "kernel.ptx differs" in err, (out, err)


# -- 5. concurrent builds into one folder ---------------------------------------------------------
def _write_many(out_root: str, barrier, errors, n: int) -> None:
    from ptxgen.emit.generated import write_kernel_dir

    barrier.wait()
    for i in range(n):
        try:
            write_kernel_dir(Path(out_root), "k", {"kernel.cu": "same\n", "layout.json": "{}\n"})
        except Exception as e:  # noqa: BLE001 - counted
            errors.put(f"{type(e).__name__}: {e}")


def test_concurrent_writes_of_one_kernel_folder(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), barrier, errors, 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, found[:5]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"], sorted(p.name for p in tmp_path.iterdir())
    assert (tmp_path / "k" / "kernel.cu").read_text() == "same\n"


# -- 7. PTXGEN_TUNING ------------------------------------------------------------------------------
@pytest.mark.parametrize("content, fragment", [
    (None, "No such file"),
    ("{garbage", "JSONDecodeError"),
    ('{"entries": [{"dtype": "bf16", "arch": "sm_90a", "spec": {}}]}', "m, n, k"),
    ('{"entries": [{"dtype": "bf16", "arch": "sm_90a", "m": "x", "n": 1, "k": 1, "spec": {}}]}', "m, n, k"),
    ('{"entries": 5}', "entries"),
])
def test_a_bad_tuning_table_is_the_same_clear_error_in_the_api_and_bench(tmp_path, monkeypatch, content, fragment):
    import numpy as np

    from ptxgen import api
    from ptxgen.runtime.tune import TuningTableError

    table = tmp_path / "t.json"
    if content is not None:
        table.write_text(content)
    monkeypatch.setenv("PTXGEN_TUNING", str(table))
    a = np.zeros((256, 64), np.float16)
    with pytest.raises(TuningTableError) as e:
        api.gemm_spec(a, a, arch="sm_90a")
    assert f"PTXGEN_TUNING={table}" in str(e.value) and fragment in str(e.value)
    code, _, err = run(["bench", "--dtype", "f16"])
    assert code == 2 and str(e.value) in err, err


def test_readme_documents_the_environment_and_the_cache_command():
    text = (ROOT / "README.md").read_text()
    for word in ("PTXGEN_TUNING", "PTXGEN_CACHE_MAX_BYTES", "ptxgen cache info", "ptxgen cache clear", "PTXGEN_NO_CACHE"):
        assert word in text, word


# -- 8. the cache: info, clear, a size cap with least-recently-used eviction -----------------------
def _fake_entries(folder: Path, n: int, size: int = 1000) -> list[str]:
    from ptxgen.runtime import cache
    from ptxgen.runtime.toolchain import Compiled

    keys = []
    for i in range(n):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        assert cache.store(key, Compiled(f"k{i}", "sm_90a", "x" * size, bytes(size), ""), folder) is not None
        os.utime(cache.entry_path(key, folder), (1000 + i, 1000 + i))  # stored long ago, in this order
        keys.append(key)
    return keys


def test_cache_evicts_the_least_recently_used_past_the_cap(tmp_path, monkeypatch):
    from ptxgen.runtime import cache
    from ptxgen.runtime.toolchain import Compiled

    keys = _fake_entries(tmp_path, 4)
    one = cache.entry_path(keys[0], tmp_path).stat().st_size
    assert cache.load(keys[0], tmp_path) is not None  # used now: the most recent
    monkeypatch.setenv("PTXGEN_CACHE_MAX_BYTES", str(4 * one + one // 2))
    new = hashlib.sha256(b"new").hexdigest()
    cache.store(new, Compiled("new", "sm_90a", "x" * 1000, bytes(1000), ""), tmp_path)
    left = {p.name.split(".")[0] for p in tmp_path.glob("*.cubin")}
    assert left == {keys[0], keys[2], keys[3], new}, "the entry used least recently (keys[1]) goes first"
    assert cache.usage(tmp_path).bytes <= 4 * one + one // 2


def test_cache_command_info_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    _fake_entries(tmp_path, 3)
    (tmp_path / "unrelated.txt").write_text("mine")
    code, out, err = run(["cache", "info"])
    total = sum(p.stat().st_size for p in tmp_path.glob("*.cubin"))
    assert code == 0 and str(tmp_path) in out and "3 entries" in out and f"{total} bytes" in out, (out, err)
    code, out, err = run(["cache", "clear"])
    assert code == 0 and "removed 3" in out and not list(tmp_path.glob("*.cubin"))
    assert (tmp_path / "unrelated.txt").exists()
    monkeypatch.setenv("PTXGEN_CACHE_MAX_BYTES", "lots")
    code, _, err = run(["cache", "info"])
    assert code == 2 and "PTXGEN_CACHE_MAX_BYTES=lots" in err


@pytest.mark.parametrize("value, on", [("", True), ("0", True), ("false", True), ("no", True), ("off", True),
                                       ("1", False), ("true", False), ("yes", False)])
def test_no_cache_reads_the_value(monkeypatch, value, on):
    from ptxgen.runtime import cache

    monkeypatch.setenv("PTXGEN_NO_CACHE", value)
    assert cache.enabled() is on


# -- 9. leftovers, the API module, closed outputs ------------------------------------------------
def test_tools_read_their_input_without_a_temporary_file(tmp_path, monkeypatch, built):
    import tempfile

    from ptxgen.runtime import toolchain

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []
    real = subprocess.run

    def spy(*a, **kw):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        return real(*a, **kw)

    monkeypatch.setattr(toolchain.subprocess, "run", spy)
    text = toolchain.run_tool("cuobjdump", ["--dump-resource-usage"], built[1].compiled.cubin)
    assert "REG:" in text and seen == [[]], seen  # a killed worker can leave nothing behind


def test_import_ptxgen_then_ptxgen_api():
    r = subprocess.run([sys.executable, "-c", "import ptxgen; print(ptxgen.api.gemm_spec.__name__)"], capture_output=True,
                       text=True, env=_env(), cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "gemm_spec", r.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("redirect, fragment", [(">&-", "standard output is closed"),
                                                (">/dev/full", "cannot write the output: No space left on device")])
@pytest.mark.parametrize("cmd", ["explain", "decode 0x8000402000010002"])
def test_output_that_cannot_be_written(redirect, fragment, cmd):
    argv = " ".join(SEED) if cmd == "explain" else ""
    r = subprocess.run(f"{sys.executable} -m ptxgen {cmd} {argv} {redirect}", shell=True, capture_output=False,
                       stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr and "Exception" not in r.stderr, r.stderr


# -- 10. the API's messages --------------------------------------------------------------------
def test_numpy_integers_are_integers():
    import numpy as np

    from ptxgen.derive.spec import make_spec

    assert make_spec(bm=np.int64(128), bn=np.int32(128), bk=32, a="kmajor-sw64").bm == 128


def test_compile_refuses_a_string_of_options():
    from ptxgen import api

    with pytest.raises(TypeError, match="options"):
        api.compile(bm=128, bn=128, bk=32, a="kmajor-sw64", options="-G")


def test_out_dtype_is_checked_before_looking_for_a_gpu():
    import numpy as np

    from ptxgen import api

    a = np.zeros((256, 64), np.float16)
    with pytest.raises(api.DTypeError, match="int4"):
        api.gemm_spec(a, a, out_dtype="int4")


@pytest.mark.parametrize("m, n", [(-5, 10), (10, 0), (0, 0)])
def test_grid_of_an_empty_or_negative_problem_is_refused(m, n):
    from ptxgen.derive.kernel import plan_kernel
    from ptxgen.derive.spec import make_spec

    abi = plan_kernel(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")).abi
    with pytest.raises(ValueError, match="at least 1"):
        abi.grid(m, n, 132)


# -- a sweep killed outright loses only the configurations in flight -------------------------------
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL")
def test_a_killed_sweep_resumes_from_its_journal(tmp_path):
    import signal

    out = tmp_path / "r.json"
    journal = tmp_path / "r.json.journal"
    argv = [sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--shard", "1/40", "--no-compile", "--jobs", "1"]
    proc = subprocess.Popen([*argv, "--json", str(out)], env=_env(), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists() and journal.read_text().count("\n") >= 3:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert not out.exists()
    lines = journal.read_text().splitlines()
    with journal.open("a") as f:
        f.write('{"kernel_name": "torn')  # the line being written when it died
    r = subprocess.run([*argv, "--resume", str(journal), "--json", str(tmp_path / "done.json")], env=_env(), cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    kept = sum(1 for line in lines if line.endswith("}"))
    assert f"{kept} already in" in r.stderr and "a torn line" in r.stderr, r.stderr[-2000:]
    report = json.loads((tmp_path / "done.json").read_text())
    assert not report["partial"] and sorted(report["kernel_names"]) == sorted(c["kernel_name"] for c in report["configs"])
    assert not (tmp_path / "done.json.journal").exists()  # the finished report replaces its own journal


@settings(max_examples=200, deadline=None)
@given(where=st.floats(0, 1, exclude_max=True), byte=st.integers(1, 255), cut=st.booleans())
def test_fuzz_cache_entry_decoder(where, byte, cut):
    """Random damage to a cubin cache entry: the decoder gives the kernel exactly, or nothing (then it is recompiled)."""
    from ptxgen.runtime import cache
    from ptxgen.runtime.toolchain import Compiled

    key = "ab" * 32
    good = Compiled("k", "sm_90a", ".version 9.0\n" * 20, bytes(range(256)) * 4, "log")
    data = cache.encode_entry(key, good)
    i = int(where * len(data))
    bad = data[:i] if cut else data[:i] + bytes([data[i] ^ byte]) + data[i + 1:]
    got = cache.decode_entry(bad, key)
    assert got is None or got == good
