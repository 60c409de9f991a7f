"""Autograd of torch.ops.ptxgen and the ptxgen.nn modules, on the CPU (the operators' CPU references stand in for the
kernels; the formulas are the same ones a GPU runs): gradcheck in float64, opcheck of the fake kernels, the modules
against torch.nn's, torch.compile(fullgraph=True) tracing forward and backward, and controls that a wrong formula
fails. The GPU tier is tests/test_training_gpu.py."""

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
from ptxgen.ops import opsgrad, opsref  # noqa: E402
from torch.autograd.gradcheck import GradcheckError  # noqa: E402

ptxgen.register_torch_ops()
op = torch.ops.ptxgen
F = torch.nn.functional
ACTS = (None, "relu", "gelu", "gelu_erf", "silu")
TORCH_ACT = {None: lambda z: z, "relu": F.relu, "gelu": lambda z: F.gelu(z, approximate="tanh"), "gelu_erf": F.gelu,
             "silu": F.silu}


def f64(*shape, grad=True, seed=None):
    g = torch.Generator().manual_seed(hash(shape) % 1000 if seed is None else seed)
    return torch.randn(*shape, dtype=torch.float64, generator=g).requires_grad_(grad)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("with_bias", (True, False))
def test_gemm_gradcheck(act, with_bias):
    a, b = f64(5, 7), f64(3, 7)
    bias = f64(3) if with_bias else None
    args = (a, b, bias) if with_bias else (a, b)
    fn = (lambda a, b, bias: op.gemm(a, b, None, bias, act)) if with_bias else (lambda a, b: op.gemm(a, b, None, None, act))
    assert torch.autograd.gradcheck(fn, args)


def test_gemm_gradcheck_3d_input_and_partial_grads():
    """a B x M x K with shared weights; only some inputs need a gradient (the others get none computed)."""
    a, b, bias = f64(2, 3, 4), f64(5, 4, grad=False), f64(5)
    assert torch.autograd.gradcheck(lambda a, bias: op.gemm(a, b, None, bias, "silu"), (a, bias))
    assert torch.autograd.gradcheck(lambda b: op.gemm(a.detach(), b, None, None, "gelu"), (b.detach().requires_grad_(),))


def test_gemm_call_with_fewer_arguments():
    """A call that leaves the trailing defaults out (as torch.ops.ptxgen.gemm(a, b) did before bias existed)."""
    a, b = f64(4, 3), f64(2, 3)
    assert torch.autograd.gradcheck(lambda a, b: op.gemm(a, b), (a, b))


def test_gemm_matches_torch_values():
    a, b, bias = f64(6, 5), f64(4, 5), f64(4)
    for act in ACTS:
        ref = TORCH_ACT[act](a @ b.T + bias)
        torch.testing.assert_close(op.gemm(a, b, None, bias, act), ref, rtol=0, atol=1e-12)


def test_output_rows_padded_as_the_kernels_write_them():
    y = op.gemm(f64(3, 4, grad=False), f64(5, 4, grad=False))
    assert y.stride() == (6, 1)  # f64: rows 16 bytes = 2 elements apart at least, so 5 columns -> 6
    z = op.gemm(torch.zeros(3, 4, dtype=torch.bfloat16), torch.zeros(9, 4, dtype=torch.bfloat16))
    assert z.stride() == (16, 1) and z.dtype == torch.bfloat16


def _bounds_ref(offs, m):
    out, s = [], 0
    for e in offs:
        e = min(max(e, s), m)
        out.append((s, e))
        s = e
    return out


