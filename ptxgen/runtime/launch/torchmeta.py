"""The compiled launcher's optional metadata reader: ``_torchmeta.cpp``, built against the torch in use.

The compiled hot call (``_launcher_hot.c``) compares a call's tensors with the last hit's: sizes, strides, dtype and
device of ``a``, ``b`` and ``out``, then their data pointers. Through the Python getters (``x.shape``,
``x.stride()``, ``x.dtype``, ``x.get_device()``, ``x.data_ptr()``) that is 15 calls, about 4 us of a ~9 us call
on the H200's host. The reader reads the same fields from the ``at::Tensor`` behind a ``torch.Tensor`` (or
``torch.nn.Parameter``) in a few ns.

It needs torch's C++ headers, which only the installed torch has, so it is built on first use, not at install time:
:func:`start` (called when ptxgen first sees torch) loads it from the cache folder
(``<cache>/torchmeta/torchmeta-<digest>.so``; the digest covers the source, torch's version, build and folder,
Python's version and the compiler) or, where it is not there and a C++ compiler is, builds it in a background thread
(one ``c++`` call, about 10 s of one core) and hands it to the launcher when done. Until then, and wherever it cannot
be built or loaded (no compiler, the cache turned off, ``PTXGEN_TORCH_META=0``), the launcher reads the getters:
the same results, a few us slower. Before it is handed over, the library's records are checked against the
getters on a few tensors (views, offsets, dtypes, 3-D); any difference and it is not used (:func:`status` says
why). A failed build is remembered (``.failed`` beside it, with the compiler's output) so that later processes do
not try again.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from ... import cachedir

SOURCE = Path(__file__).with_name("_torchmeta.cpp")
BUILD_TIMEOUT_S = 300
STALE_LOCK_S = 600  # a build lock older than this is a build that died


class MetaRecord(ctypes.Structure):
    """_torchmeta.cpp's PtxgenTensorMeta (and _launcher.h's TensorMeta)."""

    _fields_ = [("ndim", ctypes.c_int64), ("sizes", ctypes.c_int64 * 3), ("strides", ctypes.c_int64 * 3),
                ("scalar_type", ctypes.c_int32), ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32),
                ("flags", ctypes.c_int32), ("data_ptr", ctypes.c_uint64)]


_LOCK = threading.Lock()
_STATE = {"status": "not started", "thread": None, "lib": None, "path": None, "build_s": None}


def status() -> str:
    """What the reader is doing: 'not started', 'building', 'loaded <path>' (handed to the launcher),
    'off: <why>' or 'failed: <why>'."""
    return _STATE["status"]


def build_seconds() -> float | None:
    """How long this process's build took (None: it did not build)."""
    return _STATE["build_s"]


def _compiler() -> str | None:
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or (cxx if os.path.exists(cxx) else None)
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _torch_dir(torch) -> Path:
    return Path(torch.__file__).resolve().parent


def library_path(torch, compiler: str) -> Path:
    """Where the build for this torch, this Python and this source lives in the cache folder."""
    h = hashlib.sha256()
    for part in (SOURCE.read_bytes(), torch.__version__.encode(), str(getattr(torch.version, "git_version", "")).encode(),
                 str(_torch_dir(torch)).encode(), sys.version.encode(), compiler.encode(),
                 str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", "")).encode()):
        h.update(part)
        h.update(b"\0")
    return cachedir.cache_dir() / "torchmeta" / f"torchmeta-{h.hexdigest()[:20]}.so"


def build_command(torch, compiler: str, out: Path) -> list[str]:
    """The one compiler call: torch's headers and libraries, the CXX11 ABI torch was built with."""
    tdir = _torch_dir(torch)
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [compiler, "-O2", "-std=c++17", "-fPIC", "-shared", "-fvisibility=hidden", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            f"-I{sysconfig.get_paths()['include']}", f"-I{tdir / 'include'}",
            f"-I{tdir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}", str(SOURCE), f"-L{tdir / 'lib'}", "-lc10",
            f"-Wl,-rpath,{tdir / 'lib'}", "-o", str(out)]


def build(torch, compiler: str, path: Path) -> None:
    """Compile into ``path`` (atomically: a temporary file renamed). Raises RuntimeError with the compiler's
    output, after writing it to ``path.failed`` (later processes then do not try again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.so")
    cmd = build_command(torch, compiler, tmp)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        ok, log = r.returncode == 0, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, log = False, f"{type(e).__name__}: {e}"
    if not ok or not tmp.exists():
        tmp.unlink(missing_ok=True)
        path.with_suffix(".failed").write_text(" ".join(cmd) + "\n" + log)
        raise RuntimeError(f"building {SOURCE.name} failed ({path.with_suffix('.failed')})")
    os.replace(tmp, path)


def _self_check(torch, fn) -> str | None:
    """None when the library's record equals the getters on every probe tensor; else what differs."""
    x = torch.arange(7 * 9, dtype=torch.float32).reshape(7, 9)
    h = torch.empty(4, 6, 8, dtype=torch.bfloat16)
    probes = [x, x.t(), x[2:, 3:], x[:, ::2], h, h[1:, :, 2:], h.transpose(1, 2), torch.nn.Parameter(x.clone()),
              torch.empty(0, 5, dtype=torch.float16), x.to(torch.float64)]
    seen_types = {}
    for t in probes:
        rec = MetaRecord()
        if fn(t, ctypes.byref(rec)) != 0:
            return f"declined a plain {tuple(t.shape)} tensor"
        n = rec.ndim
        got = (n, tuple(rec.sizes[:n]), tuple(rec.strides[:n]), rec.device_index, rec.data_ptr)
        want = (t.dim(), tuple(t.shape), t.stride(), t.get_device(), t.data_ptr())
        if got != want or any(rec.sizes[n:]) or any(rec.strides[n:]) or rec.flags:
            return f"read {got} for a tensor whose getters say {want}"
        if seen_types.setdefault(t.dtype, rec.scalar_type) != rec.scalar_type:
            return f"two scalar types for {t.dtype}"
    if len(set(seen_types.values())) != len(seen_types):
        return f"one scalar type for two dtypes: {seen_types}"
    rec = MetaRecord()
    if fn(torch.empty(2, 2, 2, 2), ctypes.byref(rec)) == 0:
        return "described a 4-D tensor (the record holds 3 dimensions)"
    return None


def _load(torch, path: Path, mod) -> str:
    lib = ctypes.PyDLL(str(path))  # PyDLL: the GIL stays held through the self-check's calls
    abi = lib.ptxgen_torch_meta_abi
    abi.restype = ctypes.c_int
    if abi() != ctypes.sizeof(MetaRecord) or mod.meta_abi() != ctypes.sizeof(MetaRecord):
        return f"failed: record size {abi()} (library), {mod.meta_abi()} (launcher), {ctypes.sizeof(MetaRecord)} (here)"
    fn = lib.ptxgen_torch_meta
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.py_object, ctypes.POINTER(MetaRecord)]
    why = _self_check(torch, fn)
    if why is not None:
        return f"failed: self-check: {why}"
    _STATE["lib"] = lib  # never unloaded: the launcher holds its address
    mod.set_meta_reader(ctypes.cast(fn, ctypes.c_void_p).value, (torch.Tensor, torch.nn.Parameter))
    _STATE["path"] = path
    return f"loaded {path}"


