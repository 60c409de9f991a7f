"""The author layer's hot launch path (``Binder.launch``) on a machine with no GPU: a fake ``torch`` module (only
what the path reads), a fake driver that records each cuLaunchKernel's parameter block, a fake loaded kernel.

What must hold: the first call of a dispatch key is checked in full (every array read, every rule); later calls of
the same key read only the pointers (each alignment-checked) and the scalars, and the kernel sees exactly this call's
pointers and scalars (a tensor map re-encoded at its new address); a new shape, dtype, device or scalar type is a new
key and is checked again; arrays of another library take the checked path every call. Controls: a misaligned view,
a float where an i32 goes, a wrong dtype are refused on the hot path as on the checked one."""

from __future__ import annotations

import ctypes
import struct
import sys
import types

import pytest
from fake_torch import BF16, F32, FakeTensor, module

from ptxgen.author import Param, parse_operand
from ptxgen.runtime.launch.arrays import ArgumentError


class FakeDriver:
    def __init__(self):
        self.launches, self.encoded = [], []

    def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.launches.append({"func": func, "grid": (gx, gy, gz), "block": (bx, by, bz), "smem": smem, "stream": stream,
                              "params": params})
        return 0

    def encode(self, args):
        self.encoded.append(args.global_address)
        return struct.pack("<Q", args.global_address).ljust(128, b"\0")


@pytest.fixture
def rig(monkeypatch):
    """(binder, driver, reads): a Binder of (tmap_w: W's tensor map, x: bf16 pointer, out: f32 pointer, n: i32,
    alpha: f32) with the fakes in place; ``reads`` counts full argument reads."""
    import ptxgen.author.launch as launch
    import ptxgen.runtime.launch.fastlaunch as fastlaunch
    from ptxgen.api.launch import streams

    monkeypatch.setitem(sys.modules, "torch", module(stream_base=7000))
    driver = FakeDriver()
    monkeypatch.setattr(fastlaunch, "launcher", lambda: driver)
    reads = []
    real_read = launch.read_array
    monkeypatch.setattr(launch, "read_array", lambda a, name, *r: (reads.append(name), real_read(a, name, *r))[1])
    monkeypatch.setattr(streams, "ensure_current", lambda dev: None)
    monkeypatch.setattr(streams, "pointer_device", lambda ptr, name: 0)  # what the driver answers for a bare pointer
    w = parse_operand("W:k-sw128:bf16:128x64").plan()
    params = (Param("tmap_w", "tensormap", operand=w), Param("x", "ptr", dtype="bf16"),
              Param("out", "ptr", dtype="f32", const=False), Param("n", "i32"), Param("alpha", "f32"))
    binder = launch.Binder("k", params, w.operand.arch, b"", (128, 1, 1), 4096)
    loads = []
    monkeypatch.setattr(binder, "_load", lambda ordinal=None: (loads.append(ordinal), (types.SimpleNamespace(func=4242), None))[1])
    return binder, driver, reads, loads


def block_values(driver, i=-1):
    """(map address, x, out, n, alpha) as the kernel reads them from launch ``i``'s parameter block."""
    params = ctypes.cast(driver.launches[i]["params"], ctypes.POINTER(ctypes.c_void_p))
    tmap = struct.unpack("<Q", ctypes.string_at(params[0], 8))[0]
    x, out = (ctypes.c_uint64.from_address(params[k]).value for k in (1, 2))
    return tmap, x, out, ctypes.c_int32.from_address(params[3]).value, ctypes.c_float.from_address(params[4]).value


def args(base=1 << 24, n=300, alpha=0.5, device=0, w_dtype=BF16):
    w = FakeTensor((256, 1024), w_dtype, ptr=base, device=device)
    x = FakeTensor((n,), BF16, ptr=base + (1 << 20), device=device)
    out = FakeTensor((n,), F32, ptr=base + (2 << 20), device=device)
    return w, x, out, n, alpha


def test_second_call_of_a_key_reads_only_pointers_and_scalars(rig):
    binder, driver, reads, loads = rig
    binder.launch(args(), (3, 1, 1))
    assert reads == ["tmap_w", "x", "out"] and loads == [0]
    assert block_values(driver) == (1 << 24, (1 << 24) + (1 << 20), (1 << 24) + (2 << 20), 300, 0.5)
    assert driver.launches[-1]["stream"] == 7000 and driver.launches[-1]["func"] == 4242
    binder.launch(args(base=1 << 28, alpha=2.0), (5, 1, 1))
    assert reads == ["tmap_w", "x", "out"] and loads == [0], "the hot call read the arrays again"
    assert block_values(driver) == (1 << 28, (1 << 28) + (1 << 20), (1 << 28) + (2 << 20), 300, 2.0)
    assert driver.launches[-1]["grid"] == (5, 1, 1) and driver.encoded == [1 << 24, 1 << 28]
    binder.launch(args(base=1 << 28, alpha=2.0), (5, 1, 1), stream=99)
    assert driver.launches[-1]["stream"] == 99 and driver.encoded == [1 << 24, 1 << 28], "same pointer, no re-encode"


def test_a_new_shape_device_or_scalar_type_is_checked_again(rig):
    binder, driver, reads, loads = rig
    binder.launch(args(), (1, 1, 1))
    binder.launch(args(n=301), (1, 1, 1))
    assert reads.count("x") == 2 and block_values(driver)[3] == 301
    binder.launch(args(device=1), (1, 1, 1))
    assert reads.count("x") == 3 and loads == [0, 0, 1] and driver.launches[-1]["stream"] == 7001
    with pytest.raises(ArgumentError, match="alpha is a f32 scalar"):
        binder.launch(args(alpha=True), (1, 1, 1))
    with pytest.raises(ArgumentError, match="n is a i32 scalar"):
        binder.launch(args()[:3] + (300.0, 0.5), (1, 1, 1))
    assert len(driver.launches) == 3


def test_controls_hot_path_refuses_what_the_checked_path_refuses(rig):
    """A view 8 bytes off (same shape, strides, dtype: the hot key of a launched call) is refused by the hot path;
    a wrong dtype is a new key and refused by the full check."""
    binder, driver, reads, _ = rig
    binder.launch(args(), (1, 1, 1))
    w, x, out, n, alpha = args()
    x.ptr += 8
    with pytest.raises(ArgumentError, match="x: its address .* not 16-byte aligned"):
        binder.launch((w, x, out, n, alpha), (1, 1, 1))
    assert reads == ["tmap_w", "x", "out"], "the misaligned call was refused on the hot path"
    with pytest.raises(ArgumentError, match="is bf16, the array is f32"):
        binder.launch(args(w_dtype=F32), (1, 1, 1))
    assert len(driver.launches) == 1


def test_arrays_of_another_library_are_checked_every_call(rig):
    binder, driver, reads, _ = rig

    class Cai:
        def __init__(self, shape, ptr):
            self.shape, self.dtype = shape, "bfloat16"
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<V2", "data": (ptr, False), "version": 3,
                                             "strides": None}

    w, x, out, n, alpha = args()
    for base in (1 << 24, 1 << 26):
        binder.launch((w, Cai((300,), base + (1 << 20)), out, n, alpha), (1, 1, 1))
    assert reads.count("x") == 2 and reads.count("tmap_w") == 2
    assert block_values(driver)[1] == (1 << 26) + (1 << 20)