@pytest.mark.parametrize("offs", ([2, 2, 8], [0, 1, 9], [9, 9, 9], [0, 0, 0], [4, 2, 9], [3, 12, 12], [4, 8, 2]))
def test_grouped_gradcheck(offs):
    """Empty groups, a group of one row, rows past the last group (their gradient is 0), a decreasing and a too
    large offset (clamped, as the kernels clamp them; [4, 8, 2]: the last group is empty and ends at row 8, not 2, so
    rows 2-7 keep their gradient)."""
    x, w = f64(9, 6), f64(3, 4, 6)
    o = torch.tensor(offs, dtype=torch.int32)
    end = _bounds_ref(offs, 9)[-1][1]  # rows past it are unspecified (NaN in the reference)
    assert torch.autograd.gradcheck(lambda x, w: op.grouped_gemm(x, w, o)[:end], (x, w))
    y = op.grouped_gemm(x, w, o)
    assert y[end:].isnan().all()
    for g, (s, e) in enumerate(_bounds_ref(offs, 9)):
        torch.testing.assert_close(y[s:e], x[s:e] @ w[g].T, rtol=0, atol=1e-12)


def test_grouped_references_match_torch_grouped_mm():
    """The CPU references against torch's own _grouped_mm (bf16, 16-byte strides), both forms."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 32, generator=g).to(torch.bfloat16)
    w = torch.randn(4, 24, 32, generator=g).to(torch.bfloat16)
    offs = torch.tensor([8, 8, 9, 40], dtype=torch.int32)
    got = op.grouped_gemm(x, w, offs)
    ref = torch._grouped_mm(x, w.transpose(1, 2), offs=offs)
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    dy = torch.randn(40, 24, generator=g).to(torch.bfloat16)
    dw = op.grouped_gemm_k(dy.t(), x.t(), offs)
    torch.testing.assert_close(dw, torch._grouped_mm(dy.t(), x, offs=offs), rtol=1e-2, atol=1e-2)
    assert dw.shape == (4, 24, 32) and not dw[1].any()  # the empty group's gradient is zero


def test_opcheck_fake_kernels():
    a, b, bias = f64(5, 7), f64(3, 7), f64(3)
    x, w, offs = f64(9, 6), f64(3, 4, 6), torch.tensor([2, 2, 9], dtype=torch.int32)  # no unspecified (NaN) rows
    for fn, args in ((op.gemm, (a, b, None, bias, "gelu")), (op.gemm, (a, b)), (op.gemm, (f64(2, 5, 7), b)),
                     (op.gemm, (a.detach().bfloat16(), b.detach().bfloat16(), "f32")),
                     (op.grouped_gemm, (x, w, offs)), (op.grouped_gemm_k, (x.detach().t(), x.detach().t()[:2], offs))):
        torch.library.opcheck(fn, args)


def test_control_gradcheck_catches_a_wrong_derivative(monkeypatch):
    """Control: with the activation's derivative left out of the formula, gradcheck fails for gelu (and still passes
    without an activation, where there is none to leave out)."""
    monkeypatch.setattr(opsgrad, "_activation_grad", lambda ctx, dy, *rest: dy)
    a, b = f64(5, 7), f64(3, 7)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda a, b: op.gemm(a, b, None, None, "gelu"), (a, b))
    assert torch.autograd.gradcheck(lambda a, b: op.gemm(a, b), (a, b))


def test_control_gradcheck_catches_unmasked_tail_rows(monkeypatch):
    """Control: without zeroing the rows past offs[-1], dx holds what the product left there (NaN in the reference,
    as unspecified as the kernel's unwritten rows) and gradcheck fails."""
    x, w = f64(9, 6), f64(3, 4, 6, grad=False)
    o = torch.tensor([2, 2, 8], dtype=torch.int32)
    fn = lambda x: op.grouped_gemm(x, w, o)[:8]  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    monkeypatch.setattr(opsgrad, "grouped_input_grad", lambda dy, b, offs: op.grouped_gemm(dy, b.transpose(1, 2), offs))
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(fn, (x,))


def test_batched_weights_have_no_autograd():
    a, b = f64(2, 3, 4), f64(2, 5, 4)
    with pytest.raises(NotImplementedError, match="batched form"):
        op.gemm(a, b).sum().backward()


@pytest.mark.parametrize("save", (True, False))
@pytest.mark.parametrize("act", ACTS)
def test_linear_matches_torch_linear(act, save):
    lin = ptxgen.nn.Linear(6, 5, activation=act, dtype=torch.float64, save_preactivation=save)
    ref = torch.nn.Linear(6, 5, dtype=torch.float64)
    ref.load_state_dict(lin.state_dict())
    x = f64(2, 3, 6)
    y, y_ref = lin(x), TORCH_ACT[act](ref(x))
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-12)
    dy = f64(2, 3, 5, grad=False)
    got = torch.autograd.grad(y, (x, lin.weight, lin.bias), dy)
    want = torch.autograd.grad(y_ref, (x, ref.weight, ref.bias), dy)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)
    with torch.no_grad():
        torch.testing.assert_close(lin(x), y_ref, rtol=0, atol=1e-12)


