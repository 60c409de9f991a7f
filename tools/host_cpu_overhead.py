"""The compiled hot call's own overhead on the CPU, no GPU and no torch needed (issue 15's host path).

Times, in one process with interleaved rounds (medians of ROUNDS loops of CALLS calls), what a hot
``CompiledKernel`` call costs around ``cuLaunchKernel`` and torch's getters:

* before: a Python ``__call__`` into ``_launcher.hot_kernel`` (the dispatch key built as a tuple, hashed and looked
  up in the table on every call; what ``CompiledKernel.__call__`` did until this change);
* after: ``CompiledKernel``'s call through ``_launcher.KernelBase`` (no Python frame; the metadata compared field by
  field with the remembered last hit, no tuple, no hash, no lookup);
* the pieces under both: ``Launcher.call`` (pointers, checks, stream, launch) and ``_launcher.torch_key``.

The tensors are stand-ins whose accessors are all C (``__slots__`` members and ``functools.partial`` of builtins),
so the getters cost tens of ns here where torch's cost about 0.1 µs each; ``cuLaunchKernel`` is a C function that
returns 0 (built here with ``cc``). The numbers are this machine's: the difference between the two calls is what
this change removes from every hot call, not a prediction of torch's absolute host time.

    python tools/host_cpu_overhead.py
"""

from __future__ import annotations

import ctypes
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ptxgen.api.launch import hotkeys
from ptxgen.runtime.launch import fastlaunch
from ptxgen.runtime.launch.params import ParamBlock

CALLS, ROUNDS = 20000, 15


class Tensor:
    """What the hot call reads of a torch tensor, every accessor a C callable."""

    __slots__ = ("shape", "dtype", "stride", "get_device", "data_ptr")

    def __init__(self, shape, stride, ptr, dtype="bf16"):
        self.shape, self.dtype = tuple(shape), dtype
        self.stride = functools.partial(tuple, tuple(stride))
        self.get_device = functools.partial(int, 0)
        self.data_ptr = functools.partial(int, ptr)


class Entry:
    def __init__(self, c):
        self._c = c


def _noop_launch() -> tuple[int, object]:
    """The address of ``int f(...) { return 0; }`` (cuLaunchKernel's stand-in) and the library that holds it."""
    folder = Path(tempfile.mkdtemp())
    (folder / "noop.c").write_text("int noop_launch(void) { return 0; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(folder / "noop.so"), str(folder / "noop.c")], check=True)
    lib = ctypes.CDLL(str(folder / "noop.so"))
    return ctypes.cast(lib.noop_launch, ctypes.c_void_p).value, lib


def main() -> int:
    mod = fastlaunch.compiled_module()
    if mod is None or not hasattr(mod, "KernelBase"):
        print("the compiled launcher (with KernelBase) is not built here: python setup.py build_ext --inplace")
        return 2
    address, _lib = _noop_launch()
    block = ParamBlock(["ptr", "ptr", "ptr", "i32", "i32", "i32"])
    layout = [((a, None),) for a in block.addresses[:3]]
    c = mod.Launcher(1, (132, 1, 1), (384, 1, 1), 200000, block.address, block, layout, address, lambda: None,
                     fastlaunch._launch_failed, 0, (0, 0, 0), (15, 15))
    c.stream_reader = abs  # device index 0 -> stream 0, a C call
    mod.set_tensor_type(Tensor)
    a, b, out = Tensor((1024, 1024), (1024, 1), 1 << 24), Tensor((1024, 1024), (1024, 1), 2 << 24), Tensor((1024, 1024), (1024, 1), 3 << 24)
    table = hotkeys.LaunchTable({hotkeys.torch_key(a, b, out): Entry(c)})

    class Before:  # CompiledKernel.__call__ before this change
        def __init__(self, t):
            self._torch_entries = t

        def __call__(self, a, b, out=None, *, stream=None):
            if stream is None and hotkeys.hot_kernel is not None:
                r = hotkeys.hot_kernel(self._torch_entries, a, b, out)
                if r is not None:
                    return r
            raise AssertionError("declined")

    class After(mod.KernelBase):  # CompiledKernel now
        def _call_py(self, *args, **kw):
            raise AssertionError("declined")

    before, after = Before(table), After()
    after._set_hot_table(table)
    assert before(a, b, out) is out and after(a, b, out) is out and after(a, b, out) is out
    pieces = {
        "before: Python __call__ -> hot_kernel (key tuple, hash, lookup)": lambda: before(a, b, out),
        "after: KernelBase call (last hit compared field by field)": lambda: after(a, b, out),
        "_launcher.hot_kernel alone": lambda: mod.hot_kernel(table, a, b, out),
        "_launcher.torch_key (12 reads + the tuple)": lambda: mod.torch_key(a, b, out),
        "Launcher.call (data_ptr x3, checks, stream, no-op launch)": lambda: c.call(a, b, out),
        "empty lambda": lambda: None,
    }
    samples = {name: [] for name in pieces}
    for _ in range(ROUNDS):
        for name, fn in pieces.items():
            t0 = time.perf_counter()
            for _ in range(CALLS):
                fn()
            samples[name].append((time.perf_counter() - t0) / CALLS * 1e6)
    print(f"python {sys.version.split()[0]}, {CALLS} calls x {ROUNDS} rounds, interleaved; µs per call (median, min)")
    for name, s in samples.items():
        print(f"  {name:66s} {statistics.median(s):6.3f}  ({min(s):.3f})")
    print(f"  kernel hot counts (remembered hit, table lookups): {after._hot_counts}")
    mod.set_tensor_type(None)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
