"""Where the host time of a ptxgen call goes (H200, torch): each piece of the hot path timed alone.

    python3 tools/api_hostprofile.py [M N K]      # default 4096 4096 4096, bf16, K-major, out given

Prints µs per call (median of 7 loops of 2000 calls, no synchronisation inside a loop) for: reading the
dispatch key, the launch alone, Launch.call_torch, CompiledKernel.__call__, ptxgen.gemm, torch.mm(out=), and a
CUDA-graph replay of one gemm. Small problems keep the GPU ahead of the host so that the loops measure the
host. Where the compiled launcher (ptxgen.runtime.launch._launcher) was built, the same calls are timed through it
and through the ctypes path (a second kernel object prepared with PTXGEN_LAUNCHER's ctypes path), in one
process.
"""

import statistics
import sys
import time

import torch

import ptxgen
from ptxgen.api import dispatch
from ptxgen.api.launch.hotkeys import tensor_type, torch_key
from ptxgen.runtime.launch import fastlaunch


def per_call_us(fn, calls=2000, rounds=7):
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def main():
    m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (256, 256, 256)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    out_t = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ptxgen.gemm(a, b, out)
    entry = dispatch._TORCH_ENTRIES[(None, torch_key(a, b, out))]
    spec, _ = ptxgen.api.gemm_spec(a, b, out)
    kern = dispatch.kernel_for(spec)
    kern(a, b, out)
    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    bt = b.t()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ptxgen.gemm(a, b, out)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        ptxgen.gemm(a, b, out)
    mod = fastlaunch.compiled_module()
    compiled = entry._c is not None
    # the same kernel through the ctypes path: a second kernel object whose launch is prepared without the module
    saved = fastlaunch._MODULE[:]
    fastlaunch._MODULE[:] = [None]
    kern_py = ptxgen.compile(spec)
    out_py = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kern_py(a, b, out_py)
    fastlaunch._MODULE[:] = saved
    (entry_py,) = kern_py._torch_entries.values()
    assert entry_py._c is None
    rows = [
        ("tensor_type() + isinstance x3", lambda: (isinstance(a, tensor_type()), isinstance(b, tensor_type()), isinstance(out, tensor_type()))),
        ("torch_key(a, b, out)", lambda: torch_key(a, b, out)),
        ("dispatch dict lookup (key built)", lambda: dispatch._TORCH_ENTRIES.get((None, torch_key(a, b, out)))),
        ("ctypes: Launch.run (pointers unchanged: ctypes cuLaunchKernel)", lambda: entry_py.run(pa, pb, po, stream)),
        ("ctypes: Launch.call_torch", lambda: entry_py.call_torch(a, b, out_py, None)),
        ("ctypes: CompiledKernel(a, b, out)", lambda: kern_py(a, b, out_py)),
    ]
    if compiled:
        table = kern._torch_entries
        rows += [
            ("C: _launcher.torch_key(a, b, out)", lambda: mod.torch_key(a, b, out)),
            ("C: Launcher.run (pointers unchanged: cuLaunchKernel from C)", lambda: entry._c.run(pa, pb, po, stream)),
            ("C: Launcher.call(a, b, out) (data_ptr, checks, stream, launch)", lambda: entry._c.call(a, b, out)),
            ("C: hot_kernel(table, a, b, out) (key, lookup, call)", lambda: mod.hot_kernel(table, a, b, out)),
        ]
    rows += [
        ("CompiledKernel(a, b, out)", lambda: kern(a, b, out)),
        ("ptxgen.gemm(a, b, out)", lambda: ptxgen.gemm(a, b, out)),
        ("ptxgen.gemm(a, b) (allocates out)", lambda: ptxgen.gemm(a, b)),
        ("torch.mm(a, b.t(), out=o)", lambda: torch.mm(a, bt, out=out_t)),
        ("torch.mm(a, b.t()) (allocates)", lambda: torch.mm(a, bt)),
        ("torch.cuda.CUDAGraph.replay (one gemm)", g.replay),
    ]
    print(f"host us per call, {m}x{n}x{k} bf16 on {torch.cuda.get_device_name()}, torch {torch.__version__}, kernel {spec.kernel_name}")
    print(f"launch path of CompiledKernel / ptxgen.gemm: {'compiled launcher (' + mod.__file__ + ')' if compiled else 'ctypes'}")
    for name, fn in rows:
        print(f"  {per_call_us(fn):8.2f}  {name}", flush=True)
    torch.cuda.synchronize()
    for got, ref in ((out, out_t), (out_py, out_t)):  # every path computed the same product
        torch.mm(a, bt, out=ref)
        err = float((got.float() - ref.float()).norm() / ref.float().norm())
        assert err < 1e-2, err
    print("outputs checked against torch.mm (relative error < 1e-2)")


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    main()