def test_linear_bf16_with_f32_grads_like_torch():
    """bf16 parameters and input: gradients as close to float64's as torch's bf16 gradients are (relative Frobenius
    error at most 2 x torch's + 4e-3, the bench's rule). The kernel's z is rounded once to bf16 for the backward while
    y is computed from the unrounded z, so element by element the two bf16 computations differ by a rounding."""
    torch.manual_seed(0)
    lin = ptxgen.nn.Linear(64, 48, activation="gelu", dtype=torch.bfloat16)
    ref = torch.nn.Linear(64, 48, dtype=torch.bfloat16)
    ref.load_state_dict(lin.state_dict())
    r64 = torch.nn.Linear(64, 48, dtype=torch.float64)
    r64.load_state_dict({k: v.double() for k, v in lin.state_dict().items()})
    x = torch.randn(32, 64, dtype=torch.bfloat16, requires_grad=True)
    lin(x).float().square().sum().backward()
    gx = x.grad
    x.grad = None
    F.gelu(ref(x), approximate="tanh").float().square().sum().backward()
    x64 = x.detach().double().requires_grad_()
    F.gelu(r64(x64), approximate="tanh").square().sum().backward()

    def rel(g, w):
        return float((g.double() - w).norm() / w.norm())
    for g, r, w in ((gx, x.grad, x64.grad), (lin.weight.grad, ref.weight.grad, r64.weight.grad),
                    (lin.bias.grad, ref.bias.grad, r64.bias.grad)):
        assert g.dtype == r.dtype == torch.bfloat16
        assert rel(g, w) <= 2 * rel(r, w) + 4e-3, (rel(g, w), rel(r, w))


def test_linear_refuses_unknown_activation():
    with pytest.raises(ValueError, match="activation 'tanh'"):
        ptxgen.nn.Linear(4, 4, activation="tanh")


def test_grouped_linear_matches_a_loop_of_linears():
    gl = ptxgen.nn.GroupedLinear(3, 6, 5, dtype=torch.float64)
    assert gl.weight.shape == (3, 5, 6) and gl.weight.abs().max() <= 1 / 6 ** 0.5
    x, offs = f64(7, 6), torch.tensor([0, 1, 7], dtype=torch.int32)  # an empty group, a group of one row
    y = gl(x, offs)
    ref = torch.cat([F.linear(x[s:e], gl.weight[g]) for g, (s, e) in enumerate(_bounds_ref([0, 1, 7], 7))])
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-12)
    dy = f64(7, 5, grad=False)
    got = torch.autograd.grad(y, (x, gl.weight), dy)
    want = torch.autograd.grad(ref, (x, gl.weight), dy)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_compile_fullgraph_training_step():
    """torch.compile(fullgraph=True) traces forward and backward of both modules (AOTAutograd; the aot_eager
    backend, since the CPU build here has no kernel compiler to rely on): the same gradients as eager."""
    torch._dynamo.reset()
    lin = ptxgen.nn.Linear(6, 5, activation="gelu", dtype=torch.float64)
    gl = ptxgen.nn.GroupedLinear(2, 5, 3, dtype=torch.float64)
    offs = torch.tensor([3, 8], dtype=torch.int32)

    def model(x):
        return gl(lin(x), offs).square().sum()

    x = f64(8, 6)
    eager = torch.autograd.grad(model(x), (x, lin.weight, lin.bias, gl.weight))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(x), (x, lin.weight, lin.bias, gl.weight))
    for g, r in zip(got, eager):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_compile_fullgraph_training_step_inductor():
    """The same step through the default backend (inductor's CPU code, about 20 s here): inductor checks the operators'
    real output strides against the fake's (rows padded: 5 f32 columns are 8 apart)."""
    torch._dynamo.reset()
    lin = ptxgen.nn.Linear(6, 5, activation="gelu", dtype=torch.float32)
    gl = ptxgen.nn.GroupedLinear(2, 5, 3, dtype=torch.float32)
    offs = torch.tensor([3, 8], dtype=torch.int32)

    def model(x):
        return gl(lin(x), offs).square().sum()

    x = torch.randn(8, 6, requires_grad=True)
    params = (x, lin.weight, lin.bias, gl.weight)
    eager = torch.autograd.grad(model(x), params)
    got = torch.autograd.grad(torch.compile(model, fullgraph=True)(x), params)
    for g, r in zip(got, eager):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)


