"""The compiled launcher (``ptxgen.runtime.launch._launcher``, CPU tier: simulated device, a ctypes callback standing in
for ``cuLaunchKernel``).

Both launch paths, the compiled one and the ctypes one (``PTXGEN_LAUNCHER=ctypes`` or no C compiler at install
time), must hand the driver the same parameter bytes for the same calls; both must equal what the slow path
builds from scratch. The C hot call (dispatch key, lookup, pointers, checks, launch) must decline what the
Python path refuses. Skipped where the extension was not built (``python setup.py build_ext --inplace`` or
``pip install .``).
"""

from __future__ import annotations

import ctypes

import pytest

import ptxgen
from ptxgen.api.launch import hotkeys
from ptxgen.runtime.launch import fastlaunch
from ptxgen.runtime.launch.arrays import read_array
from ptxgen.runtime.launch.gpu import CudaError
from test_api import BF16, MN_BF16, FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor, mnmajor, read_params
from test_hotpath import CP_ASYNC, TMA_STORE, slow_bytes

_launcher = pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)


class CDriver:
    """A driver whose launch the C code calls through a function pointer (as it calls libcuda's): it records
    the launch and the parameter bytes it was handed, and returns the codes in ``codes`` (then 0)."""

    def __init__(self, sim, kernel):
        self.sim, self.kernel, self.codes = sim, kernel, []
        self._cb = LAUNCH(self._launch)
        self.c_launch = ctypes.cast(self._cb, ctypes.c_void_p).value

    def _launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        rc = self.codes.pop(0) if self.codes else 0
        if rc == 0:
            self.sim.launches.append(dict(func=func, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream or 0,
                                          params=params, bytes=read_params(params, self.kernel.params), via="c"))
        return rc

    def launch(self, *args):  # the ctypes path (never taken while the compiled Launcher exists)
        raise AssertionError("the Python launch path ran although the compiled launcher was built")

    def encode(self, args):
        self.sim.encoded.append(args.global_address)
        return _fake_encode(args)


@pytest.fixture
def sim(monkeypatch):
    return SimulatedGPU(monkeypatch)


def _use_c(monkeypatch, sim, kernel) -> CDriver:
    driver = CDriver(sim, kernel)
    monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", driver)
    return driver


def _calls(make, odt):
    m, n, kk = 300, 200, 264
    ld = 304 if make is mnmajor else None
    a1, a2 = make(m, kk, ld=ld), make(m, kk, ld=ld)
    b = make(n, kk, ld=208 if make is mnmajor else None)
    out1, out2 = FakeArray((m, n), odt, strides=(208, 1)), FakeArray((m, n), odt, strides=(208, 1))
    return [(a1, b, out1), (a2, b, out1), (a2, b, out2), (a1, b, out2), (a1, b, out1), (a2, b, out2)]


@pytest.mark.parametrize("fields", [BF16, TMA_STORE, MN_BF16, CP_ASYNC], ids=["tma", "tma-store", "mn-major", "cp.async"])
def test_compiled_and_ctypes_paths_pack_identical_bytes(sim, monkeypatch, fields):
    k = ptxgen.compile(**fields, arch="sm_90a")
    make = mnmajor if k.spec.a.major.value == "mn" else kmajor
    odt = "float32" if k.spec.out_dtype.value == "f32" else "bfloat16"
    calls = _calls(make, odt)
    # the ctypes path (SimulatedGPU's driver has no c_launch): the bytes after each call
    _fresh(k)
    python_bytes = []
    for x, y, o in calls:
        assert k(x, y, o) is o
        python_bytes.append(read_params(sim.launches[-1]["params"], k.params))
    (entry,) = k._entries.values()
    assert entry._c is None
    # the compiled path, the same calls
    _fresh(k)
    sim.launches.clear()
    driver = _use_c(monkeypatch, sim, k)
    for x, y, o in calls:
        assert k(x, y, o) is o
    (entry,) = k._entries.values()
    assert isinstance(entry._c, _launcher.Launcher) and entry._c.launches == len(calls)
    assert [x["via"] for x in sim.launches] == ["c"] * len(calls)
    c_bytes = [x["bytes"] for x in sim.launches]
    assert c_bytes == python_bytes
    assert c_bytes == [slow_bytes(k, x, y, o) for x, y, o in calls]
    first = sim.launches[0]
    assert first["func"] == 0xF00D and first["smem"] == k.shared_bytes and first["block"] == k.block
    assert len({x["params"] for x in sim.launches}) == 1  # one pre-packed block, patched in place
    assert driver.codes == []


