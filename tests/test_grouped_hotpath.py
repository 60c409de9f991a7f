"""The grouped call's hot path (CPU tier: a simulated device, a fake encoder and a stand-in ``torch`` module).

The first call with a dispatch key (shapes, strides, dtypes, devices) binds, checks and prepares a launch; a repeat
call with the same or new pointers only writes the pointers into that launch's parameter block and launches. The
bytes cuLaunchKernel reads at each launch (through the void** array) must equal what the uncached path,
``runtime.launch.grouped.grouped_args`` built from scratch for the same pointers, gives; a slot left pointing at the
previous buffer must show up as a difference (the control).
"""

from __future__ import annotations

import sys
import types

import pytest

import ptxgen.api.launch.streams as streams
import ptxgen.api.groupedkernel as groupedkernel
import ptxgen.grouped as grouped
from ptxgen.api.arrays import groupedpack, packing
from ptxgen.runtime.launch.arrays import ArgumentError
from ptxgen.runtime.launch.gpu import Device
from ptxgen.runtime.launch.grouped import GroupedProblem, grouped_args
from test_grouped import CaiArray, _fake_encode, read_block

STREAM = 0x77


def SMALL_BF16():
    """grouped_gemm's bf16 kernel for groups of under 768 rows on average: 64 x 256, ping-pong consumers."""
    spec = grouped.grouped_spec("bf16", small=True)
    assert (spec.bm, spec.bn, spec.consumers.value) == (64, 256, "pingpong")
    return spec


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"

    __repr__ = __str__


_SIZES = {"bfloat16": 2, "float16": 2, "float32": 4, "int32": 4, "float8_e4m3fn": 1}


def fake_torch_module():
    """Just enough of torch for ptxgen's torch paths: Tensor (data_ptr, shape, stride, dtype, device, new_empty)."""
    torch = types.ModuleType("torch")
    for name in _SIZES:
        setattr(torch, name, FakeDtype(name))
    heap = [0x7000000]

    class Tensor:
        def __init__(self, shape, dtype, ptr=None, strides=None):
            self.shape, self.dtype = tuple(shape), dtype
            self._strides = strides or tuple(int(_prod(shape[i + 1:])) for i in range(len(shape)))
            if ptr is None:
                ptr, heap[0] = heap[0], heap[0] + 0x1000000
            self._ptr = ptr
            self.device = types.SimpleNamespace(type="cuda", index=0)

        def data_ptr(self):
            return self._ptr

        def stride(self):
            return self._strides

        def get_device(self):
            return 0

        def element_size(self):
            return _SIZES[self.dtype.name]

        def new_empty(self, shape, dtype):
            return Tensor(shape, dtype)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.empty = lambda shape, dtype, device: Tensor(shape, dtype)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: STREAM)
    torch.cuda = types.SimpleNamespace(current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=STREAM))
    return torch


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


@pytest.fixture
def sim(monkeypatch):
    """A simulated H200: launches recorded with the parameter bytes read at launch time; encodes counted."""
    fake = Device(0, "simulated H200", (9, 0), None, None, 132)
    rec = types.SimpleNamespace(launches=[], encoded=[], kinds={})

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            self.func = 0xF00D

    class FakeDriver:
        def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            rec.launches.append(dict(params=params, stream=stream, grid=(gx, gy, gz), args=read_block(params, rec.kinds["k"])))
            return 0

        def encode(self, args):
            rec.encoded.append(args.global_address)
            return _fake_encode(args)

    driver = FakeDriver()
    monkeypatch.setattr(streams, "require_gpu", lambda index=None: fake)
    monkeypatch.setattr(streams, "ensure_current", lambda dev: None)
    monkeypatch.setattr("ptxgen.runtime.launch.gpu.Kernel", FakeKernel)
    monkeypatch.setattr(groupedkernel, "launcher", lambda: driver)
    for table in ("_KERNELS", "_SPECS", "_BY_TYPES", "_TORCH_KERNELS"):
        monkeypatch.setattr(grouped, table, {})
    monkeypatch.setitem(sys.modules, "torch", fake_torch_module())
    binds = []
    real_bind = groupedkernel.bind_grouped
    monkeypatch.setattr(groupedkernel, "bind_grouped", lambda *a, **kw: binds.append(1) or real_bind(*a, **kw))
    rec.binds = binds
    return rec


