"""A prepared grouped launch (``ptxgen.grouped``'s hot path): one parameter block per dispatch key, pointers
patched per call, one cuLaunchKernel.

What depends only on shapes, strides, dtypes and the device (the binding's and the problem's checks, the kernel
load, the grid, every integer parameter, the tensor maps' extents and strides) is built once by the slow path in
``ptxgen.grouped``; a repeat call reads the tensors' pointers, checks their alignment, writes them into the block
(``runtime.launch.params``: a tensor map re-encoded only when its pointer changed, and cached per pointer) and launches.
"""

from __future__ import annotations

import sys
import threading

from ...runtime.launch.fastlaunch import RETRY_WITH_CONTEXT, compiled_launcher, error_name
from ...runtime.launch.gpu import CudaError
from ...runtime.launch.grouped import GroupedProblem
from . import streams
from ..kernel import _record_torch_stream
from .streams import stream_handle

_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def torch_tensor_type():
    """``torch.Tensor`` where torch is imported (never imports it), else None."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def torch_key(x):
    """What of a torch tensor (or None) decides a grouped launch, read without DLPack: shape, strides, dtype, device."""
    return None if x is None else (x.shape, x.stride(), x.dtype, x.get_device())


class GroupedLaunch:
    """A prepared grouped launch: what depends only on shapes, strides, dtypes and the device, built once by the
    slow path (the binding's checks, the problem's checks, the kernel load, the grid, a pre-packed parameter
    block with every integer written). A call then checks the pointers' alignment, writes them into the block
    (a tensor map re-encoded only when its pointer changed, ``runtime.launch.params.MapSlot``) and launches once."""

    def __init__(self, block, slots: dict, shape: tuple, driver, dev, problem: GroupedProblem, out_dtype: str, name: str):
        self.block, self.params = block, block.address
        order = ("a", "b", "offs", "d", "scale_a", "scale_b")
        self.slots = tuple(slots.get(k) for k in order)
        self.scaled = slots.get("scale_a") is not None
        self.shape = shape  # (func, gx, gy, gz, bx, by, bz, smem)
        self._launch, self.dev, self.name = driver.launch, dev, name
        self.m, self.n, self.ldd = problem.m, problem.n, problem.ldd
        self.out_dtype = out_dtype
        self._torch_dtype = None
        self._stream = None
        self._lock = threading.Lock()
        # the compiled launcher where it was built: every pointer patched and the launch made in one C call, its
        # operands A, B, D first (run_all's order), then offs and the scales
        present = [i for i, slot in enumerate(self.slots) if slot is not None]
        self._c_order = tuple(i for i in (0, 1, 3, 2, 4, 5) if i in present)
        func, gx, gy, gz, bx, by, bz, smem = shape
        self._c = compiled_launcher(driver, func=func, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, params=block,
                                    operands=tuple(self.slots[i] for i in self._c_order),
                                    ensure_context=lambda: streams.context_switch(dev), device_index=dev.index,
                                    spans=(0, 0, 0))

    @staticmethod
    def pointers_ok(pa: int, pb: int, pf: int, pd: int, psa: int = 0, psb: int = 0, scaled: bool = False) -> bool:
        """The per-call pointer rules the slow path checks (A, B, D 16-byte aligned, offs 4; scales 4 and set)."""
        if ((pa | pb | pd) & 15) or (pf & 3):
            return False
        return not scaled or (psa and psb and not ((psa | psb) & 3))

    def run(self, ptrs: tuple, stream: int) -> None:
        """Point the block at ``ptrs`` (a, b, offs, d[, scale_a, scale_b]) and launch on ``stream``."""
        if self._c is not None:
            order = self._c_order
            self._c.run_all(*(ptrs[i] for i in order), stream)
            return
        with self._lock:  # the block is patched and read by the launch under one lock
            for slot, ptr in zip(self.slots, ptrs):
                if slot.ptr != ptr:
                    slot.point(ptr)
            rc = self._launch(*self.shape, stream, self.params, None)
            if rc in RETRY_WITH_CONTEXT:  # a thread without the device's context current (none, another's): set it, once
                restore = streams.context_switch(self.dev)
                try:
                    rc = self._launch(*self.shape, stream, self.params, None)
                finally:
                    if restore is not None:
                        restore()
            if rc:
                raise CudaError(f"cuLaunchKernel({self.name}) failed: {error_name(rc)} ({rc})")

    def call_torch(self, a, b, offs, out, scale_a, scale_b, stream):
        """The hot call for torch tensors of this launch's key; None when a pointer rules it out (the slow path
        then says why)."""
        pa, pb, pf = a.data_ptr(), b.data_ptr(), offs.data_ptr()
        psa = psb = 0
        if self.scaled:
            psa, psb = scale_a.data_ptr(), scale_b.data_ptr()
        allocated = out is None
        if allocated:
            if (pa | pb) & 15 or pf & 3:
                return None
            out = self._allocate(a)
        pd = out.data_ptr()
        if not self.pointers_ok(pa, pb, pf, pd, psa, psb, self.scaled):
            return None
        if stream is None:
            handle = self._stream(self.dev.index)
        else:
            handle = stream_handle(stream, a)
        self.run((pa, pb, pf, pd, psa, psb) if self.scaled else (pa, pb, pf, pd), handle)
        if allocated and stream is not None:
            _record_torch_stream(out, stream, handle)
        return out

    def _allocate(self, a):
        full = a.new_empty((self.m, self.ldd), dtype=self._torch_dtype)
        return full if self.ldd == self.n else full[:, : self.n]

    def enable_torch(self) -> None:
        torch = sys.modules["torch"]
        self._torch_dtype = getattr(torch, _TORCH_DTYPES[self.out_dtype])
        self._stream = streams.torch_stream_reader(torch)
