"""Training on the GPU (``gpu`` tier; skips without a GPU or a CUDA build of torch): the autograd formulas of
torch.ops.ptxgen running on ptxgen's kernels, against float64 and against torch's own bf16 gradients, at odd shapes
(M not a multiple of the tile, K not a multiple of BK, empty groups, groups of one row, rows past the last group);
ptxgen.nn modules under torch.compile(fullgraph=True) with the default backend; ptxgen.scaled_gemm against float64
and torch._scaled_mm. The CPU tier of the same formulas is tests/test_training.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

ACTS = (None, "relu", "gelu", "gelu_erf", "silu")


@pytest.fixture(scope="module")
def torch(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import ptxgen

    ptxgen.register_torch_ops()
    return torch


def rel(torch, got, ref) -> float:
    got, ref = got.double(), ref.double()
    return float(torch.linalg.norm(got - ref) / max(float(torch.linalg.norm(ref)), 1e-30))


def _act(torch, name):
    F = torch.nn.functional
    return {None: lambda z: z, "relu": F.relu, "gelu": lambda z: F.gelu(z, approximate="tanh"), "gelu_erf": F.gelu,
            "silu": F.silu}[name]


def _grads(torch, fn, inputs, dy):
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    y = fn(*inputs)
    return (y, *torch.autograd.grad(y, inputs, dy))


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("m,n,k", [(333, 264, 200), (128, 256, 64), (1, 40, 72)])
def test_gemm_autograd_against_float64_and_torch(torch, act, m, n, k):
    """y = act(a @ w.T + bias) and its three gradients from ptxgen's kernels: within 2x torch's own bf16 error (each
    against the float64 product of the same bf16 values), plus a bf16 rounding's worth."""
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).bfloat16()
    bias = torch.randn(n, device="cuda", generator=g).bfloat16()
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    f = _act(torch, act)
    ours = _grads(torch, lambda a, w, b: torch.ops.ptxgen.gemm(a, w, None, b, act), (a, w, bias), dy)
    theirs = _grads(torch, lambda a, w, b: f(torch.nn.functional.linear(a, w, b)), (a, w, bias), dy)
    exact = _grads(torch, lambda a, w, b: f(torch.nn.functional.linear(a, w, b)), (a.double(), w.double(), bias.double()),
                   dy.double())
    for name, o, t, e in zip(("y", "da", "dw", "dbias"), ours, theirs, exact):
        assert o.dtype == t.dtype and o.shape == t.shape, name
        assert rel(torch, o, e) <= 2 * rel(torch, t, e) + 4e-3, (name, rel(torch, o, e), rel(torch, t, e))


def test_linear_module_3d_input(torch):
    import ptxgen

    lin = ptxgen.nn.Linear(200, 136, activation="gelu", device="cuda", dtype=torch.bfloat16)
    ref = torch.nn.Linear(200, 136, device="cuda", dtype=torch.bfloat16)
    ref.load_state_dict(lin.state_dict())
    x = torch.randn(3, 37, 200, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    lin(x).float().square().sum().backward()
    gx, x.grad = x.grad, None
    torch.nn.functional.gelu(ref(x), approximate="tanh").float().square().sum().backward()
    for got, want in ((gx, x.grad), (lin.weight.grad, ref.weight.grad), (lin.bias.grad, ref.bias.grad)):
        assert rel(torch, got, want) < 2e-2


@pytest.mark.parametrize("act", ("relu", "gelu", "gelu_erf", "silu"))
@pytest.mark.parametrize("m,n,k", [(333, 264, 200), (1, 40, 72)])
def test_gemm_aux_autograd_against_float64_and_torch(torch, act, m, n, k):
    """gemm_aux: y and the pre-activation z from one kernel (the chain's aux), the backward without a recompute."""
    g = torch.Generator(device="cuda").manual_seed(m * 5 + n)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).bfloat16()
    bias = torch.randn(n, device="cuda", generator=g).bfloat16()
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    f = _act(torch, act)
    y, z = torch.ops.ptxgen.gemm_aux(a, w, None, bias, act)
    z_exact = torch.nn.functional.linear(a.double(), w.double(), bias.double())
    assert rel(torch, z, z_exact) < 1e-2
    ours = _grads(torch, lambda a, w, b: torch.ops.ptxgen.gemm_aux(a, w, None, b, act)[0], (a, w, bias), dy)
    theirs = _grads(torch, lambda a, w, b: f(torch.nn.functional.linear(a, w, b)), (a, w, bias), dy)
    exact = _grads(torch, lambda a, w, b: f(torch.nn.functional.linear(a, w, b)), (a.double(), w.double(), bias.double()),
                   dy.double())
    for name, o, t, e in zip(("y", "da", "dw", "dbias"), ours, theirs, exact):
        assert rel(torch, o, e) <= 2 * rel(torch, t, e) + 4e-3, (name, rel(torch, o, e), rel(torch, t, e))


