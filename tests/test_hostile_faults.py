"""Faults a hostile user finds (issue 37, item 5): grids too large to build, cache folders shared with user files, reports
of two grids or two generators, special files as layout.json, killed workers, user files in kernel folders, tuning tables,
bounds on --iters/--warmup, Ctrl-C, long arguments echoed, internal temp names in messages, the cache's own state."""

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile_common import SEED, grid_file, run

ROOT = Path(__file__).resolve().parent.parent
TINY = '[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = 128\nbn = 128\nbk = 32\na = "kmajor-sw64"\nb = "kmajor-sw32"\n'


def _env(**kw) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **kw}


# -- 1. a grid's size is computed and bounded before anything is built ---------------------------
def test_a_grid_past_the_bound_is_refused_before_anything_is_built(tmp_path, monkeypatch):
    import ptxgen.sweep as sweep

    built = []
    real = sweep._make
    monkeypatch.setattr(sweep, "_make", lambda d: built.append(1) or real(d))
    body = "[[product]]\n" + "".join(f"{f} = [{', '.join(str(v) for v in range(1, 1001))}]\n" for f in ("bm", "bn", "bk"))
    t0 = time.monotonic()
    code, out, err = run(["sweep", "--grid", grid_file(tmp_path, body + 'a = "kmajor-sw64"\n'), "--list"])
    assert code == 2 and "1000000000 combinations" in err and str(sweep.MAX_GRID_COMBINATIONS) in err, err[-500:]
    assert not built and time.monotonic() - t0 < 5 and "Traceback" not in err and not out


def test_the_bound_is_on_the_sum_over_the_products(tmp_path):
    from ptxgen.sweep import MAX_GRID_COMBINATIONS, grid_size

    one = {"bm": list(range(1000)), "bn": list(range(1000))}
    assert grid_size([one]) == 10**6 and grid_size([one, {"bm": [1, 2], "bk": [3]}]) == 10**6 + 2
    assert grid_size([{"bm": 128}]) == 1
    n = MAX_GRID_COMBINATIONS // 10**6 + 1
    code, _, err = run(["sweep", "--grid", grid_file(tmp_path, ("[[product]]\n" + "bm = [" + ", ".join(map(str, range(1000)))
                       + "]\nbn = [" + ", ".join(map(str, range(1000))) + "]\nbk = 32\na = \"kmajor-sw64\"\n") * n),
                        "--list"])
    assert code == 2 and "combinations" in err, err[-500:]


def test_the_full_grid_is_within_the_bound():
    from ptxgen.sweep import FULL_DOMAIN, MAX_GRID_COMBINATIONS
    import math

    assert math.prod(len(v) for k, v in FULL_DOMAIN.items()) <= MAX_GRID_COMBINATIONS


def test_combinations_are_generated_lazily():
    from ptxgen.sweep import _product

    combos = _product({"bm": list(range(10**4)), "bn": list(range(10**4)), "bk": list(range(10**4))})
    assert not isinstance(combos, (list, tuple)) and next(iter(combos)) == {"bm": 0, "bn": 0, "bk": 0}


# -- 2, 3. the cache deletes only files ptxgen wrote ---------------------------------------------
USER_FILES = ("notes.tmp", "x.tmp", ".hidden.tmp", "builds/user.json", "builds/run.tmp", "mine.json", "README",
              "0123456789abcdef.cubin", "builds/" + "ab" * 32 + ".json.bak")


def _user_files(folder: Path) -> dict[str, bytes]:
    made = {}
    for name in USER_FILES:
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"the user's " + name.encode())
        made[name] = p.read_bytes()
    return made


def _fake_kernels(folder: Path, n: int) -> None:
    import hashlib

    from ptxgen.runtime.compile import cache
    from ptxgen.runtime.compile.toolchain import Compiled

    for i in range(n):
        key = hashlib.sha256(f"kernel {i}".encode()).hexdigest()
        assert cache.store(key, Compiled(f"k{i}", "sm_90a", "x" * 500, bytes(500), ""), folder) is not None


