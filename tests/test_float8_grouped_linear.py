"""ptxgen.nn.GroupedLinear(fp8="rowwise") on the CPU (the operators' CPU references stand in for the kernels): the
row-wise e4m3 cast, the forward against the dequantized loop of dense products in float64, the gradients passed
through the casts (dx = dy @ (w_q x s_w), dW[g] = dy[rows g].T @ (x_q x s_x)[rows g]) with empty groups and rows past
the last group, torch.compile(fullgraph=True), the refusals and a control. The GPU tier is
tests/test_training_gpu.py::test_float8_grouped_linear_on_the_kernels."""

import pytest

torch = pytest.importorskip("torch")

import ptxgen.nn  # noqa: E402
from ptxgen.ops import float8  # noqa: E402
from torchops_stub import torch_with_ops  # noqa: E402


def dequantized(x, w):
    xq, sx = float8.rowwise_e4m3(x)
    wq, sw = float8.rowwise_e4m3(w)
    return xq.double() * sx.double()[:, None], wq.double() * sw.double()[..., None]


def test_rowwise_cast_maps_each_row_to_448():
    g = torch.Generator().manual_seed(1)
    t = torch.randn(3, 5, 64, generator=g) * torch.tensor([1e-3, 1.0, 300.0])[:, None, None]
    t[0, 0] = 0.0  # a row of zeros: a finite scale, zeros out
    q, s = float8.rowwise_e4m3(t)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (3, 5) and s.dtype == torch.float32
    assert torch.isfinite(s).all() and not q[0, 0].float().any()
    amax = q.float().abs().amax(-1)
    assert (amax[s > 1e-12 / 448] == 448).all(), "each row's largest magnitude maps to e4m3's largest finite value"
    back = q.float() * s[..., None]
    assert ((back - t).abs() <= t.abs() * 2 ** -4 + s[..., None] * 2 ** -9).all()  # e4m3: 3 fraction bits, subnormals


@pytest.mark.parametrize("ends,tail", [([4, 4, 9], 1), ([0, 1, 12], 0)])
def test_forward_and_gradients_against_float64(ends, tail):
    g = torch.Generator().manual_seed(len(ends) + tail)
    m = ends[-1] + tail
    bank = ptxgen.nn.GroupedLinear(3, 32, 24, dtype=torch.float32, fp8="rowwise")
    x = torch.randn(m, 32, generator=g).requires_grad_()
    y = bank(x, torch.tensor(ends, dtype=torch.int32))
    assert y.dtype == torch.float32 and y.shape == (m, 24)
    dy = torch.randn(m, 24, generator=g)
    y[:ends[-1]].backward(dy[:ends[-1]])
    xd, wd = dequantized(x.detach(), bank.weight.detach())
    s = 0
    for gi, e in enumerate(ends):
        if e > s:
            torch.testing.assert_close(y[s:e].double(), xd[s:e] @ wd[gi].T, rtol=1e-5, atol=1e-5)
            want_dx = dy[s:e].double() @ wd[gi]
            want_dw = dy[s:e].double().T @ xd[s:e]
            for got, want in ((x.grad[s:e], want_dx), (bank.weight.grad[gi], want_dw)):  # bf16 products
                assert torch.allclose(got.double(), want, rtol=2e-2, atol=1e-2 * float(want.abs().max()))
        else:
            assert not bank.weight.grad[gi].any()
        s = e
    assert not x.grad[ends[-1]:].any()
    full = torch.cat([x.detach()[a:b] @ bank.weight.detach()[gi].T for gi, (a, b) in enumerate(zip([0] + ends, ends))])
    assert float((y[:ends[-1]].detach() - full).norm() / full.norm()) < 0.06, "within e4m3's rounding of the full product"


@pytest.mark.parametrize("fp8_backward", [False, True], ids=["bf16-backward", "fp8-backward"])
def test_compile_fullgraph_training_step(fp8_backward):
    torch._dynamo.reset()
    bank = ptxgen.nn.GroupedLinear(2, 32, 16, dtype=torch.float32, fp8="rowwise", fp8_backward=fp8_backward)
    offs = torch.tensor([5, 8], dtype=torch.int32)
    x = torch.randn(8, 32, requires_grad=True)

    def step(x):
        return bank(x, offs).square().sum()

    eager = torch.autograd.grad(step(x), (x, bank.weight))
    got = torch.autograd.grad(torch.compile(step, fullgraph=True, backend="aot_eager")(x), (x, bank.weight))
    for c, e in zip(got, eager):
        torch.testing.assert_close(c, e, rtol=0, atol=0)


