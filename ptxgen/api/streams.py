"""Streams and contexts for the API: the CUstream handle of a call, the primary context on this thread, the
producer stream of a ``__cuda_array_interface__`` v3 array, the device of a bare pointer."""

from __future__ import annotations

import sys

from ..runtime.arrays import ArgumentError
from ..runtime.gpu import Device, require_gpu

# require_gpu is re-exported: the API modules call ``streams.require_gpu()``, the one way to the device, so that
# tests can simulate one by monkeypatching it here.
__all__ = ["Device", "ensure_current", "pointer_device", "require_gpu", "same_stream", "stream_handle", "torch_stream_reader",
           "wait_for_producer"]


def stream_handle(stream=None, like=None) -> int:
    """A CUstream handle (int) from ``stream``: None (the array library's current stream for ``like``:
    ``torch.cuda.current_stream()``, ``cupy.cuda.get_current_stream()``; else 0, the legacy default stream),
    an int, a ``torch.cuda.Stream`` (``.cuda_stream``), a CuPy stream (``.ptr``), anything with
    ``__cuda_stream__`` (``(version, handle)``), or a cuda-bindings ``CUstream``."""
    if stream is None:
        return _current_stream(like)
    if isinstance(stream, bool):
        raise TypeError(f"stream must be a CUDA stream or a handle, not {stream!r}")
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        try:
            return int(value[1])
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"stream.__cuda_stream__ gave {value!r}, not (version, handle)") from None
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(
            f"stream must be None, an int handle, a torch.cuda.Stream, a CuPy stream or an object with __cuda_stream__; "
            f"got {type(stream).__module__}.{type(stream).__qualname__}"
        ) from None


def _current_stream(like) -> int:
    if like is None:
        return 0
    lib = type(like).__module__.split(".")[0]
    try:
        if lib == "torch" and getattr(getattr(like, "device", None), "type", None) == "cuda":
            return int(torch_stream_reader(sys.modules["torch"])(like.device.index or 0))
        if lib == "cupy" and "cupy" in sys.modules:
            return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
    except Exception:  # noqa: BLE001 - no usable CUDA in that library: the checks that follow say why
        return 0
    return 0


def ensure_current(dev: Device) -> None:
    """Make the device's primary context current on this thread (a thread other than the one that first
    called require_gpu has none until torch, CuPy or we set it)."""
    from ..runtime.gpu import _driver, check

    cu = _driver()
    cur = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is None or int(cur) != int(dev.context):
        check(cu.cuCtxSetCurrent(dev.context), "cuCtxSetCurrent")


def same_stream(x: int, y: int) -> bool:
    legacy = (0, 1)
    return x == y or (x in legacy and y in legacy)


def wait_for_producer(producer: int, ours: int) -> None:
    """__cuda_array_interface__ v3: work queued on the producer's stream must finish before we read."""
    from ..runtime.gpu import _driver, check

    cu = _driver()
    ev = check(cu.cuEventCreate(0x2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
    try:
        check(cu.cuEventRecord(ev, producer), "cuEventRecord(producer stream)")
        check(cu.cuStreamWaitEvent(ours, ev, 0), "cuStreamWaitEvent")
    finally:
        check(cu.cuEventDestroy(ev), "cuEventDestroy")


def pointer_device(ptr: int, name: str) -> int:
    """The device ordinal of a pointer, from the driver (for arrays that do not say)."""
    from ..runtime.gpu import _driver

    cu = _driver()
    err, ordinal = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ArgumentError(f"{name}: its pointer {ptr:#x} is not device memory known to CUDA in this process")
    return int(ordinal)



def torch_stream_reader(torch):
    """A function ``device_index -> current CUstream handle`` for torch, without building a Stream object
    (``torch._C._cuda_getCurrentRawStream``, as Triton's launcher reads it), else the public API."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: int(torch.cuda.current_stream(index).cuda_stream)