def test_cache_clear_keeps_the_users_files_in_a_shared_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    mine = _user_files(tmp_path)
    _fake_kernels(tmp_path, 3)
    (tmp_path / "builds" / ("cd" * 32 + ".json")).write_text('{"format": 1}')  # a build memo's name
    (tmp_path / ".ptxgen-tmp.toolchain.json.abcd1234.tmp").write_text("left by a killed ptxgen")
    code, out, err = run(["cache", "clear"])
    assert code == 0 and "removed 3 kernels" in out, (out, err)
    assert {n: (tmp_path / n).read_bytes() for n in USER_FILES if (tmp_path / n).exists()} == mine
    assert not list(tmp_path.glob("*.cubin*")) or [p.name for p in tmp_path.glob("*.cubin")] == ["0123456789abcdef.cubin"]
    assert not (tmp_path / "builds" / ("cd" * 32 + ".json")).exists()
    assert not (tmp_path / ".ptxgen-tmp.toolchain.json.abcd1234.tmp").exists()


def test_eviction_keeps_the_users_files(tmp_path, monkeypatch):
    mine = _user_files(tmp_path)
    monkeypatch.setenv("PTXGEN_CACHE_MAX_BYTES", "0")  # every write evicts all it may
    _fake_kernels(tmp_path, 2)
    assert {n: (tmp_path / n).read_bytes() for n in USER_FILES if (tmp_path / n).exists()} == mine


def test_cache_usage_counts_only_ptxgens_files(tmp_path):
    from ptxgen.runtime.compile import cache

    _user_files(tmp_path)
    assert cache.usage(tmp_path).bytes == 0 and cache.usage(tmp_path).entries == 0


def test_every_file_ptxgen_writes_in_the_cache_is_its_own(tmp_path):
    """A control: the name patterns recognise every file the writers make (entries, SASS side files, memos, temporary
    files), so clear removes them all."""
    from ptxgen.runtime.compile import cache

    for name in ("ab" * 32 + ".cubin", "ab" * 32 + ".sass.json", "builds/" + "ab" * 32 + ".json"):
        assert cache.is_ours(tmp_path / name), name
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=cache.tmp_prefix("ab" * 8), suffix=cache.TMP_SUFFIX, dir=tmp_path)
    os.close(fd)
    assert cache.is_ours(Path(tmp)) and not cache.is_ours(tmp_path / "x.tmp")
    assert not cache.is_ours(tmp_path / "builds" / "user.json") and not cache.is_ours(tmp_path / "toolchain.json.bak")


# -- 4. reports carry the grid's content hash, the version and the generator's hash ---------------
def _sweep(tmp_path, body, out, *extra, name="g.toml"):
    folder = tmp_path / ("grid-of-" + out)
    folder.mkdir(exist_ok=True)
    code, _, err = run(["sweep", "--grid", grid_file(folder, body, name), "--no-compile", "--jobs", "1",
                        "--json", tmp_path / out, *extra])
    return code, err


def test_reports_record_the_grid_the_version_and_the_generator(tmp_path):
    from ptxgen import __version__
    from ptxgen.runtime.compile.buildmemo import generator_roots, tree_sha256

    assert _sweep(tmp_path, TINY, "r.json")[0] == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["ptxgen_version"] == __version__ and r["generator_sha256"] == tree_sha256(generator_roots())
    assert len(r["grid_sha256"]) == 64
    # the same configurations written otherwise are the same grid; another configuration is another grid
    assert _sweep(tmp_path, TINY.replace('"sm_100a", "sm_90a"', '"sm_90a", "sm_100a"') + "\n# x\n", "s.json")[0] == 0
    assert json.loads((tmp_path / "s.json").read_text())["grid_sha256"] == r["grid_sha256"]
    assert _sweep(tmp_path, TINY.replace("bm = 128", "bm = 64"), "t.json")[0] == 0
    assert json.loads((tmp_path / "t.json").read_text())["grid_sha256"] != r["grid_sha256"]


def test_merge_refuses_shards_of_two_grids_with_one_name(tmp_path):
    assert _sweep(tmp_path, TINY, "a.json", "--shard", "1/2")[0] == 0
    assert _sweep(tmp_path, TINY.replace("bm = 128", "bm = 64"), "b.json", "--shard", "2/2")[0] == 0
    assert json.loads((tmp_path / "a.json").read_text())["grid"] == json.loads((tmp_path / "b.json").read_text())["grid"]
    code, out, err = run(["sweep", "--merge", tmp_path / "a.json", tmp_path / "b.json", "--json", tmp_path / "m.json"])
    assert code == 2 and "grid_sha256" in err and "Traceback" not in err, (code, err)
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("key, value", [("generator_sha256", "0" * 64), ("ptxgen_version", "0.0.1"), ("grid_sha256", None)])
def test_merge_and_resume_refuse_a_report_of_another_generator(tmp_path, key, value):
    assert _sweep(tmp_path, TINY, "a.json", "--shard", "1/2")[0] == 0
    assert _sweep(tmp_path, TINY, "b.json", "--shard", "2/2")[0] == 0
    code, _, err = run(["sweep", "--merge", tmp_path / "a.json", tmp_path / "b.json"])
    assert code == 0, err  # the control: the two shards of one grid by one generator merge
    b = json.loads((tmp_path / "b.json").read_text())
    if value is None:
        del b[key]
    else:
        b[key] = value
    (tmp_path / "b.json").write_text(json.dumps({**b, "partial": True}))
    code, _, err = run(["sweep", "--merge", tmp_path / "a.json", tmp_path / "b.json"])
    assert code == 2 and key in err and "Traceback" not in err, (code, err)
    code, err = _sweep(tmp_path, TINY, "c.json", "--resume", tmp_path / "b.json")
    assert code == 2 and key in err and not (tmp_path / "c.json").exists(), (code, err)


