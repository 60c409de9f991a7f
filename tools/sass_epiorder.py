"""What --epilogue-order does to the main loop's SASS (no GPU: NVRTC and cuobjdump). Per kernel and order (none,
alternate, alternate-uniform): registers, SASS instructions of the main loop (ptxgen.runtime.compile.sass.main_loop_instructions),
how many of them run on the uniform datapath (opcode starting with U: UIADD3, ULEA, ULOP3, ...), and the loop's
WARPSYNC / VOTEU (the convergence ptxas re-establishes before wgmma), and whether the loop's opcode sequence equals the
unordered kernel's. One more row per kernel, ``none, wg shfl``: the unordered kernel's rendered source with
``wg = tid / 128`` replaced by ``__shfl_sync(0xffffffff, tid / 128, 0)`` (CUTLASS's canonical_warp_group_idx: the
compiler then knows wg is warp-uniform), an experiment on the source text, not something ptxgen generates.

    PYTHONPATH=$PWD python tools/sass_epiorder.py
"""

from __future__ import annotations

import re
import sys

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.runtime.compile.sass import main_loop_instructions
from ptxgen.runtime.compile.toolchain import compile_cuda, nvrtc_version, run_tool

BASE = dict(a="kmajor-sw128", b="kmajor-sw128", bk=64, dtype="bf16", arch="sm_90a", stages=4, out_dtype="bf16",
            schedule="persistent", epilogue="tma")
KERNELS = {
    "bf16 128x256 tma": dict(bm=128, bn=256),
    "bf16 128x256 tma bias+gelu": dict(bm=128, bn=256, fuse="bias=col:bf16,act=gelu_tanh"),
    "bf16 128x192 tma bias+gelu": dict(bm=128, bn=192, fuse="bias=col:bf16,act=gelu_tanh", raster_group=16),
    "bf16 192x128 tma (3 warpgroups)": dict(bm=192, bn=128),
}
ORDERS = ("none", "alternate", "alternate-uniform")


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


WG = "const int wg = tid / 128, wg_tid = tid % 128;"
WG_SHFL = "const int wg = __shfl_sync(0xffffffffu, tid / 128, 0), wg_tid = tid % 128;"


def loop_report(spec, shfl: bool = False) -> dict:
    src = render_kernel(plan_kernel(spec))
    if shfl:
        assert src.count(WG) == 1
        src = src.replace(WG, WG_SHFL)
    c = compile_cuda(src, spec.kernel_name, spec.arch.value)
    loop = main_loop_instructions(run_tool("cuobjdump", ["--dump-sass"], c.cubin))
    regs = re.search(r"REG:(\d+)", run_tool("cuobjdump", ["--dump-resource-usage"], c.cubin)).group(1)
    ops = [opcode(t) for t in loop]
    return {"regs": int(regs), "loop": len(ops), "uniform": sum(o.startswith("U") for o in ops),
            "sync": sum(o.startswith(("WARPSYNC", "VOTEU")) for o in ops), "ops": ops}


def main() -> int:
    print(f"NVRTC {nvrtc_version()}, sm_90a; main loop = the K-tile loop's SASS")
    print(f"{'kernel':34} {'order':18} {'regs':>4} {'loop':>4} {'uniform':>7} {'WARPSYNC/VOTEU':>14}  same opcodes as none")
    for name, kw in KERNELS.items():
        base = None
        for order in ORDERS + ("none, wg shfl",):
            r = loop_report(make_spec(**BASE, **kw, epilogue_order=order.split(",")[0]), shfl="shfl" in order)
            base = base or r
            print(f"{name:34} {order:18} {r['regs']:>4} {r['loop']:>4} {r['uniform']:>7} {r['sync']:>14}  {r['ops'] == base['ops']}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
