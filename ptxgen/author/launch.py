"""Launching a user's kernel through the project's launch pieces.

Per dispatch key (each array's shape, strides, dtype; the scalar values are written per call) a prepared launch
holds the pre-packed parameter block (ptxgen.runtime.launch.params.ParamBlock), one MapSlot per tensor map (re-encoded
only when its pointer changes) and one PtrSlot per pointer; a call checks the arrays, points the slots and calls
cuLaunchKernel once on the stream (``launch_checked``, as ptxgen's GEMM launches do). Nothing is allocated or
synchronised on that path (what a CUDA-graph capture on the caller's stream needs; not yet tested under capture).
"""

from __future__ import annotations

import threading

from ..isa.types import Arch, DType
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, read_array
from ..runtime.launch.params import MapSlot, ParamBlock, PtrSlot
from ..runtime.launch.tensormap import tensormap_args

TMA_GLOBAL_ALIGN = 16


def map_geometry(info: ArrayInfo, plan) -> tuple[tuple[int, int], int]:
    """(dims inner first, row stride in elements) of a 2-D row-major array holding ``plan``'s operand: its global
    tensor has the operand's contiguous dimension innermost (K for K-major, M/N for MN-major)."""
    op = plan.operand
    if info.ndim != 2:
        raise ArgumentError(f"{info.name}: operand {op.name}'s tensor map needs a 2-D array, got shape {info.shape}")
    if info.dtype != op.dtype.value and not (op.dtype is DType.TF32 and info.dtype == "f32"):
        raise ArgumentError(f"{info.name}: operand {op.name} is {op.dtype.value}, the array is {info.dtype}")
    rows, cols = info.shape
    if info.strides[1] != 1 and cols > 1:
        raise ArgumentError(f"{info.name}: the contiguous ({'K' if op.major.value == 'k' else 'M/N'}) dimension must have stride 1, "
                            f"strides are {info.strides}")
    ld = info.strides[0] if rows > 1 else cols
    return (cols, rows), max(ld, cols)


class Prepared:
    """One dispatch key's parameter block and slots."""

    def __init__(self, params, infos: list, encode):
        self.block = ParamBlock([p.kind for p in params])
        self.slots: list = []
        for i, (p, info) in enumerate(zip(params, infos)):
            if p.kind == "tensormap":
                dims, ld = map_geometry(info, p.operand)
                self.slots.append(MapSlot(self.block, i, tensormap_args(p.operand.tma, 0, dims, ld), encode))
            elif p.kind == "ptr":
                self.slots.append(PtrSlot(self.block, i))
            else:
                self.slots.append(None)


def _key(params, infos, args) -> tuple:
    return tuple((i.shape, i.strides, i.dtype, i.device) if i is not None else (p.kind,) for p, i, a in zip(params, infos, args))


class Binder:
    def __init__(self, name: str, params, arch: Arch, cubin: bytes, block, shared_bytes: int):
        self.name, self.params, self.arch, self.cubin = name, tuple(params), arch, cubin
        self.block_dim, self.smem = tuple(block), shared_bytes
        self._kernel = None
        self._prepared: dict = {}
        self._lock = threading.Lock()

    def bind(self, args) -> list:
        """Each argument read and checked against its Param (no GPU needed): ArrayInfo, or None for a scalar."""
        if len(args) != len(self.params):
            raise ArgumentError(f"{self.name} takes {len(self.params)} arguments ({', '.join(p.name for p in self.params)}), "
                                f"got {len(args)}")
        infos = []
        for p, a in zip(self.params, args):
            if p.kind in ("tensormap", "ptr"):
                info = read_array(a, p.name)
                if p.kind == "ptr" and info.dtype != p.dtype:
                    raise ArgumentError(f"{p.name}: the kernel reads {p.dtype}, the array is {info.dtype}")
                if info.ptr % TMA_GLOBAL_ALIGN:
                    raise ArgumentError(f"{p.name}: its address {info.ptr:#x} is not {TMA_GLOBAL_ALIGN}-byte aligned")
                if info.on_cuda is False:
                    raise ArgumentError(f"{p.name} is on {info.device_str}; the kernel reads device memory")
                infos.append(info)
            else:
                if isinstance(a, bool) or not isinstance(a, (int, float)) or (p.kind != "f32" and not isinstance(a, int)):
                    raise ArgumentError(f"{p.name} is a {p.kind} scalar, got {a!r}")
                infos.append(None)
        return infos

    def prepare(self, args) -> "Prepared":
        """The prepared launch of these arguments' key (built on first use: raises ArgumentError or ProblemError for
        an array the kernel cannot take, with no GPU needed)."""
        return self._prepared_for(self.bind(args), args)

    def _prepared_for(self, infos: list, args) -> "Prepared":
        from ..runtime.launch.fastlaunch import launcher

        key = _key(self.params, infos, args)
        with self._lock:
            prep = self._prepared.get(key)
            if prep is None:
                prep = self._prepared[key] = Prepared(self.params, infos, lambda a: launcher().encode(a))
        return prep

    def _load(self):
        with self._lock:
            return self._kernel or self._load_locked()

    def _load_locked(self):
        if self._kernel is None:
            from ..api.launch import streams
            from ..runtime.launch import gpu
            from ..runtime.launch.gpu import NoGPU

            dev = streams.require_gpu()
            if dev.arch is not self.arch:
                raise NoGPU(f"{self.name} is built for {self.arch.value}; the GPU ({dev.name}) runs {dev.arch.value} kernels")
            streams.ensure_current(dev)
            self._kernel = (gpu.Kernel(self.cubin, self.name, self.smem), dev)
        return self._kernel

    def launch(self, args, grid, stream=None):
        from ..api.launch import streams
        from ..api.launch.launchplan import launch_checked
        from ..runtime.launch.fastlaunch import launcher

        infos = self.bind(args)
        prep = self._prepared_for(infos, args)  # every argument and tensor-map rule, before any GPU work
        kernel, dev = self._load()
        first = next((a for p, a in zip(self.params, args) if p.kind in ("tensormap", "ptr")), None)
        handle = streams.stream_handle(stream, first)
        driver = launcher()
        with self._lock:
            for i, (p, info, a) in enumerate(zip(self.params, infos, args)):
                slot = prep.slots[i]
                if slot is not None:
                    if slot.ptr != info.ptr:
                        slot.point(info.ptr)
                else:
                    prep.block.set(i, a)
            gx, gy, gz = (tuple(grid) + (1, 1))[:3]
            bx, by, bz = self.block_dim
            launch_checked(driver.launch, lambda: streams.ensure_current(dev),
                           (int(kernel.func), gx, gy, gz, bx, by, bz, self.smem, handle, prep.block.address, None))