@pytest.mark.parametrize("acts", [("gelu", "gelu", "gelu"), ("silu", "relu", "gelu_erf")])
def test_linear_stack_with_the_fused_derivative(torch, acts):
    """Three ptxgen.nn.Linear in a row (layers 2 and 3 compute the previous layer's dz in their dX GEMM's epilogue, the
    chain's dact) against the torch model: every gradient within 2x torch's bf16 error against float64, + 4e-3."""
    import ptxgen

    dims = (200, 264, 136, 72)
    ours = [ptxgen.nn.Linear(i, o, activation=a, device="cuda", dtype=torch.bfloat16, fuse_input_derivative=True)
            for i, o, a in zip(dims, dims[1:], acts)]
    refs = [torch.nn.Linear(i, o, device="cuda", dtype=torch.bfloat16) for i, o in zip(dims, dims[1:])]
    exact = [torch.nn.Linear(i, o, device="cuda", dtype=torch.float64) for i, o in zip(dims, dims[1:])]
    for m, r, e in zip(ours, refs, exact):
        r.load_state_dict(m.state_dict())
        e.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
    x = torch.randn(333, dims[0], device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(333, dims[-1], device="cuda", dtype=torch.bfloat16)

    def run(layers, fns, dtype):
        xi = x.to(dtype).requires_grad_()
        h = xi
        for layer, fn in zip(layers, fns):
            h = fn(layer(h))
        params = [xi] + [p for layer in layers for p in (layer.weight, layer.bias)]
        return torch.autograd.grad(h, params, dy.to(dtype))
    ident = [lambda h: h] * 3
    torch_fns = [_act(torch, a) for a in acts]
    got, want, ref = run(ours, ident, torch.bfloat16), run(refs, torch_fns, torch.bfloat16), run(exact, torch_fns, torch.float64)
    for i, (o, t, e) in enumerate(zip(got, want, ref)):
        assert rel(torch, o, e) <= 2 * rel(torch, t, e) + 4e-3, (i, rel(torch, o, e), rel(torch, t, e))


def _bounds(offs, m):
    out, s = [], 0
    for e in offs:
        e = min(max(e, s), m)
        out.append((s, e))
        s = e
    return out


@pytest.mark.parametrize("kernel", [True, False], ids=["ptxgen-dw", "torch-dw"])
@pytest.mark.parametrize("sizes,tail,n", [([0, 1, 300, 0, 129], 0, 136), ([64, 0, 1], 5, 136), ([200], 0, 136),
                                         ([0, 0, 0], 3, 136), ([3, 0, 70], 2, 5)])
def test_grouped_autograd_against_float64(torch, monkeypatch, kernel, sizes, tail, n):
    """dx through the N-major grouped kernel, dw through grouped_gemm_k (ptxgen's K-grouped kernel, or torch's: the
    default, ptxgen.ops.torch_ops.K_GROUPED_KERNEL), both against float64 per
    group: empty groups (their dw is zero), a group of one row, rows past offs[-1] (their dx is zero), K = 200 (not a
    multiple of BK 64), N = 5 (dy's rows 10 bytes apart: the backward pads them)."""
    import ptxgen
    from ptxgen.ops import torch_ops

    monkeypatch.setattr(torch_ops, "K_GROUPED_KERNEL", kernel)
    k = 200
    offs_l = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    m = offs_l[-1] + tail
    offs = torch.tensor(offs_l, device="cuda", dtype=torch.int32)
    g = torch.Generator(device="cuda").manual_seed(len(sizes) + tail)
    x = torch.randn(m, k, device="cuda", generator=g).bfloat16().requires_grad_()
    bank = ptxgen.nn.GroupedLinear(len(sizes), k, n, device="cuda", dtype=torch.bfloat16)
    y = bank(x, offs)
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    dx, dw = torch.autograd.grad(y, (x, bank.weight), dy)
    x64, w64, dy64 = x.detach().double(), bank.weight.detach().double(), dy.double()
    for gi, (s, e) in enumerate(_bounds(offs_l, m)):
        if e > s:
            assert rel(torch, y[s:e], x64[s:e] @ w64[gi].T) < 1e-2
            assert rel(torch, dx[s:e], dy64[s:e] @ w64[gi]) < 1e-2
            assert rel(torch, dw[gi], dy64[s:e].T @ x64[s:e]) < 1e-2
        else:
            assert not dw[gi].any(), f"group {gi} is empty: its weight gradient is 0"
    assert not dx[offs_l[-1]:].any(), "rows past the last group get no gradient"


def test_compile_fullgraph_training_step(torch):
    """torch.compile(fullgraph=True), default backend: a Linear -> GroupedLinear step gives eager's gradients."""
    import ptxgen

    torch._dynamo.reset()
    lin = ptxgen.nn.Linear(256, 512, activation="gelu", device="cuda", dtype=torch.bfloat16)
    bank = ptxgen.nn.GroupedLinear(4, 512, 128, device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor([100, 100, 250, 320], device="cuda", dtype=torch.int32)

    def step(x):
        return bank(lin(x), offs).float().square().mean()

    x = torch.randn(320, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    params = (x, lin.weight, lin.bias, bank.weight)
    eager = torch.autograd.grad(step(x), params)
    compiled = torch.autograd.grad(torch.compile(step, fullgraph=True)(x), params)
    for e, c in zip(eager, compiled):
        assert rel(torch, c, e) < 1e-2


@pytest.mark.parametrize("m,n,k,with_bias", [(333, 200, 256, False), (2048, 7168 // 2, 512, True), (1, 64, 128, True)])
def test_scaled_gemm_rowwise_against_float64_and_torch(torch, m, n, k, with_bias):
    import ptxgen

    g = torch.Generator(device="cuda").manual_seed(m + n)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
    sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
    bias = torch.randn(n, device="cuda", generator=g).bfloat16() if with_bias else None
    got = ptxgen.scaled_gemm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias)
    exact = (a.double() @ b.double().T) * sa.double() * sb.double() + (bias.double() if with_bias else 0)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16
    assert rel(torch, got, exact) < 1e-2
    if m % 16 == 0 and n % 16 == 0:
        ref = torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=torch.bfloat16)
        assert rel(torch, got, ref) < 1e-2


@pytest.mark.parametrize("sizes,tail,n,k", [([0, 1, 300, 0, 129], 0, 136, 208), ([64, 0, 1], 5, 256, 128),
                                           ([3, 0, 70], 2, 40, 96)])
def test_scaled_grouped_autograd_on_the_kernels(torch, sizes, tail, n, k):
    """torch.ops.ptxgen.scaled_grouped_gemm (e4m3, row-wise scales) forward and backward on ptxgen's kernels (the M-grouped
    row-wise FP8 kernel; the bf16 N-major grouped and K-grouped kernels in the backward) against float64: the output per
    group, scale_a's and scale_b's gradients, and scaled_grouped_input_grads' da and db; empty groups, a group of one
    row, rows past the last group (their gradients 0), K not a multiple of BK."""
    from ptxgen.ops import opsgrad

    ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    m, groups = ends[-1] + tail, len(sizes)
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    g = torch.Generator(device="cuda").manual_seed(m + n)
    a = (torch.randn(m, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(groups, n, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    sa = (torch.rand(m, device="cuda", generator=g) + 0.5).requires_grad_()
    sb = (torch.rand(groups, n, device="cuda", generator=g) + 0.5).requires_grad_()
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    y = torch.ops.ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs)
    dsa, dsb = torch.autograd.grad(y, (sa, sb), dy)
    da, db = opsgrad.scaled_grouped_input_grads(dy, a, b, sa.detach(), sb.detach(), offs)
    a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
    sa64, sb64 = sa.detach().double().requires_grad_(), sb.detach().double().requires_grad_()
    rows, s = [], 0
    for gi, e in enumerate(ends):
        rows.append((a64[s:e] * sa64[s:e, None]) @ (b64[gi] * sb64[gi, :, None]).T)
        s = e
    ref = torch.cat(rows)
    ref.backward(dy.double()[:ends[-1]])
    assert y.shape == (m, n) and y.dtype == torch.bfloat16
    assert rel(torch, y[:ends[-1]].detach(), ref.detach()) < 1e-2
    for name, got, want in (("dscale_a", dsa, sa64.grad), ("dscale_b", dsb, sb64.grad), ("da", da, a64.grad),
                            ("db", db, b64.grad)):
        assert got.shape == want.shape, name
        assert rel(torch, got, want) < 1e-2, name
    assert not dsa[ends[-1]:].any() and not da[ends[-1]:].any(), "rows past the last group get no gradient"
    for gi, size in enumerate(sizes):
        if not size:
            assert not dsb[gi].any() and not db[gi].any(), f"group {gi} is empty"


@pytest.mark.parametrize("fp8_backward", [False, True], ids=["bf16-backward", "fp8-backward"])
@pytest.mark.parametrize("sizes,tail", [([0, 1, 300, 0, 129], 0), ([64, 0, 1], 5)])
def test_float8_grouped_linear_on_the_kernels(torch, sizes, tail, fp8_backward):
    """ptxgen.nn.GroupedLinear(fp8="rowwise") (bf16): the forward on the M-grouped row-wise FP8 kernel against float64
    of the dequantized casts; dx and dW passed through the casts, on the bf16 grouped kernels or (fp8_backward) on the
    row-wise FP8 M-grouped and K-grouped kernels, against float64 of their formulas (ptxgen.ops.float8), within e4m3's
    rounding of the full-precision values; then a step under torch.compile(fullgraph=True) (inductor) gives eager's
    gradients."""
    import ptxgen
    from ptxgen.ops import float8

    ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    m, k, n = ends[-1] + tail, 256, 136
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    g = torch.Generator(device="cuda").manual_seed(m)
    bank = ptxgen.nn.GroupedLinear(len(sizes), k, n, device="cuda", dtype=torch.bfloat16, fp8="rowwise",
                                   fp8_backward=fp8_backward)
    x = torch.randn(m, k, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    y = bank(x, offs)
    dx, dw = torch.autograd.grad(y, (x, bank.weight), dy)

    def dq(t):
        q, sc = float8.rowwise_e4m3(t)
        return q.double() * sc.double()[..., None]

    xd, wd = dq(x.detach()), dq(bank.weight.detach())
    inside = (torch.arange(m, device="cuda") < ends[-1])[:, None]
    dym, xm = dy * inside, x.detach() * inside
    dyd, wtd, dytd, xtd = dq(dym), dq(bank.weight.detach().transpose(1, 2)), dq(dym.t()), dq(xm.t())
    s = 0
    for gi, e in enumerate(ends):
        if e > s:
            assert rel(torch, y[s:e].detach(), xd[s:e] @ wd[gi].T) < 1e-2
            want_dx = dyd[s:e] @ wtd[gi].T if fp8_backward else dy[s:e].double() @ wd[gi]
            want_dw = dytd[:, s:e] @ xtd[:, s:e].T if fp8_backward else dy[s:e].double().T @ xd[s:e]
            assert rel(torch, dx[s:e], want_dx) < 1e-2
            assert rel(torch, dw[gi], want_dw) < 1e-2
            full = x.detach()[s:e].double() @ bank.weight.detach()[gi].double().T
            assert rel(torch, y[s:e].detach(), full) < 0.06
            assert rel(torch, dx[s:e], dy[s:e].double() @ bank.weight.detach()[gi].double()) < 0.1
        else:
            assert not dw[gi].any()
        s = e
    assert not dx[ends[-1]:].any()
    torch._dynamo.reset()

    def step(x):
        return bank(x, offs)[:ends[-1]].float().square().mean()

    eager = torch.autograd.grad(step(x), (x, bank.weight))
    compiled = torch.autograd.grad(torch.compile(step, fullgraph=True)(x), (x, bank.weight))
    for c, e in zip(compiled, eager):
        assert rel(torch, c, e) < 1e-2