def test_resume_refuses_a_report_of_another_grid_with_the_same_name(tmp_path):
    assert _sweep(tmp_path, TINY.replace("bm = 128", "bm = 64"), "a.json")[0] == 0
    code, err = _sweep(tmp_path, TINY, "b.json", "--resume", tmp_path / "a.json")
    assert code == 2 and "grid_sha256" in err and not (tmp_path / "b.json").exists(), (code, err)


def test_the_journal_carries_the_identity_too(tmp_path):
    from ptxgen.sweep.report import read_report

    assert _sweep(tmp_path, TINY, "a.json")[0] == 0
    a = json.loads((tmp_path / "a.json").read_text())
    journal = tmp_path / "j.json.journal"
    header = {k: a[k] for k in ("grid", "grid_sha256", "ptxgen_version", "generator_sha256")}
    journal.write_text(json.dumps({"sweep": header}) + "\n" + "".join(json.dumps(c) + "\n" for c in a["configs"][:1]))
    r = read_report(str(journal))
    assert r["grid_sha256"] == a["grid_sha256"] and len(r["configs"]) == 1
    code, err = _sweep(tmp_path, TINY, "b.json", "--resume", journal)
    assert code == 0 and "1 already in" in err, err
    journal.write_text(json.dumps({"sweep": {**header, "grid_sha256": "1" * 64}}) + "\n")
    code, err = _sweep(tmp_path, TINY, "c.json", "--resume", journal)
    assert code == 2 and "grid_sha256" in err, err


# -- 5. check reads only regular files, under a size bound ----------------------------------------
def _kernel_copy(tmp_path) -> Path:
    """A copy of one checked-in kernel folder of generated/."""
    import shutil

    src = sorted((ROOT / "generated").glob("*/layout.json"))[0].parent
    dest = tmp_path / "gen" / src.name
    shutil.copytree(src, dest)
    return dest


@pytest.mark.parametrize("special", ["fifo", "link to /dev/zero", "sparse 8 GB", "folder", "link to a fifo"])
@pytest.mark.parametrize("name", ["layout.json", "kernel.cu"])
def test_check_refuses_special_files_quickly(tmp_path, special, name):
    kdir = _kernel_copy(tmp_path)
    target = kdir / name
    target.unlink()
    if special == "fifo":
        os.mkfifo(target)
    elif special == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif special == "sparse 8 GB":
        with open(target, "wb") as f:
            f.truncate(8 << 30)
    elif special == "folder":
        target.mkdir()
    else:
        os.mkfifo(tmp_path / "pipe")
        target.symlink_to(tmp_path / "pipe")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ptxgen", "check", str(kdir.parent)], capture_output=True, text=True,
                       env=_env(), cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert str(target) in r.stderr and ("not a regular file" in r.stderr or "more than" in r.stderr), r.stderr[-2000:]
    assert time.monotonic() - t0 < 60


def test_read_regular_reads_a_regular_file_and_refuses_past_the_bound(tmp_path):
    from ptxgen.outputs import read_regular

    p = tmp_path / "f"
    p.write_bytes(b"x" * 100)
    assert read_regular(p, 100) == b"x" * 100  # the control: at the bound, read whole
    with pytest.raises(ValueError, match="more than"):
        read_regular(p, 99)
    proc = Path("/proc/self/status")  # a regular file whose size says 0: the bound holds on what is read
    if proc.exists():
        with pytest.raises(ValueError, match="more than"):
            read_regular(proc, 10)


# -- 8. the tuning table is checked whole before any use ------------------------------------------
def _shipped_entry() -> dict:
    from ptxgen.runtime.choose.tune import load_table

    return json.loads(json.dumps(next(e for e in load_table() if e["dtype"] == "bf16" and e["arch"] == "sm_90a")))


