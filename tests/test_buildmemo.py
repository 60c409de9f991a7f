"""The build memo (ptxgen.runtime.compile.buildmemo): a second ``ptxgen build`` of a spec whose kernel folder is already what
the build would write reuses it, prints the same lines and exits the same; anything that could change what the
build writes or reports (the generator's code, a template, the toolchain, the libraries, the folder's files) makes
it build again. Whether the build ran is seen by counting calls of the full build (or, across processes, by the
kernel folder's inode: a full build swaps in a new folder), never by timing."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.generated import KERNEL_FILES, ForeignFilesError
from ptxgen.emit.sources import template_dir
from ptxgen.runtime.compile import artifacts, buildmemo, cache
from ptxgen.status import SettingError

SEED = dict(bm=128, bn=128, bk=32, a="kmajor-sw64")
SEED_FLAGS = ["--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def full_builds(monkeypatch):
    """The list of specs the full build ran for (the build itself still runs)."""
    ran = []
    real = artifacts.build

    def counting(spec, out_root):
        ran.append(spec.kernel_name)
        return real(spec, out_root)

    monkeypatch.setattr(artifacts, "build", counting)
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    monkeypatch.delenv("PTXGEN_CACHE_MAX_BYTES", raising=False)
    return ran


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _built(tmp_path, full_builds):
    spec = make_spec(**SEED)
    first = buildmemo.build(spec, tmp_path / "out")
    assert full_builds == [spec.kernel_name]
    return spec, first, _files(first.dir)


def test_a_current_folder_is_reused_with_the_same_report(tmp_path, full_builds):
    spec, first, files = _built(tmp_path, full_builds)
    again = buildmemo.build(spec, tmp_path / "out")
    assert full_builds == [spec.kernel_name]  # no second full build
    assert again == first and _files(again.dir) == files
    assert json.dumps(again.layout) == json.dumps(first.layout)  # the --json text, key order included
    # control: another output folder has no kernel folder yet, so the build runs (and writes the same bytes)
    other = buildmemo.build(spec, tmp_path / "other")
    assert full_builds == [spec.kernel_name] * 2 and _files(other.dir) == files


@pytest.mark.parametrize("damage", ["edit", "remove", "extra", "link", "chmod", "folder-link", "memo"])
def test_a_changed_folder_or_memo_builds_again(tmp_path, full_builds, damage):
    spec, first, files = _built(tmp_path, full_builds)
    d = first.dir
    if damage == "edit":
        with open(d / "kernel.cu", "a") as f:
            f.write("// edited\n")
    elif damage == "remove":
        (d / "layout.svg").unlink()
    elif damage in ("extra", "link", "folder-link"):  # files the build did not write: refused, never replaced
        if damage == "extra":
            (d / "notes.txt").write_text("mine\n")
        elif damage == "link":  # same bytes, but a link where the build writes a file
            (tmp_path / "copy.cu").write_bytes(files["kernel.cu"])
            (d / "kernel.cu").unlink()
            (d / "kernel.cu").symlink_to(tmp_path / "copy.cu")
        else:
            shutil.move(str(d), str(tmp_path / "moved"))
            d.symlink_to(tmp_path / "moved", target_is_directory=True)
        with pytest.raises(ForeignFilesError):
            buildmemo.build(spec, tmp_path / "out")
        assert full_builds == [spec.kernel_name], "refused before any work"
        assert damage != "extra" or (d / "notes.txt").read_text() == "mine\n"
        return
    elif damage == "chmod":
        (d / "kernel.ptx").chmod(0o444)
    elif damage == "memo":
        memo = buildmemo._memo_path(json.dumps(spec.to_json(), sort_keys=True))
        memo.write_text("{not json")
    again = buildmemo.build(spec, tmp_path / "out")
    assert full_builds == [spec.kernel_name] * 2, damage
    assert again == first
    assert not d.is_symlink() and _files(d) == files, damage  # the build's folder, exactly, again
    assert all(not (d / n).is_symlink() for n in KERNEL_FILES)


def test_any_change_of_the_inputs_builds_again(tmp_path, full_builds, monkeypatch):
    spec, first, _ = _built(tmp_path, full_builds)
    real = buildmemo.inputs()
    monkeypatch.setattr(buildmemo, "inputs", lambda: {**real, "generator": "0" * 64})
    assert buildmemo.build(spec, tmp_path / "out") == first and len(full_builds) == 2
    assert buildmemo.build(spec, tmp_path / "out") == first and len(full_builds) == 2  # the new memo holds
    monkeypatch.setattr(buildmemo, "inputs", lambda: real)
    assert buildmemo.build(spec, tmp_path / "out") == first and len(full_builds) == 3


def test_the_inputs_follow_the_toolchain_and_the_libraries(tmp_path, monkeypatch):
    base = buildmemo.inputs()
    assert buildmemo.inputs() == base  # control: nothing changed, nothing differs
    monkeypatch.setattr(cache, "toolchain_id", lambda: {**base["toolchain"], "nvrtc": "99.9"})
    assert buildmemo.inputs()["toolchain"] != base["toolchain"]
    monkeypatch.undo()
    lib = tmp_path / "site" / "fakelib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(buildmemo, "THIRD_PARTY", ("fakelib",))
    before = buildmemo.inputs()["libraries"]
    assert before and before[0][:2] == ["fakelib", str(lib)]
    os.utime(lib, ns=(1, 1))  # as an upgrade that adds or removes a file changes the folder's time
    assert buildmemo.inputs()["libraries"] != before


def test_the_generator_hash_covers_the_package_and_the_templates():
    package, templates = buildmemo.generator_roots()
    assert (package / "cli.py").is_file() and (package / "runtime" / "compile" / "buildmemo.py").is_file()
    assert templates == template_dir() and any(templates.glob("*.j2"))


@pytest.mark.parametrize("where", ["ptxgen/emit/render.py", "ptxgen/derive/tile/rules.py", "templates/common.cuh.j2",
                                   "ptxgen/tuning/h200.json"])
def test_the_generator_hash_changes_with_any_byte_of_the_generator(tmp_path, where):
    tree = tmp_path / "tree"
    for name in ("ptxgen", "templates"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    roots = (tree / "ptxgen", tree / "templates")
    base = buildmemo.tree_sha256(roots)
    assert buildmemo.tree_sha256(roots) == base  # control: the same tree, the same hash
    assert base == buildmemo.tree_sha256(buildmemo.generator_roots())  # the copy is the generator's tree
    path = tree / where
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit of one file
    assert buildmemo.tree_sha256(roots) != base, where
    path.write_bytes(data)
    assert buildmemo.tree_sha256(roots) == base
    (path.parent / "new.py").write_text("")  # a file added counts too
    assert buildmemo.tree_sha256(roots) != base


def test_no_cache_builds_every_time_and_keeps_no_memo(tmp_path, full_builds, monkeypatch):
    spec = make_spec(**SEED)
    done = artifacts.build(spec, tmp_path / "out")  # (with the cache: no NVRTC run here)
    memo = buildmemo._memo_path(json.dumps(spec.to_json(), sort_keys=True))
    memo.unlink(missing_ok=True)
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    monkeypatch.setattr(artifacts, "build", lambda spec, out: full_builds.append(spec.kernel_name) or done)
    buildmemo.build(spec, tmp_path / "out")
    buildmemo.build(spec, tmp_path / "out")
    assert len(full_builds) == 3 and not memo.exists()  # the folder was current, yet each build ran


def test_a_bad_cache_cap_is_an_error_though_the_folder_is_current(tmp_path, full_builds, monkeypatch):
    spec, _, _ = _built(tmp_path, full_builds)
    monkeypatch.setenv("PTXGEN_CACHE_MAX_BYTES", "lots")
    with pytest.raises(SettingError):
        buildmemo.build(spec, tmp_path / "out")


def test_cache_clear_removes_the_memos(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    (folder / cache.BUILDS_FOLDER).mkdir(parents=True)
    (folder / cache.BUILDS_FOLDER / ("ab" * 32 + ".json")).write_text("{}")
    (folder / "mine.txt").write_text("stays")
    cache.clear(folder)
    assert list((folder / cache.BUILDS_FOLDER).iterdir()) == [] and (folder / "mine.txt").exists()


def _cli(out: Path, *extra: str) -> tuple[int, str, str]:
    """``ptxgen build`` of the seed tile into ``out``, with a cache folder of its own beside it (the suite's shared
    cache is written by tests running in parallel: nothing there may decide whether this memo is still present)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PTXGEN_CACHE_DIR": str(out.parent / "cache")}
    env.pop("PTXGEN_NO_CACHE", None)
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "build", *SEED_FLAGS, "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_the_command_prints_the_same_when_it_reuses_the_folder(tmp_path, extra):
    first = _cli(tmp_path / "out", *extra)  # a new --out: the whole build
    kernel = next((tmp_path / "out").iterdir())
    inode, files = kernel.stat().st_ino, _files(kernel)
    second = _cli(tmp_path / "out", *extra)
    assert first[0] == 0 and second == first
    assert kernel.stat().st_ino == inode and _files(kernel) == files  # reused: the same folder, not a new one
    (kernel / "layout.svg").write_text("hand edit\n")  # control: a changed folder is built again
    assert _cli(tmp_path / "out", *extra) == first
    assert kernel.stat().st_ino != inode and _files(kernel) == files


def test_the_modes_are_those_of_a_fresh_write_under_the_umask(tmp_path, full_builds):
    """A folder written under umask 027 is reused under 027; under 022 a fresh write would give other modes, so the
    build runs again (and the folder gets them)."""
    old = os.umask(0o027)
    try:
        assert buildmemo._umask() == 0o027
        spec, first, files = _built(tmp_path, full_builds)
        assert (first.dir / "kernel.cu").stat().st_mode & 0o777 == 0o640
        buildmemo.build(spec, tmp_path / "out")
        assert len(full_builds) == 1
        os.umask(0o022)
        buildmemo.build(spec, tmp_path / "out")
        assert len(full_builds) == 2 and (first.dir / "kernel.cu").stat().st_mode & 0o777 == 0o644
        assert _files(first.dir) == files
    finally:
        os.umask(old)