def test_reference_bounds_agree_with_the_kernels_clamping():
    """opsref.group_bounds (the reference's clamping) against this file's own transcription of the rule."""
    for offs in ([2, 2, 8], [5, 3, 9], [0, 20, 4], []):
        assert opsref.group_bounds(torch.tensor(offs, dtype=torch.int32), 9) == _bounds_ref(offs, 9)


def test_scaled_gemm_checks_its_arguments_before_any_gpu_work():
    from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError

    a, b = torch.zeros(4, 32, dtype=torch.float8_e4m3fn), torch.zeros(8, 32, dtype=torch.float8_e4m3fn)
    sa, sb = torch.ones(4, 1), torch.ones(1, 8)
    with pytest.raises(ArgumentError, match="scale_a M x 1 = 4 x 1"):
        ptxgen.scaled_gemm(a, b, torch.ones(4, 2), sb)
    with pytest.raises(ArgumentError, match="a must be M x K and b N x K"):
        ptxgen.scaled_gemm(a, b[:, :16], sa, sb)
    with pytest.raises(DTypeError, match="float32"):
        ptxgen.scaled_gemm(a, b, sa.double(), sb)
    with pytest.raises(ArgumentError, match="bias holds N = 8"):
        ptxgen.scaled_gemm(a, b, sa, sb, bias=torch.ones(4))
    with pytest.raises(ArgumentError, match="CUDA tensors"):
        ptxgen.scaled_gemm(a, b, sa, sb)


def test_kernel_outputs_take_the_fake_layout(monkeypatch):
    """A kernel path that allocates its output with other strides (the swap-AB kernels' rows are N apart) is copied into
    the layout the fake gives, which torch.compile plans with; an output already in it is returned as it is."""
    import ptxgen.api
    from ptxgen.ops import torch_ops

    a, b = torch.randn(5, 8).bfloat16(), torch.randn(3, 8).bfloat16()
    tight = (a.float() @ b.float().T).bfloat16()  # strides (3, 1); the fake's rows are 8 apart
    monkeypatch.setattr(ptxgen.api, "gemm", lambda *args, **kw: tight)
    got = torch_ops._impl(a, b)
    assert got.stride() == torch_ops._fake(a, b).stride() == (8, 1) and torch.equal(got, tight)
    padded = torch_ops._fake(a, b).copy_(tight)
    monkeypatch.setattr(ptxgen.api, "gemm", lambda *args, **kw: padded)
    assert torch_ops._impl(a, b) is padded


def test_aligned_rows():
    """Row-major tensors with rows a multiple of 16 bytes apart pass as they are; others get a padded copy."""
    t = torch.randn(4, 8).bfloat16()
    assert opsgrad._aligned_rows(t) is t
    odd = torch.randn(4, 5).bfloat16()
    got = opsgrad._aligned_rows(odd)
    assert got.stride() == (8, 1) and torch.equal(got, odd)
    got = opsgrad._aligned_rows(t.t())
    assert got.stride() == (8, 1) and torch.equal(got, t.t())
    view = t[1:]  # one row in: still 16-byte aligned rows
    assert opsgrad._aligned_rows(view) is view
    assert opsgrad._aligned_rows(t[:, 1:]).stride() == (8, 1)  # starts 2 bytes into a row: copied


