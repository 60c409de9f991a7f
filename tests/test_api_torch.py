"""ptxgen.gemm and compiled kernels as a torch user calls them (``gpu`` tier; skips without a GPU or torch).

The hot path across changing pointers, the ctypes tensor-map encoder against cuda-python's, CUDA-graph
capture and replay with refilled buffers, ``torch.ops.ptxgen.gemm`` under ``torch.compile(fullgraph=True)``,
any 2-D tensor ``torch.matmul`` takes (hypothesis over shapes, strides and offsets), zero-size dimensions,
errors raised before any launch with ``out`` untouched, batched ``a`` with a shared or batched ``b``, and the JSON of
``ptxgen bench --api``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ptxgen
from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError

ROOT = Path(__file__).resolve().parent.parent
BF16 = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=4)
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch(torch_cuda):  # conftest's torch_cuda, under the name these tests use
    return torch_cuda


def rel(torch, got, ref) -> float:
    got, ref = got.double(), ref.double()
    return float(torch.linalg.norm(got - ref) / max(torch.linalg.norm(ref), 1e-30))


def test_hot_path_follows_new_pointers(torch, gpu):
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    m, n, kk = 512, 384, 256
    b = torch.randn(n, kk, device="cuda", dtype=torch.bfloat16)
    results = []
    for i in range(6):  # new a and out each time: the tensor maps must follow them
        a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        results.append((a, k(a, b, out), ptxgen.gemm(a, b), ptxgen.gemm(a, b, out_dtype="f32")))
    torch.cuda.synchronize()
    assert len(k._torch_entries) == 1  # one prepared launch served the calls after the first
    for a, o1, o2, o3 in results:
        ref = a.double() @ b.double().t()
        assert rel(torch, o1, ref) < 1e-2 and rel(torch, o2, ref) < 1e-2 and rel(torch, o3, ref) < 1e-3
        assert o3.dtype == torch.float32


def test_ctypes_encoder_equals_the_bindings(torch, gpu):
    from ptxgen.runtime.launch.fastlaunch import _CtypesDriver, launcher
    from ptxgen.runtime.launch.tensormap import encode, tensormap_args

    assert isinstance(launcher(), _CtypesDriver)
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    x = torch.empty(1000, 1024, device="cuda", dtype=torch.bfloat16)
    tma = k.plan.tma_plan("a")
    args = tensormap_args(tma, x.data_ptr(), (1000, 1000), 1024)
    assert launcher().encode(args) == encode(args)


def test_compiled_launcher_on_the_gpu_matches_the_ctypes_path(torch, gpu, monkeypatch):
    """Where the compiled launcher was built, torch calls go through it (its launch count moves with the calls,
    across new pointers) and give bit-identical results to the same kernel launched through ctypes."""
    from ptxgen.runtime.launch import fastlaunch

    mod = fastlaunch.compiled_module()
    if mod is None:
        pytest.skip("the compiled launcher was not built (ptxgen launches through ctypes here)")
    m, n, kk = 1000, 768, 512
    b = torch.randn(n, kk, device="cuda", dtype=torch.bfloat16)
    ins = [torch.randn(m, kk, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    outs_c = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in ins]
    k(ins[0], b, outs_c[0])
    (entry,) = k._torch_entries.values()
    assert isinstance(entry._c, mod.Launcher)
    before = entry._c.launches
    for a, o in zip(ins, outs_c):
        assert k(a, b, o) is o
    fresh = k(ins[1], b)  # out allocated in the C hot call's callback
    assert entry._c.launches == before + len(ins)
    monkeypatch.setattr(fastlaunch, "_MODULE", [None])  # the ctypes path, a fresh kernel object
    k2 = ptxgen.compile(**BF16, arch=gpu.arch.value)
    outs_py = [k2(a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for a in ins]
    (entry2,) = k2._torch_entries.values()
    assert entry2._c is None
    torch.cuda.synchronize()
    for oc, op in zip(outs_c, outs_py):
        assert torch.equal(oc, op)
    assert torch.equal(fresh, outs_py[1])
    assert rel(torch, outs_c[2], ins[2].double() @ b.double().t()) < 1e-2


def test_cuda_graph_of_several_gemms_replays_with_refilled_inputs(torch, gpu):
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    shapes = [(256, 512, 128), (1000, 704, 512), (2048, 1024, 1024)]
    ins = [(torch.randn(m, kk, device="cuda", dtype=torch.bfloat16), torch.randn(n, kk, device="cuda", dtype=torch.bfloat16))
           for m, n, kk in shapes]
    given = torch.empty(shapes[1][0], shapes[1][1], device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up (compile, load, prepare) outside the capture, as torch asks
        for _ in range(2):
            ptxgen.gemm(*ins[0])
            k(*ins[1], given)
            ptxgen.gemm(*ins[2], out_dtype="f32")
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y0 = ptxgen.gemm(*ins[0])
        k(*ins[1], given)
        y2 = ptxgen.gemm(*ins[2], out_dtype="f32")
    for _ in range(3):
        for a, b in ins:  # refill the captured inputs in place
            a.copy_(torch.randn_like(a))
            b.copy_(torch.randn_like(b))
        g.replay()
        torch.cuda.synchronize()
        refs = [a.double() @ b.double().t() for a, b in ins]
        assert rel(torch, y0, refs[0]) < 1e-2 and rel(torch, given, refs[1]) < 1e-2 and rel(torch, y2, refs[2]) < 1e-3


def test_torch_compile_fullgraph(torch, gpu):
    ptxgen.register_torch_ops()
    assert hasattr(torch.ops.ptxgen, "gemm")

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(512, 256, device="cuda", dtype=torch.bfloat16) / 16, requires_grad=False)
            self.w2 = torch.nn.Parameter(torch.randn(200, 512, device="cuda", dtype=torch.bfloat16) / 16, requires_grad=False)

        def forward(self, x):
            h = torch.nn.functional.gelu(torch.ops.ptxgen.gemm(x, self.w1))
            return torch.ops.ptxgen.gemm(h, self.w2, "f32")

    mod = MLP()
    x = torch.randn(300, 256, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(mod, fullgraph=True)
    got = compiled(x)
    eager = (torch.nn.functional.gelu(x @ mod.w1.t()) @ mod.w2.t()).float()
    torch.cuda.synchronize()
    assert got.shape == (300, 200) and got.dtype == torch.float32
    assert rel(torch, got, eager) < 2e-2


_LAYOUTS = ("kmajor", "kmajor_odd_ld", "mnmajor", "mnmajor_odd_ld", "offset")


def _operand(torch, rows, k, dtype, layout, gen):
    def rnd(*shape):
        x = torch.randn(*shape, device="cuda", generator=gen)
        return x.to(dtype)

    if layout == "kmajor":
        return rnd(rows, k)
    if layout == "kmajor_odd_ld":
        return rnd(rows, k + 3)[:, :k]
    if layout == "mnmajor":
        return rnd(k, rows).t()
    if layout == "mnmajor_odd_ld":
        return rnd(k, rows + 1)[:, :rows].t()
    return rnd(rows * k + 1)[1:].view(rows, k)  # starts one element into its buffer: not 16-byte aligned


def test_any_tensor_matmul_accepts(torch, gpu):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "e4m3": torch.float8_e4m3fn}
    tol = {"f16": 1e-2, "bf16": 1e-2, "f32": 5e-3, "e4m3": 2e-2}

    @hypothesis.settings(max_examples=16, deadline=None, derandomize=True)
    @hypothesis.given(dt=st.sampled_from(sorted(dtypes)), m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 200),
                      la=st.sampled_from(_LAYOUTS), lb=st.sampled_from(_LAYOUTS), seed=st.integers(0, 1000))
    def check(dt, m, n, k, la, lb, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        a = _operand(torch, m, k, dtypes[dt], la, gen)
        b = _operand(torch, n, k, dtypes[dt], lb, gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # packed copies are announced once; said elsewhere
            got = ptxgen.gemm(a, b)
        ref = a.double() @ b.double().t()
        torch.cuda.synchronize()
        assert got.shape == (m, n)
        assert rel(torch, got, ref) < tol[dt], (dt, m, n, k, la, lb)

    check()


def test_unaligned_rows_warn_once_and_compute(torch, gpu, monkeypatch):
    from ptxgen.api.arrays import packing

    monkeypatch.setattr(packing, "_WARNED", set())
    at = torch.randn(64, 257, device="cuda", dtype=torch.bfloat16)  # K x M: a = at.t() is M-major with M = 257
    b = torch.randn(96, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.warns(UserWarning, match="packed K-major copy") as w:
        out = ptxgen.gemm(at.t(), b)
        ptxgen.gemm(at.t(), b)
    assert len([x for x in w if "ptxgen.gemm" in str(x.message)]) == 1
    torch.cuda.synchronize()
    assert rel(torch, out, at.t().double() @ b.double().t()) < 1e-2


def test_rows_aligned_to_8_or_4_bytes_take_a_cp_async_kernel_without_a_copy(torch, gpu, monkeypatch):
    """Operand rows (or data) 8- or 4-byte aligned: a cp.async kernel with copies that narrow reads them in place
    (no packed copy, no warning); only 2-byte alignment is packed."""
    from ptxgen.api import dispatch
    from ptxgen.api.arrays import packing

    monkeypatch.setattr(packing, "_WARNED", set())
    gen = torch.Generator(device="cuda").manual_seed(3)

    def rnd(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    cases = [
        ("bf16 rows 520 B apart", rnd(300, 260)[:, :250], rnd(200, 264)[:, :250], 8),
        ("bf16 rows 516 B apart", rnd(300, 258)[:, :250], rnd(200, 264)[:, :250], 4),
        ("bf16 data 8 B into its buffer", rnd(300, 264)[:, 4:], rnd(200, 264)[:, 4:], 8),
        ("f32 rows 1028 B apart (tf32)", rnd(300, 257, dtype=torch.float32)[:, :250], rnd(200, 256, dtype=torch.float32)[:, :250], 4),
        ("bf16 M-major, columns 520 B apart", rnd(250, 260)[:, :300].t(), rnd(200, 256)[:, :250], 8),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a packed copy would warn
        for what, a, b, w in cases:
            got = ptxgen.gemm(a, b, precision="tf32")  # float32 as tf32: the operands as they are (3xtf32 splits them)
            again = ptxgen.gemm(a, b, precision="tf32")
            torch.cuda.synchronize()
            ref = a.double() @ b.double().t()
            tol = 5e-3 if a.dtype == torch.float32 else 1e-2
            assert rel(torch, got, ref) < tol and torch.equal(got, again), what
            kernels = [kern for key, kern in dispatch._BY_KEY.items() if len(key) == 3 and key[2] == w]
            assert any(kern.spec.copy_bytes == w for kern in kernels), what


def test_zero_size_dimensions(torch, gpu):
    a = torch.randn(0, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
    assert ptxgen.gemm(a, b).shape == (0, 32)
    assert ptxgen.gemm(b, a).shape == (32, 0)
    a0 = torch.randn(16, 0, device="cuda", dtype=torch.bfloat16)
    b0 = torch.randn(24, 0, device="cuda", dtype=torch.bfloat16)
    out = torch.full((16, 24), 7.0, device="cuda", dtype=torch.bfloat16)
    assert ptxgen.gemm(a0, b0, out) is out
    torch.cuda.synchronize()
    assert torch.equal(out, torch.matmul(a0, b0.t()))  # K = 0: zeros, as torch gives


@pytest.mark.parametrize("case", ["cpu", "dtype", "mixed", "alias", "shape", "out_dtype"])
def test_errors_before_any_launch_out_untouched(torch, gpu, case):
    a = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(192, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.full((256, 192), 3.0, device="cuda", dtype=torch.bfloat16)
    exc, words = ArgumentError, []
    if case == "cpu":
        a, words = a.cpu(), ["a is on cpu:0", ".cuda()"]
    elif case == "dtype":
        a, b, exc, words = a.double(), b.double(), DTypeError, ["float64", "bf16"]
    elif case == "mixed":
        b, exc, words = b.half(), DTypeError, ["a is bf16", "b is f16"]
    elif case == "alias":
        big = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
        a, out, words = big[:, :128], big[:, 64:256], ["out overlaps a", "separate out"]
        out_before = out.clone()
    elif case == "shape":
        out, words = torch.full((192, 256), 3.0, device="cuda", dtype=torch.bfloat16), ["out has shape", "(256, 192)"]
    elif case == "out_dtype":
        out, exc, words = torch.full((256, 192), 3.0, device="cuda", dtype=torch.float64), DTypeError, ["float64"]
    before = out.clone() if case != "alias" else out_before
    with pytest.raises(exc) as e:
        ptxgen.gemm(a, b, out)
    torch.cuda.synchronize()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert torch.equal(out, before)


@pytest.mark.parametrize("call", ["kernel", "gemm"])
def test_tensors_changed_in_place_miss_the_remembered_hit(torch, gpu, call):
    """resize_, as_strided_ and ``.data =`` keep a tensor's identity and change its shape, strides or dtype: the
    compiled call (which remembers its last hit) must see it: the slow path's error with out untouched, or the right
    result for the new key, never the old key's launch."""
    from ptxgen.runtime.launch import torchmeta
    from ptxgen.runtime.launch.fastlaunch import compiled_module

    mod = compiled_module()
    reader = torchmeta.start(torch, mod, wait=True) if mod is not None else "none"  # the metadata reader, where built
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    run = k if call == "kernel" else ptxgen.gemm
    m, n, kk = 512, 384, 256
    a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, kk, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        assert run(a, b, out) is out
    counts = getattr(k, "_hot_counts", None)
    if call == "kernel" and counts is not None:
        assert counts[0] >= 1  # the remembered hit served the repeats
        if reader.startswith("loaded"):
            assert k._hot_meta_hits >= 1  # and the reader compared them: the checks below are its
    torch.cuda.synchronize()
    assert rel(torch, out, a.double() @ b.double().t()) < 1e-2

    def refused(exc, *args):
        o = args[2]
        before = o.clone()
        with pytest.raises(exc):
            run(*args)
        torch.cuda.synchronize()
        assert torch.equal(o, before)

    out.resize_(m, n - 128)  # out shrunk in place: a wrong shape now
    out.fill_(3.0)
    refused(ArgumentError, a, b, out)
    out.resize_(m, n)
    a.as_strided_((m, kk // 2), (kk, 1))  # a re-strided in place: K no longer b's
    refused(ArgumentError, a, b, out)
    b.as_strided_((n, kk // 2), (kk, 1))  # b too: a new, valid key (K = 128, rows 256 elements apart)
    assert run(a, b, out) is out and run(a, b, out) is out
    torch.cuda.synchronize()
    assert rel(torch, out, a.double() @ b.double().t()) < 1e-2
    a.resize_(m // 2, kk)  # a resized in place to fewer rows (its storage is larger): out must follow
    a.as_strided_((m // 2, kk // 2), (kk, 1))
    refused(ArgumentError, a, b, out)
    half = torch.empty(m // 2, n, device="cuda", dtype=torch.bfloat16)
    assert run(a, b, half) is half
    torch.cuda.synchronize()
    assert rel(torch, half, a.double() @ b.double().t()) < 1e-2
    a.data = a.data.to(torch.float16)  # another dtype, the same Python object
    assert a.dtype == torch.float16
    half.fill_(3.0)
    refused(DTypeError, a, b, half)


def test_batched_a_with_a_shared_b_is_one_launch(torch, gpu):
    a = torch.randn(4, 100, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(72, 128, device="cuda", dtype=torch.bfloat16)
    got = ptxgen.gemm(a, b)
    out = torch.empty(4, 100, 72, device="cuda", dtype=torch.bfloat16)
    assert ptxgen.gemm(a, b, out) is out
    torch.cuda.synchronize()
    ref = a.double() @ b.double().t()
    assert got.shape == (4, 100, 72) and rel(torch, got, ref) < 1e-2 and rel(torch, out, ref) < 1e-2
    b3 = torch.randn(4, 72, 128, device="cuda", dtype=torch.bfloat16)  # a batch of b: one batched launch too
    got3 = ptxgen.gemm(a, b3)
    torch.cuda.synchronize()
    assert rel(torch, got3, torch.bmm(a.double(), b3.double().transpose(1, 2))) < 1e-2
    with pytest.raises(ArgumentError, match="4 batches but b has 3"):
        ptxgen.gemm(a, torch.randn(3, 72, 128, device="cuda", dtype=torch.bfloat16))


def test_bench_api_json(torch, gpu):
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "bench", "--api", "--shapes", "512x512x512", "--iters", "4",
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    (row,) = body["shapes"]
    assert list(row) == ["op", "m", "n", "k", "kernel", "host_us", "single_call_ratio", "back_to_back_ratio"]
    assert row["op"] == "gemm" and body["op"] == "gemm"
    assert set(row["host_us"]) == {"gemm", "kernel", "torch"} and (row["m"], row["n"], row["k"]) == (512, 512, 512)
    assert all(v > 0 for v in row["host_us"].values()) and row["single_call_ratio"] > 0 and row["back_to_back_ratio"] > 0


# f16 borrows bf16's tuning (choose.BORROWS_TABLE): one shape per rule the chooser reaches with it, through ptxgen.gemm
F16_RULE_SHAPES = [(4096, 4096, 4096), (64, 4096, 4096), (1, 16384, 4096), (331, 8200, 8192), (2500, 10000, 4000),
                   (128, 7168, 16384)]


@pytest.mark.parametrize("m,n,k", F16_RULE_SHAPES)
def test_f16_runs_the_borrowed_rules(torch, gpu, m, n, k):
    from ptxgen.runtime.choose import choose

    c = choose("f16", gpu.arch.value, m, n, k)
    assert c.spec.dtype.value == "f16" and "bf16's tuning" in c.why
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16, generator=gen)
    out = ptxgen.gemm(a, b)
    ref = a.double() @ b.double().t()
    assert out.dtype == torch.float16 and rel(torch, out.double(), ref) < 2e-3, c.chosen_by