def _bad_tables():
    good = _shipped_entry()
    spec = good["spec"]
    other = _shipped_entry()
    yield "illegal spec", [{**good, "spec": {**spec, "bm": 7}}], "its spec is illegal: --bm=7"
    yield "unknown entry key", [{**good, "ratoi": 1.0}], "unknown key(s) ['ratoi']"
    yield "unknown spec key", [{**good, "spec": {**spec, "stagez": 3}}], "stagez"
    yield "dtype not the spec's", [{**good, "dtype": "e4m3"}], "its spec is a bf16 kernel for sm_90a, but the entry says dtype e4m3"
    yield "arch not the spec's", [{**good, "arch": "sm_100a"}], "but the entry says dtype bf16, arch sm_100a"
    yield "kernel not the spec's", [{**good, "kernel": "ptxgen_other"}], "'kernel' ptxgen_other is not its spec's kernel"
    yield "untunable dtype", [{**good, "dtype": "s8"}], "dtype s8: the chooser has kernels for"
    yield "one shape twice", [good, other], "a second entry for bf16 sm_90a"
    yield "ratio not a number", [{**good, "ratio": "fast"}], "ratio must be numbers"
    yield "a bad entry after good ones", [good, {**other, "m": 1, "spec": {**spec, "acc": "f64"}}], "entries[1]: its spec is illegal"


BAD_TABLES = list(_bad_tables())


@pytest.mark.parametrize("entries, fragment", [t[1:] for t in BAD_TABLES], ids=[t[0] for t in BAD_TABLES])
def test_a_bad_tuning_table_is_refused_whole_by_the_api_bench_and_tune(tmp_path, monkeypatch, entries, fragment):
    import numpy as np

    from ptxgen import api
    from ptxgen.runtime.choose.tune import TuningTableError

    table = tmp_path / "t.json"
    table.write_text(json.dumps({"device": "NVIDIA H200", "entries": entries}))
    monkeypatch.setenv("PTXGEN_TUNING", str(table))
    a = np.zeros((4096, 4096), np.float16)
    with pytest.raises(TuningTableError) as e:
        api.gemm_spec(a, a, arch="sm_90a")  # f16 borrows bf16's tuning: every entry is checked, not only those used
    assert fragment in str(e.value), str(e.value)
    for argv in (["bench", "--dtype", "bf16"], ["bench", "--api", "--dtype", "bf16"], ["bench", "--dtype", "e4m3"]):
        code, _, err = run(argv)
        assert code == 2 and fragment in err and "no usable GPU" not in err and "Traceback" not in err, (argv, code, err)
    code, _, err = run(["tune", "--json", table, "--merge"])
    assert code == 2 and fragment in err, err


def test_a_good_tuning_table_is_used(tmp_path, monkeypatch):
    """The control: the shipped table passes whole, and a copy of it named in PTXGEN_TUNING picks its tuned kernel."""
    import numpy as np

    from ptxgen import api
    from ptxgen.runtime.choose.tune import TABLE, load_table, table_problem
    from importlib import resources

    assert table_problem(load_table()) is None
    table = tmp_path / "t.json"
    table.write_text(resources.files("ptxgen.tuning").joinpath(TABLE).read_text())
    monkeypatch.setenv("PTXGEN_TUNING", str(table))
    e = _shipped_entry()
    a, b = np.zeros((e["m"], e["k"]), np.float16), np.zeros((e["n"], e["k"]), np.float16)
    spec, why = api.gemm_spec(a, b, arch="sm_90a")
    assert "tuned for this shape" in why, why


# -- 6. a dead worker ends the sweep with a partial report and a pointer to the journal ------------
SIX = TINY.replace("bm = 128", "bm = [64, 128, 256]")


def _dying(spec_json, compile, run):
    """run_config in a worker that the OOM killer takes on one configuration."""
    from ptxgen.sweep import _real_run_config

    if spec_json["arch"] == "sm_90a" and spec_json["bm"] == 128:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_run_config(spec_json, compile, run)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, SIGKILL")
