"""A pre-packed kernel parameter block: every parameter's bytes in one buffer, and the ``void**`` array that
``cuLaunchKernel`` reads, built once per launch configuration and patched in place per call.

Only the pointers change between calls that share a dispatch key (same shapes, strides, dtypes, device):
the raw pointer parameters are rewritten (8 bytes each) and the tensor maps are re-encoded only when their
pointer changed (:class:`MapSlot`: the last pointer, and a small cache keyed by pointer). Nothing here
needs a GPU; the encoder is passed in (the driver's, or a fake in tests).
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import replace

from .gpu import TENSORMAP_ALIGN, TENSORMAP_BYTES

_SIZE = {"ptr": 8, "u64": 8, "i32": 4, "u32": 4, "f32": 4, "tensormap": TENSORMAP_BYTES}
_ALIGN = {"ptr": 8, "u64": 8, "i32": 4, "u32": 4, "f32": 4, "tensormap": TENSORMAP_ALIGN}
_CTYPE = {"ptr": ctypes.c_uint64, "u64": ctypes.c_uint64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "f32": ctypes.c_float}


class ParamBlock:
    """``kinds``: each parameter's kind in ABI order (ptr, i32, u32, u64, f32, tensormap)."""

    def __init__(self, kinds: list[str]):
        offsets, at = [], 0
        for k in kinds:
            if k not in _SIZE:
                raise ValueError(f"unknown kernel argument kind {k!r} (one of {', '.join(_SIZE)})")
            at = -(-at // _ALIGN[k]) * _ALIGN[k]
            offsets.append(at)
            at += _SIZE[k]
        self.kinds = tuple(kinds)
        self._raw = (ctypes.c_ubyte * (at + TENSORMAP_ALIGN))()
        self.base = ctypes.addressof(self._raw) + (-ctypes.addressof(self._raw) % TENSORMAP_ALIGN)
        self.addresses = tuple(self.base + o for o in offsets)
        self.array = (ctypes.c_void_p * len(kinds))(*self.addresses)
        self.address = ctypes.addressof(self.array)  # the void** kernelParams

    def set(self, index: int, value) -> None:
        kind = self.kinds[index]
        if kind == "tensormap":
            self.set_map(index, value)
        else:
            _CTYPE[kind].from_address(self.addresses[index]).value = value

    def set_ptr(self, index: int, value: int) -> None:
        ctypes.c_uint64.from_address(self.addresses[index]).value = value

    def set_map(self, index: int, data: bytes) -> None:
        if len(data) != TENSORMAP_BYTES:
            raise ValueError(f"a tensormap argument is {TENSORMAP_BYTES} bytes, not {len(data)}")
        ctypes.memmove(self.addresses[index], data, TENSORMAP_BYTES)

    def read_back(self) -> list:
        """The values as the kernel will see them, in KernelArgs.read_back's form (a tensormap as its bytes)."""
        return [ctypes.string_at(self.addresses[i], _SIZE[k]) if k == "tensormap" else _CTYPE[k].from_address(self.addresses[i]).value
                for i, k in enumerate(self.kinds)]

    def param_bytes(self) -> list[bytes]:
        """Each parameter's bytes as cuLaunchKernel will copy them (read through the void** array)."""
        return [ctypes.string_at(self.array[i], _SIZE[k]) for i, k in enumerate(self.kinds)]


class MapSlot:
    """One tensor-map parameter of a block: its encoder arguments with the address left to fill in, the
    pointer it holds now, and the maps of the last few pointers (a caller that alternates between buffers
    does not re-encode)."""

    CACHE = 8

    def __init__(self, block: ParamBlock, index: int, template, encode):
        self.block, self.index, self.template, self.encode = block, index, template, encode
        self.ptr = None
        self._maps: OrderedDict = OrderedDict()

    @property
    def address(self) -> int:
        """Where this parameter's bytes lie in the block."""
        return self.block.addresses[self.index]

    def bytes_for(self, ptr: int) -> bytes:
        """The map for ``ptr``: from the cache, else encoded (and remembered)."""
        data = self._maps.get(ptr)
        if data is None:
            data = self.encode(replace(self.template, global_address=ptr))
            self._maps[ptr] = data
            if len(self._maps) > self.CACHE:
                self._maps.popitem(last=False)
        return data

    def point(self, ptr: int) -> None:
        """Make the block's map address ``ptr`` (called only when the pointer changed)."""
        self.block.set_map(self.index, self.bytes_for(ptr))
        self.ptr = ptr


class PtrSlot:
    """A raw pointer parameter."""

    def __init__(self, block: ParamBlock, index: int):
        self.block, self.index, self.ptr = block, index, None

    @property
    def address(self) -> int:
        return self.block.addresses[self.index]

    def point(self, ptr: int) -> None:
        self.block.set_ptr(self.index, ptr)
        self.ptr = ptr


class SlotGroup:
    """Several parameters that carry one pointer (D's tensor map and D itself in a TMA-store epilogue)."""

    def __init__(self, slots: list):
        self.slots, self.ptr = tuple(slots), None

    def point(self, ptr: int) -> None:
        for s in self.slots:
            s.point(ptr)
        self.ptr = ptr


def slot_layout(group) -> tuple:
    """The (address, map source or None) pairs of one operand's slot (or group), as the compiled launcher
    takes them: a raw pointer is written at its address, a map's bytes come from ``MapSlot.bytes_for``."""
    slots = group.slots if isinstance(group, SlotGroup) else (group,)
    return tuple((s.address, s.bytes_for if isinstance(s, MapSlot) else None) for s in slots)
