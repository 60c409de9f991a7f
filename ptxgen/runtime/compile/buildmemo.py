"""``ptxgen build`` without redoing a build whose kernel folder is already what it would write (the build memo).

A build renders the kernel (jinja2), draws the SVG (numpy, through the read model), reads the compiled kernel and
its SASS from the cache and checks the SASS: on a warm run, loading the code for those steps costs more than
the steps. So each successful build leaves a memo in the cache folder (``builds/<sha256 of the spec>.json``, see
ptxgen.cachedir): the spec, what the output depends on besides the spec, the sha256 of each file it wrote, and
what it printed about the SASS. The next build of that spec prints the same lines and writes nothing when

* the memo's spec and its ``inputs`` equal this run's (:func:`inputs`): a sha256 of every file of the ptxgen
  package and of its templates (any edit of the generator or a template counts, whatever it changes), the
  Python version, where jinja2, MarkupSafe and numpy are installed (with the modification times of those folders
  and of the folders holding them: an install, upgrade or removal changes them), and the toolchain's versions and
  fingerprint (ptxgen.runtime.compile.cache.toolchain_id and toolchain_fingerprint: NVRTC, its wheel, cuda-bindings);
* the kernel folder holds exactly the files a build writes, each a regular file (not a link) with the mode a
  fresh write gives it and the bytes the memo names; the folder is a real folder (not a link) with a fresh
  folder's mode, in a writable ``--out``.

Anything else (no memo, another generator, a file edited, added or removed, ``PTXGEN_NO_CACHE``) runs the whole
build, which writes the folder and the memo anew. The memo only ever skips work whose result is already on disk
byte for byte; tests/test_buildmemo.py checks that each of those inputs, changed, makes the build run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ...cachedir import cache_dir, enabled
from ...emit.generated import KERNEL_FILES, check_kernel_dir
from ...emit.sources import template_dir
from . import cache

FORMAT = 1
THIRD_PARTY = ("jinja2", "markupsafe", "numpy")  # the libraries whose code shapes the written files


@dataclass(frozen=True)
class BuildResult:
    """What ``ptxgen build`` reports: the folder, its files and the SASS check (as ``--json`` prints it)."""

    kernel_name: str
    dir: Path
    files: tuple[str, ...]
    sass: dict  # ok, opcode, mma_per_iteration, registers, local_bytes, problems
    sass_summary: str
    layout: dict

    @property
    def ok(self) -> bool:
        return bool(self.sass["ok"])


def build(spec, out_root: Path) -> BuildResult:
    """The kernel folder of ``spec`` under ``out_root``: reused when the memo shows it is current, else built
    (ptxgen.runtime.compile.artifacts.build) and remembered. Raises what the build raises (CompileError, OSError)."""
    spec_json = json.dumps(spec.to_json(), sort_keys=True)
    memo_path = _memo_path(spec_json) if enabled() else None
    if memo_path is not None:
        cache.max_bytes()  # a bad $PTXGEN_CACHE_MAX_BYTES is an error (exit 2) whether or not the compile is needed
        hit = _reuse(memo_path, spec_json, out_root / spec.kernel_name)
        if hit is not None:
            return hit
    from .artifacts import build as full_build

    check_kernel_dir(out_root / spec.kernel_name)  # files the user put there: refused before any work
    path, art = full_build(spec, out_root)
    rep = art.sass
    result = BuildResult(
        spec.kernel_name, path, tuple(sorted(art.files)),
        {"ok": rep.ok, "opcode": rep.opcode, "mma_per_iteration": rep.mma_in_loop, "registers": rep.registers,
         "local_bytes": rep.local_bytes, "problems": rep.problems},
        rep.summary(), art.layout.to_json())
    if memo_path is not None:
        written = {name: _sha256(art.files[name].encode("utf-8")) for name in KERNEL_FILES}
        _remember(memo_path, spec_json, result, written)
    return result


def _memo_path(spec_json: str) -> Path:
    return cache_dir() / cache.BUILDS_FOLDER / f"{hashlib.sha256(spec_json.encode()).hexdigest()}.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def inputs() -> dict:
    """Everything besides the spec that decides a build's files and its SASS report (see the module's docstring)."""
    return {"format": FORMAT, "generator": _generator_sha256(), "python": sys.version, "libraries": _libraries(),
            "toolchain": cache.toolchain_id(), "toolchain_fingerprint": cache.toolchain_fingerprint()}


def generator_roots() -> tuple[Path, Path]:
    """The folders whose files make the generator: the ptxgen package and its templates."""
    return Path(__file__).resolve().parents[2], template_dir()


def _generator_sha256() -> str:
    """Read anew on each call (a few milliseconds): a template edited while a process runs counts too."""
    return tree_sha256(generator_roots())


COMPILED_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".pyc", ".o")  # built from the sources, not sources


def tree_sha256(roots) -> str:
    """sha256 over every source file under ``roots`` (relative names and bytes, in sorted order; no __pycache__, no
    compiled file: the launcher extension ``pip install`` builds into the package differs from machine to machine, and
    its C sources are hashed)."""
    h = hashlib.sha256()
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(n for n in names if not n.endswith(COMPILED_SUFFIXES)):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    data = f.read()
                h.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode())
                h.update(data)
        h.update(b"\0root\0")
    return h.hexdigest()


def _libraries() -> list:
    """Where each library of THIRD_PARTY is found, with the modification times of its folder and of the folder
    holding it (finding a package imports nothing)."""
    import importlib.util

    def mtime(path: str):
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return None

    found = []
    for name in THIRD_PARTY:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for loc in sorted(spec.submodule_search_locations or []) if spec is not None else []:
            found.append([name, loc, mtime(loc), mtime(os.path.dirname(loc))])
    return found


def _umask() -> int:
    """The process's umask: read from /proc on Linux (setting it, the only portable way to read it, would change it
    for a moment under other threads that create files), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _reuse(memo_path: Path, spec_json: str, dest: Path) -> BuildResult | None:
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        if memo.get("format") != FORMAT or memo.get("spec") != spec_json:
            return None
        want = memo["files"]
        if sorted(want) != sorted(KERNEL_FILES) or not os.access(dest.parent, os.W_OK):
            return None
        mask = _umask()  # a fresh folder and its files get modes 0o777 and 0o666 less the umask
        st = os.lstat(dest)
        if not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o777 & ~mask or sorted(os.listdir(dest)) != sorted(want):
            return None
        texts = {}
        for name, digest in want.items():
            path = dest / name
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o666 & ~mask:
                return None
            data = path.read_bytes()
            if _sha256(data) != digest:
                return None
            texts[name] = data
        if memo.get("inputs") != json.loads(json.dumps(inputs())):  # compared as they were stored (lists for tuples)
            return None
        layout = json.loads(texts["layout.json"])
        layout.pop("_generated")
        return BuildResult(memo["kernel_name"], dest, tuple(memo["listed"]), memo["sass"], memo["sass_summary"], layout)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _remember(memo_path: Path, spec_json: str, result: BuildResult, written: dict[str, str]) -> None:
    memo = {"format": FORMAT, "spec": spec_json, "inputs": inputs(), "kernel_name": result.kernel_name,
            "files": written, "listed": list(result.files), "sass": result.sass, "sass_summary": result.sass_summary}
    cache.write_atomic(memo_path, json.dumps(memo))  # key order kept: the SASS dict is printed in its order