def test_a_dead_worker_ends_the_sweep_with_a_partial_report(tmp_path, monkeypatch):
    import ptxgen.sweep as sweep

    monkeypatch.setattr(sweep, "_real_run_config", sweep.run_config, raising=False)
    monkeypatch.setattr(sweep, "run_config", _dying)
    out = tmp_path / "r.json"
    code, stdout, err = run(["sweep", "--grid", grid_file(tmp_path, SIX), "--no-compile", "--jobs", "2", "--json", out])
    assert code == 1 and "Traceback" not in err and "BrokenProcessPool" not in err, (code, err)
    journal = f"{out}.journal"
    assert "a worker process died" in err and f"--resume {journal}" in err, err
    r = json.loads(out.read_text())
    assert r["partial"] is True and len(r["configs"]) < r["grid_size"] and "worker" in r["stopped"]
    assert Path(journal).exists()
    monkeypatch.undo()  # the configurations run in this process now
    code, _, err = run(["sweep", "--grid", tmp_path / "g.toml", "--no-compile", "--jobs", "1", "--resume", journal,
                        "--json", tmp_path / "done.json"])
    assert code == 0 and json.loads((tmp_path / "done.json").read_text())["summary"]["total"] == r["grid_size"], err


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, SIGKILL")
def test_a_worker_killed_from_outside_ends_the_sweep_cleanly(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--no-compile", "--jobs", "2",
                             "--json", str(out)], env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_children(proc.pid)) < 2:
            time.sleep(0.05)
        time.sleep(1)
        kids = _children(proc.pid)
        assert kids and proc.poll() is None, "no worker to kill"
        os.kill(kids[-1], signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "Traceback" not in err and "a worker process died" in err, err[-3000:]
    assert json.loads(out.read_text())["partial"] is True and Path(f"{out}.journal").exists()


# -- 7. build never deletes files it did not write -------------------------------------------------
@pytest.mark.parametrize("what", ["notes.txt", "a folder", "kernel.cu as a folder", "the kernel folder is a file",
                                  "the kernel folder is a link"])
def test_build_refuses_a_kernel_folder_holding_files_it_did_not_write(tmp_path, monkeypatch, what):
    import ptxgen.runtime.compile.artifacts as artifacts
    from ptxgen.derive.tile.spec import make_spec

    monkeypatch.setattr(artifacts, "generate", lambda *a, **k: pytest.fail("built before the folder was checked"))
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    name = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64").kernel_name
    kdir = tmp_path / "out" / name
    (tmp_path / "out").mkdir()
    if what == "the kernel folder is a file":
        kdir.write_text("mine")
    elif what == "the kernel folder is a link":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "mine.txt").write_text("mine")
        kdir.symlink_to(tmp_path / "elsewhere")
    else:
        kdir.mkdir()
        (kdir / "kernel.ptx").write_text("an old build")
        user = {"notes.txt": kdir / "notes.txt", "a folder": kdir / "mine" / "x.txt",
                "kernel.cu as a folder": kdir / "kernel.cu" / "x.txt"}[what]
        user.parent.mkdir(exist_ok=True)
        user.write_text("mine")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    code, out, err = run(["build", *SEED, "--out", tmp_path / "out"])
    assert code == 2 and "did not write" in err and "Traceback" not in err, (code, err)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_build_rewrites_a_kernel_folder_of_its_own_files(tmp_path):
    """The control: a folder holding only the files a build writes (one of them edited) is rebuilt."""
    code, out, err = run(["build", *SEED, "--out", tmp_path])
    assert code == 0, err
    [kdir] = tmp_path.iterdir()
    (kdir / "kernel.cu").write_text("edited")
    (kdir / "layout.svg").unlink()
    code, out, err = run(["build", *SEED, "--out", tmp_path])
    assert code == 0 and (kdir / "kernel.cu").read_text().startswith("//") and (kdir / "layout.svg").exists(), err


# -- 9. --iters and --warmup are bounded when the arguments are parsed ----------------------------
@pytest.mark.parametrize("argv, fragment", [
    (["bench", "--iters", "0"], "argument --iters: must be an integer of at least 1, not 0"),
    (["bench", "--iters", "-3"], "argument --iters: must be an integer of at least 1"),
    (["bench", "--warmup", "-1"], "argument --warmup: must be an integer of at least 0, not -1"),
    (["bench", "--api", "--iters", "0"], "argument --iters"),
    (["bench", "--iters", "x"], "argument --iters: must be an integer of at least 1, not x"),
    (["tune", "--iters", "0"], "argument --iters: must be an integer of at least 1"),
])
def test_iters_and_warmup_are_bounded_at_parsing(argv, fragment):
    code, _, err = run(argv)
    assert code == 2 and fragment in err and "GPU" not in err, (code, err)