def uncached(kernel, a, b, offs, out, scales=(0, 0)) -> list:
    """The parameters the uncached path builds from scratch for these tensors (fake encoder)."""
    m, k = a.shape
    g, n, _ = b.shape
    p = GroupedProblem(m, n, k, g, a.stride()[0], b.stride()[1], out.stride()[0])
    args = grouped_args(kernel.plan, a.data_ptr(), b.data_ptr(), offs.data_ptr(), out.data_ptr(), p, encode=_fake_encode,
                        scale_ptrs=scales)
    return [v if isinstance(v, bytes) else int(v) for v in args.read_back()]


def _problem(torch, m=700, n=256, k=136, g=5):
    T = torch.Tensor
    a1, a2 = T((m, k), torch.bfloat16), T((m, k), torch.bfloat16)
    b = T((g, n, k), torch.bfloat16)
    o1, o2 = T((g,), torch.int32), T((g,), torch.int32)
    d1, d2 = T((m, n), torch.bfloat16), T((m, n), torch.bfloat16)
    return a1, a2, b, o1, o2, d1, d2


def test_repeat_calls_write_the_uncached_bytes(sim):
    torch = sys.modules["torch"]
    kern = grouped._kernel_for(SMALL_BF16())  # _problem: 700 rows over 5 groups, 140 a group: the small-group tile
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    a1, a2, b, o1, o2, d1, d2 = _problem(torch)
    calls = [(a1, b, o1, d1), (a2, b, o1, d1), (a2, b, o2, d2), (a1, b, o1, d2), (a1, b, o1, d1), (a2, b, o2, d1)]
    for a, bb, o, d in calls:
        assert grouped.grouped_gemm(a, bb, o, d) is d
    assert len(sim.binds) == 1  # only the first call bound the arrays: the others took the hot path
    assert len(sim.launches) == len(calls) and len({x["params"] for x in sim.launches}) == 1
    assert {x["stream"] for x in sim.launches} == {STREAM}
    for (a, bb, o, d), launch in zip(calls, sim.launches):
        assert launch["args"] == uncached(kern, a, bb, o, d)
    # a map is encoded once per pointer it has held (A: a1, a2; B: b; D: d1, d2), never again
    assert sorted(sim.encoded) == sorted([a1.data_ptr(), a2.data_ptr(), b.data_ptr(), d1.data_ptr(), d2.data_ptr()])
    # the kernel's own call and an explicit stream take the same prepared launch
    assert kern(a2, b, o1, d2, stream=5) is d2 and len(sim.binds) == 1
    assert sim.launches[-1]["stream"] == 5 and sim.launches[-1]["args"] == uncached(kern, a2, b, o1, d2)


def test_control_a_slot_left_on_the_old_pointer_is_seen(sim):
    """The comparison above can fail: a hot path that forgot to patch A (its slot claims the new pointer but the
    block still holds the old map) gives bytes that differ from the uncached ones."""
    torch = sys.modules["torch"]
    kern = grouped._kernel_for(SMALL_BF16())  # _problem: 700 rows over 5 groups, 140 a group: the small-group tile
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    a1, a2, b, o1, _, d1, _ = _problem(torch)
    grouped.grouped_gemm(a1, b, o1, d1)
    (launch,) = kern._launches.values()
    launch.slots[0].ptr = a2.data_ptr()  # the bug: the block is not re-pointed at a2
    grouped.grouped_gemm(a2, b, o1, d1)
    assert sim.launches[-1]["args"] != uncached(kern, a2, b, o1, d1)
    assert sim.launches[-1]["args"] == uncached(kern, a1, b, o1, d1)


