"""The K-grouped GEMM's door (ptxgen.grouped_gemm_k, ptxgen.grouped_gemm's 2-D x 2-D form): the binding, ptxgen.api.plan,
the torch operator's fallback rule and the launch path on a simulated device (no GPU); on a GPU (marked gpu), against
float64 at odd shapes, CUDA-graph capture and the torch operator. The kernel's own checks: tests/test_kgrouped.py."""

from __future__ import annotations

import pytest


# ---- the binding (no GPU) ---------------------------------------------------------------------------------------------
def test_binding_reads_both_layouts_and_refuses_others():
    torch = pytest.importorskip("torch")
    from ptxgen.kgrouped import bind_kgrouped
    from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError, read_array

    def bind(a, b, offs, out=None):
        return bind_kgrouped(read_array(a, "a"), read_array(b, "b"), read_array(offs, "offs"),
                             None if out is None else read_array(out, "out"))

    offs = torch.tensor([3, 3, 40], dtype=torch.int32)
    dy, x = torch.zeros(40, 24, dtype=torch.bfloat16), torch.zeros(40, 16, dtype=torch.bfloat16)
    am, bm, p = bind(dy.t(), x.t(), offs)
    assert (am, bm, p.m, p.n, p.k, p.groups, p.lda, p.ldb, p.ldd) == ("mn", "mn", 24, 16, 40, 3, 24, 16, 16)
    am, bm, p = bind(dy.t().contiguous(), x.t().contiguous(), offs)
    assert (am, bm, p.lda, p.ldb) == ("k", "k", 40, 40)
    with pytest.raises(ArgumentError, match="K_total"):
        bind(dy.t(), x[:30].t(), offs)
    with pytest.raises(DTypeError):
        bind(dy.t().float(), x.t().float(), offs)
    with pytest.raises(ArgumentError, match="shape"):
        bind(dy.t(), x.t(), offs, torch.zeros(2, 24, 16, dtype=torch.bfloat16))
    with pytest.raises(ArgumentError, match="int32"):
        bind(dy.t(), x.t(), offs.long())


# ---- GPU: against float64 ---------------------------------------------------------------------------------------------
def _reference64(torch, a, b, offs_list):
    g = len(offs_list)
    out = torch.zeros(g, a.shape[0], b.shape[0], dtype=torch.float64, device=a.device)
    lo = 0
    for i, hi in enumerate(offs_list):
        if hi > lo:
            out[i] = a[:, lo:hi].double() @ b[:, lo:hi].double().t()
        lo = max(lo, hi)
    return out


