"""The hot path of a call (CPU tier, simulated device and fake tensor-map encoder).

A call whose dispatch key was seen before only writes pointers into the launch prepared by the first call. The
bytes cuLaunchKernel reads (read back through the void** array) must equal what the slow path, built from
scratch (``runtime.launch.launch.gemm_args``), gives for the same arrays; a map left pointing at the previous buffer
must show up as a difference (the control).
"""

from __future__ import annotations

import ctypes
import importlib
import warnings

import pytest

import ptxgen
from ptxgen import api
from ptxgen.api import dispatch
from ptxgen.api.launch import hotkeys, launchplan
from ptxgen.api.arrays import packing
from ptxgen.runtime.launch.arrays import ArgumentError, read_array
from ptxgen.runtime.launch.launch import Problem, gemm_args
from ptxgen.runtime.launch.params import MapSlot, ParamBlock
from test_api import BF16, MN_BF16, FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor, mnmajor, read_params

TMA_STORE = dict(BF16, epilogue="tma")
CP_ASYNC = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=4,
                loader="cp.async")


def slow_bytes(kernel, a, b, out) -> list:
    """The parameters the slow path builds from scratch for these arrays (fake encoder), decoded as read_params."""
    ai, bi, oi = read_array(a, "a"), read_array(b, "b"), read_array(out, "out")
    p = api.bind(kernel.spec, ai, bi, oi).problem
    args = gemm_args(kernel.plan, ai.ptr, bi.ptr, oi.ptr, p, encode=_fake_encode)
    values = args.read_back()
    return [v if isinstance(v, bytes) else int(v) for v in values]


@pytest.fixture
def sim(monkeypatch):
    return SimulatedGPU(monkeypatch)


@pytest.mark.parametrize("fields", [BF16, TMA_STORE, MN_BF16, CP_ASYNC], ids=["tma", "tma-store", "mn-major", "cp.async"])
def test_hot_path_writes_the_slow_paths_bytes(sim, fields):
    k = ptxgen.compile(**fields, arch="sm_90a")
    _fresh(k)
    make = mnmajor if k.spec.a.major.value == "mn" else kmajor
    m, n, kk = 300, 200, 264
    odt = "float32" if k.spec.out_dtype.value == "f32" else "bfloat16"
    a1, a2 = make(m, kk, ld=304 if make is mnmajor else None), make(m, kk, ld=304 if make is mnmajor else None)
    b = make(n, kk, ld=208 if make is mnmajor else None)
    out1, out2 = FakeArray((m, n), odt, strides=(208, 1)), FakeArray((m, n), odt, strides=(208, 1))
    calls = [(a1, b, out1), (a2, b, out1), (a2, b, out2), (a1, b, out2), (a1, b, out1)]
    for x, y, o in calls:
        assert k(x, y, o) is o
    assert len(sim.launches) == len(calls) and len(k._entries) == 1  # one prepared launch served every call
    assert len({launch["params"] for launch in sim.launches}) == 1  # the same pre-packed block each time
    # the block is patched in place: compare right after each call
    sim.launches.clear()
    for x, y, o in calls:
        k(x, y, o)
        assert read_params(sim.launches[-1]["params"], k.params) == slow_bytes(k, x, y, o)
    # each map slot encoded once per distinct pointer (a1, a2; b; out1, out2 where D has a map)
    maps = sum(1 for q in k.params if q.kind == "tensormap")
    distinct = {"tmap_a": 2, "tmap_b": 1, "tmap_d": 2}
    assert len(sim.encoded) == sum(distinct[q.name] for q in k.params if q.kind == "tensormap")
    assert maps == (3 if fields is TMA_STORE else 0 if fields is CP_ASYNC else 2)