def test_new_shapes_prepare_a_new_launch_and_allocated_outputs(sim):
    torch = sys.modules["torch"]
    kern = grouped._kernel_for(SMALL_BF16())  # _problem: 700 rows over 5 groups, 140 a group: the small-group tile
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    a1, _, b, o1, _, d1, _ = _problem(torch)
    grouped.grouped_gemm(a1, b, o1, d1)
    a3, d3 = torch.Tensor((64, 136), torch.bfloat16), torch.Tensor((64, 256), torch.bfloat16)
    grouped.grouped_gemm(a3, b, o1, d3)  # another M: another key, bound and prepared
    assert len(sim.binds) == 2 and len(kern._launches) == 2
    assert sim.launches[-1]["args"] == uncached(kern, a3, b, o1, d3)
    outs = [grouped.grouped_gemm(a3, b, o1) for _ in range(3)]  # out=None: allocated per call, on the hot path after one
    assert len(sim.binds) == 3 and len({o.data_ptr() for o in outs}) == 3
    for o, launch in zip(outs, sim.launches[-3:]):
        assert o.shape == (64, 256) and launch["args"] == uncached(kern, a3, b, o1, o)


def test_a_pointer_the_hot_path_cannot_take_goes_to_the_checks(sim, monkeypatch):
    torch = sys.modules["torch"]
    kern = grouped._kernel_for(SMALL_BF16())  # _problem: 700 rows over 5 groups, 140 a group: the small-group tile
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    a1, _, b, o1, _, d1, _ = _problem(torch)
    grouped.grouped_gemm(a1, b, o1, d1)
    bad = torch.Tensor(a1.shape, torch.bfloat16, ptr=a1.data_ptr() + 8)
    copies = []  # a torch a whose data is not 16-byte aligned: a packed copy (said once), never the prepared launch
    monkeypatch.setattr(groupedpack, "packed_copy", lambda x, info: copies.append(info) or torch.Tensor(x.shape, x.dtype))
    monkeypatch.setattr(packing, "_WARNED", set())
    with pytest.warns(UserWarning, match="a: its data does not start 16-byte aligned; computing with a packed K-major copy"):
        grouped.grouped_gemm(bad, b, o1, d1)
    assert [c.ptr for c in copies] == [bad.data_ptr()] and len(sim.launches) == 2
    bad_offs = torch.Tensor((5,), torch.int32, ptr=o1.data_ptr() + 2)
    with pytest.raises(ArgumentError, match="4-byte aligned"):
        grouped.grouped_gemm(a1, b, bad_offs, d1)
    assert len(sim.launches) == 2


def test_scaled_repeat_calls_write_the_uncached_bytes(sim):
    torch = sys.modules["torch"]
    kern = grouped._kernel_for(grouped.grouped_spec("e4m3", rowwise=True))
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    m, n, k, g = 300, 256, 128, 3
    T, f8 = torch.Tensor, torch.float8_e4m3fn
    a, b, offs = T((m, k), f8), T((g, n, k), f8), T((g,), torch.int32)
    out = T((m, n), torch.bfloat16)
    sa1, sa2, sb = T((m,), torch.float32), T((m,), torch.float32), T((g, n), torch.float32)
    for s in (sa1, sa2, sa1):
        assert grouped.scaled_grouped_gemm(a, b, s, sb, offs, out) is out
        assert sim.launches[-1]["args"] == uncached(kern, a, b, offs, out, (s.data_ptr(), sb.data_ptr()))
    assert len(sim.binds) == 1 and len(sim.launches) == 3


