"""3xTF32 on the GPU: ptxgen's float32 doors under torch's default float32 matmul precision ("highest") against a
float64 reference, at the tolerance torch's own float32 test uses (test_matmul_cuda.py::test_cublas_baddbmm_large_input:
atol 1e-5, rtol 1.1e-5, inputs uniform in [0, 1)); a control shows tf32 outside it."""

from __future__ import annotations

import contextlib

import pytest

pytestmark = pytest.mark.gpu
ATOL, RTOL = 1e-5, 1.1e-5


@contextlib.contextmanager
def _matmul_precision(torch, value: str):
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _close(torch, ours, ref64) -> bool:
    return bool(torch.isclose(ours.double(), ref64, atol=ATOL, rtol=RTOL).all())


def _uniform(torch, *shape):
    torch.manual_seed(7)
    return torch.rand(*shape, device="cuda", dtype=torch.float32)


@pytest.mark.parametrize("m,n,k", [(1000, 1000, 1000), (257, 129, 1001), (64, 48, 1)])
def test_gemm_highest_is_float32_accurate(torch_cuda, m, n, k):
    import ptxgen

    torch = torch_cuda
    a, b = _uniform(torch, m, k), _uniform(torch, n, k) * 0.5
    ref64 = a.double() @ b.double().T
    with _matmul_precision(torch, "highest"):
        ours = ptxgen.gemm(a, b)
        ours_t = ptxgen.gemm(a.t().contiguous().t(), b)  # an M-major a: the split is K-major
    torch.cuda.synchronize()
    assert _close(torch, ours, ref64), float((ours.double() - ref64).abs().max())
    assert _close(torch, ours_t, ref64)
    if k >= 1000:  # control: tf32 is outside torch's float32 tolerance on these inputs
        tf32 = ptxgen.gemm(a, b, precision="tf32")
        torch.cuda.synchronize()
        assert not _close(torch, tf32, ref64)


def test_torch_setting_high_is_tf32(torch_cuda):
    import ptxgen

    torch = torch_cuda
    a, b = _uniform(torch, 512, 1024), _uniform(torch, 256, 1024)
    with _matmul_precision(torch, "high"):
        follows = ptxgen.gemm(a, b)
    explicit = ptxgen.gemm(a, b, precision="tf32")
    three = ptxgen.gemm(a, b, precision="3xtf32")
    torch.cuda.synchronize()
    assert torch.equal(follows, explicit)
    assert not torch.equal(three, explicit)


def test_fused_and_batched_highest(torch_cuda):
    """addmm's and baddbmm's forms (c with beta, bias, an activation) and a batched 3-D call: the chain applied once to
    the one GEMM over the split operands."""
    import ptxgen

    torch = torch_cuda
    bs, m, n, k = 3, 200, 300, 1000
    a, b = _uniform(torch, bs, m, k), _uniform(torch, bs, n, k)
    c, bias = _uniform(torch, m, n), _uniform(torch, n)
    with _matmul_precision(torch, "highest"):
        batched = ptxgen.gemm(a, b)
        fused = ptxgen.gemm(a[0], b[0], c=c, beta=0.5, bias=bias, activation="relu")
        baddbmm = ptxgen.gemm(a, b, c=c.expand(bs, m, n), beta=1.0)
    torch.cuda.synchronize()
    ref = a.double() @ b.double().transpose(-2, -1)
    assert _close(torch, batched, ref)
    assert _close(torch, fused, torch.relu(ref[0] + 0.5 * c.double() + bias.double()))
    assert _close(torch, baddbmm, ref + c.double())


def test_grouped_highest(torch_cuda):
    import ptxgen

    torch = torch_cuda
    g, m, n, k = 4, 128, 256, 1024
    a, b = _uniform(torch, g * m, k), _uniform(torch, g, n, k)
    offs = torch.arange(m, g * m + 1, m, device="cuda", dtype=torch.int32)
    with _matmul_precision(torch, "highest"):
        ours = ptxgen.grouped_gemm(a, b, offs)
    torch.cuda.synchronize()
    for i in range(g):
        ref = a[i * m:(i + 1) * m].double() @ b[i].double().T
        assert _close(torch, ours[i * m:(i + 1) * m], ref), i