def test_control_a_stale_map_is_detected(sim):
    """If the hot path skipped re-pointing a slot, its bytes would differ from the slow path's: the comparison
    of the test above can fail."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    a1, a2, b = kmajor(300, 264), kmajor(300, 264), kmajor(200, 264)
    out = FakeArray((300, 200), strides=(208, 1))
    k(a1, b, out)
    (entry,) = k._entries.values()
    slot_a = entry.slots[0]
    assert isinstance(slot_a, MapSlot)
    slot_a.ptr = read_array(a2, "a").ptr  # pretend the block already points at a2 (it still holds a1's map)
    k(a2, b, out)
    stale = read_params(sim.launches[-1]["params"], k.params)
    assert stale != slow_bytes(k, a2, b, out)
    assert stale == slow_bytes(k, a1, b, out)  # it is a1's map: the stale pointer is what the comparison caught
    slot_a.ptr = None  # honest again: the next call re-points
    k(a2, b, out)
    assert read_params(sim.launches[-1]["params"], k.params) == slow_bytes(k, a2, b, out)


def test_a_new_key_prepares_a_new_launch_and_pointer_rules_still_apply(sim):
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    b = kmajor(200, 264)
    k(kmajor(300, 264), b, FakeArray((300, 200), strides=(208, 1)))
    k(kmajor(310, 264), b, FakeArray((310, 200), strides=(208, 1)))
    assert len(k._entries) == 2 and [read_params(x["params"], k.params)[3] for x in sim.launches] == [300, 310]
    # the same key with an unaligned pointer, or an out overlapping an input: refused before any launch
    n = len(sim.launches)
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        k(kmajor(300, 264, ptr=0x7E0000000008), b, FakeArray((300, 200), strides=(208, 1)))
    a = kmajor(300, 264)
    inside = FakeArray((300, 200), strides=(208, 1), ptr=read_array(a, "a").ptr + 1024)
    with pytest.raises(ArgumentError, match="out overlaps a"):
        k(a, b, inside)
    assert len(sim.launches) == n


def test_zero_size_dimensions_launch_nothing(sim):
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    out = FakeArray((0, 200), strides=(208, 1))
    assert k(FakeArray((0, 264)), kmajor(200, 264), out) is out
    out = FakeArray((300, 0), strides=(8, 1))
    assert k(kmajor(300, 264), FakeArray((0, 264)), out) is out
    assert sim.launches == []


def test_gemm_selects_once_per_key(sim, monkeypatch):
    chosen = []
    real = dispatch.choose_for_arrays

    def counting(*args):
        chosen.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(dispatch, "choose_for_arrays", counting)
    monkeypatch.setattr(dispatch, "_BY_KEY", {})
    b = kmajor(200, 264)
    for _ in range(3):
        ptxgen.gemm(kmajor(300, 264), b, FakeArray((300, 200), strides=(208, 1)))
    ptxgen.gemm(kmajor(300, 264), b, FakeArray((300, 200), "float32", strides=(200, 1)))  # another out dtype: a new key
    assert chosen == [(300, 264), (300, 264)] and len(sim.launches) == 4


class FakeTensor:
    """Just what Launch.call_torch reads of a torch tensor."""

    def __init__(self, ptr):
        self.ptr, self.zeroed = ptr, False

    def data_ptr(self):
        return self.ptr

    def zero_(self):
        self.zeroed = True


def test_torch_hot_path_pointer_rules(sim):
    """call_torch: the pointers of torch tensors go into the block; unaligned or overlapping ones fall back
    (None) to the slow path, which says why."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    a, b, out = kmajor(300, 264), kmajor(200, 264), FakeArray((300, 200), strides=(208, 1))
    k(a, b, out)
    (entry,) = k._entries.values()
    ta, tb, to = FakeTensor(0x1000000), FakeTensor(0x2000000), FakeTensor(0x3000000)
    assert entry.call_torch(ta, tb, to, 0x55) is to
    got = read_params(sim.launches[-1]["params"], k.params)
    assert sim.launches[-1]["stream"] == 0x55
    assert got == slow_bytes(k, kmajor(300, 264, ptr=0x1000000), kmajor(200, 264, ptr=0x2000000),
                             FakeArray((300, 200), strides=(208, 1), ptr=0x3000000))
    n = len(sim.launches)
    assert entry.call_torch(FakeTensor(0x1000008), tb, to, 0) is None  # unaligned
    assert entry.call_torch(ta, tb, FakeTensor(0x1000000 + 512), 0) is None  # out inside a
    assert len(sim.launches) == n


