"""Where the host time of a hot ptxgen call goes (issue 15 item 2), on a GPU, against torch.mm in the same process.

Per piece: microseconds per call, CALLS calls in a loop without synchronisation (fewer than the launch queue holds),
the median of ROUNDS loops, the pieces interleaved round by round so that clock drift hits all of them. Besides the
calls and the compiled launcher's entry points, each torch getter the dispatch key is read from (three tensors each),
and, where the metadata reader (runtime/launch/torchmeta.py) loaded, the hot calls with it and without it (the getters).

    python tools/host_breakdown.py [MxNxK]
"""

import ctypes
import statistics
import sys
import time

import torch

import ptxgen
from ptxgen.api.launch import hotkeys
from ptxgen.api.dispatch import kernel_for
from ptxgen.api.select import gemm_spec

CALLS, ROUNDS = 200, 15


def _on():
    """The setup of a piece without one: the reader as loaded (setups toggle it for their own pieces)."""
    _ON[0]()


_ON = [lambda: None]


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
        "hotkeys.hot_kernel (the C call)": lambda: hotkeys.hot_kernel(entries, a, b, out),
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
    from ptxgen.runtime.launch import torchmeta
    from ptxgen.runtime.launch.fastlaunch import compiled_module

    mod = compiled_module()
    reader = torchmeta.start(torch, mod, wait=True) if mod is not None else "no compiled launcher"
    setups = {}
    if reader.startswith("loaded"):
        fn = torchmeta._STATE["lib"].ptxgen_torch_meta
        address = ctypes.cast(fn, ctypes.c_void_p).value

        def reader_on():
            mod.set_meta_reader(address, (torch.Tensor, torch.nn.Parameter))

        def reader_off():
            mod.set_meta_reader(0, ())

        for label, setup in (("reader", reader_on), ("getters, reader off", reader_off)):
            for name, fn in (("kernel(a, b, out)", lambda: kern(a, b, out)), ("ptxgen.gemm(a, b, out)", lambda: ptxgen.gemm(a, b, out))):
                key = f"{name} [{label}]"
                pieces[key], setups[key] = fn, setup
        pieces["3 x _launcher.read_meta (a tuple each)"] = lambda: [mod.read_meta(t) for t in ts]
        _ON[0] = reader_on
        reader_on()
    launch = next(iter(entries.values()), None)
    c = getattr(launch, "_c", None)
    if c is not None:  # the compiled launcher's own entry points: the floor under the hot call
        pa, pb, pd, s = a.data_ptr(), b.data_ptr(), out.data_ptr(), torch._C._cuda_getCurrentRawStream(dev)
        pieces["launcher.call(a, b, out): data_ptr, checks, stream, launch"] = lambda: c.call(a, b, out)
        pieces["launcher.run(pa, pb, pd, stream): patch + cuLaunchKernel"] = lambda: c.run(pa, pb, pd, s)
    for name, fn in pieces.items():
        setups.get(name, _on)()
        fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in pieces}
    for _ in range(ROUNDS):
        for name, fn in pieces.items():
            setups.get(name, _on)()
            fn()  # after a setup: the remembered hit made again
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(CALLS):
                fn()
            samples[name].append((time.perf_counter() - t0) / CALLS * 1e6)
    torch.cuda.synchronize()
    print(f"{m}x{n}x{k} {spec.kernel_name}, compiled launcher: {hotkeys.hot_kernel is not None}; metadata reader: {reader}")
    if getattr(type(kern), "_hot_counts", None) is not None:
        print(f"  kernel hot counts after timing (remembered hit, table lookups): {kern._hot_counts}, "
              f"served by the reader: {getattr(kern, '_hot_meta_hits', None)}")
    base = statistics.median(samples["torch.mm(a, b.t(), out=)"])
    for name, s in samples.items():
        med = statistics.median(s)
        print(f"  {name:45s} {med:7.2f} us  ({med / base:.3f} of torch.mm; min {min(s):.2f})")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
