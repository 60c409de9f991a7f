"""The on-disk cache of compiled kernels (PTX and cubin), shared by processes.

* Key: sha256 of the rendered source, the NVRTC version (and its wheel's version), the cuda-bindings
  version, the arch, the extra NVRTC options and this file's format number.
* Folder (ptxgen.cachedir): ``$PTXGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptxgen``, else ``~/.cache/ptxgen``.
  ``PTXGEN_NO_CACHE=1`` (or true/yes/on) turns the cache off (every compile goes to NVRTC). The same folder
  holds ``toolchain.json`` (see :func:`toolchain_id`) and ``jinja2/``, the templates' bytecode (ptxgen.emit.env).
* Size: at most ``$PTXGEN_CACHE_MAX_BYTES`` (default 4 GiB); past it the least recently used kernels are
  removed (a hit marks its entry used), checked on a process's first write and after each 1/64 of the cap it writes.
  ``ptxgen cache info`` / ``ptxgen cache clear``.
* Entry ``<key>.cubin``: a magic line, a one-line JSON header (the key, sizes, the sha256 of the rest of the header and the payload,
  NVRTC's log), then the PTX and the cubin. An entry whose magic, key, sizes or hash do not check out
  is never used: the kernel is recompiled and the entry rewritten.
* Writes go to a temporary file in the same folder and are renamed over the entry with ``os.replace``
  (atomic on POSIX and Windows): a reader sees a whole old entry, a whole new one, or none. Processes
  that compile the same kernel at once each write a whole entry; the last rename wins and all are equal.
  The cache is best effort: a folder that cannot be written only costs the compile.
* ``builds/``: ``ptxgen build``'s memos of the kernel folders it wrote (ptxgen.runtime.compile.buildmemo); ``clear``
  removes them with the kernels.
* ``clear`` and eviction delete only files with ptxgen's own names (:func:`is_ours`: ``<64 hex>.cubin``,
  ``<64 hex>.sass.json``, ``builds/<64 hex>.json``, temporary files ``.ptxgen-tmp.*.tmp``), regular files, checked
  before each removal: a folder shared with other files (``PTXGEN_CACHE_DIR=/tmp``) keeps them.
* ``<key>.sass.json`` beside an entry: cuobjdump's SASS and resource texts of its cubin, with the key, the cubin's
  sha256 and the texts' sha256; used only when all three check out, else recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...cachedir import cache_dir, enabled
from ...status import SettingError
from .toolchain import Compiled, compile_cuda, nvrtc_version

FORMAT = 2  # 2: the sha256 covers the header too
MAGIC = b"PTXGEN-KERNEL-CACHE 2\n"
SUFFIX = ".cubin"


DEFAULT_MAX_BYTES = 4 << 30  # 4 GiB: about ten thousand kernels (a ~72 KB cubin and a ~335 KB SASS text each)


def max_bytes() -> int:
    """The cache's size cap, ``$PTXGEN_CACHE_MAX_BYTES`` (bytes; K, M, G suffixes of 1024) or 4 GiB."""
    raw = os.environ.get("PTXGEN_CACHE_MAX_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(raw[-1].lower(), 1)
    try:
        value = int(raw[:-1] if scale > 1 else raw) * scale
    except ValueError:
        value = -1
    if value < 0:
        raise SettingError(f"PTXGEN_CACHE_MAX_BYTES={raw}: not a number of bytes (e.g. 4000000000 or 4G)")
    return value


TOOLCHAIN_MEMO = "toolchain.json"
# Environment variables that can change which NVRTC library cuda-bindings loads.
TOOLCHAIN_ENV = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "PATH")


@lru_cache(maxsize=1)
def toolchain_id() -> dict:
    """What besides the source decides the compiler's output: NVRTC's version, its wheel's and cuda-bindings'.

    Asking costs about half a second (importing cuda.bindings, reading the installed packages' metadata), more
    than the rest of a warm ``ptxgen build``, so the answer is kept in the cache folder (``toolchain.json``) under
    a fingerprint of where those packages are installed (:func:`toolchain_fingerprint`); any change of it asks
    again."""
    fingerprint = toolchain_fingerprint()
    memo = cache_dir() / TOOLCHAIN_MEMO if enabled() else None
    if memo is not None:
        try:
            d = json.loads(memo.read_text(encoding="utf-8"))
            if d.get("fingerprint") == fingerprint and isinstance(d.get("ids"), dict):
                return d["ids"]
        except (OSError, ValueError):
            pass
    ids = _ask_toolchain()
    if memo is not None:
        write_atomic(memo, json.dumps({"fingerprint": fingerprint, "ids": ids}, sort_keys=True))
    return ids


