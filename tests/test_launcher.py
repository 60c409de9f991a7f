"""The compiled launcher (``ptxgen.runtime._launcher``, CPU tier: simulated device, a ctypes callback standing in
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
from ptxgen.api import launchplan
from ptxgen.runtime import fastlaunch
from ptxgen.runtime.arrays import read_array
from ptxgen.runtime.gpu import CudaError
from test_api import BF16, MN_BF16, FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor, mnmajor, read_params
from test_hotpath import CP_ASYNC, TMA_STORE, slow_bytes

_launcher = pytest.importorskip("ptxgen.runtime._launcher", reason="the compiled launcher was not built")

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
    monkeypatch.setattr("ptxgen.runtime.fastlaunch._DRIVER", driver)
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
    real = launchplan._TENSOR[0]
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
    key = launchplan.torch_key(ta, tb, to)
    assert _launcher.torch_key(ta, tb, to) == key and _launcher.torch_key(ta, tb, None) == launchplan.torch_key(ta, tb, None)
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
    assert _launcher.hot_kernel({launchplan.torch_key(ta, tb, None): entry}, ta, tb, None) is fresh
    assert sim.launches[-1]["bytes"][2] == 0x5000000 and sim.launches[-1]["stream"] == 7


def test_c_launch_errors(sim, monkeypatch):
    """A launch without a current context sets it and retries once; another failure raises CudaError."""
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    driver = _use_c(monkeypatch, sim, k)
    made_current = []
    monkeypatch.setattr("ptxgen.api.streams.ensure_current", lambda dev: made_current.append(dev))
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
    with pytest.raises(ValueError, match="three sequences"):
        _launcher.Launcher(1, (1, 1, 1), (1, 1, 1), 0, 0, None, [(), ()], 1, None, None, 0, (0, 0, 0), (15, 15))
    with pytest.raises(ValueError, match="1 to 4 slots"):
        _launcher.Launcher(1, (1, 1, 1), (1, 1, 1), 0, 0, None, [(), (), ()], 1, None, None, 0, (0, 0, 0), (15, 15))


def test_ctypes_path_when_asked(monkeypatch):
    monkeypatch.setenv("PTXGEN_LAUNCHER", "ctypes")
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is None
    monkeypatch.delenv("PTXGEN_LAUNCHER")
    monkeypatch.setattr(fastlaunch, "_MODULE", [])
    assert fastlaunch.compiled_module() is _launcher
