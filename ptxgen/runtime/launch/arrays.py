"""Reading device arrays from any library: pointer, shape, strides (in elements), dtype, device.

Three ways in, tried in this order:

1. a ``torch.Tensor`` (only when torch is already imported): its own ``data_ptr()``, ``stride()``,
   ``dtype`` and ``device``. Torch's ``__cuda_array_interface__`` is lossy for us: it reports bfloat16 as
   ``<f2`` (the same as float16), has no float8 types, and refuses tensors that require grad;
2. ``__cuda_array_interface__`` (CuPy, Numba, JAX, most CUDA libraries): ``data``, ``shape``,
   ``strides`` (bytes, ``None`` = C-contiguous), ``typestr`` and (version 3) the producer's ``stream``.
   The element type is taken from the object's ``dtype`` attribute when it names one (``bfloat16`` and
   the float8 types have no typestr of their own), else from ``typestr``;
3. ``__dlpack__`` / ``__dlpack_device__``: the ``DLManagedTensor`` in the capsule is read with ctypes.
   The capsule is not consumed: its destructor hands the tensor back to the producer, and the caller's
   object keeps the memory alive while the kernel runs, as with the other two paths.

Nothing here needs a GPU or imports torch/CuPy; errors are :class:`ArgumentError` (a ``ValueError``)
or :class:`DTypeError` (also a ``TypeError``), naming the argument, what was expected and what it got.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass


class ArgumentError(ValueError):
    """An array argument that the kernel cannot take (shape, layout, alignment, device)."""


class DTypeError(ArgumentError, TypeError):
    """An array argument of the wrong element type."""


# DLPack device types (dlpack.h DLDeviceType)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM, DL_CUDA_MANAGED = 1, 2, 3, 10, 13
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host (pinned host memory)", 4: "opencl", 7: "vulkan", 8: "metal",
                10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}

# Element types by name (numpy, ml_dtypes, torch without its "torch." prefix, CuPy, JAX), as ptxgen spells them.
# float32 storage is "f32": the tf32 kernels read it, and it is also an output type.
DTYPE_BY_NAME = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
    "int8": "s8",
    "uint8": "u8",
    "int32": "s32",
}
ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "s32": 4}

# __cuda_array_interface__ typestr (numpy's array-interface codes). '<f2' is float16; bfloat16 has none.
_TYPESTR = {"f2": "f16", "f4": "f32", "i1": "s8", "u1": "u8", "i4": "s32"}

# DLPack (code, bits) -> name (dlpack.h DLDataTypeCode)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_E4M3FN, _DL_E5M2 = 0, 1, 2, 4, 10, 12
_DLPACK_DTYPE = {
    (_DL_FLOAT, 16): "f16",
    (_DL_BFLOAT, 16): "bf16",
    (_DL_FLOAT, 32): "f32",
    (_DL_E4M3FN, 8): "e4m3",
    (_DL_E5M2, 8): "e5m2",
    (_DL_INT, 8): "s8",
    (_DL_UINT, 8): "u8",
    (_DL_INT, 32): "s32",
}
_DLPACK_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool", 10: "float8_e4m3fn", 12: "float8_e5m2"}


@dataclass(frozen=True)
class ArrayInfo:
    """What a kernel launch needs to know about one array argument."""

    name: str  # the argument's name, for messages
    ptr: int  # address of element [0, 0, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: str  # ptxgen's spelling ("bf16", "f32", ...), or the library's name for types ptxgen has no use for
    itemsize: int
    device: tuple[int, int] | None  # (DLPack device type, device index); None: unknown (ask the driver)
    library: str  # "torch", "cupy", "numpy", "jax", ... (the top-level module of the object's type)
    via: str  # "torch", "cuda_array_interface" or "dlpack"
    producer_stream: int | None = None  # __cuda_array_interface__ v3 "stream": work on it must finish first

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device_str(self) -> str:
        if self.device is None:
            return "an unknown device"
        kind, index = self.device
        return f"{DEVICE_NAMES.get(kind, f'DLPack device type {kind}')}:{index}"

    @property
    def on_cuda(self) -> bool | None:
        return None if self.device is None else self.device[0] in (DL_CUDA, DL_CUDA_MANAGED)


def library_of(obj) -> str:
    return type(obj).__module__.split(".")[0]


def _is_torch_tensor(obj) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _dtype_name(obj) -> str | None:
    """ptxgen's name for ``obj.dtype`` (or the library's own name for other types), None without one."""
    dt = getattr(obj, "dtype", None)
    if dt is None:
        return None
    text = str(getattr(dt, "name", None) or dt)
    text = text.removeprefix("torch.")
    return DTYPE_BY_NAME.get(text, text)


def read_array(obj, name: str, stream: int | None = None) -> ArrayInfo:
    """Read ``obj`` (a torch tensor, or anything with ``__cuda_array_interface__`` or ``__dlpack__``).

    ``stream`` is the stream the kernel will run on; a DLPack producer is asked to make its pending
    work visible to it (``__dlpack__(stream=...)``)."""
    if _is_torch_tensor(obj):
        return _from_torch(obj, name)
    cai = None
    if hasattr(type(obj), "__cuda_array_interface__") or hasattr(obj, "__cuda_array_interface__"):
        try:
            cai = obj.__cuda_array_interface__
        except Exception as e:  # noqa: BLE001 - e.g. a host array that only exposes the property
            if not hasattr(obj, "__dlpack__"):
                raise ArgumentError(f"{name}: reading its __cuda_array_interface__ failed: {e}") from None
    if cai is not None:
        return _from_cai(obj, cai, name)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, stream)
    raise DTypeError(
        f"{name} must be a device array exposing __cuda_array_interface__ or DLPack (__dlpack__), such as a torch "
        f"tensor or a CuPy array; got {type(obj).__module__}.{type(obj).__qualname__}"
    )


def _from_torch(t, name: str) -> ArrayInfo:
    dev = t.device
    if dev.type == "cuda":
        device = (DL_CUDA, dev.index if dev.index is not None else 0)
    elif dev.type == "cpu":
        device = (DL_CPU, 0)
    else:
        device = (-1, dev.index or 0)
    dtype = str(t.dtype).removeprefix("torch.")
    return ArrayInfo(name, int(t.data_ptr()), tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()),
                     DTYPE_BY_NAME.get(dtype, dtype), int(t.element_size()), device, "torch", "torch")


def _dlpack_device(obj) -> tuple[int, int] | None:
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    try:
        kind, index = fn()
        return int(kind), int(index)
    except Exception:  # noqa: BLE001 - a device we cannot name is checked through the driver instead
        return None


def _from_cai(obj, cai: dict, name: str) -> ArrayInfo:
    try:
        shape = tuple(int(s) for s in cai["shape"])
        ptr = int(cai["data"][0] or 0)
        typestr = str(cai["typestr"])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ArgumentError(f"{name}: malformed __cuda_array_interface__ ({e!r}): {cai!r}") from None
    if cai.get("mask") is not None:
        raise ArgumentError(f"{name}: masked arrays (__cuda_array_interface__ 'mask') are not supported")
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        raise ArgumentError(f"{name}: unreadable __cuda_array_interface__ typestr {typestr!r}") from None
    dtype = _dtype_name(obj) or _TYPESTR.get(typestr[1:], f"typestr {typestr}")
    if dtype in ITEMSIZE and ITEMSIZE[dtype] != itemsize:
        raise ArgumentError(f"{name}: its dtype says {dtype} ({ITEMSIZE[dtype]} B) but __cuda_array_interface__ says "
                            f"{typestr} ({itemsize} B)")
    strides = cai.get("strides")
    if strides is None:
        elem = _contiguous_strides(shape)
    else:
        byte_strides = tuple(int(s) for s in strides)
        if len(byte_strides) != len(shape):
            raise ArgumentError(f"{name}: __cuda_array_interface__ has {len(shape)} dims but {len(byte_strides)} strides")
        bad = [s for s in byte_strides if s % itemsize]
        if bad:
            raise ArgumentError(f"{name}: byte strides {byte_strides} are not multiples of the element size {itemsize} B")
        elem = tuple(s // itemsize for s in byte_strides)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    return ArrayInfo(name, ptr, shape, elem, dtype, itemsize, _dlpack_device(obj), library_of(obj),
                     "cuda_array_interface", None if stream is None else int(stream))


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(1, s)
    return tuple(reversed(out))


# --- DLPack through ctypes -----------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_stream_arg(stream: int | None) -> int | None:
    """The ``stream`` argument of ``__dlpack__`` for a CUDA consumer: 1 for the legacy default stream (0 is
    not allowed by the protocol), 2 for per-thread default, else the handle."""
    if stream is None:
        return None
    return 1 if stream == 0 else stream


def _from_dlpack(obj, name: str, stream: int | None) -> ArrayInfo:
    device = _dlpack_device(obj)
    try:
        if device is not None and device[0] in (DL_CUDA, DL_CUDA_MANAGED, DL_ROCM) and stream is not None:
            capsule = obj.__dlpack__(stream=dlpack_stream_arg(stream))
        else:
            capsule = obj.__dlpack__()
    except Exception as e:  # noqa: BLE001
        raise ArgumentError(f"{name}: exporting it through DLPack failed: {e}") from None
    if _capsule_is_valid(capsule, b"dltensor"):
        managed = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
        t = managed.dl_tensor
    elif _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, b"dltensor_versioned"))
        t = managed.dl_tensor
    else:
        raise ArgumentError(f"{name}: __dlpack__ returned {capsule!r}, not an unconsumed 'dltensor' capsule")
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    strides = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else _contiguous_strides(shape)
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    if lanes != 1:
        dtype = f"{_DLPACK_CODE_NAMES.get(code, code)}{bits}x{lanes}"
    else:
        dtype = _DLPACK_DTYPE.get((code, bits)) or f"{_DLPACK_CODE_NAMES.get(code, f'code {code} ')}{bits}"
    ptr = int(t.data or 0) + int(t.byte_offset)
    dev = (int(t.device.device_type), int(t.device.device_id))
    del capsule  # the capsule's destructor calls the producer's deleter; obj still holds the memory
    return ArrayInfo(name, ptr, shape, strides, dtype, max(1, bits * lanes // 8), dev, library_of(obj), "dlpack")