def test_the_smallest_iters_and_warmup_are_accepted():
    from ptxgen.cli import build_parser

    a = build_parser("bench").parse_args(["bench", "--iters", "1", "--warmup", "0"])
    assert (a.iters, a.warmup) == (1, 0)
    assert build_parser("tune").parse_args(["tune", "--iters", "1"]).iters == 1


@pytest.mark.parametrize("iters, warmup", [(0, 10), (-1, 10), (5, -1), (1.5, 0)])
def test_bench_spec_refuses_no_rounds_before_any_gpu_work(monkeypatch, iters, warmup):
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.check import bench

    monkeypatch.setattr(bench, "require_gpu", lambda: pytest.fail("looked for a GPU"))
    with pytest.raises(ValueError, match="iters must be an integer of at least 1"):
        bench.bench_spec(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", arch="sm_90a"), 256, 256, 64, warmup, iters)


# -- 10. Ctrl-C exits 130 with no traceback, whenever it comes -------------------------------------
def _ctrl_c(tmp_path, argv, delay: float, times: int) -> tuple[int, str]:
    """Run ``ptxgen argv`` in a process group of its own and send SIGINT to the group (as a terminal's Ctrl-C does:
    workers and tools get it too) ``times`` times, 50 ms apart, ``delay`` seconds after the start; ``times`` None: every
    5 ms until it exits (Ctrl-C held down)."""
    proc = subprocess.Popen([sys.executable, "-m", "ptxgen", *map(str, argv)], cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(delay)
        deadline = time.monotonic() + 60
        while (times is None or times > 0) and proc.poll() is None and time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                break
            times = None if times is None else times - 1
            time.sleep(0.05 if times is not None else 0.005)
        _, err = proc.communicate(timeout=120)  # a guard against a hang, not a measurement
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def _assert_interrupted(tmp_path, code, err, out):
    assert code == 130 and "Traceback" not in err and "Exception ignored" not in err, (code, err[-3000:])
    assert "interrupted" in err, err[-3000:]
    if out.exists():  # a report written after the Ctrl-C is whole, and nothing half-written is left
        assert json.loads(out.read_text())["partial"] is True
    assert not [p.name for p in out.parent.iterdir() if ".tmp" in p.name], list(out.parent.iterdir())


SWEEP_ARGV = ["sweep", "--grid", "ci", "--no-compile", "--jobs", "2"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")
@pytest.mark.parametrize("delay, times", [(0.15, 1), (1.5, 3), (0.3, None), (1.5, None)])
def test_ctrl_c_exits_130_without_a_traceback(tmp_path, delay, times):
    out = tmp_path / "r.json"
    code, err = _ctrl_c(tmp_path, [*SWEEP_ARGV, "--json", out], delay, times)
    _assert_interrupted(tmp_path, code, err, out)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")
@pytest.mark.parametrize("delay", [0.1, 0.2, 0.3, 0.5, 0.8, 1.2, 2.0, 3.0, 4.0])
@pytest.mark.parametrize("times", [1, 2, 5, None])
@pytest.mark.parametrize("command", ["sweep", "full grid"])
def test_ctrl_c_exits_130_without_a_traceback_every_time(tmp_path, delay, times, command):
    out = tmp_path / "r.json"
    argv = [*SWEEP_ARGV, "--json", out] if command == "sweep" else ["sweep", "--grid", "full", "--list"]  # 403,200 specs
    code, err = _ctrl_c(tmp_path, argv, delay, times)
    _assert_interrupted(tmp_path, code, err, out)


# -- lows: a 100 KB argument is named, not echoed ---------------------------------------------------
BIG = "x" * 100_000


def _long_argvs(tmp):
    yield ["explain", "--bm", BIG, "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
    yield ["explain", *SEED, "--a", BIG]
    yield ["explain", *SEED, "--dtype", BIG]
    yield ["explain", *SEED, BIG]
    yield [BIG]
    yield ["decode", BIG]
    yield ["decode", "--idesc", BIG]
    yield ["show", *SEED, "--decode", BIG]
    yield ["show", *SEED, "--svg", f"{tmp}/{BIG}"]
    yield ["build", *SEED, "--out", f"{tmp}/{BIG}"]
    yield ["check", f"{tmp}/{BIG}"]
    yield ["sweep", "--grid", BIG]
    yield ["sweep", "--grid", f"{tmp}/{BIG[:200]}.toml"]
    yield ["sweep", "--shard", BIG]
    yield ["sweep", "--json", f"{tmp}/{BIG}"]
    yield ["sweep", "--resume", f"{tmp}/{BIG}"]
    yield ["sweep", "--merge", f"{tmp}/{BIG}"]
    yield ["sweep", "--jobs", BIG]
    yield ["bench", "--shapes", BIG]
    yield ["bench", "--arch", BIG]
    yield ["bench", "--iters", BIG]
    yield ["validate", *SEED, "--arch", BIG]
    yield ["tune", "--arch", BIG]
    yield ["tune", "--json", f"{tmp}/{BIG}"]
    yield ["cache", BIG]


@pytest.mark.parametrize("i", range(25))
def test_a_100kb_argument_is_not_echoed(tmp_path, monkeypatch, i):
    argv = list(_long_argvs(tmp_path))[i]
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = run(argv)
    assert code in (1, 2, 3) and "Traceback" not in err, (code, err[:300])
    assert len(out) + len(err) < 4000, (argv[:3], len(err), err[:300], err[-300:])


def test_a_100kb_grid_value_and_tuning_path_are_not_echoed(tmp_path, monkeypatch):
    code, _, err = run(["sweep", "--grid", grid_file(tmp_path, f'[[product]]\nbm = 128\nbn = 128\nbk = 32\na = "{BIG}"\n'),
                        "--list"])
    assert code == 2 and len(err) < 4000, len(err)
    code, _, err = run(["sweep", "--grid", grid_file(tmp_path, f'[[product]]\n{BIG[:5000]} = 1\n', "u.toml"), "--list"])
    assert code == 2 and len(err) < 4000, len(err)
    monkeypatch.setenv("PTXGEN_TUNING", str(tmp_path / BIG[:200]) * 100)
    code, _, err = run(["bench", "--dtype", "bf16"])
    assert code == 2 and len(err) < 4000, len(err)


# -- lows: messages never name ptxgen's internal temporary files -----------------------------------
def _small_files(limit: int):
    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return cap


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="RLIMIT_FSIZE")
def test_a_failed_write_names_the_output_not_a_temporary_file(tmp_path):
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.compile.buildmemo import build

    build(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"), tmp_path / "warm")  # compiled into the cache before
    for argv, named in ((["show", *SEED, "--svg", tmp_path / "d.svg"], tmp_path / "d.svg"),
                        (["build", *SEED, "--out", tmp_path / "gen"], tmp_path / "gen")):
        r = subprocess.run([sys.executable, "-m", "ptxgen", *map(str, argv)], capture_output=True, text=True, env=_env(),
                           cwd=ROOT, preexec_fn=_small_files(20_000), timeout=300)
        assert r.returncode == 2 and "File too large" in r.stderr, r.stderr[-2000:]
        assert str(named) in r.stderr and ".tmp" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


# -- lows: cache info tells of a cache that cannot be used; PTXGEN_NO_CACHE takes known values only --
def test_cache_info_says_when_the_folder_is_not_a_folder_or_cannot_be_written(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("mine")
    cases = [(tmp_path / "afile", "is not a folder"), (tmp_path / "afile" / "cache", "cannot be created")]
    try:
        import tempfile

        fd, probe = tempfile.mkstemp(dir="/sys")
        os.close(fd)
        os.unlink(probe)
    except OSError:
        cases.append((Path("/sys"), "cannot be written"))  # a folder even root cannot write in
    for folder, fragment in cases:
        monkeypatch.setenv("PTXGEN_CACHE_DIR", str(folder))
        for action in ("info", "clear"):
            code, out, err = run(["cache", action])
            assert code == 1 and fragment in err and str(folder) in err, (folder, action, code, out, err)
    assert (tmp_path / "afile").read_text() == "mine"
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "new" / "cache"))  # the controls: a folder to be made, one made
    code, out, err = run(["cache", "info"])
    assert code == 0 and "not created yet" in out and not (tmp_path / "new").exists(), (out, err)
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    code, out, err = run(["cache", "info"])
    assert code == 0 and not err and "0 entries" in out, (out, err)
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")  # off: where it would be does not matter
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "afile"))
    code, out, err = run(["cache", "info"])
    assert code == 0 and "off" in out, (out, err)


@pytest.mark.parametrize("value", ["maybe", "2", "ture", "nope", "-1"])
def test_no_cache_refuses_a_value_it_does_not_know(monkeypatch, value):
    from ptxgen.runtime.compile import cache
    from ptxgen.status import SettingError

    monkeypatch.setenv("PTXGEN_NO_CACHE", value)
    with pytest.raises(SettingError, match=f"PTXGEN_NO_CACHE={value}"):
        cache.enabled()
    for argv in (["cache", "info"], ["build", *SEED, "--out", "/nonexistent/x"], ["explain", *SEED]):
        code, _, err = run(argv)
        assert code == 2 and f"PTXGEN_NO_CACHE={value}" in err and "Traceback" not in err, (argv, code, err)


@pytest.mark.parametrize("value, on", [(" ", True), ("OFF", True), ("False", True), ("TRUE", False), (" yes ", False),
                                       ("On", False), ("0", True)])
def test_no_cache_takes_its_known_values_in_any_case(monkeypatch, value, on):
    from ptxgen.runtime.compile import cache

    monkeypatch.setenv("PTXGEN_NO_CACHE", value)
    assert cache.enabled() is on


def test_main_called_from_other_code_leaves_sigint_alone(monkeypatch, capsys):
    """Only ``python -m ptxgen`` and the ``ptxgen`` script take over SIGINT: a test or a tool calling ptxgen.cli.main
    keeps its handler and its signal mask (an inherited blocked SIGINT would reach every later child process)."""
    from ptxgen import cli

    before = signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, set())
    monkeypatch.setattr(sys, "argv", ["ptxgen", "explain", *SEED])
    assert cli.main() == 0
    assert (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, set())) == before