def test_control_a_wrong_map_source_shows_up(sim, monkeypatch):
    """The comparison above can fail: a Launcher whose A map comes from the wrong pointer packs other bytes."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    _use_c(monkeypatch, sim, k)
    (x, y, o), (x2, _, _) = _calls(kmajor, "bfloat16")[:2]
    k(x, y, o)
    (entry,) = k._entries.values()
    slot_a = entry.slots[0]
    wrong_ptr = read_array(x2, "a").ptr
    layout = [((slot_a.address, lambda ptr: slot_a.bytes_for(wrong_ptr)),),
              ((entry.slots[1].address, entry.slots[1].bytes_for),),
              ((entry.slots[2].address, None),)]
    driver = fastlaunch._DRIVER
    wrong = _launcher.Launcher(0xF00D, (6, 1, 1), k.block, k.shared_bytes, entry.block.address, entry.block, layout,
                               driver.c_launch, lambda: None, fastlaunch._launch_failed, 0, (0, 0, 0), (15, 15))
    p = [read_array(v, n).ptr for v, n in ((x, "a"), (y, "b"), (o, "out"))]
    wrong.patch(*p)
    got = read_params(entry.block.address, k.params)
    assert got != slow_bytes(k, x, y, o) and got == slow_bytes(k, x2, y, o)
    # the real Launcher believes the block still holds x's map (it patched it last): it must be told otherwise
    # by a call with another pointer before it writes x's map again
    entry._c.patch(*p)
    assert read_params(entry.block.address, k.params) != slow_bytes(k, x, y, o)  # the stale record, caught
    entry._c.patch(p[0] + 16 * 4096, p[1], p[2])
    entry._c.patch(*p)
    assert read_params(entry.block.address, k.params) == slow_bytes(k, x, y, o)


class FakeTorch:
    """What the C hot call reads of a torch tensor: shape, stride(), dtype, get_device(), data_ptr()."""

    def __init__(self, shape, stride, ptr, dtype="bf16", device=0):
        self.shape, self._stride, self.ptr, self.dtype, self._device = tuple(shape), tuple(stride), ptr, dtype, device

    def stride(self):
        return self._stride

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self.ptr


@pytest.fixture
def fake_tensor_type():
    _launcher.set_tensor_type(FakeTorch)
    yield FakeTorch
    real = hotkeys._TENSOR[0]
    _launcher.set_tensor_type(real)  # None (no torch here) or torch.Tensor


def test_c_hot_call_key_lookup_and_pointer_rules(sim, monkeypatch, fake_tensor_type):
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    _use_c(monkeypatch, sim, k)
    a, b, out = kmajor(300, 264), kmajor(200, 264), FakeArray((300, 200), strides=(208, 1))
    k(a, b, out)
    (entry,) = k._entries.values()
    entry._c.stream_reader = lambda index: 0x55 + index
    ta, tb, to = (FakeTorch((300, 264), (264, 1), 0x1000000), FakeTorch((200, 264), (264, 1), 0x2000000),
                  FakeTorch((300, 200), (208, 1), 0x3000000))
    key = hotkeys.torch_key(ta, tb, to)
    assert _launcher.torch_key(ta, tb, to) == key and _launcher.torch_key(ta, tb, None) == hotkeys.torch_key(ta, tb, None)
    table = {key: entry}
    n = len(sim.launches)
    assert _launcher.hot_kernel(table, ta, tb, to) is to
    assert _launcher.hot_gemm({("bf16", key): entry}, "bf16", ta, tb, to) is to
    assert len(sim.launches) == n + 2 and sim.launches[-1]["stream"] == 0x55
    want = slow_bytes(k, kmajor(300, 264, ptr=0x1000000), kmajor(200, 264, ptr=0x2000000),
                      FakeArray((300, 200), strides=(208, 1), ptr=0x3000000))
    assert sim.launches[-1]["bytes"] == want
    # declined (None), nothing launched: a key not seen, an unaligned pointer, out inside a, not a tensor,
    # another out_dtype, an entry without a compiled Launcher
    declined = [
        _launcher.hot_kernel(table, FakeTorch((301, 264), (264, 1), 0x1000000), tb, to),
        _launcher.hot_kernel(table, FakeTorch((300, 264), (264, 1), 0x1000008), tb, to),
        _launcher.hot_kernel(table, ta, tb, FakeTorch((300, 200), (208, 1), 0x1000000 + 512)),
        _launcher.hot_kernel(table, ta, kmajor(200, 264), to),
        _launcher.hot_gemm({("bf16", key): entry}, "f32", ta, tb, to),
        _launcher.hot_kernel({key: type("NoC", (), {"_c": None})()}, ta, tb, to),
    ]
    assert declined == [None] * 6 and len(sim.launches) == n + 2
    entry._c.stream_reader = None  # no stream reader: declined too
    assert _launcher.hot_kernel(table, ta, tb, to) is None and len(sim.launches) == n + 2


def test_c_hot_call_allocates_a_missing_out(sim, monkeypatch, fake_tensor_type):
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    _use_c(monkeypatch, sim, k)
    k(kmajor(300, 264), kmajor(200, 264), FakeArray((300, 200), strides=(208, 1)))
    (entry,) = k._entries.values()
    entry._c.stream_reader = lambda index: 7
    fresh = FakeTorch((300, 200), (208, 1), 0x5000000)
    monkeypatch.setattr(entry, "_allocate_torch", lambda a: fresh, raising=False)
    ta, tb = FakeTorch((300, 264), (264, 1), 0x1000000), FakeTorch((200, 264), (264, 1), 0x2000000)
    assert _launcher.hot_kernel({hotkeys.torch_key(ta, tb, None): entry}, ta, tb, None) is fresh
    assert sim.launches[-1]["bytes"][2] == 0x5000000 and sim.launches[-1]["stream"] == 7


def test_c_launch_errors(sim, monkeypatch):
    """A launch without a current context sets it and retries once; another failure raises CudaError."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    driver = _use_c(monkeypatch, sim, k)
    made_current = []
    monkeypatch.setattr("ptxgen.api.launch.streams.ensure_current", lambda dev: made_current.append(dev))
    a, b, out = kmajor(300, 264), kmajor(200, 264), FakeArray((300, 200), strides=(208, 1))
    k(a, b, out)
    driver.codes = [201]
    n = len(made_current)
    k(a, b, out)
    assert len(made_current) == n + 1 and driver.codes == []
    driver.codes = [1, 1]
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed: .*\(1\)"):
        k(a, b, out)