# ---- the saved pre-activation (gemm_aux) and the fused derivative (gemm_dact) --------------------------------------
@pytest.mark.parametrize("act", ACTS)
def test_gemm_aux_gradcheck_both_outputs(act):
    """(y, z): y = act(z) and z = a @ b.T + bias, each differentiable (a gradient may reach z directly)."""
    a, b, bias = f64(5, 7), f64(3, 7), f64(3)
    y, z = op.gemm_aux(a, b, None, bias, act)
    torch.testing.assert_close(y, TORCH_ACT[act](a @ b.T + bias), rtol=0, atol=1e-12)
    assert z.shape == ((5, 3) if act else (0, 3))
    assert torch.autograd.gradcheck(lambda a, b, bias: op.gemm_aux(a, b, None, bias, act), (a, b, bias))


def _two_layers(x, w1, b1, w2, b2, act1="gelu_tanh", told="gelu_tanh", act2="silu"):
    y1, z1 = op.gemm_aux(x, w1, None, b1, act1)
    return op.gemm_aux(y1, w2, None, b2, act2, z1, told)[0]


@pytest.mark.parametrize("act1", ("relu", "gelu_tanh", "gelu_erf", "silu"))
def test_the_fused_derivative_gradcheck(act1):
    """Layer 2 is told that its input is act1(z1): its backward returns z1's gradient from one gemm_dact, (dz2 @ W2) x
    act1'(z1), and layer 1's backward receives dz1 directly. Control: told the wrong activation, gradcheck fails."""
    args = (f64(5, 7), f64(6, 7), f64(6), f64(4, 6), f64(4))
    assert torch.autograd.gradcheck(lambda *t: _two_layers(*t, act1=act1, told=act1), args)
    wrong = {"relu": "silu", "gelu_tanh": "gelu_erf", "gelu_erf": "gelu_tanh", "silu": "relu"}[act1]
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda *t: _two_layers(*t, act1=act1, told=wrong), args)


def test_gemm_dact_is_the_product_times_the_derivative():
    a, b, z = f64(5, 7, grad=False), f64(3, 7, grad=False), f64(5, 3)
    for act in ("relu", "gelu", "gelu_erf", "silu"):
        torch.autograd.grad(TORCH_ACT[act](z).sum(), z)
        (d,) = torch.autograd.grad(TORCH_ACT[act](z), z, torch.ones_like(z))
        torch.testing.assert_close(op.gemm_dact(a, b, z.detach(), act), (a @ b.T) * d, rtol=0, atol=1e-12)


def test_opcheck_aux_and_dact():
    a, b, bias, z = f64(5, 7), f64(3, 7), f64(3), f64(5, 3, grad=False)
    for fn, args in ((op.gemm_aux, (a, b, None, bias, "gelu")), (op.gemm_aux, (a, b, None, None, "relu")),
                     (op.gemm_aux, (a, b)), (op.gemm_aux, (a.detach().bfloat16(), b.detach().bfloat16(), "f32", None, "silu")),
                     (op.gemm_aux, (f64(5, 3), f64(4, 3), None, f64(4), "silu", z, "gelu")),
                     (op.gemm_dact, (a.detach(), b.detach(), z, "gelu_erf"))):
        torch.library.opcheck(fn, args)


def _stack(acts, dims=(6, 7, 5, 4), save=True, fuse=True):
    torch.manual_seed(1)
    ours = [ptxgen.nn.Linear(i, o, activation=a, dtype=torch.float64, save_preactivation=save, fuse_input_derivative=fuse)
            for i, o, a in zip(dims[:-1], dims[1:], acts)]
    refs = [torch.nn.Linear(i, o, dtype=torch.float64) for i, o in zip(dims[:-1], dims[1:])]
    for r, m in zip(refs, ours):
        r.load_state_dict(m.state_dict())
    return ours, refs