def test_param_block_layout():
    block = ParamBlock(["tensormap", "tensormap", "ptr", "i32", "i32", "i32", "i32"])
    assert block.base % 64 == 0 and all(x % 64 == 0 for x in block.addresses[:2])
    block.set(2, 0xDEADBEEF0)
    block.set(3, -5)
    block.set_map(1, bytes(range(128)))
    raw = block.param_bytes()
    assert raw[1] == bytes(range(128)) and int.from_bytes(raw[2], "little") == 0xDEADBEEF0
    assert int.from_bytes(raw[3], "little", signed=True) == -5
    assert [ctypes.c_void_p.from_address(block.address + 8 * i).value for i in range(7)] == list(block.addresses)
    with pytest.raises(ValueError):
        block.set_map(0, b"short")
    with pytest.raises(ValueError):
        ParamBlock(["float64"])


def test_pack_plan_names_what_needs_a_copy():
    def info(shape, strides, ptr=0x10000, dtype="bf16"):
        return api.arrays.binding.ArrayInfo("a", ptr, shape, strides, dtype, 2 if dtype == "bf16" else 4, (2, 0), "torch", "torch")

    assert packing.operand_problem(info((300, 264), (264, 1))) is None
    assert packing.operand_problem(info((257, 64), (1, 257))) == "its rows start 514 B apart, not a multiple of 16 B"
    assert packing.operand_problem(info((300, 64), (128, 2))) == "neither dimension is contiguous"
    assert packing.operand_problem(info((300, 64), (0, 1))) == "a broadcast view (stride 0)"
    assert packing.operand_problem(info((300, 64), (64, 1), ptr=0x10002)) == "its data does not start 16-byte aligned"
    assert packing.operand_problem(info((0, 64), (64, 1), ptr=0x10002)) is None  # empty: nothing is read
    out = info((300, 200), (1, 300))
    assert packing.out_problem(out, 300, 200) == "it is not row-major"
    assert packing.pack_plan(info((300, 264), (264, 1)), info((200, 264), (1, 264)), None) == {}
    b = api.arrays.binding.ArrayInfo("b", 0x20000, (201, 264), (1, 201), "bf16", 2, (2, 0), "torch", "torch")
    plan = packing.pack_plan(info((300, 264), (264, 1)), b, info((300, 201), (1, 300)))
    assert plan == {"b": "its rows start 402 B apart, not a multiple of 16 B", "out": "it is not row-major"}
    cupy_like = api.arrays.binding.ArrayInfo("b", 0x20000, (201, 264), (1, 201), "bf16", 2, (2, 0), "jax", "dlpack")
    assert packing.pack_plan(info((300, 264), (264, 1)), cupy_like, None) == {}  # only torch/CuPy arrays are copied


def test_warned_once(monkeypatch):
    monkeypatch.setattr(packing, "_WARNED", set())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        packing.warn_once("a", "its rows start 514 B apart", "copying")
        packing.warn_once("a", "its rows start 130 B apart", "copying")
        packing.warn_once("b", "its rows start 130 B apart", "copying")
    assert [str(x.message).split(":")[1].strip() for x in w] == ["a", "b"]


def test_torch_key_is_what_decides_the_launch():
    assert hotkeys.info_key(read_array(kmajor(3, 64, ptr=0x1000), "a"), read_array(kmajor(2, 64), "b"), None) == \
        hotkeys.info_key(read_array(kmajor(3, 64, ptr=0x9000), "a"), read_array(kmajor(2, 64), "b"), None)
    assert hotkeys.info_key(read_array(kmajor(3, 64), "a"), read_array(kmajor(2, 64), "b"), None) != \
        hotkeys.info_key(read_array(kmajor(3, 64, ld=72), "a"), read_array(kmajor(2, 64), "b"), None)


def test_problem_values_are_written_once():
    k = ptxgen.compile(**CP_ASYNC, arch="sm_90a")
    block, slots = launchplan.build_params(k.plan, Problem(300, 200, 264, 272, 264, 208), _fake_encode)
    raw = block.param_bytes()
    ints = [int.from_bytes(r, "little") for r, q in zip(raw, k.params) if q.kind == "i32"]
    assert ints == [300, 200, 264, 272, 264, 208] and set(slots) == {"A", "B", "D"}