def test_launcher_refuses_a_bad_layout():
    with pytest.raises(ValueError, match="3 to 8 sequences of slots"):
        _launcher.Launcher(1, (1, 1, 1), (1, 1, 1), 0, 0, None, [(), ()], 1, None, None, 0, (0, 0, 0), (15, 15))
    with pytest.raises(ValueError, match="3 to 8 sequences of slots .*, not 9"):
        _launcher.Launcher(1, (1, 1, 1), (1, 1, 1), 0, 0, None, [()] * 9, 1, None, None, 0, (0, 0, 0), (15, 15))
    with pytest.raises(ValueError, match="1 to 4 slots"):
        _launcher.Launcher(1, (1, 1, 1), (1, 1, 1), 0, 0, None, [(), (), ()], 1, None, None, 0, (0, 0, 0), (15, 15))


def test_ctypes_path_when_asked(monkeypatch):
    monkeypatch.setenv("PTXGEN_LAUNCHER", "ctypes")
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is None
    monkeypatch.delenv("PTXGEN_LAUNCHER")
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is _launcher


# ---- the remembered last hit (HotState: Hot.call, and CompiledKernel's call through KernelBase) ----------------------
def _two_entries(sim, monkeypatch):
    """A kernel with two prepared launches (M = 300 and M = 304), both in its hot table under FakeTorch keys."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    _use_c(monkeypatch, sim, k)
    k(kmajor(300, 264), kmajor(200, 264), FakeArray((300, 200), strides=(208, 1)))
    k(kmajor(304, 264), kmajor(200, 264), FakeArray((304, 200), strides=(208, 1)))
    e300, e304 = k._entries.values()
    for e in (e300, e304):
        e._c.stream_reader = lambda index: 0x55
    ta, tb, to = (FakeTorch((300, 264), (264, 1), 0x1000000), FakeTorch((200, 264), (264, 1), 0x2000000),
                  FakeTorch((300, 200), (208, 1), 0x3000000))
    ta4, to4 = FakeTorch((304, 264), (264, 1), 0x4000000), FakeTorch((304, 200), (208, 1), 0x5000000)
    k._torch_entries[hotkeys.torch_key(ta, tb, to)] = e300
    k._torch_entries[hotkeys.torch_key(ta4, tb, to4)] = e304
    return k, (ta, tb, to), (ta4, to4), (e300, e304)


def _want(x, y, o):
    return slow_bytes(_want.k, kmajor(x.shape[0], x.shape[1], ptr=x.ptr), kmajor(y.shape[0], y.shape[1], ptr=y.ptr),
                      FakeArray(o.shape, strides=o._stride, ptr=o.ptr))


def test_kernel_call_runs_in_c_and_remembers_the_last_hit(sim, monkeypatch, fake_tensor_type):
    """k(a, b, out) goes straight into C (KernelBase): the first call with a key looks it up, the next ones with the
    same metadata are served by the remembered hit; each launch packs the slow path's bytes for its own key."""
    k, (ta, tb, to), (ta4, to4), (e300, e304) = _two_entries(sim, monkeypatch)
    _want.k = k
    assert type(k).__call__ is hotkeys.KernelBase.__call__  # no Python frame between the user and C
    assert k._hot_counts == (0, 0)
    n, before = len(sim.launches), e300._c.launches + e304._c.launches
    assert k(ta, tb, to) is to and k._hot_counts == (0, 1)
    assert k(ta, tb, to) is to and k(ta, tb, out=to) is to and k(ta, tb, to, stream=None) is to
    assert k._hot_counts == (3, 1)
    assert sim.launches[-1]["bytes"] == _want(ta, tb, to) and sim.launches[-1]["stream"] == 0x55
    # another key in the table: looked up (not served by the last hit), and its own launch
    assert k(ta4, tb, to4) is to4 and k._hot_counts == (3, 2)
    assert sim.launches[-1]["bytes"] == _want(ta4, tb, to4) != sim.launches[-2]["bytes"]
    assert k(ta, tb, to) is to and k._hot_counts == (3, 3) and sim.launches[-1]["bytes"] == _want(ta, tb, to)
    assert len(sim.launches) == n + 6 and e300._c.launches + e304._c.launches == before + 6