def _ask_toolchain() -> dict:
    from importlib import metadata

    ids = {"nvrtc": nvrtc_version()}
    for dist in ("nvidia-cuda-nvrtc", "cuda-bindings"):
        try:
            ids[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return ids


def toolchain_fingerprint() -> list:
    """Where the ``cuda`` (cuda-bindings) and ``nvidia`` (the NVRTC wheel) packages are found, with the modification
    times of those folders and of the folders holding them (site-packages: a package installed, upgraded or removed
    adds or removes its dist-info folder there), the interpreter and ``TOOLCHAIN_ENV``. Finding a namespace package
    imports nothing."""
    import importlib.util

    def mtime(path: str):
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return None

    places = []
    for name in ("cuda", "nvidia"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for loc in sorted(spec.submodule_search_locations or []) if spec is not None else []:
            places.append([name, loc, mtime(loc), mtime(os.path.dirname(loc))])
    return [FORMAT, sys.executable, places, {k: os.environ.get(k) for k in TOOLCHAIN_ENV}]


def write_atomic(path: Path, text: str) -> None:
    """Best effort: a folder that cannot be written only costs asking again next time."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=TMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def cache_key(source: str, arch: str, options: tuple[str, ...] = ()) -> str:
    payload = json.dumps(
        {"format": FORMAT, "source": hashlib.sha256(source.encode()).hexdigest(), "toolchain": toolchain_id(),
         "arch": arch, "options": list(options)},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def entry_path(key: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"{key}{SUFFIX}"


def encode_entry(key: str, compiled: Compiled) -> bytes:
    ptx = compiled.ptx.encode()
    payload = ptx + compiled.cubin
    header = {"key": key, "name": compiled.name, "arch": compiled.arch, "ptx_bytes": len(ptx), "cubin_bytes": len(compiled.cubin),
              "log": compiled.log, "toolchain": toolchain_id()}
    header["sha256"] = _entry_sha256(header, payload)
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def _entry_sha256(header: dict, payload: bytes) -> str:
    """The sha256 of everything the entry says: its header (less this field) and its payload."""
    fields = json.dumps({k: v for k, v in header.items() if k != "sha256"}, sort_keys=True).encode()
    return hashlib.sha256(fields + b"\n" + payload).hexdigest()


def decode_entry(data: bytes, key: str) -> Compiled | None:
    """The entry's kernel, or None if anything about it does not check out."""
    if not data.startswith(MAGIC):
        return None
    line_end = data.find(b"\n", len(MAGIC))
    if line_end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC):line_end])
        if header["key"] != key:
            return None
        payload = data[line_end + 1:]
        n_ptx, n_cubin = int(header["ptx_bytes"]), int(header["cubin_bytes"])
        if len(payload) != n_ptx + n_cubin or _entry_sha256(header, payload) != header["sha256"]:
            return None
        return Compiled(str(header["name"]), str(header["arch"]), payload[:n_ptx].decode(), bytes(payload[n_ptx:]),
                        str(header.get("log", "")))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def load(key: str, folder: Path | None = None) -> Compiled | None:
    path = entry_path(key, folder)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    hit = decode_entry(data, key)
    if hit is not None:
        _touch(path)  # used now: the last to be evicted
    return hit


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


@dataclass(frozen=True)
class Usage:
    folder: Path
    entries: int  # kernels (``.cubin`` entries)
    bytes: int  # every file of ptxgen's in the folder: entries, SASS side files, temporary files


def _groups(folder: Path) -> dict[str, list[Path]]:
    """ptxgen's files at the top of the cache folder by key: ``<key>.cubin``, ``<key>.sass.json``; each temporary file
    of ptxgen's (:func:`is_ours`) a group of its own. Other files (the user's, in a shared folder) are not listed."""
    groups: dict[str, list[Path]] = {}
    try:
        names = list(folder.iterdir())
    except OSError:
        return groups
    for p in names:
        if _regular(p) and _TOP.match(p.name):
            key = p.name.split(".")[0] if p.name.endswith((SUFFIX, SASS_SUFFIX)) else p.name
            groups.setdefault(key, []).append(p)
    return groups