def test_opcheck_fake_kernel_and_autograd_registration():
    """opcheck's checks that take FP8 outputs (its schema and AOT-dispatch checks do arithmetic on every output, which the
    CPU build has no FP8 kernel for)."""
    x, w = torch.randn(8, 32, requires_grad=True), torch.randn(2, 16, 32, requires_grad=True)
    torch.library.opcheck(torch.ops.ptxgen.float8_grouped_linear, (x, w, torch.tensor([3, 8], dtype=torch.int32)),
                          test_utils=("test_faketensor", "test_autograd_registration"))


def test_refusals():
    with pytest.raises(ValueError, match="'rowwise'"):
        ptxgen.nn.GroupedLinear(2, 32, 16, fp8="e5m2")
    bank = ptxgen.nn.GroupedLinear(2, 32, 16, dtype=torch.float64, fp8="rowwise")
    with pytest.raises(TypeError, match="bf16, f16 or f32"):
        bank(torch.zeros(4, 32, dtype=torch.float64), torch.tensor([2, 4], dtype=torch.int32))
    assert "fp8=rowwise" in repr(bank)


def test_control_a_scale_left_out_is_caught(monkeypatch):
    """Control: a cast whose scale is off by 2 fails the forward's comparison above."""
    real = float8.rowwise_e4m3
    bank = ptxgen.nn.GroupedLinear(1, 32, 16, dtype=torch.float32, fp8="rowwise")
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(2))
    xd, wd = dequantized(x, bank.weight.detach())
    monkeypatch.setattr(float8, "rowwise_e4m3", lambda t: (lambda q, s: (q, s * 2))(*real(t)))
    y = bank(x, torch.tensor([6], dtype=torch.int32)).detach().double()
    assert not torch.allclose(y, xd @ wd[0].T, rtol=1e-5, atol=1e-5)


def test_the_training_benchmark_checks_the_fp8_moe_on_the_cpu(capsys):
    """tools/bench_training.py --ablate times the MoE with float8 banks beside the bf16 ones; its gradient check (CPU
    references, small model) passes within e4m3's bound and reports an error above the bf16 models' (the casts are
    really there)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "bench_training.py"
    spec = importlib.util.spec_from_file_location("bench_training", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--device", "cpu", "--small", "--no-compile", "--check-only", "--model", "moe", "--ablate"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "worst gradient error" in ln)
    errs = dict(part.split()[-2:] for part in line.split(": ", 1)[1].split(", "))
    assert float(errs["ptxgen"]) < float(errs["ptxgen-fp8"]) <= bench.FP8_GRAD_BOUND
    assert float(errs["ptxgen"]) < float(errs["ptxgen-fp8-bwd"]) <= bench.FP8_GRAD_BOUND


# ---- fp8_backward: both backward products in row-wise FP8 -------------------------------------------------------------
def _dq(q, s):
    return q.double() * s.double()[..., None]


@pytest.mark.parametrize("ends,tail", [([4, 4, 9], 3), ([0, 1, 12], 0)])
def test_fp8_backward_gradients_against_the_casts_in_float64(ends, tail):
    """dx = cast(dy) @ cast(w[g].T).T per group, dW[g] = cast(dy.T)[:, rows g] @ cast(x.T)[:, rows g].T, each cast
    row-wise (dy's and x's rows past the last group masked to zero first: those rows carry 1e4 here, so a cast that saw
    them would take other scales); within e4m3's rounding of the full-precision gradients."""
    g = torch.Generator().manual_seed(len(ends) * 10 + tail)
    m = ends[-1] + tail
    bank = ptxgen.nn.GroupedLinear(3, 32, 24, dtype=torch.float32, fp8="rowwise", fp8_backward=True)
    x = torch.randn(m, 32, generator=g)
    x[ends[-1]:] = 1e4
    x.requires_grad_()
    dy = torch.randn(m, 24, generator=g)
    dy[ends[-1]:] = 1e4
    bank(x, torch.tensor(ends, dtype=torch.int32)).backward(dy)
    inside = (torch.arange(m) < ends[-1])[:, None]
    dym, xm = dy * inside, x.detach() * inside
    dyd, wtd = _dq(*float8.rowwise_e4m3(dym)), _dq(*float8.rowwise_e4m3(bank.weight.detach().transpose(1, 2)))
    dytd, xtd = _dq(*float8.rowwise_e4m3(dym.t())), _dq(*float8.rowwise_e4m3(xm.t()))
    s = 0
    for gi, e in enumerate(ends):
        if e > s:
            want_dx, want_dw = dyd[s:e] @ wtd[gi].T, dytd[:, s:e] @ xtd[:, s:e].T
            for got, want in ((x.grad[s:e], want_dx), (bank.weight.grad[gi], want_dw)):
                torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
            full_dx = dy[s:e].double() @ bank.weight.detach()[gi].double()
            assert float((x.grad[s:e].double() - full_dx).norm() / full_dx.norm()) < 0.1
        else:
            assert not bank.weight.grad[gi].any()
        s = e
    assert not x.grad[ends[-1]:].any()


