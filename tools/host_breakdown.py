"""Where the host time of a hot ptxgen call goes (issue 15 item 2), on a GPU, against torch.mm in the same process.

Per piece: microseconds per call, CALLS calls in a loop without synchronisation (fewer than the launch queue holds),
the median of ROUNDS loops, the pieces interleaved round by round so that clock drift hits all of them. Besides the
calls and the compiled launcher's entry points, each torch getter the dispatch key is read from (three tensors each).

    python tools/host_breakdown.py [MxNxK]
"""

import statistics
import sys
import time

import torch

import ptxgen
from ptxgen.api import launchplan
from ptxgen.api.dispatch import kernel_for
from ptxgen.api.select import gemm_spec

CALLS, ROUNDS = 200, 15


def main() -> int:
    m, n, k = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1024x1024x1024").split("x"))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    out, out_t = (torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    spec, _ = gemm_spec(a, b, out)
    kern = kernel_for(spec)
    bt = b.t()
    entries = kern._torch_entries
    dev = a.device.index
    pieces = {
        "torch.mm(a, b.t(), out=)": lambda: torch.mm(a, bt, out=out_t),
        "ptxgen.gemm(a, b, out)": lambda: ptxgen.gemm(a, b, out),
        "kernel(a, b, out)": lambda: kern(a, b, out),
        "launchplan.hot_kernel (the C call)": lambda: launchplan.hot_kernel(entries, a, b, out),
        "3 x data_ptr()": lambda: (a.data_ptr(), b.data_ptr(), out.data_ptr()),
        "torch._C._cuda_getCurrentRawStream": lambda: torch._C._cuda_getCurrentRawStream(dev),
        "torch.cuda.current_stream().cuda_stream": lambda: torch.cuda.current_stream().cuda_stream,
        "empty lambda": lambda: None,
    }
    ts = (a, b, out)
    pieces.update({  # what the dispatch key is read from (the compiled hot call makes these 12 calls)
        "3 x t.shape": lambda: [t.shape for t in ts],
        "3 x t.stride()": lambda: [t.stride() for t in ts],
        "3 x t.dtype": lambda: [t.dtype for t in ts],
        "3 x t.get_device()": lambda: [t.get_device() for t in ts],
        "3 x t.size()": lambda: [t.size() for t in ts],
        "3 x t.device": lambda: [t.device for t in ts],
        "3 x t.is_contiguous()": lambda: [t.is_contiguous() for t in ts],
        "list comprehension over 3 (the lines above carry it)": lambda: [t for t in ts],
    })
    kern(a, b, out)
    launch = next(iter(entries.values()), None)
    c = getattr(launch, "_c", None)
    if c is not None:  # the compiled launcher's own entry points: the floor under the hot call
        pa, pb, pd, s = a.data_ptr(), b.data_ptr(), out.data_ptr(), torch._C._cuda_getCurrentRawStream(dev)
        pieces["launcher.call(a, b, out): data_ptr, checks, stream, launch"] = lambda: c.call(a, b, out)
        pieces["launcher.run(pa, pb, pd, stream): patch + cuLaunchKernel"] = lambda: c.run(pa, pb, pd, s)
    for fn in pieces.values():
        fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in pieces}
    for _ in range(ROUNDS):
        for name, fn in pieces.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(CALLS):
                fn()
            samples[name].append((time.perf_counter() - t0) / CALLS * 1e6)
    torch.cuda.synchronize()
    print(f"{m}x{n}x{k} {spec.kernel_name}, compiled launcher: {launchplan.hot_kernel is not None}")
    if getattr(type(kern), "_hot_counts", None) is not None:
        print(f"  kernel hot counts after timing (remembered hit, table lookups): {kern._hot_counts}")
    base = statistics.median(samples["torch.mm(a, b.t(), out=)"])
    for name, s in samples.items():
        med = statistics.median(s)
        print(f"  {name:45s} {med:7.2f} us  ({med / base:.3f} of torch.mm; min {min(s):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
