"""Every device of the process (CPU tier): a simulated driver with two devices, each with its own primary context.

The simulation is strict where the real driver may be lenient: a function handle launches only while its module's
context is current (else INVALID_CONTEXT, 201), and each device's memory lies in its own address range, so every
launch can be checked against the device its pointers belong to (:meth:`TwoDevices.check_launch`). The tests follow
which context each module was loaded into, which function handle and context each launch used, which prepared launch
(cache entry) served it, and which context is current after the call (the caller's, as torch's device guard leaves
it). Controls show the checks fail when a call is sent to the wrong device.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest

import ptxgen
from ptxgen.api import dispatch
from ptxgen.api.launch import launchplan, streams
from ptxgen.runtime.launch import gpu
from ptxgen.runtime.launch.arrays import ArgumentError
from ptxgen.runtime.launch.gpu import Device
from test_api import BF16, FakeArray, _fake_encode, _fresh, read_params

DEVICE_SPAN = 1 << 40


def base(device: int) -> int:
    """Where the simulated memory of ``device`` starts (each device has its own range)."""
    return 0x100000000000 + device * DEVICE_SPAN


class TwoDevices:
    """Two simulated 9.0 devices. ``current``: the context current on the (one) thread, device 0's at the start, as after
    ``torch.cuda.set_device(0)``. Modules load into the current context; a launch whose function belongs to another
    context than the current one fails with 201, as a launch with the wrong context current may."""

    def __init__(self, monkeypatch, sms=(132, 114)):
        self.contexts = [f"ctx{i}" for i in range(2)]
        self.devices = [Device(i, f"simulated H100 {i}", (9, 0), None, self.contexts[i], sms[i]) for i in range(2)]
        self.current = self.contexts[0]
        self.loaded, self.launches, self.switches, self.next_ptr = [], [], [], [base(0), base(1)]
        self.func_context: dict[int, str] = {}
        self.failed = 0
        sim = self

        class FakeKernel:
            def __init__(self, cubin, name, smem):
                self.context = sim.current
                self.func = 0xF000 + 0x100 * sim.contexts.index(sim.current) + len(sim.loaded)
                self.name, self.dynamic_smem = name, smem
                sim.func_context[self.func] = sim.current
                sim.loaded.append(dict(context=sim.current, name=name, func=self.func))

            def max_active_clusters(self, size, block):
                return 132 // size

            def launch(self, grid, block, args, stream=0):  # the slow paths' cuda-python launch (fused, block FP8)
                assert sim.current == self.context, "a cuda-python launch with another context current"
                sim.launches.append(dict(func=self.func, context=sim.current, stream=stream, values=args.read_back()))

        class FakeDriver:
            def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
                return sim.driver_launch(func, stream, params)

            def encode(self, args):
                return _fake_encode(args)

        def ensure_current(dev):
            if sim.current == dev.context:
                return None
            previous, sim.current = sim.current, dev.context
            sim.switches.append((previous, dev.context))
            return previous

        def restore_context(previous):
            if previous is not None:
                sim.switches.append((sim.current, previous))
                sim.current = previous

        def require_gpu(index=None):
            return self.devices[self.contexts.index(self.current) if index is None else index]

        monkeypatch.setattr(streams, "require_gpu", require_gpu)
        monkeypatch.setattr(streams, "ensure_current", ensure_current)
        monkeypatch.setattr(streams, "restore_context", restore_context)
        monkeypatch.setattr(streams, "wait_for_producer", lambda producer, ours: None)
        monkeypatch.setattr(gpu, "Kernel", FakeKernel)
        monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", FakeDriver())
        monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", _fake_encode)

    def driver_launch(self, func, stream, params) -> int:
        if self.func_context[func] != self.current:
            self.failed += 1
            return 201  # CUDA_ERROR_INVALID_CONTEXT
        self.launches.append(dict(func=func, context=self.current, stream=stream, params=params))
        return 0

    def array(self, shape, device: int, dtype="bfloat16", strides=None):
        """A FakeArray in ``device``'s memory range, saying its device through DLPack."""
        ptr = self.next_ptr[device]
        self.next_ptr[device] += 1 << 26
        return FakeArray(shape, dtype, strides=strides, ptr=ptr, device=(2, device))

    def pointers(self, launch, params) -> list[int]:
        """The device addresses a launch was handed: raw pointers, and each tensor map's global address."""
        values = launch["values"] if "values" in launch else read_params(launch["params"], params)
        out = []
        for v in values:
            if isinstance(v, bytes):
                out.append(int.from_bytes(v[:8], "little"))
            elif isinstance(v, int) and v >= base(0):
                out.append(v)
        return out

    def check_launch(self, launch, params) -> int:
        """The device a launch ran on: its function's module context, which was current, and every pointer it was
        handed in that device's memory. AssertionError otherwise."""
        device = self.contexts.index(launch["context"])
        assert self.func_context[launch["func"]] == launch["context"], "launched a function of another context"
        ptrs = self.pointers(launch, params)
        assert ptrs, "no pointer found in the launch"
        for p in ptrs:
            assert base(device) <= p < base(device) + DEVICE_SPAN, (
                f"pointer {p:#x} is cuda:{(p - base(0)) // DEVICE_SPAN}'s memory, launched on cuda:{device}")
        return device


