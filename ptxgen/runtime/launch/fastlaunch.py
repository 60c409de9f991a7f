"""The two driver calls on the hot path, made through ctypes straight into ``libcuda``: ``cuLaunchKernel`` with
a pre-packed parameter block, and ``cuTensorMapEncodeTiled`` writing into a buffer of ours.

cuda-python's bindings convert and wrap every argument (lists of ``cuuint64_t``, a ``CUtensorMap`` object) and
cost several µs a call; a ctypes call with fixed argument types costs about one. Both go to the same driver
and context (``libcuda.so.1`` is loaded once per process). Where ctypes cannot load the driver the bindings
are used instead (:func:`launcher`).

Faster still, where it was built (``pip install .`` compiles it; optional): the C extension
``ptxgen.runtime.launch._launcher`` (``_launcher*.c``) does a prepared launch's whole hot path in one call, reading
the tensors' pointers, patching them into the block and calling ``cuLaunchKernel`` from C
(:func:`compiled_launcher`; split-K's and stream-K's launches too, the calling stream's workspace one more
pointer). Without it (no C compiler at install time, ``PTXGEN_LAUNCHER=ctypes``, or a
driver that is not libcuda's) the ctypes path above runs, writing the same bytes.
"""

from __future__ import annotations

import ctypes
import os

from .gpu import CudaError, _driver
from .params import ParamBlock, slot_layout
from .tensormap import TensorMapArgs

TENSOR_MAP_BYTES = 128

# Results of a launch that mean "this thread has no (or another) current context": set it and try once more.
RETRY_WITH_CONTEXT = frozenset({201, 400, 709})  # INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED


class _CtypesDriver:
    # the compiled launcher may call libcuda's cuLaunchKernel and cuStreamIsCapturing itself (0: it dlopens
    # libcuda.so.1 as we did)
    c_launch = 0
    c_capture = 0

    def __init__(self, lib: ctypes.CDLL):
        u32, vp = ctypes.c_uint32, ctypes.c_void_p
        self.launch = lib.cuLaunchKernel
        self.launch.restype = ctypes.c_int
        self.launch.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
        self._encode = lib.cuTensorMapEncodeTiled
        self._encode.restype = ctypes.c_int
        self._encode.argtypes = [vp, ctypes.c_int, u32, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self._out = (ctypes.c_ubyte * (TENSOR_MAP_BYTES + 64))()
        self._out_addr = ctypes.addressof(self._out) + (-ctypes.addressof(self._out) % 64)
        # stream-K's workspace (api.launch.launchplan.streamk_workspace): is a stream capturing, and its flags zeroed in stream order
        self._is_capturing = lib.cuStreamIsCapturing
        self._is_capturing.restype = ctypes.c_int
        self._is_capturing.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
        self._memset = lib.cuMemsetD32Async
        self._memset.restype = ctypes.c_int
        self._memset.argtypes = [ctypes.c_uint64, u32, ctypes.c_size_t, vp]

    def capture_status(self, stream: int) -> tuple[int, int]:
        """(CUresult, CUstreamCaptureStatus) of ``stream``: status 0 none, 1 active, 2 invalidated."""
        status = ctypes.c_int(0)  # one per call: launches on other threads ask at the same time
        rc = self._is_capturing(stream, ctypes.byref(status))
        return rc, status.value

    def memset_d32_async(self, ptr: int, value: int, count: int, stream: int) -> int:
        """cuMemsetD32Async: ``count`` 32-bit words at ``ptr`` set to ``value`` in ``stream``'s order (the CUresult)."""
        return self._memset(ptr, value, count, stream)

    def encode(self, a: TensorMapArgs) -> bytes:
        dims = (ctypes.c_uint64 * a.rank)(*a.global_dims)
        strides = (ctypes.c_uint64 * max(1, a.rank - 1))(*a.global_strides)
        box = (ctypes.c_uint32 * a.rank)(*a.box)
        estr = (ctypes.c_uint32 * a.rank)(*a.element_strides)
        rc = self._encode(self._out_addr, a.data_type, a.rank, a.global_address, dims, strides, box, estr, a.interleave,
                          a.swizzle, a.l2_promotion, a.oob_fill)
        if rc:
            raise CudaError(f"cuTensorMapEncodeTiled({a.to_json()}) failed: {error_name(rc)} ({rc})")
        return ctypes.string_at(self._out_addr, TENSOR_MAP_BYTES)


class _BindingsDriver:
    """The same two calls through cuda-python (slower; used only when ctypes cannot load libcuda)."""

    def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        cu = _driver()
        return int(cu.cuLaunchKernel(cu.CUfunction(func), gx, gy, gz, bx, by, bz, smem, cu.CUstream(stream), params, 0)[0])

    def encode(self, a: TensorMapArgs) -> bytes:
        from .tensormap import encode

        return encode(a)

    def capture_status(self, stream: int) -> tuple[int, int]:
        cu = _driver()
        err, status = cu.cuStreamIsCapturing(cu.CUstream(stream))
        return int(err), int(status)

    def memset_d32_async(self, ptr: int, value: int, count: int, stream: int) -> int:
        cu = _driver()
        return int(cu.cuMemsetD32Async(cu.CUdeviceptr(ptr), value, count, cu.CUstream(stream))[0])


_DRIVER = None


def launcher():
    """The process's driver entry points (``.launch(func, gx, gy, gz, bx, by, bz, smem, stream, params, None)``
    returning the CUresult as an int, and ``.encode(TensorMapArgs) -> bytes``)."""
    global _DRIVER
    if _DRIVER is None:
        try:
            _DRIVER = _CtypesDriver(ctypes.CDLL("libcuda.so.1"))
        except (OSError, AttributeError):
            _DRIVER = _BindingsDriver()
    return _DRIVER


def error_name(rc: int) -> str:
    try:
        cu = _driver()
        name = cu.cuGetErrorName(cu.CUresult(rc))[1]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - an unknown code still gets reported by number
        return "CUDA error"


_MODULE: list = []
# what the Python side calls on the compiled module; a module missing one is a stale in-place build, not used
_MODULE_NAMES = ("Launcher", "Hot", "KernelBase", "forget_tables", "hot_gemm", "hot_kernel", "set_tensor_type",
                 "WS_STREAMK", "LAUNCH_ABI")  # LAUNCH_ABI: Launcher(..., masks[, workspace]), one launch
MAX_OPERANDS = 8  # _launcher.h's: A, B, D and up to five more pointers a Launcher patches


def compiled_module():
    """The compiled launcher module (``ptxgen.runtime.launch._launcher``), or None where it was not built or
    ``PTXGEN_LAUNCHER=ctypes`` asks for the ctypes path."""
    if not _MODULE:
        mod = None
        if os.environ.get("PTXGEN_LAUNCHER", "").lower() != "ctypes":
            try:
                from . import _launcher as mod
            except ImportError:
                mod = None
            if mod is not None and not all(hasattr(mod, name) for name in _MODULE_NAMES):
                mod = None  # a build of older _launcher*.c left in place (setup.py build_ext --inplace): the ctypes path
        _MODULE.append(mod)
    return _MODULE[0]


def _launch_failed(rc: int) -> None:
    raise CudaError(f"cuLaunchKernel failed: {error_name(rc)} ({rc})")


def compiled_launcher(driver, *, func: int, grid, block, smem: int, params: ParamBlock, operands, ensure_context,
                      device_index: int, spans: tuple[int, int, int], masks: tuple[int, int] = (15, 15),
                      workspace: str | None = None):
    """A ``_launcher.Launcher`` for a prepared launch, or None (no compiled module, or a driver whose launch
    the C code cannot call: a fake one in tests without ``c_launch``, the cuda-python fallback; more than
    MAX_OPERANDS operands).

    ``operands``: the slots (``runtime.launch.params`` MapSlot, PtrSlot or SlotGroup) of A, B and D in ``params``,
    then any others (``run_all``'s order). ``driver.c_launch``: 0 for libcuda's cuLaunchKernel, else the address of a
    function with its signature. ``masks``: (A and B, D) pointer alignment masks (a pointer with any of those bits set
    is declined). ``workspace``: "stream_k" where the last operand is the calling stream's workspace with zeroed flags
    (split-K's and stream-K's: ``Launcher.run_cached`` takes the stream's remembered one, and declines a capturing
    stream; needs ``driver.c_capture``: 0 for libcuda's cuStreamIsCapturing, else a function with its signature)."""
    mod = compiled_module()
    address = getattr(driver, "c_launch", None)
    capture = getattr(driver, "c_capture", None) if workspace == "stream_k" else 0
    if mod is None or address is None or capture is None or len(operands) > MAX_OPERANDS:
        return None
    layout = [slot_layout(g) for g in operands]
    extra = () if workspace is None else (({"stream_k": mod.WS_STREAMK}[workspace], int(capture)),)
    try:
        return mod.Launcher(int(func), tuple(grid), tuple(block), int(smem), params.address, params, layout, int(address),
                            ensure_context, _launch_failed, int(device_index), tuple(spans), tuple(masks), *extra)
    except OSError:  # libcuda (or its cuStreamIsCapturing) not loadable from C: the ctypes path
        return None
