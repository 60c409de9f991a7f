"""Autograd of torch.ops.ptxgen.scaled_grouped_gemm (row-wise FP8 expert bank, torch._scaled_grouped_mm's 2-D x 3-D
form) on the CPU: the operator's CPU reference stands in for the kernel, the backward formula
(ptxgen.ops.opsgrad.scaled_grouped_backward, through the grouped and K-grouped operators) is the one a GPU runs.
gradcheck in float64 with empty groups, a group of one row and rows past the last group; FP8 inputs (gradients of the
scales only) against torch's eager autograd of the dequantized loop; opcheck of the fake kernel; torch.compile(fullgraph=True)
(aot_eager); the refusals; controls
that a wrong formula fails. The GPU tier is tests/test_training_gpu.py::test_scaled_grouped_autograd_on_the_kernels."""

import pytest

torch = pytest.importorskip("torch")

from test_scaled_autograd import f64, op  # noqa: E402 (the dense form's helpers; ptxgen's operators registered)
from torch.autograd.gradcheck import GradcheckError  # noqa: E402

from ptxgen.ops import opsgrad  # noqa: E402
from torchops_stub import torch_with_ops  # noqa: E402


def loop(a, b, sa, sb, ends):
    """The grouped product as a loop of dense dequantized products (rows past the last group left out)."""
    rows, s = [], 0
    for g, e in enumerate(ends):
        rows.append((a[s:e] * sa.reshape(-1, 1)[s:e]) @ (b[g] * sb.reshape(b.shape[0], -1, 1)[g]).T)
        s = e
    return torch.cat(rows)


@pytest.mark.parametrize("ends", ([2, 2, 8], [0, 1, 8], [3, 5, 6], [8, 8, 8]))
def test_gradcheck_every_input(ends):
    """Empty groups, a group of one row, two rows past the last group ([3, 5, 6]: their gradient is 0)."""
    a, b = f64(8, 5, seed=1), f64(3, 4, 5, seed=2)
    sa, sb = f64(8, seed=3, positive=True), f64(3, 4, seed=4, positive=True)
    offs = torch.tensor(ends, dtype=torch.int32)
    assert torch.autograd.gradcheck(lambda *t: op.scaled_grouped_gemm(*t, offs)[:ends[-1]], (a, b, sa, sb))
    y = op.scaled_grouped_gemm(a, b, sa, sb, offs)
    torch.testing.assert_close(y[:ends[-1]], loop(a, b, sa, sb, ends), rtol=1e-12, atol=1e-12)
    assert y[ends[-1]:].isnan().all()  # unwritten, as the kernels leave them


def test_gradient_of_rows_past_the_last_group_is_zero():
    a, b = f64(7, 5, seed=5), f64(2, 3, 5, seed=6)
    sa, sb = f64(7, seed=7, positive=True), f64(2, 3, seed=8, positive=True)
    offs = torch.tensor([2, 4], dtype=torch.int32)
    op.scaled_grouped_gemm(a, b, sa, sb, offs)[:4].sum().backward()
    assert not a.grad[4:].any() and not sa.grad[4:].any() and a.grad[:4].all()


def test_gradcheck_partial_and_shaped_scales():
    """Only some inputs need a gradient; scale_a M_total x 1 and scale_b flat (G N values) get gradients of their own
    shape."""
    a, b = f64(6, 4, seed=9, grad=False), f64(2, 3, 4, seed=10)
    sa, sb = f64(6, 1, seed=11, positive=True), f64(6, seed=12, positive=True, grad=False)
    offs = torch.tensor([1, 6], dtype=torch.int32)
    assert torch.autograd.gradcheck(lambda b, sa: op.scaled_grouped_gemm(a, b, sa, sb, offs), (b, sa))
    sb.requires_grad_()
    op.scaled_grouped_gemm(a, b, sa, sb, offs).sum().backward()
    assert sa.grad.shape == sa.shape and sb.grad.shape == sb.shape


