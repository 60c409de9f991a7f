"""What ptxas does with a block-FP8 kernel at given setmaxnreg counts (NVRTC, no GPU): the kernel rendered from its spec
(tools/bench_blockfp8.py's variant names), the two setmaxnreg immediates replaced by --producer / --consumers (a
measurement only: counts that overdraw the register pool hang on the GPU), compiled for sm_90a; prints the local-memory
instructions (LDL/STL), the stack, and the highest register of each branch (before setmaxnreg, the consumers' branch
after setmaxnreg.inc, the producer's after setmaxnreg.dec).

    python tools/regs_blockfp8.py m192-n128-s4-tma --producer 40 --consumers 152
"""

from __future__ import annotations

import argparse
import re
import sys

from bench_blockfp8 import parse_variant  # this script's folder (tools/) is on sys.path

import ptxgen.api.fp8blocks as fb
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("variant")
    ap.add_argument("--producer", type=int, help="setmaxnreg.dec count (default: the plan's)")
    ap.add_argument("--consumers", type=int, help="setmaxnreg.inc count (default: the plan's)")
    args = ap.parse_args()
    spec = fb.default_spec(**parse_variant(args.variant)[3])
    src = render_kernel(plan_kernel(spec))
    for op, n in (("dec", args.producer), ("inc", args.consumers)):
        if n is not None:
            src, hits = re.subn(rf"setmaxnreg\.{op}\.sync\.aligned\.u32 \d+;", f"setmaxnreg.{op}.sync.aligned.u32 {n};", src)
            if hits != 1:
                print(f"no setmaxnreg.{op} in the kernel", file=sys.stderr)
                return 2
    c = compile_cuda(src, spec.kernel_name, "sm_90a")
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    usage = run_tool("cuobjdump", ["--dump-resource-usage"], c.cubin)
    highest, branch = {}, "before setmaxnreg"
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if not m:
            continue
        if "USETMAXREG.TRY_ALLOC" in m.group(1):
            branch = "consumers"
        elif "USETMAXREG.DEALLOC" in m.group(1):
            branch = "producer"
        for r in re.findall(r"\bR(\d+)\b", m.group(1)):
            highest[branch] = max(highest.get(branch, 0), int(r))
    stack = re.search(r"STACK:(\d+)", usage)
    print(f"{args.variant}: {spec.kernel_name}")
    print(f"  setmaxnreg: {re.findall(r'USETMAXREG[^;]*', sass)}")
    ldl, stl = (len(re.findall(rf"\b{op}\b", sass)) for op in ("LDL", "STL"))
    print(f"  LDL {ldl}, STL {stl}, stack {stack.group(1) if stack else '?'} B")
    print("  highest register: " + ", ".join(f"{b} R{r}" for b, r in highest.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