def change_in_place(change: str, k, ta, tb, to, monkeypatch):
    """Change one of the remembered hit's tensors in place (``change``: resize, restride, dtype, device, b_resize,
    out_restride; anything else: no out, with an allocation that must not run); the ``out`` to call with."""
    if change == "resize":
        ta.shape = (301, 264)
    elif change == "restride":
        ta._stride = (272, 1)
    elif change == "dtype":
        ta.dtype = "f16"
    elif change == "device":
        ta._device = 1
    elif change == "b_resize":
        tb.shape = (200, 272)
    elif change == "out_restride":
        to._stride = (200, 1)
    else:
        monkeypatch.setattr(k._torch_entries[hotkeys.torch_key(ta, tb, to)], "_allocate_torch", lambda a: 1 / 0,
                            raising=False)
        return None
    return to

@pytest.mark.parametrize("change", ["resize", "restride", "dtype", "device", "b_resize", "out_restride", "no_out"])
def test_control_changed_metadata_misses_the_last_hit(sim, monkeypatch, fake_tensor_type, change):
    """The same objects changed in place (as resize_, as_strided_, set_ do to a torch tensor) must not be served by
    the remembered hit: the key is looked up again, and a key the table does not hold launches nothing (the call
    goes on to the Python path, which says what is wrong)."""
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    slow = []
    k._call_py = lambda *args, **kw: slow.append(args) or "slow path"
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k._hot_counts == (1, 1)
    n = len(sim.launches)
    assert k(ta, tb, change_in_place(change, k, ta, tb, to, monkeypatch)) == "slow path"
    assert k._hot_counts == (1, 1) and len(sim.launches) == n and len(slow) == 1


def test_control_a_cleared_table_drops_the_last_hit(sim, monkeypatch, fake_tensor_type):
    """LaunchTable.clear (as _remember does when full) and del: the remembered hit goes with the entry."""
    k, (ta, tb, to), (ta4, to4), _ = _two_entries(sim, monkeypatch)
    k._call_py = lambda *args, **kw: "slow path"
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k._hot_counts == (1, 1)
    del k._torch_entries[hotkeys.torch_key(ta, tb, to)]
    n = len(sim.launches)
    assert k(ta, tb, to) == "slow path" and len(sim.launches) == n
    assert k(ta4, tb, to4) is to4 and k(ta4, tb, to4) is to4 and k._hot_counts == (2, 2)
    k._torch_entries.clear()
    assert k(ta4, tb, to4) == "slow path" and len(sim.launches) == n + 2