def test_fp8_inputs_give_scale_gradients_as_torch_eager():
    """FP8 a and b: scale_a's and scale_b's gradients agree with torch's eager autograd of the dequantized loop in f64
    (to bf16 precision: the backward's grouped GEMMs take bf16 operands); a and b get none."""
    g = torch.Generator().manual_seed(3)
    ends = [5, 5, 12, 16]
    a = (torch.randn(16, 32, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(4, 24, 32, generator=g) * 2).to(torch.float8_e4m3fn)
    sa = (torch.rand(16, generator=g) + 0.5).requires_grad_()
    sb = (torch.rand(4, 24, generator=g) + 0.5).requires_grad_()
    offs = torch.tensor(ends, dtype=torch.int32)
    a.requires_grad_()
    y = op.scaled_grouped_gemm(a, b, sa, sb, offs, "f32")
    assert y.dtype == torch.float32 and y.shape == (16, 24)
    dy = torch.randn(16, 24, generator=g)
    y.backward(dy)
    sa2, sb2 = (t.detach().double().requires_grad_() for t in (sa, sb))
    loop(a.detach().double(), b.double(), sa2, sb2, ends).backward(dy.double())
    for mine, ref in ((sa, sa2), (sb, sb2)):
        assert mine.grad.shape == mine.shape
        assert torch.allclose(mine.grad.double(), ref.grad, rtol=1e-2, atol=1e-2 * float(ref.grad.abs().max()))
    assert not sb.grad[1].any(), "the empty group's column scales get no gradient"
    assert a.grad is None


def test_input_grads_for_a_float8_training_step():
    """scaled_grouped_input_grads: da, db in bf16 against the f64 loop's gradients through the dequantized inputs
    (an empty first group, two rows past the last)."""
    g = torch.Generator().manual_seed(4)
    ends = [0, 3, 9]
    a = torch.randn(11, 32, generator=g).to(torch.float8_e5m2)
    b = torch.randn(3, 16, 32, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(11, generator=g) + 0.5, torch.rand(3, 16, generator=g) + 0.5
    offs = torch.tensor(ends, dtype=torch.int32)
    dy = torch.randn(11, 16, generator=g).to(torch.bfloat16)
    da, db = opsgrad.scaled_grouped_input_grads(dy, a, b, sa, sb, offs)
    assert da.dtype == db.dtype == torch.bfloat16 and da.shape == a.shape and db.shape == b.shape
    a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
    loop(a64, b64, sa.double(), sb.double(), ends).backward(dy.double()[:9])
    for mine, ref in ((da, a64.grad), (db, b64.grad)):  # bf16 operands: each term rounded once, sums may cancel
        assert torch.allclose(mine.double(), ref, rtol=2e-2, atol=1e-2 * float(ref.abs().max()))
    assert not da[9:].any() and not db[0].any()


def test_opcheck_fake_kernel():
    a, b = f64(8, 5, seed=1), f64(3, 4, 5, seed=2)
    sa, sb = f64(8, seed=3, positive=True), f64(3, 4, seed=4, positive=True)
    offs = torch.tensor([2, 2, 8], dtype=torch.int32)  # no unspecified (NaN) rows
    torch.library.opcheck(op.scaled_grouped_gemm, (a, b, sa, sb, offs))
    torch.library.opcheck(op.scaled_grouped_gemm, (a.detach().bfloat16(), b.detach().bfloat16(), sa, sb, offs, "f32"),
                          test_utils=("test_schema", "test_faketensor"))


def test_compile_fullgraph_traces_forward_and_backward():
    """torch.compile(fullgraph=True) (aot_eager: no kernel compiler relied on here) gives eager's scale gradients for
    FP8 inputs: the fake kernel and the backward's grouped operators trace."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(5)
    a = torch.randn(10, 32, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(3, 16, 32, generator=g).to(torch.float8_e4m3fn)
    offs = torch.tensor([4, 4, 10], dtype=torch.int32)

    def step(sa, sb):
        return op.scaled_grouped_gemm(a, b, sa, sb, offs, "f32").square().sum()

    sa, sb = torch.rand(10, generator=g) + 0.5, torch.rand(3, 16, generator=g) + 0.5
    eager = torch.autograd.grad(step(sa.requires_grad_(), sb.requires_grad_()), (sa, sb))
    got = torch.autograd.grad(torch.compile(step, fullgraph=True, backend="aot_eager")(sa, sb), (sa, sb))
    for c, e in zip(got, eager):
        torch.testing.assert_close(c, e, rtol=0, atol=0)


@pytest.mark.parametrize("shapes,words", [
    (((8, 5), (4, 5), (8,), (4,), (1,)), "3-D b"),
    (((8, 5), (2, 4, 5), (8,), (2, 4), (3,)), "offs has shape"),
    (((8, 5), (2, 4, 5), (7,), (2, 4), (2,)), "scale_a must hold 8"),
    (((8, 5), (2, 4, 5), (8,), (4,), (2,)), "scale_b 2 x 4"),
])
def test_refuses_what_it_does_not_take(shapes, words):
    a, b, sa, sb, offs = (torch.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=words):
        op.scaled_grouped_gemm(a.double(), b.double(), sa, sb, offs.int())


def test_control_gradcheck_catches_scales_of_the_wrong_group(monkeypatch):
    """Control: with scale_b's groups rolled by one in the backward's products, gradcheck fails."""
    real = opsgrad._scaled_grouped_products
    monkeypatch.setattr(opsgrad, "_scaled_grouped_products",
                        lambda dy, a, b, sa, sb, offs, wg, wh: real(dy, a, b, sa, sb.roll(1, 0), offs, wg, wh))
    a, b = f64(6, 4, seed=1), f64(2, 3, 4, seed=2)
    sa, sb = f64(6, seed=3, positive=True), f64(2, 3, seed=4, positive=True)
    offs = torch.tensor([3, 6], dtype=torch.int32)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda a, sb: op.scaled_grouped_gemm(a, b, sa, sb, offs), (a, sb))


def test_control_gradcheck_catches_unmasked_tail_rows(monkeypatch):
    """Control: G through the grouped product without zero_tail reads the unwritten rows past the last group (NaN in
    the reference) and gradcheck fails."""
    a, b = f64(7, 4, seed=1), f64(2, 3, 4, seed=2, grad=False)
    sa, sb = f64(7, seed=3, positive=True, grad=False), f64(2, 3, seed=4, positive=True, grad=False)
    offs = torch.tensor([3, 5], dtype=torch.int32)
    fn = lambda a: op.scaled_grouped_gemm(a, b, sa, sb, offs)[:5]  # noqa: E731
    assert torch.autograd.gradcheck(fn, (a,))
    real = op.grouped_gemm
    no_zero_tail = torch_with_ops(torch, grouped_gemm=lambda a, b, offs, out=None, zero_tail=False: real(a, b, offs, out, False))
    monkeypatch.setattr(opsgrad, "_torch", lambda: no_zero_tail)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(fn, (a,))
