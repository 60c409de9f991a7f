"""A stand-in for torch on machines without it: CUDA tensors as far as ptxgen's launch paths read them (shape,
strides, dtype, device, pointer), for the hot-path tests (tests/test_author_hot.py, tests/test_attention_hot.py).
Nothing here has memory behind it."""

from __future__ import annotations

import types


class FakeDType:
    def __init__(self, name: str, size: int):
        self.name, self.size = name, size

    def __str__(self):
        return f"torch.{self.name}"


BF16, F16, F32 = FakeDType("bfloat16", 2), FakeDType("float16", 2), FakeDType("float32", 4)


def contiguous(shape) -> tuple:
    out, at = [], 1
    for d in reversed(shape):
        out.append(at)
        at *= d
    return tuple(reversed(out))


class FakeDevice(str):
    """``cuda:N``: a string as ``str(tensor.device)`` reads, with torch.device's ``type`` and ``index``."""

    @property
    def type(self):
        return self.split(":")[0]

    @property
    def index(self):
        return int(self.split(":")[1])


class FakeTensor:
    """A CUDA tensor: ``ptr`` None takes a fresh 16 MiB-aligned address."""

    next_ptr = 1 << 30

    def __init__(self, shape, dtype=BF16, ptr=None, device=0, strides=None):
        self.shape, self.dtype = tuple(shape), dtype
        self._strides = tuple(strides or contiguous(shape))
        if ptr is None:
            ptr, FakeTensor.next_ptr = FakeTensor.next_ptr, FakeTensor.next_ptr + (1 << 24)
        self.ptr, self.index = ptr, device
        self.device, self.is_cuda = FakeDevice(f"cuda:{device}"), True

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return self.index

    def data_ptr(self):
        return self.ptr

    def element_size(self):
        return self.dtype.size


def module(stream_base: int = 7000) -> types.ModuleType:
    """A ``torch`` module with ``Tensor``, ``float32``, ``empty``/``empty_like`` (fresh fake tensors) and the raw
    current-stream reader (``stream_base + device index``)."""
    fake = types.ModuleType("torch")
    fake.Tensor, fake.float32 = FakeTensor, F32
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: stream_base + index)
    fake.empty_like = lambda t: FakeTensor(t.shape, t.dtype, device=t.device.index, strides=t.stride())
    fake.empty = lambda shape, dtype, device: FakeTensor(shape, dtype, device=FakeDevice(device).index)
    return fake
