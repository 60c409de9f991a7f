#!/usr/bin/env python3
"""The toolchain matrix (issue 19): compile kernels with every supported CUDA's NVRTC (PyPI wheels) and run the
SASS gate of `ptxgen build` on each cubin (intended MMA instructions in the main loop, no local memory).

    python tools/toolchain_matrix.py --install DIR [--only 12.8,13.0]      # pip --target each NVRTC wheel
    PTXGEN_TOOLCHAINS=DIR python tools/toolchain_matrix.py [--ci-every 40] [--json OUT]

Kernels: every one under generated/ and every Nth configuration of the ci grid (both archs), with the pinned
NVRTC ("pinned", the one ptxgen builds with) and each toolchain installed under $PTXGEN_TOOLCHAINS.
Exit 1 when any kernel fails the gate under any toolchain.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptxgen.derive.tile.spec import TileSpec  # noqa: E402
from ptxgen.emit.generated import kernel_dirs, read_layout_json  # noqa: E402
from ptxgen.runtime.compile import toolchains  # noqa: E402


def kernels(ci_every: int) -> list[TileSpec]:
    specs = [TileSpec.from_json(read_layout_json(d)["spec"]) for d in kernel_dirs(ROOT / "generated")]
    if ci_every:
        from ptxgen.sweep import load_grid

        specs += load_grid("ci").specs[::ci_every]
    seen, out = set(), []
    for s in specs:
        if s.kernel_name not in seen:
            seen.add(s.kernel_name)
            out.append(s)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", metavar="DIR", help="pip-install the NVRTC wheels into DIR/<version> and exit")
    ap.add_argument("--only", help="comma-separated toolchains (default: all of " + ", ".join(toolchains.WHEELS) + ")")
    ap.add_argument("--ci-every", type=int, default=40, help="every Nth ci-grid configuration (0: none)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--work", default="/tmp/ptxgen-toolchain-matrix", help="scratch folder for sources and cubins")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(toolchains.WHEELS)
    unknown = [n for n in names if n not in toolchains.WHEELS and n != "pinned"]
    if unknown:
        print(f"unknown toolchain(s) {unknown}: choose from {list(toolchains.WHEELS)} or pinned", file=sys.stderr)
        return 2
    if args.install:
        t = time.time()
        problems = toolchains.install(Path(args.install), [n for n in names if n != "pinned"])
        for p in problems:
            print(p, file=sys.stderr)
        print(f"installed {', '.join(names)} under {args.install} in {time.time() - t:.1f} s")
        return 1 if problems else 0
    tcs = [tc for tc in toolchains.installed() if tc.name in names]
    if "pinned" in names or not args.only:
        tcs.append(toolchains.Toolchain("pinned", None))
    missing = sorted(set(names) - {tc.name for tc in tcs})
    if missing:
        print(f"not installed under ${toolchains.ENV}: {missing} (run --install first)", file=sys.stderr)
        return 2
    specs = kernels(args.ci_every)
    print(f"{len(specs)} kernels x {len(tcs)} toolchains")
    rows, failed = [], 0
    for tc in tcs:
        t = time.time()
        results = toolchains.compile_and_check(tc, specs, Path(args.work) / tc.name)
        bad = [r for r in results if r.problems]
        failed += len(bad)
        local = sum(r.local_instructions for r in results)
        print(f"{tc.name:>6} (NVRTC {results[0].version}): {len(results) - len(bad)}/{len(results)} pass the SASS gate, "
              f"{local} LDL/STL in all, {time.time() - t:.0f} s")
        for r in bad:
            print(f"   {r.kernel}: {'; '.join(r.problems)[:300]}")
        rows += [dict(toolchain=r.toolchain, nvrtc=r.version, kernel=r.kernel, problems=r.problems,
                      ldl_stl=r.local_instructions, stack_bytes=r.stack_bytes, sass=r.summary) for r in results]
    if args.json:
        Path(args.json).write_text(json.dumps({"results": rows}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
