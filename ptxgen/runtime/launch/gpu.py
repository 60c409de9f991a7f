"""A thin, checked layer over the CUDA driver API (``cuda.bindings.driver``).

Every call's status is checked; a failure raises :class:`CudaError` naming the call. Kernel
arguments are marshalled with ctypes into the ``void**`` array that cuLaunchKernel takes
(:class:`KernelArgs`, testable without a GPU).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ...isa.types import Arch


class NoGPU(RuntimeError):
    """No usable GPU (exit status 3)."""


class CudaError(RuntimeError):
    pass


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:  # pragma: no cover - cuda-python is a dependency
        raise NoGPU(f"cuda-python is not installed ({e})") from None
    return driver


def check(result, what: str):
    """Unpack a cuda-bindings result tuple, raising CudaError on a failed status."""
    cu = _driver()
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        name = cu.cuGetErrorName(err)[1]
        raise CudaError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name} ({int(err)})")
    rest = result[1:]
    return rest[0] if len(rest) == 1 else (rest or None)


def arch_for_compute_capability(major: int, minor: int) -> Arch:
    """sm_90a on 9.0, sm_100a on 10.x; anything else has neither wgmma nor tcgen05 (NoGPU)."""
    if (major, minor) == (9, 0):
        return Arch.SM90A
    if major == 10:
        return Arch.SM100A
    if major == 12:
        raise NoGPU(
            f"compute capability {major}.{minor} (consumer Blackwell) has no tcgen05 and no wgmma: "
            "ptxgen's kernels need sm_90a (9.0) or sm_100a (10.x)"
        )
    raise NoGPU(f"compute capability {major}.{minor} has neither wgmma (9.0) nor tcgen05 (10.x)")


@dataclass
class Device:
    index: int
    name: str
    cc: tuple[int, int]
    handle: object
    context: object
    sm_count: int = 132

    @property
    def arch(self) -> Arch:
        return arch_for_compute_capability(*self.cc)


_DEVICE: Device | None = None  # the first device initialised (kept for callers that ask "is a GPU in use")
_DEVICES: dict[int, Device] = {}  # ordinal -> Device, each with its primary context retained


def current() -> Device | None:
    """The first device ``require_gpu`` set up in this process, or None where it was never called (no driver work)."""
    return _DEVICE


def require_gpu(index: int | None = None) -> Device:
    """The device of ordinal ``index`` with its primary context retained, or raise NoGPU. ``index`` None: the device
    whose context is current on this thread (torch.cuda.set_device's, a torchrun rank's), else device 0.

    A thread with no current context gets the device's made current (as the runtime API's first call does); a
    thread with another device's context current keeps it: initialising a device never switches the context
    torch (or the caller) set."""
    if index is not None:
        dev = _DEVICES.get(index)
        if dev is not None:
            return dev
    cu = _driver()
    try:
        check(cu.cuInit(0), "cuInit")
    except CudaError as e:
        raise NoGPU(f"no usable NVIDIA GPU: {e}") from None
    except RuntimeError as e:  # libcuda.so missing: cuda-bindings raises before returning a status
        raise NoGPU(f"no usable NVIDIA GPU (no driver): {e}") from None
    current = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if index is None:
        index = int(check(cu.cuCtxGetDevice(), "cuCtxGetDevice")) if current is not None and int(current) else 0
        dev = _DEVICES.get(index)
        if dev is not None:
            return dev
    count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
    if not 0 <= index < count:
        raise NoGPU(f"no usable NVIDIA GPU cuda:{index}: the driver reports {count} device(s)")
    handle = check(cu.cuDeviceGet(index), "cuDeviceGet")
    attr = cu.CUdevice_attribute
    major = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle), "cc major")
    minor = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle), "cc minor")
    sms = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle), "multiprocessor count")
    name = check(cu.cuDeviceGetName(64, handle), "cuDeviceGetName")
    ctx = check(cu.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
    if current is None or not int(current):
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    global _DEVICE
    dev = _DEVICES.setdefault(index, Device(index, name.split(b"\0")[0].decode(), (major, minor), handle, ctx, sms))
    if _DEVICE is None:
        _DEVICE = dev
    return dev


def init_driver() -> None:
    """cuInit and a device set up, once (NoGPU without a usable GPU): what the encoder and the module loader need, without
    asking the driver per call which device is current (a hot-path map re-encode calls this)."""
    if _DEVICE is None:
        require_gpu()


TENSORMAP_BYTES = 128  # sizeof(CUtensorMap)
TENSORMAP_ALIGN = 64


class _AlignedBytes:
    """``n`` bytes at a ``align``-byte-aligned address inside an over-allocated ctypes buffer."""

    def __init__(self, data: bytes, align: int):
        self.raw = (ctypes.c_ubyte * (len(data) + align))()
        base = ctypes.addressof(self.raw)
        self.offset = -base % align
        self.nbytes = len(data)
        ctypes.memmove(base + self.offset, data, len(data))

    @property
    def address(self) -> int:
        return ctypes.addressof(self.raw) + self.offset

    @property
    def value(self) -> bytes:
        return ctypes.string_at(self.address, self.nbytes)


class KernelArgs:
    """ctypes storage for kernel arguments and the ``void**`` array that points at them.

    Kinds: ``ptr``, ``i32``, ``u32``, ``u64``, ``f32`` (scalars) and ``tensormap`` (the 128 bytes of a
    ``CUtensorMap`` for a ``const __grid_constant__`` parameter, kept 64-byte aligned; cuLaunchKernel copies
    each parameter's bytes from the pointer in the array)."""

    def __init__(self, values: list[tuple[str, int | float | bytes]]):
        kinds = {"ptr": ctypes.c_uint64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "f32": ctypes.c_float}
        self.values = []
        for k, v in values:
            if k == "tensormap":
                v = bytes(v)
                if len(v) != TENSORMAP_BYTES:
                    raise ValueError(f"a tensormap argument is {TENSORMAP_BYTES} bytes, not {len(v)}")
                self.values.append(_AlignedBytes(v, TENSORMAP_ALIGN))
            elif k in kinds:
                self.values.append(kinds[k](v))
            else:
                raise ValueError(f"unknown kernel argument kind {k!r} (one of {', '.join([*kinds, 'tensormap'])})")
        self.array = (ctypes.c_void_p * len(self.values))(*[self._addr(v) for v in self.values])

    @staticmethod
    def _addr(v) -> int:
        return v.address if isinstance(v, _AlignedBytes) else ctypes.addressof(v)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)

    def read_back(self) -> list:
        """The values as the kernel will see them (for tests; a tensormap reads back as its bytes)."""
        return [v.value for v in self.values]


