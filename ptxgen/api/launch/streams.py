"""Streams, devices and contexts for the API: the CUstream handle of a call, the device a call's arrays are on
(:func:`call_device`), that device's primary context on this thread (:func:`on_device`, :func:`context_switch`), the
producer stream of a ``__cuda_array_interface__`` v3 array, the device of a bare pointer.

Every device of the process can run kernels: a call runs on its arrays' device, in that device's primary context (the
one torch and CuPy use), on the array library's current stream for that device. The context current on the thread is
switched only where it is not the device's, and switched back afterwards (as torch's device guard does), so a call
never changes the device torch (or the caller) has current."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ...runtime.launch.arrays import ArgumentError
from ...runtime.launch.gpu import Device, require_gpu

# require_gpu is re-exported: the API modules call ``streams.require_gpu()``, the one way to the device, so that
# tests can simulate one by monkeypatching it here.
__all__ = ["Device", "call_device", "call_ordinal", "context_switch", "device", "ensure_current", "on_device",
           "pointer_device", "require_gpu", "restore_context", "same_stream", "stream_handle", "torch_stream_reader",
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


def device(index: int | None = None) -> Device:
    """The Device of ordinal ``index`` (None: the thread's current one, else 0), through :func:`require_gpu` (one
    Device per ordinal, its primary context retained)."""
    return require_gpu(index)


def call_ordinal(infos) -> int:
    """The device ordinal of a call's arrays (``ArrayInfo``; None entries skipped): each array's DLPack device, else the
    driver's answer for its pointer. Arrays on two devices: ArgumentError naming both."""
    first = None
    for info in infos:
        if info is None:
            continue
        ordinal = info.device[1] if info.device is not None else pointer_device(info.ptr, info.name)
        if first is None:
            first = (info.name, ordinal)
        elif ordinal != first[1]:
            raise ArgumentError(f"{first[0]} is on cuda:{first[1]} but {info.name} is on cuda:{ordinal}: the arrays of one "
                                "call must be on one device (move one, e.g. .to(other.device))")
    return 0 if first is None else first[1]


def unknown_device(infos) -> int | None:
    """For a dispatch key: None where every array says its device (the key holds it already), else the call's ordinal
    (:func:`call_ordinal`, asked of the driver)."""
    if all(i is None or i.device is not None for i in infos):
        return None
    return call_ordinal(infos)


def call_device(infos) -> Device:
    """The Device a call's arrays are on (:func:`call_ordinal`)."""
    return device(call_ordinal(infos))


def ensure_current(dev: Device):
    """Make the device's primary context current on this thread (a thread other than the one that first called
    require_gpu has none until torch, CuPy or we set it). Returns the context it replaced (to hand to
    :func:`restore_context`), or None: nothing changed, or the thread had no context (the device's then stays)."""
    from ...runtime.launch.gpu import _driver, check

    cu = _driver()
    cur = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is None or int(cur) != int(dev.context):
        check(cu.cuCtxSetCurrent(dev.context), "cuCtxSetCurrent")
        return cur if cur is not None and int(cur) else None
    return None


def restore_context(previous) -> None:
    """Make ``previous`` (what :func:`ensure_current` returned) current again; None does nothing."""
    if previous is None:
        return
    from ...runtime.launch.gpu import _driver, check

    check(_driver().cuCtxSetCurrent(previous), "cuCtxSetCurrent (restore)")


def context_switch(dev: Device):
    """The prepared launches' ``ensure_context`` (called when a launch came back with RETRY_WITH_CONTEXT): make the
    device's context current; returns a callable that switches back (the launch calls it once relaunched), or None."""
    previous = ensure_current(dev)
    return None if previous is None else (lambda: restore_context(previous))


@contextmanager
def on_device(dev: Device):
    """The device's primary context current for the block (module loads, allocations, the slow path's launches), the
    previous one current again after it."""
    previous = ensure_current(dev)
    try:
        yield dev
    finally:
        restore_context(previous)


def same_stream(x: int, y: int) -> bool:
    legacy = (0, 1)
    return x == y or (x in legacy and y in legacy)


def wait_for_producer(producer: int, ours: int) -> None:
    """__cuda_array_interface__ v3: work queued on the producer's stream must finish before we read."""
    from ...runtime.launch.gpu import _driver, check

    cu = _driver()
    ev = check(cu.cuEventCreate(0x2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
    try:
        check(cu.cuEventRecord(ev, producer), "cuEventRecord(producer stream)")
        check(cu.cuStreamWaitEvent(ours, ev, 0), "cuStreamWaitEvent")
    finally:
        check(cu.cuEventDestroy(ev), "cuEventDestroy")


def pointer_device(ptr: int, name: str) -> int:
    """The device ordinal of a pointer, from the driver (for arrays that do not say)."""
    from ...runtime.launch.gpu import _driver

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
