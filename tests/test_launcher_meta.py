"""The compiled launcher's metadata reader (``_launcher.c``: set_meta_reader; ``runtime/launch/torchmeta.py`` and
``_torchmeta.cpp`` for torch). CPU tier.

With a reader, a hot call compares the call's sizes, strides, dtype and device with the remembered hit's as bytes
and takes the pointers from the same record, instead of 15 Python getters. It must serve exactly the calls the
getters would: a tensor changed in place (resize_, as_strided_, set_/.data=) or another dtype, device or out must
miss, new pointers must be patched. First with a reader written in Python over FakeTorch (no torch needed), then,
where torch and a C++ compiler are present, the real reader over real (CPU) tensors.
"""

from __future__ import annotations

import ctypes
import shutil

import pytest

from ptxgen.api.launch import hotkeys
from test_api import SimulatedGPU
from test_launcher import FakeTorch, _two_entries, _want, change_in_place

_launcher = pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")

from ptxgen.runtime.launch import torchmeta  # noqa: E402

READER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(torchmeta.MetaRecord))
DTYPES = {"bf16": 15, "f16": 5, "f32": 6}


class FakeReader:
    """A reader over FakeTorch's fields (as _torchmeta.cpp reads an at::Tensor's); ``lie``: report the sizes and
    strides a tensor had when first seen (a reader that misses in-place changes: the control)."""

    def __init__(self, lie=False):
        self.lie, self.first, self.calls = lie, {}, 0
        self._cb = READER(self._read)
        self.address = ctypes.cast(self._cb, ctypes.c_void_p).value

    def _read(self, x, rec):
        self.calls += 1
        if getattr(x, "decline", False):
            return 1
        shape, stride = self.first.setdefault(id(x), (x.shape, x._stride)) if self.lie else (x.shape, x._stride)
        r = rec.contents
        ctypes.memset(ctypes.addressof(r), 0, ctypes.sizeof(r))
        r.ndim = len(shape)
        for i, (s, t) in enumerate(zip(shape, stride)):
            r.sizes[i], r.strides[i] = s, t
        r.scalar_type, r.device_type, r.device_index, r.data_ptr = DTYPES[x.dtype], 1, x._device, x.ptr
        return 0


@pytest.fixture
def sim(monkeypatch):
    return SimulatedGPU(monkeypatch)


@pytest.fixture
def reader():
    _launcher.set_tensor_type(FakeTorch)
    r = FakeReader()
    _launcher.set_meta_reader(r.address, (FakeTorch,))
    yield r
    _launcher.set_meta_reader(0, ())
    _launcher.set_tensor_type(hotkeys._TENSOR[0])  # None (no torch here) or torch.Tensor
    if torchmeta._STATE["lib"] is not None:  # the real reader was loaded in this process: hand it back
        import torch

        fn = torchmeta._STATE["lib"].ptxgen_torch_meta
        _launcher.set_meta_reader(ctypes.cast(fn, ctypes.c_void_p).value, (torch.Tensor, torch.nn.Parameter))


def test_the_reader_serves_the_remembered_hit_with_new_pointers(sim, monkeypatch, reader):
    k, (ta, tb, to), (ta4, to4), _ = _two_entries(sim, monkeypatch)
    _want.k = k
    n = len(sim.launches)
    assert k(ta, tb, to) is to and k._hot_counts == (0, 1) and k._hot_meta_hits == 0
    assert k(ta, tb, to) is to and k(ta, tb, out=to) is to and k._hot_counts == (2, 1) and k._hot_meta_hits == 2
    # the same key, other memory: served by the reader, the block patched with the new pointers
    a2, o2 = FakeTorch(ta.shape, ta._stride, 0x7000000), FakeTorch(to.shape, to._stride, 0x8000000)
    assert k(a2, tb, o2) is o2 and k._hot_meta_hits == 3
    assert sim.launches[-1]["bytes"] == _want(a2, tb, o2) != sim.launches[-2]["bytes"]
    assert k(ta4, tb, to4) is to4 and k._hot_counts == (3, 2) and k._hot_meta_hits == 3  # another key: looked up
    assert sim.launches[-1]["bytes"] == _want(ta4, tb, to4)
    assert len(sim.launches) == n + 5


@pytest.mark.parametrize("change", ["resize", "restride", "dtype", "device", "b_resize", "out_restride", "no_out"])
def test_control_changed_metadata_misses_with_the_reader(sim, monkeypatch, reader, change):
    """As test_launcher's control, with the reader comparing: the same objects changed in place miss."""
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    slow = []
    k._call_py = lambda *args, **kw: slow.append(args) or "slow path"
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k._hot_meta_hits == 1
    n = len(sim.launches)
    assert k(ta, tb, change_in_place(change, k, ta, tb, to, monkeypatch)) == "slow path"
    assert k._hot_meta_hits == 1 and len(sim.launches) == n and len(slow) == 1


