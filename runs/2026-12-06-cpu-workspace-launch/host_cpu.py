"""Host time per ptxgen.gemm call on CPU, the driver's entry points stubbed (libnoop.so: each returns 0 at once):
what ptxgen's own side of a hot call costs for a plain, a split-K and a stream-K pick, through the compiled launcher
(split-K's and stream-K's workspace one more pointer of it) and without it (the prepared launch's Python path: the
path split-K and stream-K took before, the workspace got and patched in Python per call; for the plain pick: ctypes).
Each number: the median of 7 loops of 2000 calls. Run from the repository root: runs/2026-12-06-cpu-workspace-launch/command.sh"""
import ctypes, sys, time, statistics
sys.path.insert(0, "tests"); sys.path.insert(0, ".")
import pytest, torch
import ptxgen
from ptxgen.api import dispatch, launchplan
from ptxgen.runtime.launch import fastlaunch
from ptxgen.runtime.choose import choose
from test_api import SimulatedGPU, _fake_encode, kmajor, FakeArray

mp = pytest.MonkeyPatch()
SimulatedGPU(mp)
lib = ctypes.CDLL(sys.argv[1])  # libnoop.so, built from noop.c by command.sh
drv = fastlaunch._CtypesDriver(lib)
drv.c_launch = ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value
drv.c_capture = ctypes.cast(lib.cuStreamIsCapturing, ctypes.c_void_p).value
drv.encode = _fake_encode
fastlaunch._DRIVER = drv
mp.setattr(launchplan, "allocate_device_bytes", lambda n, like=None, dev=0: (0x7000_0000 + n, object()))
launchplan.tensor_type()  # torch.Tensor for the C hot calls
STREAM = 0x51
SHAPES = {"plain 3000x5000x7000": (3000, 5000, 7000), "split-K 128x4096x4096": (128, 4096, 4096),
          "stream-K 2048x11008x4096": (2048, 11008, 4096)}

def entry_for(m, n, k, compiled=True):
    spec = choose("bf16", "sm_90a", m, n, k, lda=k, ldb=k).spec
    kern = ptxgen.compile(spec)
    kern._entries.clear(); kern._torch_entries.clear()
    a, b = kmajor(m, k, ptr=1 << 40), kmajor(n, k, ptr=2 << 40)
    o = FakeArray((m, n), "bfloat16", strides=(n, 1), ptr=3 << 40)
    kern(a, b, o, stream=type("S", (), {"cuda_stream": STREAM})())
    (e,) = kern._entries.values()
    if e._c is not None:
        e._c.stream_reader = lambda i: STREAM
    if not compiled:
        e._c = None
    e._stream = lambda i: STREAM
    return spec, e

def per_call_us(f, calls=2000, rounds=7):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)

rows = []
for name, (m, n, k) in SHAPES.items():
    ta, tb = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16)
    to = torch.empty(m, n, dtype=torch.bfloat16)
    key = (None, launchplan.torch_key(ta, tb, to))
    res = {}
    for compiled in (True, False):
        spec, e = entry_for(m, n, k, compiled)
        dispatch._TORCH_ENTRIES.clear(); dispatch._SWAPPED.clear()
        dispatch._TORCH_ENTRIES[key] = e
        assert ptxgen.gemm(ta, tb, to) is to
        res["compiled" if compiled else "python"] = per_call_us(lambda: ptxgen.gemm(ta, tb, to))
    kind = "split-K %d" % spec.split_k if spec.split_k > 1 else "stream-K %d" % spec.stream_k if spec.stream_k > 1 else "plain"
    print(f"{name:28s} pick {kind:11s} host us/call: compiled launcher {res['compiled']:.2f}, "
          f"without it (Python path) {res['python']:.2f}", flush=True)

# block FP8 (ptxgen.api.fp8launch.Fp8Launch, a stream-K spec): the launch step of its hot path (fp8blocks._hot_torch
# calls run_cached, else run), with the compiled launcher and without it (the Python workspace path)
from ptxgen.api.fp8launch import Fp8Launch
from ptxgen.runtime.launch.launch import Problem, workspace_bytes
from ptxgen.api import fp8blocks
kernel = ptxgen.compile(fp8blocks.default_spec("bf16", stream_k=4))
p = Problem(128, 4096, 7168, 7168, 7168, 4096)
res = {}
for compiled in (True, False):
    nbytes = workspace_bytes(kernel.plan, p, 132)
    e = Fp8Launch(plan=kernel.plan, problem=p, kernel=type("K", (), {"func": 0xF8, "dynamic_smem": 1024}), grid=(132, 1, 1),
                  block=(384, 1, 1), extra={"lds_a": 128, "lds_b": 32}, encode=_fake_encode, driver=drv,
                  ensure_context=lambda: None, device_index=0, spans=(0, 0, 0), out_alloc=None,
                  workspace=lambda s, like: launchplan.streamk_workspace(drv, 0, s, nbytes, like))
    if not compiled:
        e._c = None
    P = (1 << 40, 2 << 40, 3 << 40, 4 << 40, 5 << 40)
    def step():
        if e._c is None or not e._c.run_cached(*P, STREAM):
            e.run({"A": P[0], "B": P[1], "D": P[2], "SFA": P[3], "SFB": P[4]}, STREAM, None)
    step()
    res[compiled] = per_call_us(step)
print(f"{'bfp8 128x4096x7168 launch':28s} pick stream-K 4  host us/call: compiled launcher {res[True]:.2f}, "
      f"without it (Python path) {res[False]:.2f}", flush=True)