def _stale(lock: Path) -> bool:
    """A lock left by a build that died: its process is gone (this machine), or it is older than STALE_LOCK_S."""
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            return True
        pid = int(lock.read_text() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _take_lock(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        if _stale(lock):
            lock.unlink(missing_ok=True)
            return _take_lock(lock)
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _build_and_load(torch, compiler: str, path: Path, mod) -> None:
    try:
        lock = path.with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        if _take_lock(lock):
            try:
                if not path.exists():
                    t0 = time.perf_counter()
                    build(torch, compiler, path)
                    _STATE["build_s"] = time.perf_counter() - t0
            finally:
                lock.unlink(missing_ok=True)
        else:  # another process builds it: wait for its result
            deadline = time.monotonic() + BUILD_TIMEOUT_S
            while lock.exists() and not path.exists() and not _stale(lock) and time.monotonic() < deadline:
                time.sleep(0.5)
        if not path.exists():
            failed = path.with_suffix(".failed")
            _STATE["status"] = f"failed: the build failed ({failed})" if failed.exists() else "failed: no library was built"
            return
        _STATE["status"] = _load(torch, path, mod)
    except Exception as e:  # noqa: BLE001 - optional: the getters serve every call meanwhile
        _STATE["status"] = f"failed: {type(e).__name__}: {e}"


def start(torch, mod, wait: bool = False) -> str:
    """Load the reader for ``torch`` into the compiled launcher ``mod``, building it first in a background thread
    where needed (``wait``: in this thread, or wait for a build under way). Returns :func:`status`."""
    with _LOCK:
        if _STATE["status"] == "not started":
            if os.environ.get("PTXGEN_TORCH_META", "").strip().lower() in ("0", "false", "no", "off"):
                _STATE["status"] = "off: PTXGEN_TORCH_META=0"
            elif not cachedir.enabled():
                _STATE["status"] = "off: the cache is off (PTXGEN_NO_CACHE): nowhere to keep the build"
            elif getattr(mod, "set_meta_reader", None) is None:
                _STATE["status"] = "off: the compiled launcher has no set_meta_reader (an older build)"
            elif sys.platform != "linux":
                _STATE["status"] = "off: built on Linux only"
            else:
                compiler = _compiler()
                if compiler is None:
                    _STATE["status"] = "off: no C++ compiler (c++, g++, clang++ or $CXX)"
                else:
                    path = library_path(torch, compiler)
                    if path.exists():
                        _STATE["status"] = "loading"
                        _build_and_load(torch, compiler, path, mod)
                    elif path.with_suffix(".failed").exists():
                        _STATE["status"] = f"failed: an earlier build failed ({path.with_suffix('.failed')})"
                    else:
                        _STATE["status"] = "building"
                        th = threading.Thread(target=_build_and_load, args=(torch, compiler, path, mod),
                                              name="ptxgen-torchmeta-build", daemon=True)
                        _STATE["thread"] = th
                        th.start()
        th = _STATE["thread"]
    if wait and th is not None:
        th.join()
    return _STATE["status"]
