"""Faults (issue 21): nothing lost, nothing trusted that can lie, no runaway processes. Workers capped and dying with
their parent; damaged reports, cache entries and generated files rerun or refused, never trusted; concurrent builds into
one folder; a bad tuning table; interrupted commands."""

import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hostile_common import JSON, SEED, grid_file, run

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
    grid = grid_file(tmp_path, TINY)
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
    code, _, err = run(["sweep", "--grid", grid_file(tmp_path, grid_text, "tiny.toml"), "--no-compile", "--jobs", "1",
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
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.compile.artifacts import build

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
    from ptxgen.runtime.compile.artifacts import generate

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
    from ptxgen.runtime.choose.tune import TuningTableError

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
    from ptxgen.runtime.compile import cache
    from ptxgen.runtime.compile.toolchain import Compiled

    keys = []
    for i in range(n):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        assert cache.store(key, Compiled(f"k{i}", "sm_90a", "x" * size, bytes(size), ""), folder) is not None
        os.utime(cache.entry_path(key, folder), (1000 + i, 1000 + i))  # stored long ago, in this order
        keys.append(key)
    return keys


def test_cache_evicts_the_least_recently_used_past_the_cap(tmp_path, monkeypatch):
    from ptxgen.runtime.compile import cache
    from ptxgen.runtime.compile.toolchain import Compiled

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
    from ptxgen.runtime.compile import cache

    monkeypatch.setenv("PTXGEN_NO_CACHE", value)
    assert cache.enabled() is on


# -- 9. leftovers, the API module, closed outputs ------------------------------------------------
def test_tools_read_their_input_without_a_temporary_file(tmp_path, monkeypatch, built):
    import tempfile

    from ptxgen.runtime.compile import toolchain

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

    from ptxgen.derive.tile.spec import make_spec

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
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import make_spec

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
    assert set(json.loads(lines[0])) == {"sweep"}  # the header: the sweep's identity
    kept = sum(1 for line in lines[1:] if line.endswith("}"))
    assert f"{kept} already in" in r.stderr and "a torn line" in r.stderr, r.stderr[-2000:]
    report = json.loads((tmp_path / "done.json").read_text())
    assert not report["partial"] and sorted(report["kernel_names"]) == sorted(c["kernel_name"] for c in report["configs"])
    assert not (tmp_path / "done.json.journal").exists()  # the finished report replaces its own journal


@settings(max_examples=200, deadline=None)
@given(where=st.floats(0, 1, exclude_max=True), byte=st.integers(1, 255), cut=st.booleans())
def test_fuzz_cache_entry_decoder(where, byte, cut):
    """Random damage to a cubin cache entry: the decoder gives the kernel exactly, or nothing (then it is recompiled)."""
    from ptxgen.runtime.compile import cache
    from ptxgen.runtime.compile.toolchain import Compiled

    key = "ab" * 32
    good = Compiled("k", "sm_90a", ".version 9.0\n" * 20, bytes(range(256)) * 4, "log")
    data = cache.encode_entry(key, good)
    i = int(where * len(data))
    bad = data[:i] if cut else data[:i] + bytes([data[i] ^ byte]) + data[i + 1:]
    got = cache.decode_entry(bad, key)
    assert got is None or got == good