def test_control_a_reader_that_misses_changes_would_launch_them(sim, monkeypatch, reader):
    """The control of the test above: a reader that keeps reporting a tensor's first sizes lets a resized tensor
    through (so that test's misses come from the reader's record, not from elsewhere)."""
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    liar = FakeReader(lie=True)
    _launcher.set_meta_reader(liar.address, (FakeTorch,))
    k._call_py = lambda *args, **kw: "slow path"
    assert k(ta, tb, to) is to and k(ta, tb, to) is to
    ta.shape = (301, 264)
    n = len(sim.launches)
    assert k(ta, tb, to) is to and len(sim.launches) == n + 1  # wrongly served: what the real reader must not do


def test_a_declining_reader_leaves_the_getters(sim, monkeypatch, reader):
    k, (ta, tb, to), _, _ = _two_entries(sim, monkeypatch)
    tb.decline = True
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k(ta, tb, to) is to
    assert k._hot_counts == (2, 1) and k._hot_meta_hits == 0
    tb.decline = False  # readable again: the getters' agreement hands the record to the reader
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k._hot_meta_hits == 1


def test_the_reader_drops_its_record_with_the_table_and_a_new_reader(sim, monkeypatch, reader):
    k, (ta, tb, to), (ta4, to4), _ = _two_entries(sim, monkeypatch)
    k._call_py = lambda *args, **kw: "slow path"
    assert k(ta, tb, to) is to and k(ta, tb, to) is to and k._hot_meta_hits == 1
    _launcher.set_meta_reader(reader.address, (FakeTorch,))  # a new reader: the record goes, the key is looked up
    assert k(ta, tb, to) is to and k._hot_counts == (1, 2) and k._hot_meta_hits == 1
    del k._torch_entries[hotkeys.torch_key(ta, tb, to)]
    n = len(sim.launches)
    assert k(ta, tb, to) == "slow path" and len(sim.launches) == n and k._hot_meta_hits == 1


def test_the_gemm_table_compares_the_out_dtype_with_the_reader(sim, monkeypatch, reader):
    k, (ta, tb, to), _, (e300, _) = _two_entries(sim, monkeypatch)
    table = hotkeys.LaunchTable({("bf16", hotkeys.torch_key(ta, tb, to)): e300})
    hot = hotkeys.hot_table(table, gemm=True)
    assert hot.call("bf16", ta, tb, to) is to and hot.call("bf16", ta, tb, to) is to and hot.meta_hits == 1
    assert hot.call("f32", ta, tb, to) is None and hot.call(None, ta, tb, to) is None and hot.meta_hits == 1


def test_set_meta_reader_refuses_bad_arguments():
    with pytest.raises(ValueError, match="1 to 4 types"):
        _launcher.set_meta_reader(1, ())
    with pytest.raises(TypeError, match="types are types"):
        _launcher.set_meta_reader(1, (3,))
    assert _launcher.meta_abi() == ctypes.sizeof(torchmeta.MetaRecord) == 80


# ---- the real reader (torch and a C++ compiler) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch_reader(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if torchmeta._compiler() is None:
        pytest.skip("no C++ compiler")
    status = torchmeta.start(torch, _launcher, wait=True)
    if not status.startswith("loaded"):
        pytest.fail(f"the metadata reader did not load: {status}")
    hotkeys.tensor_type()
    return torch


def test_the_torch_reader_reads_what_the_getters_read(torch_reader):
    torch = torch_reader
    x = torch.randn(40, 24).to(torch.bfloat16)
    cube = torch.empty(3, 8, 16, dtype=torch.float16)
    probes = [x, x.t(), x[3:, 5:], x[::3], x[:, 1::2], x.unsqueeze(0).expand(4, 40, 24)[1], cube, cube[1:, 2:].transpose(1, 2),
              torch.empty(0, 7), torch.empty(5, 0, dtype=torch.float16), torch.nn.Parameter(torch.ones(6, 6)),
              torch.empty(9, dtype=torch.int8), torch.empty(4, 8, dtype=torch.float8_e4m3fn)]
    for t in probes:
        got = _launcher.read_meta(t)
        n = got[0]
        assert (n, got[1][:n], got[2][:n], got[5], got[7]) == (t.dim(), tuple(t.shape), t.stride(), t.get_device(),
                                                               t.data_ptr())
    kinds = {_launcher.read_meta(torch.empty(2, 2, dtype=d))[3] for d in (torch.bfloat16, torch.float16, torch.float32,
                                                                          torch.float8_e4m3fn, torch.float8_e5m2)}
    assert len(kinds) == 5  # each dtype its own code


def test_the_torch_reader_declines_what_it_cannot_describe(torch_reader):
    torch = torch_reader

    class Sub(torch.Tensor):
        pass

    x = torch.empty(4, 4)
    assert _launcher.read_meta(torch.empty(2, 2, 2, 2)) is None  # 4-D
    assert _launcher.read_meta(x.as_subclass(Sub)) is None  # not exactly torch.Tensor / Parameter
    assert _launcher.read_meta(torch.empty(4, 4).to_sparse()) is None
    on_meta, on_cpu = _launcher.read_meta(torch.empty(4, 4, device="meta")), _launcher.read_meta(x)
    assert on_meta[4] != on_cpu[4] and on_meta[7] == 0  # another device type (never a CUDA record's), as data_ptr() says
    assert _launcher.read_meta(torch.randn(3, 3, dtype=torch.complex64).conj())[6] == 1  # the conjugate bit is kept