def test_other_arrays_reuse_the_launch_by_their_array_info(sim):
    """Arrays that are not torch tensors (__cuda_array_interface__) still bind per call, then patch one block."""
    kern = grouped.compile_grouped(grouped.grouped_spec("bf16"))
    sim.kinds["k"] = [q.kind for q in kern.plan.abi.params]
    m, n, k, g = 700, 256, 136, 5
    arrays = [(CaiArray((m, k), "<f2", 2, 0x100000 * (1 + i), dtype="bfloat16"), CaiArray((m, n), "<f2", 2, 0x4000000 + 0x100000 * i,
                                                                                            dtype="bfloat16")) for i in range(3)]
    b = CaiArray((g, n, k), "<f2", 2, 0x2000000, dtype="bfloat16")
    offs = CaiArray((g,), "<i4", 4, 0x3000000)
    for a, out in arrays:
        kern(a, b, offs, out, stream=3)
    assert len(kern._launches) == 1 and len({x["params"] for x in sim.launches}) == 1
    for (a, out), launch in zip(arrays, sim.launches):
        p = GroupedProblem(m, n, k, g, k, k, n)
        ptrs = (a.__cuda_array_interface__["data"][0], 0x2000000, 0x3000000, out.__cuda_array_interface__["data"][0])
        want = [v if isinstance(v, bytes) else int(v) for v in grouped_args(kern.plan, *ptrs, p, encode=_fake_encode).read_back()]
        assert launch["args"] == want



@pytest.mark.parametrize("m, g, small", [(698, 8, True), (16707, 64, True), (767 * 16, 16, True), (768 * 16 - 1, 16, True),
                                          (768 * 16, 16, False), (16384, 8, False), (0, 4, True), (5, 0, False)])
def test_the_tile_follows_the_mean_rows_per_group(m, g, small):
    """16-bit inputs: the 64 x 256 ping-pong tile when M_total < 768 G (mean rows per group under 768), else 128 x 256;
    FP8 keeps 128 x 256 either way. Decided from the host's sizes, never from offs."""
    assert grouped.SMALL_GROUP_ROWS == 768
    assert grouped.small_groups(m, g) is small
    spec = grouped.grouped_spec("bf16", small=grouped.small_groups(m, g))
    assert (spec.bm, spec.bn, spec.consumers.value) == ((64, 256, "pingpong") if small else (128, 256, "cooperative"))
    assert grouped.grouped_spec("e4m3", small=True) == grouped.grouped_spec("e4m3")


def test_each_tile_class_gets_its_kernel_and_the_cached_call_the_same_bytes(sim):
    """grouped_gemm picks the kernel by M_total / G; a repeat call (the hot path, keyed on the tile class too) hands the
    driver the bytes the uncached path builds for the kernel the rule names, and the grid of that kernel's BM; moving
    between classes never reuses the other class's launch. offs is never read (the simulated device has no memory)."""
    torch = sys.modules["torch"]
    T = torch.Tensor
    n, k, g = 256, 136, 4
    big, small = grouped._kernel_for(grouped.grouped_spec("bf16")), grouped._kernel_for(SMALL_BF16())
    sim.kinds["k"] = [q.kind for q in big.plan.abi.params]
    assert sim.kinds["k"] == [q.kind for q in small.plan.abi.params]
    b, offs = T((g, n, k), torch.bfloat16), T((g,), torch.int32)
    # (rows, the kernel the rule must pick, its grid: (ceil(M / BM) + G - 1) tile rows x 1 column tile, under 132 SMs)
    cases = [(768 * g, big, 24 + 3), (768 * g - 1, small, 48 + 3), (200, small, 4 + 3), (5000, big, 40 + 3)]
    arrays = [(T((m, k), torch.bfloat16), T((m, n), torch.bfloat16)) for m, _, _ in cases]
    for _ in range(2):
        for (a, d), (m, kern, grid) in zip(arrays, cases):
            assert grouped.grouped_gemm(a, b, offs, d) is d
            assert sim.launches[-1]["args"] == uncached(kern, a, b, offs, d)
            assert sim.launches[-1]["grid"] == (grid, 1, 1)
    assert len(sim.binds) == len(cases)  # the second round took the hot path for every class
    assert len(big._launches) == 2 and len(small._launches) == 2
    # control: the other class's kernel builds other bytes (A's tensor map box is BM rows), so the check above can fail
    (a, d), (_, kern, _) = arrays[1], cases[1]
    assert uncached(big, a, b, offs, d) != uncached(small, a, b, offs, d)
