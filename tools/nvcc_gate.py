#!/usr/bin/env python3
"""The SASS gate under a given nvcc (or, with --nvrtc, the NVRTC that cuda-python loads on this machine) (issue 19: "no local memory under CUDA 13.0's nvcc"): every sm_100a kernel under
generated/ and every Nth sm_100a configuration of the ci grid, rendered, compiled by nvcc (not NVRTC) to a cubin
for sm_100a, and checked by the same gate as `ptxgen build` (ptxgen.runtime.compile.sass.check_sass: the intended MMA
instructions in the main loop, LDTM, no LDL/STL, no local memory or stack).

    python tools/nvcc_gate.py [--nvcc /usr/local/cuda/bin/nvcc] [--ci-every 4] [--jobs 16] [--json OUT]
    python tools/nvcc_gate.py --nvrtc --cuobjdump /usr/local/cuda/bin/cuobjdump [--ci-every 1] [--jobs 16]

Prints one line per kernel and a summary; exit 1 when any kernel fails to compile or fails the gate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptxgen.derive.tile.kernel import plan_kernel  # noqa: E402
from ptxgen.derive.tile.spec import TileSpec  # noqa: E402
from ptxgen.emit.generated import kernel_dirs, read_layout_json  # noqa: E402
from ptxgen.emit.render import render_kernel  # noqa: E402
from ptxgen.runtime.compile.sass import check_sass  # noqa: E402


def kernels(ci_every: int) -> list[TileSpec]:
    specs = [TileSpec.from_json(read_layout_json(d)["spec"]) for d in kernel_dirs(ROOT / "generated")]
    if ci_every:
        from ptxgen.sweep import load_grid

        specs += [s for s in load_grid("ci").specs if s.arch.value == "sm_100a"][::ci_every]
    seen, out = set(), []
    for s in specs:
        if s.arch.value == "sm_100a" and s.kernel_name not in seen:
            seen.add(s.kernel_name)
            out.append(s)
    return out


def _nvrtc_cubin(spec_json: dict, path: str) -> str:
    """In a worker process: render and compile with NVRTC (ptxgen.runtime.compile.toolchain.compile_cuda); '' or the error."""
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = TileSpec.from_json(spec_json)
    try:
        Path(path).write_bytes(compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, spec.arch.value).cubin)
        return ""
    except Exception as e:  # noqa: BLE001 - reported per kernel
        return f"NVRTC: {type(e).__name__}: {str(e)[-600:]}"


def one(nvcc: str | None, cuobjdump: str, spec: TileSpec, work: Path, pool=None) -> dict:
    cu, cubin = work / f"{spec.kernel_name}.cu", work / f"{spec.kernel_name}.cubin"
    if nvcc is None:
        err = pool.submit(_nvrtc_cubin, spec.to_json(), str(cubin)).result()
        if err:
            return {"kernel": spec.kernel_name, "ok": False, "problems": [err]}
    else:
        cu.write_text(render_kernel(plan_kernel(spec)))
        proc = subprocess.run([nvcc, "-gencode=arch=compute_100a,code=sm_100a", "-std=c++17", "-cubin", "-o", str(cubin), str(cu)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return {"kernel": spec.kernel_name, "ok": False, "problems": [f"nvcc exit {proc.returncode}: {proc.stderr.strip()[-600:]}"]}
    dump = [subprocess.run([cuobjdump, flag, str(cubin)], capture_output=True, text=True, check=True).stdout
            for flag in ("--dump-sass", "--dump-resource-usage")]
    rep = check_sass(spec, cubin.read_bytes(), dump[0], dump[1])
    return {"kernel": spec.kernel_name, "ok": rep.ok, "problems": list(rep.problems), "registers": rep.registers,
            "local_bytes": rep.local_bytes, "stack_bytes": rep.stack_bytes, "mma_in_loop": rep.mma_in_loop}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvcc", help="the nvcc to run (default: the one ptxgen finds, e.g. PyPI's nvidia-cuda-nvcc)")
    ap.add_argument("--ci-every", type=int, default=4, help="every Nth sm_100a configuration of the ci grid (0: none)")
    ap.add_argument("--nvrtc", action="store_true", help="compile with NVRTC (the one cuda-python loads) instead of nvcc")
    ap.add_argument("--cuobjdump", help="the cuobjdump that reads the cubins (default: next to --nvcc, else ptxgen's)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N kernels (a quick look)")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--json", help="write one JSON line per kernel here")
    args = ap.parse_args()
    from ptxgen.runtime.compile.toolchain import nvrtc_version, tool

    nvcc = None if args.nvrtc else (args.nvcc or str(tool("nvcc")))
    cuobjdump = args.cuobjdump or (str(Path(nvcc).with_name("cuobjdump")) if nvcc else "")
    if not Path(cuobjdump or "/nonexistent").exists():
        cuobjdump = str(tool("cuobjdump"))
    if nvcc is None:
        version, nvcc_shown = [f"NVRTC {nvrtc_version()}"], "NVRTC (cuda-python)"
    else:
        version, nvcc_shown = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:], nvcc
    specs = kernels(args.ci_every)
    if args.limit:
        specs = specs[: args.limit]
    print(f"{nvcc_shown}: {' '.join(version)}; {len(specs)} sm_100a kernels", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as threads, ProcessPoolExecutor(args.jobs) as procs:
        results = list(threads.map(lambda s: one(nvcc, cuobjdump, s, Path(tmp), procs), specs))
    for r in results:
        print(("PASS " if r["ok"] else "FAIL ") + r["kernel"] + ("" if r["ok"] else ": " + "; ".join(r["problems"])))
    if args.json:
        with open(args.json, "w") as f:
            for r in results:
                f.write(json.dumps({**r, "nvcc": " ".join(version)}) + "\n")
    bad = [r for r in results if not r["ok"]]
    local = sum(1 for r in results if r.get("local_bytes") or r.get("stack_bytes"))
    print(f"{len(results) - len(bad)} of {len(results)} pass the SASS gate under {' '.join(version)}; "
          f"{local} with local memory or stack")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