GPU_CASES = [  # (M, N, offs)
    (128, 128, [64]),  # G = 1
    (200, 136, [0, 1, 1, 65, 130, 130, 300, 301]),  # G = 8: empty groups, a group of 1 K row, tails not multiples of BK
    (72, 264, [17]),  # G = 1, K < BK
    (136, 8, [0, 0, 0]),  # every group empty: zeros
    (256, 384, [1000, 1999, 2063, 4096]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["mn", "k"])
@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
def test_kgrouped_against_float64(gpu, layout, out_dtype):
    import torch

    import ptxgen

    gen = torch.Generator(device="cuda").manual_seed(0)
    for m, n, offs_list in GPU_CASES:
        k_total = -(-(offs_list[-1] + 5) // 8) * 8  # K rows past the last group; rows of K-major copies 16-byte aligned
        dy = torch.randn(k_total, m, device="cuda", generator=gen).to(torch.bfloat16)
        x = torch.randn(k_total, n, device="cuda", generator=gen).to(torch.bfloat16)
        a, b = (dy.t(), x.t()) if layout == "mn" else (dy.t().contiguous(), x.t().contiguous())
        offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
        out = ptxgen.grouped_gemm_k(a, b, offs, out_dtype=out_dtype)
        torch.cuda.synchronize()
        ref = _reference64(torch, a, b, offs_list)
        assert out.shape == (len(offs_list), m, n)
        tol = dict(rtol=2e-2, atol=2e-2) if out_dtype == "bf16" else dict(rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(out.double(), ref, **tol)
        same = ptxgen.grouped_gemm(a, b, offs, out_dtype=out_dtype)  # the door of every _grouped_mm layout
        torch.cuda.synchronize()
        assert torch.equal(same, out)


@pytest.mark.gpu
def test_kgrouped_graph_capture_replays_with_new_offs(gpu):
    import torch

    import ptxgen

    m, n, k_total = 256, 128, 700
    a = torch.randn(k_total, m, device="cuda").to(torch.bfloat16).t()
    b = torch.randn(k_total, n, device="cuda").to(torch.bfloat16).t()
    offs = torch.tensor([100, 100, 700], dtype=torch.int32, device="cuda")
    out = torch.empty(3, m, n, dtype=torch.bfloat16, device="cuda")
    ptxgen.grouped_gemm_k(a, b, offs, out)  # prepares the launch outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ptxgen.grouped_gemm_k(a, b, offs, out)
    offs.copy_(torch.tensor([1, 400, 650], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), _reference64(torch, a, b, [1, 400, 650]), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_torch_op_runs_the_kernel(gpu):
    import torch

    import ptxgen

    ptxgen.register_torch_ops()
    dy = torch.randn(300, 64, device="cuda").to(torch.bfloat16)
    x = torch.randn(300, 40, device="cuda").to(torch.bfloat16)
    offs = torch.tensor([0, 7, 300], dtype=torch.int32, device="cuda")
    got = torch.ops.ptxgen.grouped_gemm_k(dy.t(), x.t(), offs)
    torch.testing.assert_close(got.double(), _reference64(torch, dy.t(), x.t(), [0, 7, 300]), rtol=2e-2, atol=2e-2)
    assert torch.equal(got, ptxgen.grouped_gemm_k(dy.t(), x.t(), offs))  # the same kernel, not torch's


def test_torch_op_falls_back_only_where_the_kernel_refuses(monkeypatch):
    """The rule's plumbing, without a GPU: a refusal (ProblemError, ArgumentError, DTypeError, NoGPU) runs torch's kernel,
    any other error propagates, and an accepted call returns the kernel's output."""
    torch = pytest.importorskip("torch")
    import ptxgen.kgrouped as kgrouped
    import ptxgen.ops.torch_ops as torch_ops

    def torch_zeros():
        return torch.zeros(4, 8, dtype=torch.bfloat16)
    from ptxgen.runtime.launch.gpu import NoGPU
    from ptxgen.runtime.launch.launch import ProblemError

    monkeypatch.setattr(torch_ops, "_torch_grouped_k", lambda a, b, offs, out_dtype=None: "torch")
    monkeypatch.setattr(kgrouped, "grouped_gemm_k", lambda *a, **k: "kernel")
    assert torch_ops.K_GROUPED_KERNEL  # the default: ptxgen's kernel
    monkeypatch.setattr(torch_ops, "K_GROUPED_KERNEL", False)
    assert torch_ops._grouped_k_impl(torch_zeros(), torch_zeros(), None) == "torch"  # cleared: torch's, never asked
    monkeypatch.setattr(torch_ops, "K_GROUPED_KERNEL", True)
    calls = []

    def refuse(exc):
        def fn(a, b, offs, out=None, *, out_dtype=None, stream=None):
            calls.append(out_dtype)
            if exc is None:
                return "kernel"
            raise exc("refused")
        return fn

    a = torch_zeros()
    for exc, want in ((None, "kernel"), (ProblemError, "torch"), (NoGPU, "torch")):
        monkeypatch.setattr(kgrouped, "grouped_gemm_k", refuse(exc))
        assert torch_ops._grouped_k_impl(a, a, None) == want
    monkeypatch.setattr(kgrouped, "grouped_gemm_k", refuse(RuntimeError))
    with pytest.raises(RuntimeError):
        torch_ops._grouped_k_impl(a, a, None)
    assert calls[0] == "bf16"  # ptxgen's spelling, not torch's
    assert torch_ops._grouped_k_impl(a.double(), a.double(), None) == "torch"  # no kernel writes float64: not asked


def test_api_plan_answers_for_the_k_grouped_form():
    torch = pytest.importorskip("torch")
    import ptxgen.api

    dy = torch.empty(1000, 256, dtype=torch.bfloat16, device="meta")
    x = torch.empty(1000, 128, dtype=torch.bfloat16, device="meta")
    offs = torch.empty(8, dtype=torch.int32, device="meta")
    p = ptxgen.api.plan("grouped_gemm", dy.t(), x.t(), offs, device="h100")
    assert p.path.value == "hot" and p.kernel.endswith("groupedoffs_k") and "A mn-major, B mn-major" in p.why
    p = ptxgen.api.plan("grouped_gemm", dy.t().float(), x.t().float(), offs, device="h100")
    assert p.path.value == "refused" and p.error == "DTypeError"
    odd = torch.empty(1000, 37, dtype=torch.bfloat16, device="meta")  # b rows of 74 B: not 16-byte multiples
    p = ptxgen.api.plan("grouped_gemm", dy.t(), odd.t(), offs, device="h100")
    assert p.path.value == "refused" and p.error == "ProblemError" and "ldb=37" in p.why
    assert "ldd" not in p.why  # the out it allocates has its rows padded to 16 bytes


def test_launch_path_with_a_simulated_device(monkeypatch):
    """Everything up to cuLaunchKernel, no GPU: the binding of MN-major dy.t() and x.t(), the maps (A over M x K_total
    with M inner, B over N x K_total), the grid from G, M and N only (nothing reads offs), the arguments in ABI order."""
    from test_grouped import CaiArray, fake_launcher, simulate_device

    import ptxgen.kgrouped as kgrouped
    from ptxgen.runtime.launch.gpu import Device

    from ptxgen.derive.tile.kernel import plan_kernel

    fake = Device(0, "simulated H100", (9, 0), None, None, 132)
    spec = kgrouped.kgrouped_spec("bf16", "bf16", "sm_90a", "mn", "mn")
    kernel_cls, driver, launched = fake_launcher([q.kind for q in plan_kernel(spec).abi.params])
    simulate_device(monkeypatch, fake, kernel_cls, driver, kgrouped, ("_KERNELS", "_PREPARED"))
    m, n, k, g = 200, 136, 1000, 8
    a = CaiArray((m, k), "<f2", 2, 0x100000, strides=(1, m), dtype="bfloat16")  # dy.t(): dy is K x M row-major
    b = CaiArray((n, k), "<f2", 2, 0x200000, strides=(1, n), dtype="bfloat16")
    offs = CaiArray((g,), "<i4", 4, 0x300000)
    out = CaiArray((g, m, n), "<f2", 2, 0x400000, dtype="bfloat16")
    assert kgrouped.grouped_gemm_k(a, b, offs, out, stream=0x77) is out
    call = launched[0]
    assert call["name"] == spec.kernel_name and call["stream"] == 0x77 and call["block"] == (384, 1, 1)
    assert call["grid"] == (min(132, g * -(-m // spec.bm) * -(-n // spec.bn)), 1, 1)  # G x tiles over M x tiles over N
    args = call["args"]
    word = lambda x, i: int.from_bytes(x[8 * i:8 * i + 8], "little")  # noqa: E731
    a_map, b_map = args[:2]
    assert (word(a_map, 0), word(a_map, 1), word(a_map, 2), word(a_map, 3)) == (0x100000, m, k, m * 2)
    assert (word(b_map, 0), word(b_map, 1), word(b_map, 2), word(b_map, 3)) == (0x200000, n, k, n * 2)
    # D through the (N, M, G) map of the default's TMA store (rows of N, groups of M rows), and its pointer
    d_map = args[2]
    assert (word(d_map, 0), word(d_map, 1), word(d_map, 2), word(d_map, 3), word(d_map, 4)) == (0x400000, n, m, g, n * 2)
    assert args[3:] == [0x400000, 0x300000, m, n, k, g, n]
    assert grouped_gemm_door(a, b, offs, out) is out and launched[-1]["name"] == spec.kernel_name
    bad = CaiArray((g, m, n), "<f2", 2, 0x400000, strides=(m * n, 1, m), dtype="bfloat16")
    from ptxgen.runtime.launch.arrays import ArgumentError

    with pytest.raises(ArgumentError, match="out must hold each out"):
        kgrouped.grouped_gemm_k(a, b, offs, bad)


def grouped_gemm_door(a, b, offs, out):
    import ptxgen.grouped as grouped

    return grouped.grouped_gemm(a, b, offs, out)
