"""A minimal device array for kernels of one's own when neither torch (CUDA) nor CuPy is at hand: raw codes uploaded
into a ``ptxgen.runtime.launch.gpu.Buffer``, exposed through ``__cuda_array_interface__`` so the launch reads it as it reads a
torch tensor or a CuPy array."""

from __future__ import annotations

import numpy as np

from ..runtime.launch.arrays import ITEMSIZE

_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "s32": "int32", "u8": "uint8", "s8": "int8",
          "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
_CODE_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


class DeviceArray:
    """A C-contiguous device array of raw element codes (``dtype``: ptxgen's name, e.g. "bf16")."""

    def __init__(self, shape: tuple[int, ...], dtype: str):
        from ..runtime.launch.gpu import Buffer, require_gpu

        require_gpu()  # cuInit and the primary context, current on this thread
        self.shape, self.ptxgen_dtype = tuple(int(s) for s in shape), dtype
        self.itemsize = ITEMSIZE[dtype]
        self.dtype = _NAMES[dtype]  # read by ptxgen.runtime.launch.arrays (bf16 has no typestr of its own)
        self.buffer = Buffer(max(1, int(np.prod(self.shape))) * self.itemsize)

    @classmethod
    def from_codes(cls, codes: np.ndarray, dtype: str) -> "DeviceArray":
        arr = cls(codes.shape, dtype)
        arr.buffer.upload(np.ascontiguousarray(codes).astype(_CODE_TYPES[arr.itemsize]))
        return arr

    def codes(self) -> np.ndarray:
        n = int(np.prod(self.shape))
        return self.buffer.download(_CODE_TYPES[self.itemsize], n).reshape(self.shape)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": f"<V{self.itemsize}", "data": (self.buffer.address, False), "version": 3,
                "strides": None}

    def free(self) -> None:
        self.buffer.free()
