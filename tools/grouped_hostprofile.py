"""Host time of a grouped call on the CPU, without a GPU: a simulated H200 (the driver's launch a no-op, the
tensor-map encoder a fake) and a stand-in ``torch`` module, so only ptxgen's Python work before the launch is
timed. Runs on any tree that has ``ptxgen.grouped`` (compare branches by running it from each).

Usage: PYTHONPATH=$PWD python tools/grouped_hostprofile.py [--calls 20000]
Prints µs per call for: grouped_gemm with the same pointers, grouped_gemm with pointers alternating between two
sets, and the pieces of the first (uncached) call path where they exist (read_array x 4, bind_grouped).
"""

from __future__ import annotations

import argparse
import sys
import time
import types

_SIZES = {"bfloat16": 2, "int32": 4}


def fake_torch():
    torch = types.ModuleType("torch")

    class Dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    for name in _SIZES:
        setattr(torch, name, Dtype(name))

    class Tensor:
        def __init__(self, shape, dtype, ptr):
            self.shape, self.dtype, self._ptr = tuple(shape), dtype, ptr
            self._strides = tuple(_prod(shape[i + 1:]) for i in range(len(shape)))
            self.device = types.SimpleNamespace(type="cuda", index=0)

        def data_ptr(self):
            return self._ptr

        def stride(self):
            return self._strides

        def get_device(self):
            return 0

        def element_size(self):
            return _SIZES[self.dtype.name]

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x77)
    torch.cuda = types.SimpleNamespace(current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=0x77))
    return torch


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def per_call_us(fn, calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    import ptxgen.api.groupedkernel as groupedkernel
    import ptxgen.api.launch.streams as streams
    import ptxgen.grouped as grouped
    from ptxgen.api.arrays.groupedbind import bind_grouped
    from ptxgen.runtime.launch.arrays import read_array
    from ptxgen.runtime.launch.gpu import Device

    torch = sys.modules["torch"] = fake_torch()  # after ptxgen's import: it registers no torch operator

    dev = Device(0, "simulated H200", (9, 0), None, None, 132)

    class Kernel:
        def __init__(self, cubin, name, smem):
            self.func = 0xF00D

    class Driver:
        def launch(self, *a):
            return 0

        def encode(self, a):
            return a.global_address.to_bytes(8, "little").ljust(128, b"\0")

    streams.require_gpu = lambda index=None: dev
    streams.ensure_current = lambda d: None
    import ptxgen.runtime.launch.gpu as gpu

    gpu.Kernel = Kernel
    drv = Driver()
    groupedkernel.launcher = lambda: drv
    m, n, k, g = 16384, 4096, 7168, 8
    T = torch.Tensor
    sets = [(T((m, k), torch.bfloat16, 0x10000000 + i * 0x1000000), T((g, n, k), torch.bfloat16, 0x40000000),
             T((g,), torch.int32, 0x30000000 + i * 0x100), T((m, n), torch.bfloat16, 0x50000000 + i * 0x1000000)) for i in range(2)]
    a, b, offs, out = sets[0]
    print(f"grouped_gemm, same pointers: {per_call_us(lambda: grouped.grouped_gemm(a, b, offs, out), args.calls):.2f} us/call")
    flip = [0]

    def alternating():
        flip[0] ^= 1
        grouped.grouped_gemm(*sets[flip[0]])

    print(f"grouped_gemm, two pointer sets alternating: {per_call_us(alternating, args.calls):.2f} us/call")
    print(f"  read_array x 4 (the uncached path's first step): "
          f"{per_call_us(lambda: [read_array(x, 'x', 0) for x in sets[0]], args.calls):.2f} us/call")
    infos = [read_array(x, n_, 0) for x, n_ in zip(sets[0], ("a", "b", "offs", "out"))]
    spec = grouped.grouped_spec("bf16")
    print(f"  bind_grouped: {per_call_us(lambda: bind_grouped(spec, *infos), args.calls):.2f} us/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
