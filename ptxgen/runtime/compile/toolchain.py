"""NVIDIA's compilers and binary tools, from PyPI wheels only (never a system CUDA).

* NVRTC through ``cuda.bindings.nvrtc`` (works with no GPU and no driver);
* CUDA headers from the ``nvidia-cuda-runtime`` wheel (passed to NVRTC as an include path);
* ``cuobjdump`` / ``nvdisasm`` from the ``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` wheels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


class ToolchainError(RuntimeError):
    pass


class CompileError(RuntimeError):
    """NVRTC rejected the source; ``log`` holds its messages."""

    def __init__(self, name: str, arch: str, log: str):
        self.log = log
        super().__init__(f"NVRTC could not compile {name} for {arch}:\n{log}")


def _nvidia_roots() -> list[Path]:
    try:
        import nvidia  # namespace package that the NVIDIA wheels install into
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def _find(rel_paths: list[str]) -> Path | None:
    for root in _nvidia_roots():
        for rel in rel_paths:
            p = root / rel
            if p.exists():
                return p
    return None


@lru_cache(maxsize=1)
def cuda_include_dir() -> Path:
    p = _find(["cu13/include/cuda_runtime.h", "cuda_runtime/include/cuda_runtime.h", "cu12/include/cuda_runtime.h"])
    if p is None:
        raise ToolchainError("CUDA headers not found: pip install nvidia-cuda-runtime")
    return p.parent


@lru_cache(maxsize=None)
def tool(name: str) -> Path:
    p = _find([f"cu13/bin/{name}", f"cuda_cuobjdump/bin/{name}", f"cuda_nvdisasm/bin/{name}", f"cu12/bin/{name}", f"cuda_nvcc/bin/{name}"])
    if p is None:
        p = _system_tool(name)
    if p is None:
        raise ToolchainError(f"{name} not found: pip install nvidia-cuda-{name.lower()} (or put a CUDA toolkit's bin on PATH)")
    if not os.access(p, os.X_OK):
        p.chmod(p.stat().st_mode | 0o111)
    return p


def _system_tool(name: str) -> Path | None:
    """A CUDA toolkit's ``name`` where no PyPI wheel has one: on ``PATH``, else under ``$CUDA_HOME``/``$CUDA_PATH``
    or /usr/local/cuda (the H200 image has nvcc 13.0's tools there and no wheel)."""
    found = shutil.which(name)
    if found:
        return Path(found)
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        p = Path(root) / "bin" / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def _check(result, what: str):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(f"{what}: {err}")
    return result[1:]


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


@dataclass(frozen=True)
class Compiled:
    name: str
    arch: str
    ptx: str
    cubin: bytes
    log: str


def compile_cuda(source: str, name: str, arch: str, extra_options: tuple[str, ...] = ()) -> Compiled:
    """C++ -> PTX and cubin for ``arch`` (``sm_100a`` or ``sm_90a``) with NVRTC; no GPU needed."""
    from cuda.bindings import nvrtc

    (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"--device-as-default-execution-space"]
        try:  # the generated kernels include no headers; user code compiled through here may
            opts.append(f"--include-path={cuda_include_dir()}".encode())
        except ToolchainError:
            pass
        opts += [o.encode() for o in extra_options]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        (size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log_buf = bytearray(size)  # writable buffers: an immutable bytes of length 1 is shared, NVRTC would overwrite it
        nvrtc.nvrtcGetProgramLog(prog, log_buf)
        log = log_buf.rstrip(b"\0 ").decode(errors="replace")
        if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(name, arch, log)
        (size,) = _check(nvrtc.nvrtcGetPTXSize(prog), "ptx size")
        ptx = bytearray(size)
        _check(nvrtc.nvrtcGetPTX(prog, ptx), "get ptx")
        (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        cubin = bytearray(size)
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "get cubin")
        return Compiled(name, arch, ptx.rstrip(b"\0").decode(), bytes(cubin), log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def link_ptx(ptx: str, arch: str) -> bytes:
    """PTX -> cubin with nvJitLink (a second assembly path, independent of NVRTC's own cubin)."""
    from cuda.bindings import nvjitlink

    opts = [f"-arch={arch}", "-O3"]
    handle = nvjitlink.create(len(opts), opts)
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise CompileError("kernel.ptx", arch, f"nvJitLink: {e}\n{log.decode(errors='replace')}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


def run_tool(name: str, args: list[str], data: bytes, suffix: str = ".cubin") -> str:
    """Run cuobjdump/nvdisasm on ``data``. On Linux the input is an anonymous in-memory file (memfd) the tool opens
    as /proc/self/fd/N: a process killed meanwhile (a sweep worker, Ctrl-C) leaves no file behind. Elsewhere, a
    temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(f"ptxgen-input{suffix}")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
            return _tool_output(name, args, [str(tool(name)), *args, f"/proc/self/fd/{fd}"], pass_fds=(fd,))
        finally:
            os.close(fd)
    with tempfile.TemporaryDirectory(prefix="ptxgen-") as d:
        path = Path(d) / f"input{suffix}"
        path.write_bytes(data)
        return _tool_output(name, args, [str(tool(name)), *args, str(path)])


def _tool_output(name: str, args: list[str], argv: list[str], **kw) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise ToolchainError(f"{name} {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout
