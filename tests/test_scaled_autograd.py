"""Autograd of torch.ops.ptxgen.scaled_gemm (row-wise FP8, torch._scaled_mm's recipe) on the CPU: the operator's
CPU reference stands in for the kernel, the backward formula (ptxgen.ops.opsgrad.scaled_backward) is the one a GPU
runs. gradcheck in float64, opcheck of the fake kernel, FP8 inputs (gradients for the scales and the bias only), and a
control that a wrong formula fails. The GPU tier is tests/test_scaled_rowwise_gpu.py."""

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
from ptxgen.ops import opsgrad  # noqa: E402
from torch.autograd.gradcheck import GradcheckError  # noqa: E402

ptxgen.register_torch_ops()
op = torch.ops.ptxgen


def f64(*shape, grad=True, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, dtype=torch.float64, generator=g)
    return (x.abs() + 0.5 if positive else x).requires_grad_(grad)


@pytest.mark.parametrize("with_bias", (True, False))
def test_scaled_gemm_gradcheck_every_input(with_bias):
    a, b = f64(5, 7, seed=1), f64(3, 7, seed=2)
    sa, sb = f64(5, 1, seed=3, positive=True), f64(1, 3, seed=4, positive=True)
    if with_bias:
        assert torch.autograd.gradcheck(lambda a, b, sa, sb, bias: op.scaled_gemm(a, b, sa, sb, None, bias),
                                        (a, b, sa, sb, f64(3, seed=5)))
    else:
        assert torch.autograd.gradcheck(lambda a, b, sa, sb: op.scaled_gemm(a, b, sa, sb), (a, b, sa, sb))


def test_scaled_gemm_gradcheck_partial_and_vector_scales():
    """Only some inputs need a gradient; 1-D scales (M and N) get gradients of their own shape."""
    a, b = f64(4, 6, seed=6, grad=False), f64(9, 6, seed=7)
    sa, sb = f64(4, seed=8, positive=True), f64(9, seed=9, positive=True, grad=False)
    assert torch.autograd.gradcheck(lambda b, sa: op.scaled_gemm(a, b, sa, sb), (b, sa))


def test_matches_the_dequantized_product():
    a, b = f64(6, 5, grad=False, seed=10), f64(4, 5, grad=False, seed=11)
    sa, sb, bias = f64(6, 1, grad=False, seed=12), f64(1, 4, grad=False, seed=13), f64(4, grad=False, seed=14)
    want = (a * sa) @ (b * sb.reshape(4, 1)).t() + bias
    assert torch.allclose(op.scaled_gemm(a, b, sa, sb, None, bias), want, rtol=1e-12, atol=1e-12)


def test_fp8_inputs_give_scale_and_bias_gradients_as_torch_eager():
    """FP8 a and b (CPU reference): gradients of scale_a, scale_b and the bias agree with torch's eager autograd of
    the dequantized product in f64 (to bf16 precision: the backward's GEMMs take bf16 operands); a and b themselves get none (FP8 is not a gradient dtype; opsgrad says why)."""
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(8, 32, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(16, 32, generator=g) * 2).to(torch.float8_e4m3fn)
    sa = (torch.rand(8, 1, generator=g) + 0.5).requires_grad_()
    sb = (torch.rand(1, 16, generator=g) + 0.5).requires_grad_()
    bias = torch.randn(16, generator=g).requires_grad_()
    a.requires_grad_()
    y = op.scaled_gemm(a, b, sa, sb, "f32", bias)
    dy = torch.randn(8, 16, generator=g)
    y.backward(dy)
    sa2, sb2, bias2 = (t.detach().double().requires_grad_() for t in (sa, sb, bias))
    ((a.detach().double() * sa2) @ (b.double() * sb2.reshape(16, 1)).t() + bias2).backward(dy.double())
    for mine, ref in ((sa, sa2), (sb, sb2), (bias, bias2)):
        assert mine.grad.shape == mine.shape
        assert torch.allclose(mine.grad.double(), ref.grad, rtol=1e-2, atol=1e-2 * float(ref.grad.abs().max()))  # bf16 GEMMs
    assert a.grad is None


def test_input_grads_for_a_float8_training_step():
    """scaled_input_grads: da, db in bf16 against the f64 formula (G = (dy sb) @ b, da = sa G)."""
    g = torch.Generator().manual_seed(4)
    a = torch.randn(8, 32, generator=g).to(torch.float8_e5m2)
    b = torch.randn(16, 32, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(8, 1, generator=g) + 0.5, torch.rand(1, 16, generator=g) + 0.5
    dy = torch.randn(8, 16, generator=g).to(torch.bfloat16)
    da, db = opsgrad.scaled_input_grads(dy, a, b, sa, sb)
    assert da.dtype == torch.bfloat16 and da.shape == a.shape and db.shape == b.shape
    d = dy.double()
    assert torch.allclose(da.double(), sa.double() * ((d * sb.double()) @ b.double()), rtol=2e-2, atol=2e-2)
    assert torch.allclose(db.double(), sb.double().t() * ((d * sa.double()).t() @ a.double()), rtol=2e-2, atol=2e-2)


def test_opcheck_fake_kernel():
    a, b = f64(5, 7, seed=1), f64(3, 7, seed=2)
    sa, sb = f64(5, 1, seed=3, positive=True), f64(1, 3, seed=4, positive=True)
    torch.library.opcheck(op.scaled_gemm, (a, b, sa, sb, None, f64(3, seed=5)))
    torch.library.opcheck(op.scaled_gemm, (a, b, sa, sb))


def test_control_gradcheck_catches_swapped_scales(monkeypatch):
    """Control: with the scales' roles swapped in the backward's products, gradcheck fails."""
    real = opsgrad._scaled_products
    monkeypatch.setattr(opsgrad, "_scaled_products",
                        lambda dy, a, b, sa, sb, wg, wh: real(dy, a, b, sb.reshape(sa.shape) if sb.numel() == sa.numel() else sa * 1.5,
                                                              sb, wg, wh))
    a, b = f64(4, 5, seed=1), f64(4, 5, seed=2)
    sa, sb = f64(4, 1, seed=3, positive=True), f64(1, 4, seed=4, positive=True)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda a, b, sa, sb: op.scaled_gemm(a, b, sa, sb), (a, b, sa, sb))
