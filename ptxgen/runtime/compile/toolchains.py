"""Other CUDA compilers than the pinned NVRTC: the toolchain matrix (issue 19).

The generated kernels must compile without local memory and with the intended SASS under every supported
CUDA, not only the pinned NVRTC that ``ptxgen build`` uses: CUDA 13.0 put the direct epilogue's tail buffer on the
stack while 13.5 kept it in registers. Each toolchain is an NVRTC from PyPI, installed with
``pip install --target DIR`` (:data:`WHEELS`), and loaded through ctypes in a child process (two NVRTCs of one
major version share a soname; a process of its own keeps them apart). The cubin is disassembled with the pinned
``cuobjdump`` and checked by :func:`ptxgen.runtime.compile.sass.check_sass`, the same gate as ``ptxgen build``.

``PTXGEN_TOOLCHAINS`` names a folder with one ``pip --target`` install per toolchain, named by version
(``12.8``, ``13.0``): ``tools/toolchain_matrix.py --install`` fills it.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The supported toolchains (sm_100a needs CUDA 12.8 or later) and the PyPI wheel that brings each one's NVRTC.
# "pinned" is the NVRTC in pyproject.toml that ptxgen itself compiles with (cuda.bindings, in process).
WHEELS = {
    "12.8": "nvidia-cuda-nvrtc-cu12==12.8.93",
    "12.9": "nvidia-cuda-nvrtc-cu12==12.9.86",
    "13.0": "nvidia-cuda-nvrtc==13.0.88",
}
OLDEST = "12.8"
ENV = "PTXGEN_TOOLCHAINS"


@dataclass(frozen=True)
class Toolchain:
    name: str  # "12.8", ..., or "pinned"
    library: Path | None  # libnvrtc.so.* (None: the pinned NVRTC through cuda.bindings)

    @property
    def pinned(self) -> bool:
        return self.library is None


def find_library(root: Path) -> Path | None:
    """The libnvrtc.so.<major> of a ``pip install --target root`` of an NVRTC wheel."""
    hits = sorted(p for p in root.glob("nvidia/**/lib/libnvrtc.so.*") if ".alt." not in p.name)
    return hits[0] if hits else None


def installed(root: Path | None = None) -> list[Toolchain]:
    """The toolchains under ``root`` (default ``$PTXGEN_TOOLCHAINS``), oldest first; [] when none."""
    root = root or (Path(os.environ[ENV]) if os.environ.get(ENV) else None)
    if root is None or not root.is_dir():
        return []
    out = []
    for name in WHEELS:
        lib = find_library(root / name)
        if lib is not None:
            out.append(Toolchain(name, lib))
    return out


def install(root: Path, names: list[str]) -> list[str]:
    """pip-installs the NVRTC wheel of each toolchain into ``root/<name>`` (skips those already there); returns
    the problems (pip's error messages)."""
    problems = []
    for name in names:
        target = root / name
        if find_library(target) is not None:
            continue
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), WHEELS[name]],
                              capture_output=True, text=True)
        if proc.returncode != 0 or find_library(target) is None:
            problems.append(f"{WHEELS[name]}: {proc.stderr.strip()[-500:]}")
    return problems