def usage(folder: Path | None = None) -> Usage:
    folder = folder or cache_dir()
    groups = _groups(folder)
    size = 0
    for files in groups.values():
        for p in files:
            try:
                size += p.stat().st_size
            except OSError:
                pass
    return Usage(folder, sum(any(p.name.endswith(SUFFIX) for p in g) for g in groups.values()), size)


_unchecked_bytes: dict[Path, int] = {}  # per folder: bytes this process wrote since it last enforced the cap


def _after_write(folder: Path, size: int) -> None:
    """Enforce the cap after a write: on this process's first write to the folder, then whenever it has written
    another 1/64 of the cap (a full scan of the folder per kernel would cost more than the kernel on big sweeps; the
    cap may be passed by that much per writing process meanwhile)."""
    limit = max_bytes()
    pending = _unchecked_bytes.get(folder)
    if pending is None or pending + size > limit // 64:
        _unchecked_bytes[folder] = 0
        evict(folder, limit)
    else:
        _unchecked_bytes[folder] = pending + size


TMP_SUFFIX = ".tmp"
_HEX64 = "[0-9a-f]{64}"
_TMP = r"\.ptxgen-tmp\.[\w.-]+\.tmp"  # tmp_prefix(...) + mkstemp's random part or a pid + TMP_SUFFIX
# ptxgen's own names (the only files clear and evict remove): entries, SASS side files and temporary files at the top of
# the folder; build memos and their temporary files in builds/. The last two of each: the temporary names of 0.1.0's
# first releases (a 16-hex key and mkstemp's 8 characters; the SASS side file's name and a pid; toolchain.json's).
_TOP = re.compile(rf"(?:{_HEX64}\.cubin|{_HEX64}\.sass\.json|{_TMP}|\.[0-9a-f]{{16}}\.\w{{8}}\.tmp"
                  rf"|\.{_HEX64}\.sass\.json\.\d+\.tmp|\.toolchain\.json\.\w{{8}}\.tmp)\Z", re.ASCII)
_MEMOS = re.compile(rf"(?:{_HEX64}\.json|{_TMP}|\.{_HEX64}\.json\.\w{{8}}\.tmp)\Z", re.ASCII)


def tmp_prefix(name: str) -> str:
    """The start of the name of every temporary file ptxgen writes in the cache folder (then a random part or a pid,
    then TMP_SUFFIX): a name pattern of its own, so that ``clear`` and eviction never take a user's ``*.tmp``."""
    return f".ptxgen-tmp.{name}."


def is_ours(path: Path) -> bool:
    """Whether ``path``'s name is one ptxgen gives the files it writes in the cache folder (``builds/``: the memos)."""
    return bool((_MEMOS if path.parent.name == BUILDS_FOLDER else _TOP).match(path.name))


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove(path: Path) -> None:
    """Delete ``path`` if it is a regular file (not a link) with one of ptxgen's names, checked now."""
    if is_ours(path) and _regular(path):
        try:
            path.unlink()
        except OSError:
            pass


def folder_problem(folder: Path) -> str | None:
    """Why the cache folder cannot be used (None: it can, or it does not exist yet and can be made): not a folder, or
    a folder that cannot be created or written (a temporary file of ptxgen's name is written and removed to know)."""
    probe = folder
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if probe != folder and not probe.is_dir():
        return f"{folder}: cannot be created ({probe} is not a folder)"
    if probe == folder and not folder.is_dir():
        return f"{folder}: is not a folder"
    try:
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix("probe"), suffix=TMP_SUFFIX, dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        return f"{folder}: cannot be {'written' if probe == folder else 'created'} ({e.strerror or e})"
    return None


def evict(folder: Path | None = None, limit: int | None = None) -> int:
    """Remove the least recently used kernels (an entry and its SASS side file together) until the cache holds at
    most ``limit`` bytes (default :func:`max_bytes`); the number of kernels removed."""
    folder = folder or cache_dir()
    limit = max_bytes() if limit is None else limit
    sized = []
    for files in _groups(folder).values():
        try:
            stats = [p.stat() for p in files]
        except OSError:
            continue
        sized.append((max(st.st_mtime for st in stats), sum(st.st_size for st in stats), files))
    total = sum(size for _, size, _ in sized)
    removed = 0
    for _, size, files in sorted(sized, key=lambda x: x[0]):
        if total <= limit:
            break
        for p in files:
            _remove(p)
        total -= size
        removed += 1
    return removed


def store(key: str, compiled: Compiled, folder: Path | None = None) -> Path | None:
    """Write the entry atomically; None if the folder cannot be written."""
    folder = folder or cache_dir()
    path = entry_path(key, folder)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(key[:16]), suffix=TMP_SUFFIX, dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(encode_entry(key, compiled))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _after_write(folder, path.stat().st_size)
        return path
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None


@dataclass(frozen=True)
class CacheResult:
    compiled: Compiled
    key: str
    hit: bool  # read from the cache (no NVRTC run)
    path: Path | None  # the entry, None when the cache is off or could not be written


def compile_cached(source: str, name: str, arch: str, options: tuple[str, ...] = (), folder: Path | None = None) -> CacheResult:
    """:func:`~ptxgen.runtime.compile.toolchain.compile_cuda` through the on-disk cache."""
    options = tuple(options)
    key = cache_key(source, arch, options)
    if not enabled():
        return CacheResult(compile_cuda(source, name, arch, options), key, False, None)
    max_bytes()  # a bad $PTXGEN_CACHE_MAX_BYTES is an error before the compile, not after it
    folder = folder or cache_dir()
    hit = load(key, folder)
    if hit is not None:
        if hit.name != name:  # the same source under another name (names are derived from the spec, so rare)
            hit = Compiled(name, hit.arch, hit.ptx, hit.cubin, hit.log)
        return CacheResult(hit, key, True, entry_path(key, folder))
    compiled = compile_cuda(source, name, arch, options)
    return CacheResult(compiled, key, False, store(key, compiled, folder))


BUILDS_FOLDER = "builds"  # ptxgen build's memos (ptxgen.runtime.compile.buildmemo): <sha256 of the spec>.json, about 1 KB each


def clear(folder: Path | None = None) -> int:
    """Remove every kernel (entries, SASS side files, stray temporary files) and the build memos: the files with
    ptxgen's own names (:func:`is_ours`), checked before each removal; the number of kernels removed. Other files in
    the folder (a user's ``*.tmp`` or ``builds/*.json`` in a shared folder) are left alone."""
    folder = folder or cache_dir()
    try:
        memos = list((folder / BUILDS_FOLDER).iterdir())
    except OSError:
        memos = []
    for p in memos:
        _remove(p)
    n = 0
    for files in _groups(folder).values():
        n += any(p.name.endswith(SUFFIX) for p in files)
        for p in files:
            _remove(p)
    return n


SASS_SUFFIX = ".sass.json"


def _sass_side(res: CacheResult) -> tuple[str, str] | None:
    """The SASS texts kept beside the entry, if they are of this entry's cubin and whole: the file names the key and
    the cubin's sha256 and carries the sha256 of the two texts."""
    try:
        d = json.loads(res.path.with_suffix(SASS_SUFFIX).read_text(encoding="utf-8"))
        dump, resources = d["sass"], d["resources"]
        if (isinstance(dump, str) and isinstance(resources, str) and d["key"] == res.key
                and d["cubin_sha256"] == hashlib.sha256(res.compiled.cubin).hexdigest()
                and d["sha256"] == _texts_sha256(dump, resources)):
            return dump, resources
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _texts_sha256(dump: str, resources: str) -> str:
    return hashlib.sha256(json.dumps([dump, resources]).encode()).hexdigest()


def sass_dumps(res: CacheResult) -> tuple[str, str]:
    """(cuobjdump --dump-sass, --dump-resource-usage) of a cached cubin, kept beside its cache entry: the
    disassembler is the slowest step of a warm `ptxgen build`. The texts are a pure function of the cubin."""
    from .toolchain import run_tool

    side = res.path.with_suffix(SASS_SUFFIX) if res.path is not None else None
    if side is not None and res.hit:
        kept = _sass_side(res)
        if kept is not None:
            return kept
    dump = run_tool("cuobjdump", ["--dump-sass"], res.compiled.cubin)
    resources = run_tool("cuobjdump", ["--dump-resource-usage"], res.compiled.cubin)
    if side is not None:
        tmp = side.with_name(f"{tmp_prefix(side.name)}{os.getpid()}{TMP_SUFFIX}")
        try:
            tmp.write_text(json.dumps({"key": res.key, "cubin_sha256": hashlib.sha256(res.compiled.cubin).hexdigest(),
                                       "sha256": _texts_sha256(dump, resources), "sass": dump, "resources": resources}),
                           encoding="utf-8")
            os.replace(tmp, side)
            _after_write(side.parent, side.stat().st_size)
        except OSError:
            tmp.unlink(missing_ok=True)
    return dump, resources
