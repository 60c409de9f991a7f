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
HUGE = "[[product]]\n" + "".join(f"{f} = [{', '.join(map(str, range(64, 64 + 8 * 30, 8)))}]\n" for f in ("bm", "bn", "bk")) + \
    'a = "kmajor-sw64"\nstages = [' + ", ".join(map(str, range(1, 41))) + "]\n"  # 30^3 x 40 = 1,080,000


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

    from ptxgen.runtime import cache
    from ptxgen.runtime.toolchain import Compiled

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
    from ptxgen.runtime import cache

    _user_files(tmp_path)
    assert cache.usage(tmp_path).bytes == 0 and cache.usage(tmp_path).entries == 0


def test_every_file_ptxgen_writes_in_the_cache_is_its_own(tmp_path):
    """A control: the name patterns recognise every file the writers make (entries, SASS side files, memos, temporary
    files), so clear removes them all."""
    from ptxgen.runtime import cache

    for name in ("ab" * 32 + ".cubin", "ab" * 32 + ".sass.json", "builds/" + "ab" * 32 + ".json"):
        assert cache.is_ours(tmp_path / name), name
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=cache.tmp_prefix("ab" * 8), suffix=cache.TMP_SUFFIX, dir=tmp_path)
    os.close(fd)
    assert cache.is_ours(Path(tmp)) and not cache.is_ours(tmp_path / "x.tmp")
    assert not cache.is_ours(tmp_path / "builds" / "user.json") and not cache.is_ours(tmp_path / "toolchain.json.bak")