def test_the_generator_hash_is_of_sources_not_of_a_compiled_launcher(tmp_path):
    """Shards swept on two machines merge: the launcher extension pip builds into the package (its bytes differ from
    one build to the next) is not part of the generator's hash; its C sources are."""
    import shutil

    from ptxgen.runtime.compile.buildmemo import tree_sha256

    tree = tmp_path / "tree"
    for name in ("ptxgen", "templates"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    roots = (tree / "ptxgen", tree / "templates")
    base = tree_sha256(roots)
    (tree / "ptxgen" / "runtime" / "launch" / "_launcher.abi3.so").write_bytes(os.urandom(64))
    assert tree_sha256(roots) == base
    c = tree / "ptxgen" / "runtime" / "launch" / "_launcher.c"
    c.write_text(c.read_text() + "\n")  # the control: a source changed changes it
    assert tree_sha256(roots) != base


def test_a_ctrl_c_wrapped_by_the_interpreter_is_still_an_interrupt(monkeypatch, capsys):
    """Python 3.11 wraps an exception raised in a descriptor's __set_name__ (a dataclass being made while a command's
    modules load) in RuntimeError; a Ctrl-C there (the CI run of 2026-12-06 at 53d0224 caught one in `ptxgen sweep`)
    exits 130 with no traceback. Control: a RuntimeError of another cause still propagates."""
    from ptxgen import cli

    class Ctrl:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt

    def interrupted(args):
        type("Made", (), {"field": Ctrl()})  # RuntimeError from KeyboardInterrupt on 3.11; KeyboardInterrupt later
        return 0

    monkeypatch.setattr(cli, "cmd_decode", interrupted)
    assert cli.main(["decode", "0x0"]) == 130
    assert "ptxgen: interrupted" in capsys.readouterr().err

    def broken(args):
        raise RuntimeError("not a Ctrl-C")

    monkeypatch.setattr(cli, "cmd_decode", broken)
    with pytest.raises(RuntimeError, match="not a Ctrl-C"):
        cli.main(["decode", "0x0"])


def test_a_ctrl_c_python_cannot_pass_on_exits_130(tmp_path):
    """A KeyboardInterrupt raised in a weakref callback (as in importlib's module-lock callback, which the CI run of
    2026-12-06 at ba48e27 caught) is unraisable: under the command's interruptible phase it exits 130 with
    "ptxgen: interrupted" and no "Exception ignored" report. Control: outside that phase Python reports it and goes on."""
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import signal, sys, weakref\n"
        "from ptxgen import interrupt\n"
        "from ptxgen.ctrlc import exit_interrupted\n"
        "class T: pass\n"
        "def cb(_):\n"
        "    raise KeyboardInterrupt\n"
        "def run():\n"
        "    t = T(); r = weakref.ref(t, cb); del t\n"
        "    print('went on', flush=True)\n"
        "if sys.argv[1] == 'command':\n"
        "    signal.signal(signal.SIGINT, exit_interrupted)\n"
        "    with interrupt.interruptible():\n"
        "        run()\n"
        "else:\n"
        "    run()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(prog), "command"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 130 and "ptxgen: interrupted" in r.stderr and "Exception ignored" not in r.stderr, r
    assert "went on" not in r.stdout
    r = subprocess.run([sys.executable, str(prog), "plain"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "Exception ignored" in r.stderr and "went on" in r.stdout  # the control