def test_the_api_sits_above_the_runtime():
    """runtime never imports the API; the API package never imports torch_ops (which imports the API lazily)."""
    from pathlib import Path

    from test_layering import PKG, _ptxgen_imports

    for path in (PKG / "runtime").rglob("*.py"):
        assert not {m for m in _ptxgen_imports(path) if m.startswith(("ptxgen.api", "ptxgen.ops.torch_ops"))}, path.name
    for path in (PKG / "api").rglob("*.py"):
        assert not {m for m in _ptxgen_imports(path) if m.startswith(("ptxgen.ops.torch_ops", "ptxgen.cli"))}, path.name
    assert Path(PKG / "api" / "__init__.py").exists() and not (PKG / "api.py").exists()


def test_bench_api_usage_is_checked_before_any_gpu_work():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent

    def run(*args):
        return subprocess.run([sys.executable, "-m", "ptxgen", "bench", "--api", *args], capture_output=True, text=True, cwd=root)

    for args, words in ((["--shapes", "0x64x64"], "at least 1"), (["--shapes", "4x4"], "expected MxNxK"),
                        (["--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128"], "drop --bm")):
        r = run(*args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    try:
        importlib.import_module("torch")
        pytest.skip("torch is installed: the no-torch exit is not reachable here")
    except ImportError:
        r = run("--shapes", "64x64x64")
        assert r.returncode == 3 and "needs torch" in r.stderr


def test_precheck_refuses_before_any_copy():
    def info(name, shape, strides, dtype="bf16", ptr=None, device=(2, 0)):
        ptr = ptr if ptr is not None else {"a": 0x100000, "b": 0x200000, "out": 0x300000}[name]
        return api.arrays.binding.ArrayInfo(name, ptr, shape, strides, dtype, 4 if dtype in ("f32", "float64") else 2, device,
                                     "torch", "torch")

    a, b = info("a", (300, 64), (1, 301)), info("b", (200, 64), (64, 1))
    dispatch._precheck(a, b, info("out", (300, 200), (200, 1)), None)  # fine: nothing raised
    cases = [
        ((a, info("b", (200, 64), (64, 1), "f16"), None, None), "a is bf16"),
        ((a, info("b", (200, 72), (72, 1)), None, None), "K columns"),
        ((a, b, info("out", (200, 300), (300, 1)), None), "out has shape"),
        ((a, b, info("out", (300, 200), (200, 1), "float64"), None), "not float64"),
        ((a, b, None, "s32"), "not s32"),
        ((a, b, info("out", (300, 200), (200, 1), ptr=0x100000 + 64), None), "out overlaps a"),
        ((a, info("b", (200, 64), (64, 1), device=(1, 0)), None, None), "b is on cpu:0"),
    ]
    for args, words in cases:
        with pytest.raises(ArgumentError, match=words):
            dispatch._precheck(*args)


def test_bench_api_host_loops_are_interleaved_round_by_round():
    """``ptxgen bench --api`` times the three sides' loops in turn within each round (gemm, kernel, torch, gemm, ...),
    so that the host's drift over the seconds of a shape hits all of them; each loop's calls are its own side's."""
    from ptxgen.api.bench import bench_api

    order = []

    class Cuda:
        @staticmethod
        def synchronize():
            order.append("sync")

    fake_torch = type("FakeTorch", (), {"cuda": Cuda})
    calls = {name: (lambda name=name: order.append(name)) for name in ("gemm", "kernel", "torch")}
    host = bench_api._host_us(fake_torch, calls, n=2, rounds=3)
    assert set(host) == {"gemm", "kernel", "torch"} and all(v >= 0 for v in host.values())
    loops = [x for x in order if x != "sync"]
    assert loops == ["gemm", "gemm", "kernel", "kernel", "torch", "torch"] * 3
    assert order.count("sync") == 3 * 3 + 1  # before every loop (the GPU idle), and once after
