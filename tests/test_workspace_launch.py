"""Split-K and stream-K launches through the compiled launcher (api.launch.launchplan.Launch, api.launch.fp8launch.Fp8Launch:
the calling stream's workspace as the last pointer of ``Launcher.run_all``, remembered per stream in C; one launch each,
split-K's workspace kept as stream-K's: counters zeroed once per stream, a capture's its own).

CPU tier (simulated device; ctypes callbacks stand in for cuLaunchKernel and cuStreamIsCapturing, as the C code calls
libcuda's): every launch goes through C (the Python launch raises), the bytes cuLaunchKernel reads equal the slow
path's built from scratch with the calling stream's workspace, one workspace per stream allocated and zeroed in stream
order once, after which Python's workspace functions are not called again on that stream; a capturing stream is
declined by C and gets its own workspace per launch with the memset ahead of it; the C hot call for torch tensors
declines a stream it has no workspace for. Control: a launch whose workspace pointer is not passed fails the same
checks.

GPU tier (``gpu``; run in its own process with a timeout, so that a stream-K wait that never ends fails instead of
hanging): ``ptxgen.gemm`` at a split-K and a stream-K pick, repeated on two streams and in a CUDA graph, against torch
and float64, with the Python workspace functions never called once each stream has its workspace
(``python tests/test_workspace_launch.py split|stream_k``).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ptxgen
from ptxgen.api.launch import hotkeys, launchplan
from ptxgen.derive.store.streamk import FLAG_REGION_BYTES
from ptxgen.runtime.choose import choose
from ptxgen.runtime.launch import fastlaunch
from ptxgen.runtime.launch.launch import Problem, gemm_launches

if __name__ != "__main__":
    from test_api import FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor

    _launcher = pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")

SPLIT_SHAPE = (128, 4096, 4096)  # the chooser's pick on an H100/H200: split-K 2 (64 x 128 tiles)
STREAMK_SHAPE = (2048, 11008, 4096)  # stream-K 4 (128 x 256, persistent, TMA store)
VP, U32 = ctypes.c_void_p, ctypes.c_uint
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, VP, *[U32] * 7, VP, VP, VP)
CAPTURE = ctypes.CFUNCTYPE(ctypes.c_int, VP, ctypes.POINTER(ctypes.c_int))


def read_block(address: int, params) -> list:
    """The parameters as cuLaunchKernel reads them through the void** array at ``address``."""
    arr = (ctypes.c_void_p * len(params)).from_address(address)
    out = []
    for i, q in enumerate(params):
        if q.kind == "tensormap":
            out.append(ctypes.string_at(arr[i], 128))
        elif q.kind in ("ptr", "wptr"):
            out.append(ctypes.c_uint64.from_address(arr[i]).value)
        else:
            out.append(ctypes.c_int32.from_address(arr[i]).value)
    return out


class CDriver:
    """The driver as the compiled launcher sees it (launch and capture query through function pointers) and as
    launchplan.streamk_workspace sees it (capture_status, memset_d32_async), with allocations, in one ordered log.
    A launch's parameters are read as it is made (``kernels``: the kernels whose blocks it knows)."""

    def __init__(self, monkeypatch, kernels):
        self.log, self.capturing, self.next_addr, self.kernels = [], set(), 0x7000_0000, kernels
        self._launch_cb, self._capture_cb = LAUNCH(self._launch), CAPTURE(self._capture)
        self.c_launch = ctypes.cast(self._launch_cb, ctypes.c_void_p).value
        self.c_capture = ctypes.cast(self._capture_cb, ctypes.c_void_p).value
        self.c_captures, self.launch_codes, self.capture_codes = 0, [], []
        monkeypatch.setattr(launchplan, "allocate_device_bytes", self._allocate)
        for name, empty in (("_STREAMK_WORKSPACES", {}), ("_STREAMK_OUTGROWN", []),
                            ("_STREAMK_CAPTURED", [])):
            monkeypatch.setattr(launchplan, name, empty)
        monkeypatch.setattr(fastlaunch, "_DRIVER", self)

    def _params_of(self, address):
        for k in self.kernels:
            for e in k._entries.values():
                if getattr(e, "params", None) == address:
                    return k.params
        raise AssertionError(f"a launch with an unknown parameter block {address:#x}")

    def _launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        rc = self.launch_codes.pop(0) if self.launch_codes else 0
        if rc == 0:
            self.log.append(("launch", stream or 0, params, (gx, gy, gz), read_block(params, self._params_of(params))))
        return rc

    def _capture(self, stream, status):
        self.c_captures += 1
        status[0] = 1 if (stream or 0) in self.capturing else 0
        return self.capture_codes.pop(0) if self.capture_codes else 0

    def _allocate(self, nbytes, torch_like=None, device_index=0):
        addr = self.next_addr
        self.next_addr += -(-nbytes // 4096) * 4096 + 4096
        self.log.append(("alloc", addr, nbytes, torch_like))
        return addr, object()

    def capture_status(self, stream):
        return 0, 1 if stream in self.capturing else 0

    def memset_d32_async(self, ptr, value, count, stream):
        self.log.append(("memset", ptr, value, count, stream))
        return 0

    def launch(self, *args):
        raise AssertionError("the Python launch path ran although the compiled launcher was built")

    def encode(self, args):
        return _fake_encode(args)

    def of(self, kind):
        return [e for e in self.log if e[0] == kind]


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


@pytest.fixture(scope="module")
def split_kernel():
    spec = choose("bf16", "sm_90a", *SPLIT_SHAPE, lda=SPLIT_SHAPE[2], ldb=SPLIT_SHAPE[2]).spec
    assert spec.split_k > 1
    return ptxgen.compile(spec)


@pytest.fixture(scope="module")
def sk_kernel():
    spec = choose("bf16", "sm_90a", *STREAMK_SHAPE, lda=STREAMK_SHAPE[2], ldb=STREAMK_SHAPE[2]).spec
    assert spec.stream_k > 1
    return ptxgen.compile(spec)


_PTR = [1 << 44]


def arrays(m, n, k):
    """a, b, out with fake addresses 1 GiB apart."""
    ptrs = []
    for _ in range(3):
        _PTR[0] += 1 << 30
        ptrs.append(_PTR[0])
    return (kmajor(m, k, ptr=ptrs[0]), kmajor(n, k, ptr=ptrs[1]),
            FakeArray((m, n), "bfloat16", strides=(n, 1), ptr=ptrs[2]))


def ptrs_of(*xs):
    return [x.__cuda_array_interface__["data"][0] for x in xs]


def slow(kernel, a, b, out, w) -> list:
    """Each launch's parameters built from scratch (runtime.launch.launch.gemm_launches, as ptxgen bench launches)."""
    m, k = a.__cuda_array_interface__["shape"]
    n = b.__cuda_array_interface__["shape"][0]
    p = Problem(m, n, k, k, k, out.__cuda_array_interface__["strides"][0] // 2)
    launches = gemm_launches(kernel.plan, "mma", *ptrs_of(a, b, out), w, p, 132, encode=_fake_encode)
    return [[v if isinstance(v, bytes) else int(v) for v in args.read_back()] for _, _, _, args in launches]


@pytest.fixture
def setup(monkeypatch):
    """(driver, counts): the simulated device, the C driver, and how often Python's workspace functions ran."""
    SimulatedGPU(monkeypatch)
    counts = {"streamk_workspace": 0}
    for name in counts:
        inner = getattr(launchplan, name)

        def counted(*args, _inner=inner, _name=name, **kw):
            counts[_name] += 1
            return _inner(*args, **kw)

        monkeypatch.setattr(launchplan, name, counted)
    return counts


def test_split_k_without_the_compiled_launcher_packs_the_same_bytes(setup, monkeypatch, split_kernel):
    """The Python path (a driver the C code cannot call: the ctypes fallback) launches the same one kernel with the
    same bytes, its workspace per stream too (zeroed once each)."""
    k = split_kernel
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    del drv.c_launch  # not callable from C: the prepared launch has no compiled launcher
    python_launches = []
    drv.launch = lambda func, gx, gy, gz, bx, by, bz, smem, stream, params, extra: python_launches.append(
        (stream, params, read_block(params, drv._params_of(params)))) or 0
    a, b, out = arrays(*SPLIT_SHAPE)
    for s in (0xE1, 0xE2, 0xE1):
        k(a, b, out, stream=Stream(s))
        (entry,) = k._entries.values()
        w = launchplan._STREAMK_WORKSPACES[(0, s)][0]
        assert entry._c is None and [x[2] for x in python_launches[-1:]] == slow(k, a, b, out, w)
        assert python_launches[-1][:2] == (s, entry.params)
    assert setup["streamk_workspace"] == 3 and len(drv.of("alloc")) == len(drv.of("memset")) == 2
    assert len(python_launches) == 3  # one launch a call
    _fresh(k)


@pytest.mark.parametrize("which", ["split", "stream_k"])
def test_split_and_stream_k_run_in_c_with_the_streams_workspace_zeroed_once(setup, monkeypatch, split_kernel, sk_kernel,
                                                                            which):
    """One launch a call through C, W the calling stream's workspace (split-K's counters and stream-K's flags zeroed
    once per stream, ahead of its first launch)."""
    k, shape = (split_kernel, SPLIT_SHAPE) if which == "split" else (sk_kernel, STREAMK_SHAPE)
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    a, b, out = arrays(*shape)
    order = [0x61, 0x61, 0x62, 0x61, 0x62, 0x62]
    for s in order:
        assert k(a, b, out, stream=Stream(s)) is out
    (entry,) = k._entries.values()
    c = entry._c
    assert isinstance(c, _launcher.Launcher) and c.workspace_kind == _launcher.WS_STREAMK and c.launches == len(order)
    assert setup["streamk_workspace"] == 2 and drv.c_captures == len(order) - 2  # C asked the capture status itself
    w = {s: launchplan._STREAMK_WORKSPACES[(0, s)][0] for s in (0x61, 0x62)}
    assert dict(c.workspaces) == w and w[0x61] != w[0x62]
    memsets = drv.of("memset")
    assert [(x[1], x[2], x[3], x[4]) for x in memsets] == [(w[s], 0, FLAG_REGION_BYTES // 4, s) for s in (0x61, 0x62)]
    for s in (0x61, 0x62):  # zeroed in the stream's order, ahead of its first launch
        zeroed = next(i for i, e in enumerate(drv.log) if e[0] == "memset" and e[4] == s)
        assert zeroed < next(i for i, e in enumerate(drv.log) if e[0] == "launch" and e[1] == s)
    launches = drv.of("launch")
    assert len(launches) == len(order)
    for s, x in zip(order, launches):
        assert x[1] == s and [x[4]] == slow(k, a, b, out, w[s]) and x[4][-1] == w[s]
    _fresh(k)


@pytest.mark.parametrize("which", ["split", "stream_k"])
def test_control_a_launch_without_the_workspace_pointer_fails_the_check(setup, monkeypatch, split_kernel, sk_kernel,
                                                                        which):
    """The checks above can fail: a compiled launcher built without the workspace operand launches with W unwritten,
    and its bytes are not the slow path's."""
    k, shape = (split_kernel, SPLIT_SHAPE) if which == "split" else (sk_kernel, STREAMK_SHAPE)
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    real = launchplan.compiled_launcher

    def without_workspace(driver, *, operands, workspace=None, **kw):
        return real(driver, operands=operands[:-1], **kw)

    monkeypatch.setattr(launchplan, "compiled_launcher", without_workspace)
    a, b, out = arrays(*shape)
    for _ in range(2):
        k(a, b, out, stream=Stream(0x71))
    (entry,) = k._entries.values()
    assert entry._c.workspace_kind == 0
    launches = drv.of("launch")
    assert len(launches) == 2
    assert launchplan._STREAMK_WORKSPACES == {}  # no workspace was ever got
    w = 0x7000_0000  # where the stream's workspace would be
    assert [launches[-1][4]] != slow(k, a, b, out, w)[:1]
    _fresh(k)


def test_a_capturing_stream_is_declined_by_c_and_gets_a_fresh_workspace_per_launch(setup, monkeypatch, sk_kernel):
    k = sk_kernel
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    monkeypatch.setattr(launchplan, "_torch_current_stream", lambda index: 0x81)
    a, b, out = arrays(*STREAMK_SHAPE)
    k(a, b, out, stream=Stream(0x81))
    k(a, b, out, stream=Stream(0x81))
    eager = launchplan._STREAMK_WORKSPACES[(0, 0x81)][0]
    (entry,) = k._entries.values()
    assert entry._c.workspaces == ((0x81, eager),)
    drv.capturing.add(0x81)
    before, asked = len(drv.log), drv.c_captures
    like = object()  # a torch caller's tensor (allocate_device_bytes is faked)
    for _ in range(2):
        entry.run(*ptrs_of(a, b, out), 0x81, like)
    new = drv.log[before:]
    assert [e[0] for e in new] == ["alloc", "memset", "launch"] * 2 and drv.c_captures == asked + 2  # C said: capturing
    w1, w2 = new[0][1], new[3][1]
    assert len({w1, w2, eager}) == 3 and (new[1][1], new[4][1]) == (w1, w2) and new[0][3] is like
    assert (new[2][4][-1], new[5][4][-1]) == (w1, w2)
    assert entry._c.workspaces == ((0x81, eager),)  # a capture's workspace is never remembered
    drv.capturing.clear()
    n = setup["streamk_workspace"]
    entry.run(*ptrs_of(a, b, out), 0x81, like)  # the capture ended: C alone, the stream's own workspace, not re-zeroed
    assert [e[0] for e in drv.log[before + 6:]] == ["launch"] and drv.log[-1][4][-1] == eager
    assert setup["streamk_workspace"] == n
    _fresh(k)


def test_a_stream_no_longer_remembered_gets_the_same_workspace_again(setup, monkeypatch, sk_kernel):
    """C remembers the last WS_STREAMS streams; an older one is declined and gets its workspace from Python again (the
    same one: not allocated or zeroed twice)."""
    k = sk_kernel
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    a, b, out = arrays(*STREAMK_SHAPE)
    streams = [0xB1, 0xB2, 0xB3, 0xB4, 0xB5]
    for s in streams:
        k(a, b, out, stream=Stream(s))
    (entry,) = k._entries.values()
    assert [s for s, _ in entry._c.workspaces] == [0xB5, 0xB2, 0xB3, 0xB4]  # 0xB1's place taken by 0xB5
    n = setup["streamk_workspace"]
    k(a, b, out, stream=Stream(0xB1))
    w = launchplan._STREAMK_WORKSPACES[(0, 0xB1)][0]
    assert setup["streamk_workspace"] == n + 1 and len(drv.of("alloc")) == len(drv.of("memset")) == 5
    assert drv.log[-1][4][-1] == w and (0xB1, w) in entry._c.workspaces
    _fresh(k)


def test_driver_errors_on_the_compiled_workspace_path(setup, monkeypatch, split_kernel, sk_kernel):
    """A capture query or launch without a current context sets it and retries once; a refused launch raises."""
    from ptxgen.runtime.launch.gpu import CudaError

    made_current = []
    monkeypatch.setattr("ptxgen.api.launch.streams.ensure_current", lambda dev: made_current.append(dev))
    _fresh(sk_kernel)
    _fresh(split_kernel)
    drv = CDriver(monkeypatch, [sk_kernel, split_kernel])
    a, b, out = arrays(*STREAMK_SHAPE)
    sk_kernel(a, b, out, stream=Stream(0xC1))
    drv.capture_codes = [201]  # CUDA_ERROR_INVALID_CONTEXT on the capture query: the context set, asked again
    n, asked = len(made_current), drv.c_captures
    sk_kernel(a, b, out, stream=Stream(0xC1))
    assert len(made_current) == n + 1 and drv.c_captures == asked + 2 and drv.capture_codes == []
    assert setup["streamk_workspace"] == 1  # served by C after the retry
    sa, sb, so = arrays(*SPLIT_SHAPE)
    split_kernel(sa, sb, so, stream=Stream(0xC2))
    n = len(drv.of("launch"))
    drv.launch_codes = [1]  # the launch refused (CUDA_ERROR_INVALID_VALUE: no retry)
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed: .*\(1\)"):
        split_kernel(sa, sb, so, stream=Stream(0xC2))
    assert drv.launch_codes == [] and len(drv.of("launch")) == n
    _fresh(sk_kernel)
    _fresh(split_kernel)


def test_a_workspace_launcher_refuses_a_three_pointer_run(setup, monkeypatch, sk_kernel):
    k = sk_kernel
    _fresh(k)
    CDriver(monkeypatch, [k])
    a, b, out = arrays(*STREAMK_SHAPE)
    k(a, b, out, stream=Stream(0xD1))
    (entry,) = k._entries.values()
    with pytest.raises(TypeError, match="run_all or run_cached"):
        entry._c.run(*ptrs_of(a, b, out), 0xD1)  # W would keep whatever it held
    _fresh(k)


class FakeTorch:
    """What the C hot call reads of a torch tensor (tests/test_launcher.py's)."""

    def __init__(self, x):
        cai = x.__cuda_array_interface__
        self.shape, self._stride, self.ptr = cai["shape"], tuple(s // 2 for s in cai["strides"]), cai["data"][0]
        self.dtype, self._device = "bf16", 0

    def stride(self):
        return self._stride

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self.ptr


@pytest.mark.parametrize("which", ["split", "stream_k"])
def test_the_c_hot_call_declines_a_stream_without_a_workspace_then_serves_it(setup, monkeypatch, split_kernel,
                                                                              sk_kernel, which):
    k, shape = (split_kernel, SPLIT_SHAPE) if which == "split" else (sk_kernel, STREAMK_SHAPE)
    _fresh(k)
    drv = CDriver(monkeypatch, [k])
    _launcher.set_tensor_type(FakeTorch)
    try:
        a, b, out = arrays(*shape)
        k(a, b, out, stream=Stream(0x91))  # prepared, and stream 0x91's workspace remembered
        (entry,) = k._entries.values()
        ta, tb, to = FakeTorch(a), FakeTorch(b), FakeTorch(out)
        table = {hotkeys.torch_key(ta, tb, to): entry}
        n = len(drv.of("launch"))
        entry._c.stream_reader = lambda index: 0x92  # torch's current stream: one with no workspace yet
        assert _launcher.hot_kernel(table, ta, tb, to) is None and len(drv.of("launch")) == n  # declined
        entry._c.stream_reader = lambda index: 0x91
        assert _launcher.hot_kernel(table, ta, tb, to) is to
        w = dict(entry._c.workspaces)[0x91]
        got = [e[4] for e in drv.of("launch")[n:]]
        assert got == slow(k, a, b, out, w)  # one launch, W the stream's
        drv.capturing.add(0x91)  # a capture: declined (its workspace comes from the graph's pool, zeroed in the graph)
        assert _launcher.hot_kernel(table, ta, tb, to) is None and len(drv.of("launch")) == n + 1
    finally:
        _launcher.set_tensor_type(hotkeys._TENSOR[0])
    _fresh(k)


def test_block_fp8_stream_k_runs_in_c_with_the_streams_workspace(monkeypatch):
    """Fp8Launch: W as the sixth pointer; run_cached declines a stream it has no workspace for, run gets it once."""
    from ptxgen.api.launch.fp8launch import Fp8Launch
    from test_blockfp8_streamk import bfsk_spec

    SimulatedGPU(monkeypatch)
    spec = bfsk_spec()
    kernel = ptxgen.compile(spec)
    calls = []

    class Kern:
        func, dynamic_smem = 0xF8, 1024

    drv = CDriver(monkeypatch, [])
    drv._params_of = lambda address: kernel.params
    p = Problem(128, 4096, 7168, 7168, 7168, 4096)
    def sk(stream, like):
        calls.append(stream)
        return launchplan.streamk_workspace(drv, 0, stream, 1 << 20, like)

    e = Fp8Launch(plan=kernel.plan, problem=p, kernel=Kern, grid=(132, 1, 1), block=(384, 1, 1),
                  extra={"lds_a": 128, "lds_b": 32}, encode=_fake_encode, driver=drv, ensure_context=lambda: None,
                  device_index=0, spans=(0, 0, 0), out_alloc=None, workspace=sk)
    assert e._c is not None and e._c.workspace_kind == _launcher.WS_STREAMK
    ptrs = {"A": 1 << 40, "B": 2 << 40, "D": 3 << 40, "SFA": 4 << 40, "SFB": 5 << 40}
    assert e._c.run_cached(*ptrs.values(), 0xA1) is False and drv.of("launch") == []
    for _ in range(3):
        e.run(dict(ptrs), 0xA1)
    w = launchplan._STREAMK_WORKSPACES[(0, 0xA1)][0]
    assert calls == [0xA1] and e._c.workspaces == ((0xA1, w),) and len(drv.of("launch")) == 3
    names = [q.name for q in kernel.params]
    for x in drv.of("launch"):
        got = dict(zip(names, x[4]))
        assert got["W"] == w and got["SFB"] == ptrs["SFB"] and x[1] == 0xA1


# -- GPU tier -------------------------------------------------------------------------------------------------------
CASE_TIMEOUT_S = 300


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["split", "stream_k"])
def test_gemm_split_and_stream_k_on_two_streams_and_in_a_graph(gpu, torch_cuda, artifact_dir, which):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, __file__, which], capture_output=True, text=True, timeout=CASE_TIMEOUT_S,
                              env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{which}: no result in {CASE_TIMEOUT_S} s (a stream-K wait that never ends?): {e.stdout!r}")
    with open(artifact_dir / "workspace_launch.jsonl", "a") as f:
        f.write(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["passed"], report


def gpu_case(which: str) -> int:
    """``ptxgen.gemm`` at SPLIT_SHAPE or STREAMK_SHAPE: one JSON line per step, the last with ``passed``."""
    import torch

    from ptxgen.api import dispatch

    m, n, k = SPLIT_SHAPE if which == "split" else STREAMK_SHAPE
    report = {"which": which, "shape": [m, n, k], "device": torch.cuda.get_device_name()}

    def say(step, **kw):
        print(json.dumps({"step": step, **kw}), flush=True)

    def fail(msg):
        report.update(passed=False, failed=msg)
        print(json.dumps(report), flush=True)
        return 1

    def inputs(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return (torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g),
                torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g))

    def nan_out():
        return torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)

    def errors(out, a, b):
        """(ours, torch's) max |x - float64| / max |float64|."""
        ref = a.double() @ b.double().T
        scale = float(ref.abs().max())
        theirs = torch.mm(a, b.T)
        return float((out.double() - ref).abs().max()) / scale, float((theirs.double() - ref).abs().max()) / scale

    def close(out, a, b):
        ours, theirs = errors(out, a, b)
        return ours <= max(2 * theirs, 8e-3), ours, theirs

    a, b = inputs(1)
    spec, why = ptxgen.api.gemm_spec(a, b, nan_out())
    say("pick", kernel=spec.kernel_name, why=why)
    if (spec.split_k if which == "split" else spec.stream_k) < 2:
        return fail(f"the pick {spec.kernel_name} is not {which} here")
    first = nan_out()
    ptxgen.gemm(a, b, first)
    torch.cuda.synchronize()
    ok, ours, theirs = close(first, a, b)
    say("first", rel_err=ours, torch_rel_err=theirs)
    if not ok:
        return fail(f"rel error {ours} (torch's {theirs})")
    entries = [getattr(e, "inner", e) for e in [*dispatch._TORCH_ENTRIES.values(), *dispatch._SWAPPED.values()]]
    entries = [e for e in entries if getattr(e, "split", False) or getattr(e, "streamk", False)]
    c = entries[0]._c if entries else None
    if c is None or not c.workspace_kind:
        return fail("the prepared launch has no compiled launcher with a workspace operand")
    want = first.view(torch.int16).clone()

    # two streams, many calls each, interleaved; then the same with Python's workspace functions counted
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for s in (s1, s2):
        s.wait_stream(torch.cuda.current_stream())
    counted = {"n": 0}
    real = launchplan.streamk_workspace

    def count(f):
        return lambda *x, **kw: counted.__setitem__("n", counted["n"] + 1) or f(*x, **kw)

    results, before = [], c.launches
    for rnd in range(2):
        if rnd == 1:  # each stream has its workspace now: C alone from here
            launchplan.streamk_workspace = count(real)
        o1, o2 = [nan_out() for _ in range(10)], [nan_out() for _ in range(10)]
        torch.cuda.synchronize()
        for i in range(10):
            with torch.cuda.stream(s1):
                ptxgen.gemm(a, b, o1[i])
            ptxgen.gemm(a, b, o2[i], stream=s2)
        torch.cuda.synchronize()
        results += [bool(torch.equal(want, o.view(torch.int16))) for o in o1 + o2]
    launchplan.streamk_workspace = real
    streams = {s1.cuda_stream, s2.cuda_stream} <= {s for s, _ in c.workspaces}
    say("streams", bit_identical=all(results), launches=c.launches - before, python_workspace_calls=counted["n"],
        remembered=[hex(s) for s, _ in c.workspaces])
    if not all(results) or c.launches - before != 40 or counted["n"] or not streams:
        return fail("two streams: results differ, or a call did not go through the compiled launcher alone")

    # a CUDA graph, replayed twice with the inputs refilled
    sa, sb, so = a.clone(), b.clone(), nan_out()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ptxgen.gemm(sa, sb, so)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ptxgen.gemm(sa, sb, so)
    replays = []
    for seed in (2, 3):
        x, y = inputs(seed)
        sa.copy_(x)
        sb.copy_(y)
        so.fill_(float("nan"))
        graph.replay()
        eager = nan_out()
        ptxgen.gemm(x, y, eager)
        torch.cuda.synchronize()
        ok, ours, theirs = close(so, x, y)
        same = bool(torch.equal(so.view(torch.int16), eager.view(torch.int16)))
        replays.append(so.clone())
        say("graph", seed=seed, bit_identical_to_eager=same, rel_err=ours, torch_rel_err=theirs)
        if not (ok and same):
            return fail(f"graph replay of seed {seed}: bit-identical to eager {same}, rel error {ours} "
                        f"(torch's {theirs})")
    if torch.equal(replays[0], replays[1]):
        return fail("the two replays gave the same result for different inputs")
    report["passed"] = True
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(gpu_case(sys.argv[1]))
