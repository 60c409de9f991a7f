"""L2 summary of the --consumer-slabs 2 block-FP8 kernels (ptxgen.derive.scaled.bfp8slabs) under the NVRTC in use: the SASS gate,
QGMMA and WARPGROUP.DEPBAR counts, the highest register, setmaxnreg, local memory, ptxas's C7514/C7517 warnings; beside
tma_scales_spec (192 x 128, the kernel fp8blocks.gemm runs) for comparison.

Usage: PYTHONPATH=$PWD python tools/sass_slabs.py   (log: runs/2026-12-02-consumer-slabs/sass_slabs.log)"""
import re

from ptxgen.api.fp8blocks import slabs_spec, tma_scales_spec
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.runtime.compile.sass import check_sass
from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

KERNELS = [("cs2 tma bf16", slabs_spec()), ("cs2 tma f32", slabs_spec("f32")), ("cs2 smem bf16", slabs_spec(fp8_scale_load="smem")),
           ("cs2 direct bf16 s4", slabs_spec(epilogue="direct", stages=4)), ("reference: tma_scales_spec 192x128", tma_scales_spec())]


def main() -> int:
    bad = 0
    for name, s in KERNELS:
        c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
        rep = check_sass(s, c.cubin)
        sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
        regs = max(int(r) for r in re.findall(r"\bR(\d+)\b", sass))
        spills = bool(re.search(r"\b(LDL|STL)\b", sass))
        warn = [w for w in ("C7514", "C7517") if w in c.log]
        bad += not rep.ok or rep.local_bytes or spills or bool(warn)
        print(f"{name}: {s.kernel_name}")
        print(f"  gate ok={rep.ok} problems={rep.problems} mma_in_loop={rep.mma_in_loop} local={rep.local_bytes} B "
              f"QGMMA={len(re.findall('QGMMA', sass))} DEPBAR={sass.count('WARPGROUP.DEPBAR')} highest=R{regs} "
              f"setmaxnreg={re.findall(r'USETMAXREG[^;]*', sass)} warnings={warn} LDL/STL={spills}")
    return 1 if bad else 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    raise SystemExit(main())
