"""The floor under a ptxgen launch on this GPU: cuLaunchKernel called from a C loop (tools/launch_floor.c), per call,
for empty kernels with ptxgen's parameter shape (three 128-byte tensor maps and three ints), a 2-CTA cluster, the
real kernel's dynamic shared memory, and the real kernel with its own prepared block; then the same real launch
through the compiled Launcher (``Launcher.run`` from Python) and the whole ``kernel(a, b, out)`` call.

    python tools/launch_floor.py [MxNxK]

Per row: microseconds per launch, N launches in a loop without synchronisation, the median of ROUNDS loops (rows
interleaved round by round), torch.mm(a, b.t(), out=) in the same rounds for scale.
"""

import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from ptxgen.api.dispatch import kernel_for
from ptxgen.api.select import gemm_spec
from ptxgen.runtime.launch.gpu import Kernel
from ptxgen.runtime.compile.toolchain import compile_cuda

N, ROUNDS = 200, 15
SOURCE = r"""
struct alignas(64) Map { unsigned char bytes[128]; };
extern "C" __global__ void empty0() {}
extern "C" __global__ void empty_params(const __grid_constant__ Map a, const __grid_constant__ Map b,
                                        const __grid_constant__ Map d, int m, int n, int k) {}
extern "C" __global__ void __cluster_dims__(2, 1, 1) empty_cluster(const __grid_constant__ Map a, const __grid_constant__ Map b,
                                                                   const __grid_constant__ Map d, int m, int n, int k) {}
"""


def main() -> int:
    m, n, k = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1024x1024x1024").split("x"))
    here = os.path.dirname(os.path.abspath(__file__))
    so = os.path.join(tempfile.mkdtemp(), "launch_floor.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", os.path.join(here, "launch_floor.c"), "-o", so], check=True)
    loop = ctypes.CDLL(so).launch_loop
    vp, u32 = ctypes.c_void_p, ctypes.c_uint
    loop.argtypes = [vp, vp, u32, u32, u32, vp, vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    loop.restype = ctypes.c_double
    cu_launch = ctypes.cast(ctypes.CDLL("libcuda.so.1").cuLaunchKernel, vp).value

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    out, out_t = (torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    spec, _ = gemm_spec(a, b, out)
    kern = kernel_for(spec)
    kern(a, b, out)
    torch.cuda.synchronize()
    launch = next(iter(kern._torch_entries.values()))
    c = launch._c
    stream = torch.cuda.current_stream().cuda_stream
    real_smem, real_block, real_grid = launch.smem, launch.bx, launch.gx
    print(f"{m}x{n}x{k} {spec.kernel_name}: grid {launch.gx}x{launch.gy}x{launch.gz}, block {launch.bx}, "
          f"smem {launch.smem} B, cluster {kern.cluster}, {len(launch.block.kinds)} params ({launch.block.kinds})")

    cubin = compile_cuda(SOURCE, "launch_floor", "sm_90a").cubin
    maps = (ctypes.c_ubyte * (3 * 128 + 64 + 16))()
    base = ctypes.addressof(maps) + (-ctypes.addressof(maps) % 64)
    ints = (ctypes.c_int * 3)(m, n, k)
    pblock = (ctypes.c_void_p * 6)(base, base + 128, base + 256, *[ctypes.addressof(ints) + 4 * i for i in range(3)])
    rows = {}

    loaded = []

    def kernel(name, smem):
        loaded.append(Kernel(cubin, name, smem))
        return int(loaded[-1].func)

    e0, ep, ec = kernel("empty0", 0), kernel("empty_params", 0), kernel("empty_params", real_smem)
    ecl = kernel("empty_cluster", real_smem)
    rc = ctypes.c_int(0)

    def c_loop(f, gx, bx, smem, params):
        return lambda: loop(cu_launch, f, gx, bx, smem, stream, params, N, ctypes.byref(rc)) / 1e3

    rows["C: empty kernel, 1 CTA, no params"] = c_loop(e0, 1, 128, 0, None)
    rows[f"C: empty kernel, {real_grid} CTAs x {real_block}, no params"] = c_loop(e0, real_grid, real_block, 0, None)
    rows["C: empty kernel, 3 maps + 3 ints"] = c_loop(ep, real_grid, real_block, 0, pblock)
    rows[f"C: the same + {real_smem} B dynamic smem"] = c_loop(ec, real_grid, real_block, real_smem, pblock)
    rows["C: the same + __cluster_dims__(2,1,1)"] = c_loop(ecl, real_grid - real_grid % 2, real_block, real_smem, pblock)
    rows["C: the real kernel, its prepared block"] = c_loop(launch.func, real_grid, real_block, real_smem, launch.params)
    pa, pb, pd = a.data_ptr(), b.data_ptr(), out.data_ptr()

    def per_call(fn):
        def timed():
            t0 = time.perf_counter()
            for _ in range(N):
                fn()
            return (time.perf_counter() - t0) / N * 1e6
        return timed

    rows["Python: Launcher.run(pa, pb, pd, stream)"] = per_call(lambda: c.run(pa, pb, pd, stream))
    rows["Python: Launcher.call(a, b, out)"] = per_call(lambda: c.call(a, b, out))
    rows["Python: kernel(a, b, out)"] = per_call(lambda: kern(a, b, out))
    bt = b.t()
    rows["Python: torch.mm(a, b.t(), out=)"] = per_call(lambda: torch.mm(a, bt, out=out_t))
    for fn in rows.values():
        fn()
    samples = {name: [] for name in rows}
    for _ in range(ROUNDS):
        for name, fn in rows.items():
            torch.cuda.synchronize()
            v = fn()
            if rc.value:
                print(f"{name}: cuLaunchKernel returned {rc.value}")
                return 1
            samples[name].append(v)
    torch.cuda.synchronize()
    for name, s in samples.items():
        print(f"  {name:55s} {statistics.median(s):7.2f} us  (min {min(s):.2f})")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