# ---- NVRTC through ctypes (runs in the child process) ------------------------------------------------------
def _nvrtc_compile(lib_path: str, source: bytes, name: str, arch: str) -> tuple[str, bytes, str, str]:
    """(ptx, cubin, log, version) from the NVRTC at ``lib_path``; raises RuntimeError with the log on failure."""
    # libnvrtc dlopens its builtins by soname; some wheels set no RPATH to find them beside it: load them first
    for builtins in sorted(Path(lib_path).parent.glob("libnvrtc-builtins.so.*")):
        if ".alt." not in builtins.name:
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(lib_path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source, f"{name}.cu".encode(), 0, None, None)
    if rc:
        raise RuntimeError(f"nvrtcCreateProgram: error {rc}")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"--device-as-default-execution-space"]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if rc:
            raise RuntimeError(f"NVRTC {major.value}.{minor.value} could not compile {name} for {arch}:\n{log}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, ptx)
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, cubin)
        return ptx.value.decode(), cubin.raw, log, f"{major.value}.{minor.value}"
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _child(argv: list[str]) -> int:
    """``python -m ptxgen.runtime.compile.toolchains LIB OUTDIR`` with a JSON list of {name, arch, cu} on stdin: writes
    OUTDIR/<name>.cubin and .ptx, prints one JSON line per kernel ({name, version} or {name, error})."""
    lib, out = argv
    for job in json.load(sys.stdin):
        try:
            ptx, cubin, _, version = _nvrtc_compile(lib, Path(job["cu"]).read_bytes(), job["name"], job["arch"])
            Path(out, job["name"] + ".cubin").write_bytes(cubin)
            Path(out, job["name"] + ".ptx").write_text(ptx)
            print(json.dumps({"name": job["name"], "version": version}), flush=True)
        except RuntimeError as e:
            print(json.dumps({"name": job["name"], "error": str(e)}), flush=True)
    return 0


@dataclass
class Result:
    toolchain: str
    version: str  # what the NVRTC reports
    kernel: str
    problems: list[str]
    local_instructions: int = 0  # LDL/STL
    stack_bytes: int = 0
    summary: str = ""


def compile_and_check(toolchain: Toolchain, specs, workdir: Path, sources: dict[str, str] | None = None) -> list[Result]:
    """Renders each spec (or takes ``sources[kernel_name]``), compiles it with ``toolchain`` and runs the SASS gate
    on the cubin."""
    import re

    from ...derive.tile.layout import derive
    from ...emit.render import render_kernel
    from .sass import check_sass
    from .toolchain import compile_cuda, nvrtc_version, run_tool

    workdir.mkdir(parents=True, exist_ok=True)
    jobs, by_name = [], {}
    for spec in specs:
        cu = workdir / f"{spec.kernel_name}.cu"
        cu.write_text((sources or {}).get(spec.kernel_name) or render_kernel(derive(spec)))
        jobs.append({"name": spec.kernel_name, "arch": spec.arch.value, "cu": str(cu)})
        by_name[spec.kernel_name] = spec
    outcomes = {}
    if toolchain.pinned:
        for j in jobs:
            c = compile_cuda(Path(j["cu"]).read_text(), j["name"], j["arch"])
            (workdir / f"{j['name']}.cubin").write_bytes(c.cubin)
            outcomes[j["name"]] = {"version": nvrtc_version()}
    else:
        proc = subprocess.run([sys.executable, "-m", "ptxgen.runtime.compile.toolchains", str(toolchain.library), str(workdir)],
                              input=json.dumps(jobs), capture_output=True, text=True, env={**os.environ, "PYTHONPATH": _package_parent()})
        for line in proc.stdout.splitlines():
            rec = json.loads(line)
            outcomes[rec["name"]] = rec
        if proc.returncode != 0:
            raise RuntimeError(f"the {toolchain.name} compiler process failed: {proc.stderr.strip()[-2000:]}")
    results = []
    for name, spec in by_name.items():
        rec = outcomes.get(name, {"error": "no answer from the compiler process"})
        if "error" in rec:
            results.append(Result(toolchain.name, rec.get("version", "?"), name, [rec["error"]]))
            continue
        cubin = (workdir / f"{name}.cubin").read_bytes()
        sass = run_tool("cuobjdump", ["--dump-sass"], cubin)
        res = run_tool("cuobjdump", ["--dump-resource-usage"], cubin)
        rep = check_sass(spec, cubin, sass, res)
        local = len(re.findall(r"\b(?:LDL|STL)(?:\.\w+)*\s", sass))
        results.append(Result(toolchain.name, rec["version"], name, list(rep.problems), local, rep.stack_bytes + rep.local_bytes,
                              rep.summary()))
    return results


def _package_parent() -> str:
    parent = str(Path(__file__).resolve().parents[3])
    return os.pathsep.join([parent, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
