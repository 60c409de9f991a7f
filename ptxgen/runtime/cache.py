"""The on-disk cache of compiled kernels (PTX and cubin), shared by processes.

* Key: sha256 of the rendered source, the NVRTC version (and its wheel's version), the cuda-bindings
  version, the arch, the extra NVRTC options and this file's format number.
* Folder: ``$PTXGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptxgen``, else ``~/.cache/ptxgen``.
  ``PTXGEN_NO_CACHE=1`` turns the cache off (every compile goes to NVRTC).
* Entry ``<key>.cubin``: a magic line, a one-line JSON header (the key, sizes, the payload's sha256,
  NVRTC's log), then the PTX and the cubin. An entry whose magic, key, sizes or hash do not check out
  is never used: the kernel is recompiled and the entry rewritten.
* Writes go to a temporary file in the same folder and are renamed over the entry with ``os.replace``
  (atomic on POSIX and Windows): a reader sees a whole old entry, a whole new one, or none. Processes
  that compile the same kernel at once each write a whole entry; the last rename wins and all are equal.
  The cache is best effort: a folder that cannot be written only costs the compile.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .toolchain import Compiled, compile_cuda, nvrtc_version

FORMAT = 1
MAGIC = b"PTXGEN-KERNEL-CACHE 1\n"
SUFFIX = ".cubin"


def cache_dir() -> Path:
    env = os.environ.get("PTXGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptxgen"


def enabled() -> bool:
    return os.environ.get("PTXGEN_NO_CACHE", "") in ("", "0")


@lru_cache(maxsize=1)
def toolchain_id() -> dict:
    """What besides the source decides the compiler's output."""
    from importlib import metadata

    ids = {"nvrtc": nvrtc_version()}
    for dist in ("nvidia-cuda-nvrtc", "cuda-bindings"):
        try:
            ids[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return ids


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
              "sha256": hashlib.sha256(payload).hexdigest(), "log": compiled.log, "toolchain": toolchain_id()}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


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
        if len(payload) != n_ptx + n_cubin or hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        return Compiled(str(header["name"]), str(header["arch"]), payload[:n_ptx].decode(), bytes(payload[n_ptx:]),
                        str(header.get("log", "")))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def load(key: str, folder: Path | None = None) -> Compiled | None:
    try:
        data = entry_path(key, folder).read_bytes()
    except OSError:
        return None
    return decode_entry(data, key)


def store(key: str, compiled: Compiled, folder: Path | None = None) -> Path | None:
    """Write the entry atomically; None if the folder cannot be written."""
    folder = folder or cache_dir()
    path = entry_path(key, folder)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(encode_entry(key, compiled))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
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
    """:func:`~ptxgen.runtime.toolchain.compile_cuda` through the on-disk cache."""
    options = tuple(options)
    key = cache_key(source, arch, options)
    if not enabled():
        return CacheResult(compile_cuda(source, name, arch, options), key, False, None)
    folder = folder or cache_dir()
    hit = load(key, folder)
    if hit is not None:
        if hit.name != name:  # the same source under another name (names are derived from the spec, so rare)
            hit = Compiled(name, hit.arch, hit.ptx, hit.cubin, hit.log)
        return CacheResult(hit, key, True, entry_path(key, folder))
    compiled = compile_cuda(source, name, arch, options)
    return CacheResult(compiled, key, False, store(key, compiled, folder))


def clear(folder: Path | None = None) -> int:
    """Remove every entry (and stray temporary file); the number of files removed."""
    folder = folder or cache_dir()
    n = 0
    for p in list(folder.glob(f"*{SUFFIX}")) + list(folder.glob(".*.tmp")):
        try:
            p.unlink()
            n += 1
        except OSError:
            pass
    return n


def sass_dumps(res: CacheResult) -> tuple[str, str]:
    """(cuobjdump --dump-sass, --dump-resource-usage) of a cached cubin, kept beside its cache entry: the
    disassembler is the slowest step of a warm `ptxgen build`. The texts are a pure function of the cubin."""
    from .toolchain import run_tool

    side = res.path.with_suffix(".sass.json") if res.path is not None else None
    if side is not None and res.hit:
        try:
            d = json.loads(side.read_text(encoding="utf-8"))
            if d.get("key") == res.key:
                return d["sass"], d["resources"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    dump = run_tool("cuobjdump", ["--dump-sass"], res.compiled.cubin)
    resources = run_tool("cuobjdump", ["--dump-resource-usage"], res.compiled.cubin)
    if side is not None:
        try:
            tmp = side.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": res.key, "sass": dump, "resources": resources}), encoding="utf-8")
            os.replace(tmp, side)
        except OSError:
            pass
    return dump, resources