def test_control_fp8_backward_without_the_mask_takes_other_scales(monkeypatch):
    """Control: with the tail rows left in (1e5 there), the casts of dy.T and x.T take their scales from them and dW moves
    far from the masked formula."""
    ends, m = [5, 9], 12
    bank = ptxgen.nn.GroupedLinear(2, 32, 16, dtype=torch.float32, fp8="rowwise", fp8_backward=True)
    g = torch.Generator().manual_seed(5)
    x, dy = torch.randn(m, 32, generator=g), torch.randn(m, 16, generator=g)
    x[9:], dy[9:] = 1e5, 1e5  # a row's scale 1e5 / 448: its unit values fall to e4m3's few subnormals

    def dw_of():
        w = bank.weight
        w.grad = None
        bank(x, torch.tensor(ends, dtype=torch.int32)).backward(dy)
        return w.grad.clone()

    good = dw_of()
    monkeypatch.setattr(float8, "_groups_rows", lambda t, offs: t)
    bad = dw_of()
    assert float((bad - good).norm() / good.norm()) > 0.1


def test_fp8_backward_is_refused_without_fp8():
    with pytest.raises(ValueError, match="fp8='rowwise'"):
        ptxgen.nn.GroupedLinear(2, 32, 16, fp8_backward=True)
    assert "fp8_backward=True" in repr(ptxgen.nn.GroupedLinear(2, 32, 16, fp8="rowwise", fp8_backward=True))


def test_the_backward_operators_on_their_references():
    """scaled_grouped_gemm's zero_tail gives 0 past the last group (NaN without it); scaled_grouped_gemm_k (the K-grouped
    row-wise form, G x M x N) equals the per-group scaled products; opcheck of both (f64: the CPU reference takes it)."""
    op = torch.ops.ptxgen
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(9, 8, dtype=torch.float64, generator=g), torch.randn(2, 5, 8, dtype=torch.float64, generator=g)
    sa, sb = torch.rand(9, dtype=torch.float64, generator=g) + 0.5, torch.rand(2, 5, dtype=torch.float64, generator=g) + 0.5
    offs = torch.tensor([3, 7], dtype=torch.int32)
    assert op.scaled_grouped_gemm(a, b, sa, sb, offs)[7:].isnan().all()
    assert not op.scaled_grouped_gemm(a, b, sa, sb, offs, None, True)[7:].any()
    ak, bk = torch.randn(4, 10, dtype=torch.float64, generator=g), torch.randn(3, 10, dtype=torch.float64, generator=g)
    sak, sbk = torch.rand(2 * 4, dtype=torch.float64, generator=g), torch.rand(2 * 3, dtype=torch.float64, generator=g)
    offk = torch.tensor([6, 6], dtype=torch.int32)
    out = op.scaled_grouped_gemm_k(ak, bk, sak, sbk, offk)
    assert out.shape == (2, 4, 3) and not out[1].any()
    torch.testing.assert_close(out[0], (ak[:, :6] @ bk[:, :6].T) * sak[:4, None] * sbk[None, :3])
    torch.library.opcheck(op.scaled_grouped_gemm_k, (ak, bk, sak, sbk, offk))
    torch.library.opcheck(op.scaled_grouped_gemm, (a, b, sa, sb, torch.tensor([3, 9], dtype=torch.int32), None, True))


def test_fp8_backward_k_grouped_operands_have_16_byte_rows(monkeypatch):
    """The K-grouped FP8 kernel reads its operands through tensor maps (16-byte row pitches): with 12 tokens the casts of
    dy.T and x.T reach it as 12-column views of 16-byte rows, equal to the casts themselves."""
    seen = []
    real = torch.ops.ptxgen.scaled_grouped_gemm_k

    def spy(a, b, sa, sb, offs, out_dtype=None):
        seen.append((a, b))
        return real(a, b, sa, sb, offs, out_dtype)

    monkeypatch.setattr(float8, "_torch", lambda: torch_with_ops(torch, scaled_grouped_gemm_k=spy))
    bank = ptxgen.nn.GroupedLinear(2, 32, 16, dtype=torch.float32, fp8="rowwise", fp8_backward=True)
    x = torch.randn(12, 32, requires_grad=True)
    bank(x, torch.tensor([5, 12], dtype=torch.int32)).sum().backward()
    (a, b), = seen
    assert a.shape == (16, 12) and b.shape == (32, 12) and a.stride() == b.stride() == (16, 1)
    assert torch.equal(b.float(), float8.rowwise_e4m3(x.detach().t())[0].float())
    from ptxgen.ops.opsgrad import _aligned_rows

    assert _aligned_rows(a) is a  # already 16-byte rows: no copy