def test_torch_tensors_changed_in_place_miss_the_reader(sim, monkeypatch, torch_reader):
    """Real tensors (CPU memory, the simulated device's launch): resize_, as_strided_, .data= and set_ on the same
    objects. Each call either launches with the current pointers and the slow path's bytes for the tensors' key, or
    goes to the Python path; never the old key's launch for changed tensors."""
    torch = torch_reader
    _launcher.set_tensor_type(torch.Tensor)
    k, _, _, (e300, e304) = _two_entries(sim, monkeypatch)
    _want.k = k
    a = torch.zeros(300, 264, dtype=torch.bfloat16)
    b = torch.zeros(200, 264, dtype=torch.bfloat16)
    out = torch.empty(300, 208, dtype=torch.bfloat16)[:, :200]
    o4 = torch.empty(304, 208, dtype=torch.bfloat16)[:, :200]
    a4 = torch.zeros(304, 264, dtype=torch.bfloat16)
    k._torch_entries.clear()
    k._torch_entries[hotkeys.torch_key(a, b, out)] = e300
    k._torch_entries[hotkeys.torch_key(a4, b, o4)] = e304
    slow = []
    k._call_py = lambda *args, **kw: slow.append(args) or "slow path"

    def fake(t):
        return FakeTorch(tuple(t.shape), t.stride(), t.data_ptr())

    def served(x, y, o):
        n = len(sim.launches)
        r = k(x, y, o)
        if r == "slow path":
            return False
        assert r is o and len(sim.launches) == n + 1
        assert sim.launches[-1]["bytes"] == _want(fake(x), fake(y), fake(o))
        return True

    assert served(a, b, out) and served(a, b, out) and k._hot_meta_hits == 1
    a.resize_(304, 264)  # now the other key
    assert served(a, b, out) is False  # (a 304-row a with a 300-row out: no such key)
    assert served(a, b, o4) and k._hot_counts[1] == 2
    a.resize_(300, 264)
    assert served(a, b, out) and served(a, b, out)
    hits = k._hot_meta_hits
    a.as_strided_((300, 264), (1, 300))  # same sizes, other strides
    assert served(a, b, out) is False and k._hot_meta_hits == hits
    a.as_strided_((300, 264), (264, 1))  # back: the remembered hit again (the miss found no key, kept no record)
    assert served(a, b, out) and served(a, b, out) and k._hot_meta_hits == hits + 2
    a.data = torch.ones(300, 264, dtype=torch.bfloat16)  # new memory, same key: the new pointer is patched in
    assert served(a, b, out) and k._hot_meta_hits == hits + 3
    b.set_(torch.zeros(200, 272, dtype=torch.bfloat16))  # another shape through set_
    assert served(a, b, out) is False
    b.data = torch.zeros(200, 264, dtype=torch.float16)  # another dtype
    assert served(a, b, out) is False
    n_slow = len(slow)
    b.data = torch.zeros(200, 264, dtype=torch.bfloat16)
    assert served(a, b, out) and len(slow) == n_slow


def test_the_build_command_uses_torchs_headers_and_abi(monkeypatch, tmp_path):
    """No torch needed: the command for a torch-like object (what a build on a machine with torch runs)."""

    class FakeC:
        _GLIBCXX_USE_CXX11_ABI = False

    class FakeTorchModule:
        __file__ = str(tmp_path / "torch" / "__init__.py")
        __version__ = "9.9"
        _C = FakeC
        version = type("V", (), {"git_version": "abc"})

    cmd = torchmeta.build_command(FakeTorchModule, "c++", tmp_path / "x.so")
    assert cmd[0] == "c++" and "-D_GLIBCXX_USE_CXX11_ABI=0" in cmd and str(torchmeta.SOURCE) in cmd
    assert f"-I{tmp_path / 'torch' / 'include'}" in cmd and "-lc10" in cmd
    p1 = torchmeta.library_path(FakeTorchModule, "c++")
    FakeTorchModule.__version__ = "9.10"
    assert torchmeta.library_path(FakeTorchModule, "c++") != p1  # another torch: another build


def test_start_is_off_without_a_compiler_or_when_asked(monkeypatch):
    monkeypatch.setattr(torchmeta, "_STATE", dict(torchmeta._STATE, status="not started", thread=None))
    monkeypatch.setenv("PTXGEN_TORCH_META", "0")
    assert torchmeta.start(object(), _launcher) == "off: PTXGEN_TORCH_META=0"
    monkeypatch.delenv("PTXGEN_TORCH_META")
    monkeypatch.setattr(torchmeta, "_STATE", dict(torchmeta._STATE, status="not started", thread=None))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    assert torchmeta.start(object(), _launcher).startswith("off: no C++ compiler")