class Buffer:
    """A plain device allocation (cuMemAlloc; never managed memory)."""

    def __init__(self, nbytes: int):
        cu = _driver()
        self.nbytes = nbytes
        self.ptr = check(cu.cuMemAlloc(max(1, nbytes)), "cuMemAlloc")

    @property
    def address(self) -> int:
        return int(self.ptr)

    def upload(self, host: np.ndarray) -> None:
        cu = _driver()
        host = np.ascontiguousarray(host)
        assert host.nbytes <= self.nbytes
        check(cu.cuMemcpyHtoD(self.ptr, host, host.nbytes), "cuMemcpyHtoD")

    def download(self, dtype, count: int) -> np.ndarray:
        cu = _driver()
        out = np.empty(count, dtype=dtype)
        check(cu.cuMemcpyDtoH(out, self.ptr, out.nbytes), "cuMemcpyDtoH")
        return out

    def fill_u8(self, value: int) -> None:
        cu = _driver()
        check(cu.cuMemsetD8(self.ptr, value, self.nbytes), "cuMemsetD8")

    def fill_u32(self, value: int) -> None:
        cu = _driver()
        check(cu.cuMemsetD32(self.ptr, value, self.nbytes // 4), "cuMemsetD32")

    def fill_u16(self, value: int) -> None:
        cu = _driver()
        check(cu.cuMemsetD16(self.ptr, value, self.nbytes // 2), "cuMemsetD16")

    def free(self) -> None:
        if self.ptr is not None:
            check(_driver().cuMemFree(self.ptr), "cuMemFree")
            self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


class Kernel:
    """A cubin loaded into the current context (the caller makes the device's primary context current:
    ``api.launch.streams.on_device``), one entry point, its dynamic shared memory set."""

    def __init__(self, cubin: bytes, name: str, dynamic_smem: int):
        cu = _driver()
        init_driver()
        self.module = check(cu.cuModuleLoadData(cubin), "cuModuleLoadData")
        self.func = check(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        self.dynamic_smem = dynamic_smem
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(cu.cuFuncSetAttribute(self.func, attr, dynamic_smem), "cuFuncSetAttribute(max dynamic smem)")

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], args: KernelArgs, stream=0) -> None:
        cu = _driver()
        check(
            cu.cuLaunchKernel(self.func, *grid, *block, self.dynamic_smem, stream, args.address, 0),
            "cuLaunchKernel",
        )

    def max_active_clusters(self, cluster_size: int, block: tuple[int, int, int]) -> int:
        """How many clusters of ``cluster_size`` CTAs (compiled in as __cluster_dims__) can be resident at once
        (cuOccupancyMaxActiveClusters): a persistent grid of more clusters would run a second, partial wave."""
        cu = _driver()
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = cluster_size, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = self.dynamic_smem
        cfg.numAttrs = 0
        return int(check(cu.cuOccupancyMaxActiveClusters(self.func, cfg), "cuOccupancyMaxActiveClusters"))

    def unload(self) -> None:
        check(_driver().cuModuleUnload(self.module), "cuModuleUnload")


def synchronize(what: str = "kernel") -> None:
    """Wait for the device and surface any asynchronous launch error."""
    check(_driver().cuCtxSynchronize(), f"{what} (cuCtxSynchronize)")


class EventTimer:
    """CUDA events around a region; milliseconds."""

    def __init__(self):
        cu = _driver()
        self.start = check(cu.cuEventCreate(0), "cuEventCreate")
        self.stop = check(cu.cuEventCreate(0), "cuEventCreate")

    def __enter__(self):
        check(_driver().cuEventRecord(self.start, 0), "cuEventRecord")
        return self

    def __exit__(self, *exc):
        cu = _driver()
        check(cu.cuEventRecord(self.stop, 0), "cuEventRecord")
        check(cu.cuEventSynchronize(self.stop), "cuEventSynchronize")
        self.ms = check(cu.cuEventElapsedTime(self.start, self.stop), "cuEventElapsedTime")