def test_kernel_call_hands_other_calls_to_the_python_path(sim, monkeypatch, fake_tensor_type):
    """A stream, an unknown keyword, a wrong argument count, non-tensors, a pointer rule: the Python path gets the
    call with its arguments as given (and raises what it raises)."""
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    seen = []
    k._call_py = lambda *args, **kw: seen.append((args, kw)) or "slow path"
    n = len(sim.launches)
    assert k(ta, tb, to, stream=7) == "slow path" and seen[-1] == ((ta, tb, to), {"stream": 7})
    assert k(ta, tb, to, foo=1) == "slow path" and seen[-1] == ((ta, tb, to), {"foo": 1})
    assert k(ta) == "slow path" and k(ta, tb, to, to) == "slow path"
    assert k(ta, tb, to, out=to) == "slow path"  # out twice: Python raises the TypeError
    assert k(ta, kmajor(200, 264), to) == "slow path"
    assert k(ta, tb, FakeTorch((300, 200), (208, 1), 0x1000000 + 512)) == "slow path"  # out inside a
    assert len(sim.launches) == n and len(seen) == 7
    del k._call_py
    with pytest.raises(TypeError):
        k(ta, tb, to, out=to)


def test_gemm_hot_table_compares_the_out_dtype(sim, monkeypatch, fake_tensor_type):
    k, (ta, tb, to), _, (e300, _) = _two_entries(sim, monkeypatch)
    table = hotkeys.LaunchTable({("bf16", hotkeys.torch_key(ta, tb, to)): e300})
    hot = hotkeys.hot_table(table, gemm=True)
    n = len(sim.launches)
    assert hot.call("bf16", ta, tb, to) is to and hot.call("bf16", ta, tb, to) is to and hot.counts == (1, 1)
    assert hot.call("f32", ta, tb, to) is None and hot.call(None, ta, tb, to) is None
    assert hot.counts == (1, 1) and len(sim.launches) == n + 2
    hot.forget()
    assert hot.call("bf16", ta, tb, to) is to and hot.counts == (1, 2)
    with pytest.raises(TypeError):
        hot.call(ta, tb, to)
    with pytest.raises(TypeError):
        hotkeys.hot_table({}, gemm=False).call("bf16", ta, tb, to)


def test_a_table_dropped_while_the_key_is_read_declines(sim, monkeypatch, fake_tensor_type):
    """The getters may run Python code (a tensor subclass): one that takes the table away mid-call leaves a declined
    call (the Python path), not a launch or a crash."""
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    k._call_py = lambda *args, **kw: "slow path"

    class Dropping(FakeTorch):
        def stride(self):
            k._set_hot_table(None)
            return self._stride

    n = len(sim.launches)
    assert k(Dropping(ta.shape, ta._stride, ta.ptr), tb, to) == "slow path" and len(sim.launches) == n
    assert k(ta, tb, to) == "slow path" and len(sim.launches) == n  # no table: every call declines


def test_a_stale_in_place_build_of_the_launcher_is_not_used(monkeypatch):
    """A _launcher built from an older _launcher.c (setup.py build_ext --inplace, then a pull) lacks names the Python
    side calls: compiled_module() must fall back to the ctypes path instead of failing at import (control: the same
    module with every name present is used)."""
    import sys
    import types

    from ptxgen.runtime.launch import fastlaunch

    package = sys.modules["ptxgen.runtime.launch"]  # fastlaunch's package, where ``from . import _launcher`` looks

    stale = types.ModuleType("ptxgen.runtime.launch._launcher")
    stale.Launcher = object  # an older build: no Hot, KernelBase, ...
    monkeypatch.setitem(sys.modules, "ptxgen.runtime.launch._launcher", stale)
    monkeypatch.setattr(package, "_launcher", stale, raising=False)
    monkeypatch.delenv("PTXGEN_LAUNCHER", raising=False)
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is None
    whole = types.ModuleType("ptxgen.runtime.launch._launcher")
    for name in fastlaunch._MODULE_NAMES:
        setattr(whole, name, object)
    monkeypatch.setitem(sys.modules, "ptxgen.runtime.launch._launcher", whole)
    monkeypatch.setattr(package, "_launcher", whole, raising=False)
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is whole