def _count(monkeypatch):
    calls = {"gemm": 0, "gemm_dact": 0, "gemm_aux": 0}
    for name in calls:
        fn = getattr(opsref, name)

        def counted(*a, _fn=fn, _name=name, **k):
            calls[_name] += 1
            return _fn(*a, **k)
        monkeypatch.setattr(opsref, name, counted)
    return calls


@pytest.mark.parametrize("acts", [("gelu", "silu", "relu"), ("gelu_erf", None, "gelu")])
def test_linear_stack_fuses_the_derivative_and_recomputes_nothing(monkeypatch, acts):
    """Three ptxgen.nn.Linear in a row against torch.nn.Linear + activation (values and every gradient in float64).
    Backward products: each layer's dW, layer 1's dx, and for each layer whose input is an activated ptxgen Linear's
    output one gemm_dact (its dX with the previous derivative fused); no forward GEMM runs again."""
    ours, refs = _stack(acts)
    x = f64(3, 2, 6)
    calls = _count(monkeypatch)
    y = x
    for m in ours:
        y = m(y)
    assert calls == {"gemm": sum(a is None for a in acts[:1]), "gemm_dact": 0, "gemm_aux": 3 - (acts[0] is None)}
    yr = x
    for r, a in zip(refs, acts):
        yr = TORCH_ACT[a](r(yr))
    torch.testing.assert_close(y, yr, rtol=0, atol=1e-12)
    dy = f64(3, 2, 4, grad=False)
    params = [x] + [p for m in ours for p in (m.weight, m.bias)]
    before = dict(calls)
    got = torch.autograd.grad(y, params, dy)
    want = torch.autograd.grad(yr, [x] + [p for r in refs for p in (r.weight, r.bias)], dy)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)
    fused = sum(a is not None for a in acts[:-1])  # layers 2, 3 whose input came with a saved z
    assert calls["gemm_dact"] == fused and calls["gemm_aux"] == before["gemm_aux"]
    assert calls["gemm"] - before["gemm"] == 3 + (3 - fused)  # dW of each layer; dX of the others


def test_linear_stack_falls_back_when_the_input_changed():
    """Control: the intermediate output modified in place (its version moved) is not act(z) any more, so the next layer
    does not fuse the derivative; the gradients still are torch's."""
    ours, refs = _stack(("gelu", "silu", None))
    x = f64(4, 6)
    h = ours[0](x)
    h.mul_(2.0)
    assert ptxgen.nn.linear._input_preactivation(h, 4, 7) is None
    y = ours[2](ours[1](h))
    hr = TORCH_ACT["gelu"](refs[0](x)) * 2.0
    yr = refs[2](TORCH_ACT["silu"](refs[1](hr)))
    for g, r in zip(torch.autograd.grad(y.sum(), (x, ours[0].weight)), torch.autograd.grad(yr.sum(), (x, refs[0].weight))):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_gemm_aux_refuses_what_it_does_not_take():
    with pytest.raises(ValueError, match="2-D a"):
        op.gemm_aux(f64(2, 3, 4), f64(5, 4), None, None, "gelu")
    with pytest.raises(ValueError, match="a_pre"):
        op.gemm_aux(f64(3, 4), f64(5, 4), None, None, "gelu", f64(3, 5), "gelu")


def test_compile_fullgraph_linear_stack():
    """Under torch.compile the modules' tensor attribute is not used (gemm_aux saves z, the derivative is element-wise);
    the gradients are eager's, where the derivative is fused into gemm_dact."""
    torch._dynamo.reset()
    ours, _ = _stack(("gelu", "silu", None))

    def model(x):
        for m in ours:
            x = m(x)
        return x.square().sum()

    x = f64(4, 6)
    params = [x] + [p for m in ours for p in (m.weight, m.bias)]
    eager = torch.autograd.grad(model(x), params)
    got = torch.autograd.grad(torch.compile(model, fullgraph=True, backend="aot_eager")(x), params)
    for g, r in zip(got, eager):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)