@pytest.fixture
def sim(monkeypatch):
    """The simulated devices, and the process-wide tables started afresh (no kernel loaded by another test's fakes)."""
    import ptxgen.grouped as grouped
    from ptxgen.api import fp8blocks, fused

    for module, names in ((dispatch, ("_BY_KEY", "_KERNELS", "_SWAPPED")), (fused, ("_KERNELS",)),
                          (grouped, ("_KERNELS", "_SPECS", "_BY_TYPES", "_TORCH_KERNELS"))):
        for name in names:
            monkeypatch.setattr(module, name, {})
    for name in ("_BY_INFO", "_BY_TORCH"):
        monkeypatch.setattr(fp8blocks, name, type(getattr(fp8blocks, name))())
    return TwoDevices(monkeypatch)


@pytest.fixture
def kbf16():
    k = ptxgen.compile(**BF16, arch="sm_90a")
    _fresh(k)
    yield k
    _fresh(k)


def _operands(sim, device, m=300, n=200, k=264):
    return (sim.array((m, k), device), sim.array((n, k), device), sim.array((m, n), device, strides=(-(-n // 8) * 8 + 8, 1)))


# ---------------------------------------------------------------------------------------------------------------------
# CompiledKernel
# ---------------------------------------------------------------------------------------------------------------------
def test_a_second_device_loads_a_second_module_and_launches_its_function(sim, kbf16):
    a0, b0, o0 = _operands(sim, 0)
    a1, b1, o1 = _operands(sim, 1)
    assert kbf16(a0, b0, o0) is o0
    assert [x["context"] for x in sim.loaded] == ["ctx0"] and sim.switches == []
    assert kbf16(a1, b1, o1) is o1
    # a second module, loaded into device 1's context; the launch used its function, with device 1's context current
    assert [x["context"] for x in sim.loaded] == ["ctx0", "ctx1"]
    f0, f1 = (x["func"] for x in sim.loaded)
    assert [x["func"] for x in sim.launches] == [f0, f1]
    assert [sim.check_launch(x, kbf16.params) for x in sim.launches] == [0, 1]
    # one prepared launch per device (the dispatch key holds the device), and device 0's context current again
    assert sorted(e.device_index for e in kbf16._entries.values()) == [0, 1]
    assert set(kbf16._modules) == {0, 1}
    assert sim.current == "ctx0"
    # repeat calls: no module loaded, each device's entry serves its own arrays
    for x in (0, 1, 0, 1):
        kbf16(*_operands(sim, x))
    assert len(sim.loaded) == 2 and len(kbf16._entries) == 2
    assert [sim.check_launch(x, kbf16.params) for x in sim.launches[2:]] == [0, 1, 0, 1]


def test_no_context_switch_while_the_device_is_the_current_one(sim, kbf16):
    """torchrun's ranks: torch.cuda.set_device(rank) leaves the rank's context current: no call switches it."""
    sim.current = "ctx1"
    for _ in range(3):
        kbf16(*_operands(sim, 1))
    assert sim.switches == [] and sim.failed == 0
    assert [x["context"] for x in sim.loaded] == ["ctx1"]
    assert [sim.check_launch(x, kbf16.params) for x in sim.launches] == [1, 1, 1]


def test_another_devices_call_switches_for_the_launch_and_back(sim, kbf16):
    """A call on cuda:1 while cuda:0 is current: the prepared launch fails with INVALID_CONTEXT, sets device 1's
    context, launches again and makes device 0's current again (torch's current device is not changed)."""
    kbf16(*_operands(sim, 1))  # prepared (module load under device 1's context, switched back)
    before = len(sim.switches)
    kbf16(*_operands(sim, 1))
    assert sim.failed == 2  # the first call's launch and this one's, each once
    assert sim.switches[before:] == [("ctx0", "ctx1"), ("ctx1", "ctx0")]
    assert sim.current == "ctx0" and sim.check_launch(sim.launches[-1], kbf16.params) == 1


def test_mixed_devices_are_refused_naming_both(sim, kbf16):
    a0, b0, o0 = _operands(sim, 0)
    a1, b1, o1 = _operands(sim, 1)
    for args in ((a0, b1, o0), (a0, b0, o1), (a1, b0, o1)):
        with pytest.raises(ArgumentError, match=r"on cuda:[01].*on cuda:[01]") as e:
            kbf16(*args)
        assert "cuda:0" in str(e.value) and "cuda:1" in str(e.value)
    with pytest.raises(ArgumentError, match=r"a (is )?on cuda:0.* b (is )?on cuda:1"):
        ptxgen.gemm(a0, b1, o0)
    assert sim.launches == [] and sim.loaded == []


def test_call_ordinal_asks_the_driver_for_arrays_that_do_not_say(monkeypatch, sim):
    """Arrays without a DLPack device: the pointer's device (cuPointerGetAttribute), and the two named apart."""
    monkeypatch.setattr(streams, "pointer_device", lambda ptr, name: (ptr - base(0)) // DEVICE_SPAN)
    x0, x1 = SimpleNamespace(name="a", device=None, ptr=base(0) + 64), SimpleNamespace(name="b", device=None, ptr=base(1) + 64)
    known1 = SimpleNamespace(name="out", device=(2, 1), ptr=0)
    assert streams.call_ordinal([x1, None, known1]) == 1
    assert streams.unknown_device([known1]) is None and streams.unknown_device([x1, known1]) == 1
    with pytest.raises(ArgumentError, match="a is on cuda:0 but b is on cuda:1"):
        streams.call_ordinal([x0, x1])


def test_control_a_call_sent_to_the_wrong_device_is_caught(monkeypatch, sim, kbf16):
    """The checks above can fail: with every call sent to device 0 (the single-device behaviour), the launch for cuda:1
    arrays uses device 0's function with device 1's pointers, and check_launch says so."""
    monkeypatch.setattr(streams, "call_device", lambda infos: sim.devices[0])
    kbf16(*_operands(sim, 1))
    assert [x["context"] for x in sim.loaded] == ["ctx0"]
    with pytest.raises(AssertionError, match="cuda:1's memory, launched on cuda:0"):
        sim.check_launch(sim.launches[-1], kbf16.params)


def test_control_a_module_shared_between_devices_is_caught(monkeypatch, sim, kbf16):
    """A Launch for cuda:1 holding device 0's module (one module for every device): its launch runs in device 0's
    context with device 1's pointers, and check_launch says so; with device 1's context current the strict driver
    refuses it (201, then once more after the switch: CudaError)."""
    kbf16(*_operands(sim, 0))
    monkeypatch.setitem(kbf16._modules, 1, kbf16._modules[0])
    kbf16(*_operands(sim, 1))
    with pytest.raises(AssertionError, match="cuda:1's memory, launched on cuda:0"):
        sim.check_launch(sim.launches[-1], kbf16.params)
    sim.current = "ctx1"
    with pytest.raises(gpu.CudaError, match=r"\(201\)"):
        kbf16(*_operands(sim, 1))


# ---------------------------------------------------------------------------------------------------------------------
# ptxgen.gemm, the fused door, batched, grouped, block FP8, workspaces
# ---------------------------------------------------------------------------------------------------------------------
def test_gemm_selects_and_launches_per_device(sim):
    runs = []
    for device in (0, 1, 0, 1):
        a, b, o = _operands(sim, device, 256, 512, 256)
        assert ptxgen.gemm(a, b, o) is o
        runs.append(sim.launches[-1])
    kernels = set(dispatch._BY_KEY.values())
    assert len(dispatch._BY_KEY) == 2 and len(kernels) == 1  # one selection per key (device in it), one compiled kernel
    (k,) = kernels
    assert set(k._modules) == {0, 1} and len(k._entries) == 2
    assert [sim.check_launch(x, k.params) for x in runs] == [0, 1, 0, 1]
    assert sim.current == "ctx0"


def test_batched_gemm_runs_on_its_device(sim):
    a = sim.array((3, 128, 256), 1)
    b = sim.array((3, 256, 256), 1)
    out = sim.array((3, 128, 256), 1)
    assert ptxgen.gemm(a, b, out) is out
    (k,) = set(dispatch._BY_KEY.values())
    assert sim.check_launch(sim.launches[-1], k.params) == 1 and sim.loaded[-1]["context"] == "ctx1"


def test_fused_epilogue_runs_on_its_device_and_refuses_a_bias_elsewhere(sim):
    a, b, o = _operands(sim, 1, 256, 256, 256)
    bias1, bias0 = sim.array((256,), 1, "float32"), sim.array((256,), 0, "float32")
    assert ptxgen.gemm(a, b, o, bias=bias1, activation="relu") is o
    launch = sim.launches[-1]
    assert launch["context"] == "ctx1" and sim.loaded[-1]["context"] == "ctx1"
    assert all(base(1) <= p < base(2) for p in sim.pointers(launch, None))
    assert sim.current == "ctx0"
    with pytest.raises(ArgumentError, match="cuda:1.*bias is on cuda:0"):
        ptxgen.gemm(a, b, o, bias=bias0, activation="relu")


def test_grouped_gemm_prepares_per_device(sim):
    import ptxgen.grouped as grouped

    g, m, n, k = 3, 300, 256, 128
    calls = []
    for device in (0, 1):
        a, b = sim.array((m, k), device), sim.array((g, n, k), device)
        offs, out = sim.array((g,), device, "int32"), sim.array((m, n), device)
        assert ptxgen.grouped_gemm(a, b, offs, out) is out
        calls.append(sim.launches[-1])
    (kernel,) = grouped._KERNELS.values()
    assert [x["context"] for x in calls] == ["ctx0", "ctx1"]
    assert calls[0]["func"] != calls[1]["func"] and set(kernel.compiled._modules) == {0, 1}
    assert sorted(launch.dev.index for launch in kernel._launches.values()) == [0, 1]
    offs0 = sim.array((g,), 0, "int32")
    with pytest.raises(ArgumentError, match="cuda:1.*cuda:0"):
        ptxgen.grouped_gemm(sim.array((m, k), 1), sim.array((g, n, k), 1), offs0, sim.array((m, n), 1))


def test_block_fp8_runs_on_its_device(sim, monkeypatch):
    from ptxgen.api import fp8blocks

    monkeypatch.setattr(fp8blocks, "launcher", lambda: SimpleNamespace(encode=_fake_encode))
    used = []
    monkeypatch.setattr(fp8blocks, "streamk_workspace",
                        lambda drv, device, stream, nbytes, like, ens: used.append(device) or (base(device) + (1 << 36), None))
    m, n, k = 256, 512, 512
    for device in (1, 0):
        a, b = sim.array((m, k), device, "float8_e4m3fn"), sim.array((n, k), device, "float8_e4m3fn")
        sa = sim.array((m, k // 128), device, "float32", strides=(1, m))
        sb = sim.array((k // 128, n // 128), device, "float32", strides=(1, k // 128))
        out = sim.array((m, n), device)
        assert fp8blocks.gemm(a, b, sa, sb, out) is out
        launch = sim.launches[-1]
        assert launch["context"] == f"ctx{device}" and sim.loaded[-1]["context"] == f"ctx{device}"
        assert all(base(device) <= p < base(device) + DEVICE_SPAN for p in sim.pointers(launch, None))
    assert used in ([], [1, 0])
    assert sim.current == "ctx0"


def test_workspaces_are_allocated_in_their_devices_context(sim, monkeypatch):
    made = []

    class FakeBuffer:
        def __init__(self, nbytes):
            made.append(sim.current)
            self.address = base(sim.contexts.index(sim.current)) + (1 << 38) + 256 * len(made)

    class Driver:  # not capturing; the counters' memset accepted
        def capture_status(self, stream):
            return 0, 0

        def memset_d32_async(self, ptr, value, count, stream):
            return 0

    monkeypatch.setattr(gpu, "Buffer", FakeBuffer)
    monkeypatch.setattr(launchplan, "_STREAMK_WORKSPACES", {})
    w1, _ = launchplan.streamk_workspace(Driver(), 1, 0x77, 4096)
    w0, _ = launchplan.streamk_workspace(Driver(), 0, 0x77, 4096)
    assert made == ["ctx1", "ctx0"] and w1 != w0 and sim.current == "ctx0"
    assert base(1) <= w1 < base(2) and base(0) <= w0 < base(1)
    assert launchplan.streamk_workspace(Driver(), 1, 0x77, 4096)[0] == w1 and len(made) == 2  # kept per (device, stream)


# ---------------------------------------------------------------------------------------------------------------------
# the compiled launcher: the retry with the device's context, and the switch back
# ---------------------------------------------------------------------------------------------------------------------
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)


def test_compiled_launcher_switches_for_the_launch_and_back(sim, monkeypatch, kbf16):
    pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")

    class CDriver:
        encode = staticmethod(_fake_encode)

        def __init__(self):
            self._cb = LAUNCH(lambda func, gx, gy, gz, bx, by, bz, smem, stream, params, extra:
                              sim.driver_launch(func, stream or 0, params))
            self.c_launch = ctypes.cast(self._cb, ctypes.c_void_p).value

        def launch(self, *args):
            raise AssertionError("the Python launch path ran although the compiled launcher was built")

    monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", CDriver())
    kbf16(*_operands(sim, 0))
    kbf16(*_operands(sim, 1))
    entries = {e.device_index: e for e in kbf16._entries.values()}
    assert all(e._c is not None for e in entries.values())
    assert sim.current == "ctx0"
    n, switched = len(sim.launches), len(sim.switches)
    for _ in range(2):  # device 0 current: device 0's calls never switch
        kbf16(*_operands(sim, 0))
    assert len(sim.switches) == switched and sim.failed == 1  # only the first cuda:1 call failed once
    kbf16(*_operands(sim, 1))  # device 1's call: one failed launch, switch, launch, switch back
    assert sim.switches[switched:] == [("ctx0", "ctx1"), ("ctx1", "ctx0")] and sim.current == "ctx0"
    assert [sim.check_launch(x, kbf16.params) for x in sim.launches[n:]] == [0, 0, 1]
    sim.current = "ctx1"  # as after torch.cuda.set_device(1): device 1's calls launch at once
    switched = len(sim.switches)
    kbf16(*_operands(sim, 1))
    assert len(sim.switches) == switched and sim.check_launch(sim.launches[-1], kbf16.params) == 1


# ---------------------------------------------------------------------------------------------------------------------
# runtime.launch.gpu.require_gpu and api.launch.streams' context functions against a simulated cuda.bindings driver
# ---------------------------------------------------------------------------------------------------------------------
class FakeCu:
    """The few cuda.bindings.driver calls require_gpu and the context functions make; two devices."""

    class CUresult:
        CUDA_SUCCESS = 0

    CUdevice_attribute = SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
                                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
                                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms")

    def __init__(self):
        self.current, self.retained, self.calls = 0, [], []

    def cuInit(self, flags):
        return (0,)

    def cuCtxGetCurrent(self):
        return (0, self.current)

    def cuCtxGetDevice(self):
        return (0, self.current - 100)  # contexts are 100 + ordinal

    def cuDeviceGetCount(self):
        return (0, 2)

    def cuDeviceGet(self, index):
        return (0, index)

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, {"major": 9, "minor": 0, "sms": 132 - 18 * dev}[attr])

    def cuDeviceGetName(self, n, dev):
        return (0, f"NVIDIA H100 #{dev}".encode() + b"\0")

    def cuDevicePrimaryCtxRetain(self, dev):
        self.retained.append(dev)
        return (0, 100 + dev)

    def cuCtxSetCurrent(self, ctx):
        self.calls.append(("set", ctx))
        self.current = int(ctx)
        return (0,)


def test_require_gpu_per_ordinal_never_switches_the_callers_context(monkeypatch):
    cu = FakeCu()
    monkeypatch.setattr(gpu, "_driver", lambda: cu)
    monkeypatch.setattr(gpu, "_DEVICES", {})
    monkeypatch.setattr(gpu, "_DEVICE", None)
    cu.current = 101  # torch.cuda.set_device(1) made device 1's primary context current
    d = gpu.require_gpu()
    assert (d.index, d.context, d.sm_count) == (1, 101, 114) and cu.calls == []
    d0 = gpu.require_gpu(0)  # another device: its context retained, the current one kept
    assert (d0.index, d0.context, d0.sm_count) == (0, 100, 132) and cu.current == 101 and cu.calls == []
    assert gpu.require_gpu(0) is d0 and gpu.require_gpu(1) is d and cu.retained == [1, 0]
    assert gpu._DEVICE is d  # the first initialised
    with pytest.raises(gpu.NoGPU, match="cuda:2"):
        gpu.require_gpu(2)
    # the context functions, real ones, on that driver
    with streams.on_device(d0):
        assert cu.current == 100
    assert cu.current == 101 and cu.calls == [("set", 100), ("set", 101)]
    restore = streams.context_switch(d0)
    assert cu.current == 100 and restore is not None
    restore()
    assert cu.current == 101
    assert streams.context_switch(d) is None and len(cu.calls) == 4  # already current: nothing switched


def test_require_gpu_on_a_thread_without_a_context_makes_one_current(monkeypatch):
    cu = FakeCu()
    monkeypatch.setattr(gpu, "_driver", lambda: cu)
    monkeypatch.setattr(gpu, "_DEVICES", {})
    monkeypatch.setattr(gpu, "_DEVICE", None)
    d = gpu.require_gpu()
    assert d.index == 0 and cu.current == 100
    cu.current = 0  # a new thread: no context; ensure_current sets it and nothing is restored afterwards
    with streams.on_device(d):
        pass
    assert cu.current == 100 and streams.ensure_current(d) is None


# ---------------------------------------------------------------------------------------------------------------------
# gpu tier: the real driver (one GPU: the current device's calls never switch; two or more: cuda:1 from cuda:0)
# ---------------------------------------------------------------------------------------------------------------------
def _count_switches(monkeypatch) -> list:
    """Every context switch a launch asks for (streams.context_switch), recorded."""
    real = streams.context_switch
    seen = []

    def counted(dev):
        seen.append(dev.index)
        return real(dev)

    monkeypatch.setattr(streams, "context_switch", counted)
    return seen


@pytest.mark.gpu
def test_gpu_calls_on_the_current_device_never_switch(gpu, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    torch.cuda.set_device(0)
    a = torch.randn(512, 256, device="cuda:0", dtype=torch.bfloat16)
    b = torch.randn(384, 256, device="cuda:0", dtype=torch.bfloat16)
    ptxgen.gemm(a, b)  # prepares
    switches = _count_switches(monkeypatch)
    for _ in range(20):
        out = ptxgen.gemm(a, b)
    torch.cuda.synchronize()
    ref = (a.float() @ b.float().T)
    assert float((out.float() - ref).abs().max()) <= 2e-2 * float(ref.abs().max())
    assert switches == [] and torch.cuda.current_device() == 0


@pytest.mark.gpu
def test_gpu_gemm_on_cuda1_runs_on_cuda1(gpu, monkeypatch):
    """With cuda:0 current, ptxgen.gemm on tensors of cuda:1: the result is right, the output and the module are cuda:1's,
    cuda:0's memory is untouched by it and torch's current device is still cuda:0."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    torch.cuda.set_device(0)
    a = torch.randn(1000, 512, device="cuda:1", dtype=torch.bfloat16)
    b = torch.randn(768, 512, device="cuda:1", dtype=torch.bfloat16)
    torch.cuda.synchronize(1)
    before0, before1 = torch.cuda.memory_allocated(0), torch.cuda.memory_allocated(1)
    switches = _count_switches(monkeypatch)
    out = ptxgen.gemm(a, b)
    out2 = ptxgen.gemm(a, b)  # the prepared launch
    torch.cuda.synchronize(1)
    assert out.device == torch.device("cuda:1") and out2.device == torch.device("cuda:1")
    ref = a.float() @ b.float().T
    for o in (out, out2):
        assert float((o.float() - ref).abs().max()) <= 2e-2 * float(ref.abs().max())
    assert torch.cuda.memory_allocated(0) == before0 and torch.cuda.memory_allocated(1) > before1
    assert torch.cuda.current_device() == 0
    kernels = [k for k in dispatch._KERNELS.values() if 1 in k._modules]
    assert kernels, "no kernel loaded on cuda:1"
    print(f"context switches asked by the launches on cuda:1 with cuda:0 current: {len(switches)}")
    torch.cuda.set_device(1)  # cuda:1 current: its calls launch without a switch
    del switches[:]
    ptxgen.gemm(a, b)
    torch.cuda.synchronize(1)
    assert switches == []
    torch.cuda.set_device(0)
