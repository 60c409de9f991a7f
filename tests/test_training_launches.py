"""What one training step of the benchmark's models (tools/bench_training.py: a 4-layer MLP with bias and gelu, one
MoE layer of 8 experts, top-2) launches, on the CPU: every operator the step dispatches (forward, backward and the
gradients' accumulation) recorded by a TorchDispatchMode, ptxgen's modules against torch eager's. Each non-view operator
stands for one kernel (or one ptxgen GEMM) on a GPU. The counts are written from the models: per Linear layer,
forward one GEMM (bias, gelu and the pre-activation in its epilogue), backward gelu's derivative, two GEMMs and one
bias reduction (with ``actgrad.ENABLED`` set: the derivative and the reduction as one
``ptxgen.activation_grad``, two kernels, one pass over dy and z); per expert bank, forward one grouped GEMM, backward one grouped GEMM (dx) and one K-grouped (dW).
Controls put back the forms these steps replaced (an f32 bias sum and a cast; a masked pass over dx) and the checks
fail."""

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
import ptxgen.nn as pnn  # noqa: E402
from ptxgen.ops import actgrad, opsgrad, torch_ops  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

ptxgen.register_torch_ops()
F = torch.nn.functional
op = torch.ops.ptxgen
# metadata only: no kernel on a GPU
VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "detach", "alias", "slice", "select", "expand",
         "unsqueeze", "squeeze", "as_strided", "split", "unbind"}


class Launches(TorchDispatchMode):
    """Counts every operator dispatched inside it that is not a view, by name (``aten.mm``, ``ptxgen.gemm_aux``)."""

    def __init__(self):
        super().__init__()
        self.count = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        pkt = func.overloadpacket
        if pkt.__name__ not in VIEWS:
            self.count[f"{pkt._qualified_op_name.replace('::', '.')}"] += 1
        return func(*args, **(kwargs or {}))


def mlp(ptx: bool, dims=(32, 48, 32, 48, 32)):
    pairs = list(zip(dims[:-1], dims[1:]))
    if ptx:
        layers = [pnn.Linear(i, o, activation="gelu", dtype=torch.bfloat16) for i, o in pairs]
        return torch.nn.Sequential(*layers)
    seq = []
    for i, o in pairs:
        seq += [torch.nn.Linear(i, o, dtype=torch.bfloat16), torch.nn.GELU(approximate="tanh")]
    return torch.nn.Sequential(*seq)


def step_launches(model, x, dy) -> Counter:
    """The operators of one step ``model(x).backward(dy)`` after a first step (gradients set to None first)."""
    def step():
        for p in model.parameters():
            p.grad = None
        x.grad = None
        model(x).backward(dy)
    step()
    rec = Launches()
    with rec:
        step()
    return rec.count


def _inputs(t: int, d: int):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(t, d, generator=g).bfloat16().requires_grad_()
    return x, torch.randn(t, d, generator=g).bfloat16()


def unexpected(count: Counter, want: dict) -> dict:
    """Operators the step launched beyond ``want`` (name -> count), and counts that differ."""
    return {k: (count.get(k, 0), want.get(k, 0)) for k in set(count) | set(want) if count.get(k, 0) != want.get(k, 0)}


MLP_WANT = {"ptxgen.gemm_aux": 4, "aten.gelu_backward": 4, "ptxgen.gemm": 8, "aten.sum": 4}
MLP_ONE_PASS_WANT = {"ptxgen.gemm_aux": 4, "ptxgen.activation_grad": 4, "ptxgen.gemm": 8}


def test_mlp_step_launches_one_gemm_per_product_and_nothing_torch_does_not():
    x, dy = _inputs(16, 32)
    ours = step_launches(mlp(True), x, dy)
    assert unexpected(ours, MLP_WANT) == {}
    theirs = step_launches(mlp(False), x.detach().clone().requires_grad_(), dy)
    # torch eager: addmm + gelu forward per layer, gelu_backward + 2 mm + sum backward: 24 kernels to ptxgen's 20
    assert theirs["aten.gelu_backward"] == ours["aten.gelu_backward"] and theirs["aten.sum"] == ours["aten.sum"]
    assert sum(ours.values()) < sum(theirs.values()), (ours, theirs)


def test_with_the_one_pass_kernels_on_the_derivative_and_bias_sum_are_one_operator(monkeypatch):
    """actgrad.ENABLED set: each layer's gelu_backward and bias sum become one ptxgen.activation_grad (two
    kernels on a GPU, one pass over dy and z); the default step (the test above, the flag off) is its control."""
    monkeypatch.setattr(actgrad, "ENABLED", True)
    x, dy = _inputs(16, 32)
    assert unexpected(step_launches(mlp(True), x, dy), MLP_ONE_PASS_WANT) == {}


def test_control_an_f32_bias_sum_and_a_cast_is_seen(monkeypatch):
    """Control: the bias gradient as an f32 sum then a cast to bf16 (the form column_sum replaced) adds a copy per
    layer, and the check fails."""
    monkeypatch.setattr(opsgrad, "column_sum", lambda dz, dtype: dz.sum(0, dtype=torch.float32).to(dtype))
    x, dy = _inputs(16, 32)
    extra = unexpected(step_launches(mlp(True), x, dy), MLP_WANT)
    assert extra == {"aten._to_copy": (4, 0)}


def test_bias_gradient_is_the_f32_sum_rounded_once():
    """column_sum in one reduction equals the f32 sum cast to the bias' type (bf16, f32; f64 stays f64)."""
    g = torch.Generator().manual_seed(1)
    dz = (torch.randn(512, 24, generator=g) * 4 + 2).bfloat16()
    ref = dz.double().sum(0)
    for dtype in (torch.bfloat16, torch.float32, torch.float16):
        got = opsgrad.column_sum(dz, dtype)
        assert got.dtype == dtype
        assert torch.equal(got, dz.float().sum(0).to(dtype))
        torch.testing.assert_close(got.double(), ref, rtol=1e-2 if dtype != torch.float32 else 1e-5, atol=1e-2)
    d64 = dz.double()
    assert opsgrad.column_sum(d64, torch.float64).dtype == torch.float64


class MoE(torch.nn.Module):
    """tools/bench_training.py's MoE layer, small: router, top-2, tokens sorted by expert, two expert banks."""

    def __init__(self, d, f, experts, ptx: bool):
        super().__init__()
        self.router = torch.nn.Linear(d, experts, bias=False, dtype=torch.bfloat16)
        bank = (lambda i, o: pnn.GroupedLinear(experts, i, o, dtype=torch.bfloat16))
        self.w13, self.w2 = bank(d, 2 * f), bank(f, d)
        self.f, self.experts, self.ptx = f, experts, ptx

    def _bank(self, layer, x, offs):
        if self.ptx:
            return layer(x, offs)
        return torch._grouped_mm(x, layer.weight.transpose(1, 2), offs=offs)

    def forward(self, x):
        probs = F.softmax(self.router(x.detach()).float(), dim=-1)
        wts, idx = torch.topk(probs, 2, dim=-1)
        wts = (wts / wts.sum(-1, keepdim=True)).to(x.dtype)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        tok = order // 2
        counts = torch.zeros(self.experts, dtype=torch.int32).scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        h = self._bank(self.w13, x[tok], offs)
        o = self._bank(self.w2, F.silu(h[:, :self.f]) * h[:, self.f:], offs) * wts.reshape(-1)[order][:, None]
        return torch.zeros_like(x).index_add(0, tok, o)


def _bank_ops(count: Counter) -> Counter:
    """The step's operators less the router's and the routing's, which both models run alike."""
    return Counter({k: v for k, v in count.items() if k.startswith("ptxgen.")
                    or k in ("aten.where", "aten.arange", "aten.lt", "aten.copy_", "aten.clone")})


def test_moe_step_backward_has_no_pass_over_dx():
    torch.manual_seed(0)
    x, dy = _inputs(32, 16)
    ours = _bank_ops(step_launches(MoE(16, 24, 4, True), x, dy))
    assert ours == Counter({"ptxgen.grouped_gemm": 4, "ptxgen.grouped_gemm_k": 2})


def test_control_a_masked_pass_over_dx_is_seen(monkeypatch):
    """Control: dx masked after the product (arange, lt, where over dx: the form zero_tail replaced) is seen."""
    def masked(dy, b, offs):
        da = op.grouped_gemm(dy, b.transpose(1, 2), offs)
        rows = torch.arange(da.shape[0], device=da.device)
        return torch.where((rows < offs[-1])[:, None], da, torch.zeros((), dtype=da.dtype, device=da.device))
    monkeypatch.setattr(opsgrad, "grouped_input_grad", masked)
    torch.manual_seed(0)
    x, dy = _inputs(32, 16)
    ours = _bank_ops(step_launches(MoE(16, 24, 4, True), x, dy))
    assert ours["aten.where"] == 2 and ours["aten.arange"] == 2


def test_zero_tail_output_matches_the_masked_product():
    """zero_tail: the groups' rows as without it, the rows past the last group 0 (NaN in the reference without)."""
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(11, 8, generator=g, dtype=torch.float64), torch.randn(3, 5, 8, generator=g, dtype=torch.float64)
    offs = torch.tensor([2, 2, 7], dtype=torch.int32)
    plain, zeroed = op.grouped_gemm(x, w, offs), op.grouped_gemm(x, w, offs, None, True)
    assert torch.equal(zeroed[:7], plain[:7]) and plain[7:].isnan().all() and not zeroed[7:].any()
    torch.library.opcheck(op.grouped_gemm, (x.requires_grad_(), w, offs, None, True))  # the fake, the schema, autograd


def _fake_gemm(calls):
    """ptxgen.api.gemm on CPU tensors, recording whether the caller passed ``out`` (the reference's values)."""
    from ptxgen.ops import opsref

    def gemm(a, b, out=None, *, out_dtype=None, bias=None, activation=None, aux=None, **kw):
        calls.append({"out": out, "aux": aux})
        name = str(a.dtype).removeprefix("torch.")
        y, z = opsref.gemm_aux(a, b, name, bias, activation)
        if aux is not None:
            aux.copy_(z)
        if out is None:
            return y
        return out.copy_(y)
    return gemm


def test_gemm_aux_writes_into_its_own_output(monkeypatch):
    """The CUDA implementation of gemm_aux hands the kernel the output it returns (no second M x N allocation)."""
    calls = []
    monkeypatch.setattr(ptxgen.api, "gemm", _fake_gemm(calls))
    a, b, bias = torch.randn(6, 8).bfloat16(), torch.randn(5, 8).bfloat16(), torch.randn(5).bfloat16()
    y, z = torch_ops._aux_impl(a, b, None, bias, "gelu_tanh")
    assert len(calls) == 1 and calls[0]["out"] is y and calls[0]["aux"] is z
    assert y.stride() == (8, 1) and z.stride() == (8, 1)  # rows padded to 16 bytes, the fake's layout
    ry, rz = torch.ops.ptxgen.gemm_aux(a, b, None, bias, "gelu_tanh")  # the CPU reference
    assert torch.equal(y, ry) and torch.equal(z, rz)


def test_control_an_output_the_kernel_allocates_is_seen(monkeypatch):
    """Control: the plain gemm's implementation lets the kernel allocate its output, and the recorder shows it."""
    calls = []
    monkeypatch.setattr(ptxgen.api, "gemm", _fake_gemm(calls))
    torch_ops._impl(torch.randn(6, 8).bfloat16(), torch.randn(5, 8).bfloat16(), None, torch.randn(5).bfloat16(), "relu")
    assert len(calls) == 1 and calls[0]["out"] is None


def test_linear_adds_no_view_nodes_for_a_2d_input():
    """A 2-D input goes to the operator as it is and its output comes back as it is: the output's autograd node is the
    operator's (no reshape views to differentiate, as nn.Linear's addmm); a 3-D input is flattened and reshaped
    (the control: view nodes around the operator)."""
    lin = pnn.Linear(8, 6, activation="gelu", dtype=torch.bfloat16)
    y = lin(torch.randn(4, 8).bfloat16().requires_grad_())
    assert "ptxgen_gemm_aux" in type(y.grad_fn).__name__
    assert all("View" not in type(f).__name__ for f, _ in y.grad_fn.next_functions if f is not None)
    y3 = lin(torch.randn(2, 2, 8).bfloat16().requires_grad_())
    assert "ptxgen" not in type(y3.grad_fn).__name__  # a view or reshape node over the operator's


def test_gemm_aux_without_activation_checks_before_any_product(monkeypatch):
    """The plain branch (no activation, z empty) still refuses a 3-D ``a`` and a mis-shaped ``a_pre`` before a product."""
    calls = []
    monkeypatch.setattr(ptxgen.api, "gemm", _fake_gemm(calls))
    b = torch.randn(5, 8).bfloat16()
    with pytest.raises(ValueError, match="2-D a"):
        torch_ops._aux_impl(torch.randn(2, 3, 8).bfloat16(), b)
    with pytest.raises(ValueError, match="a_pre"):
        torch_ops._aux_impl(torch.randn(3, 8).bfloat16(), b, None, None, None, torch.randn(4, 8).bfloat16(), "gelu")
    assert calls == []
    y, z = torch_ops._aux_impl(torch.randn(3, 8).bfloat16(), b)
    assert len(calls) == 1 and z.shape == (0, 5)


def test_every_product_of_the_steps_reads_its_operands_as_they_are():
    """ptxgen.api.plan (meta tensors standing for CUDA ones, an H100) on each product of the benchmark's steps at 8192
    tokens, with the operands autograd hands them (the weight's transposed view for dX, both transposed for dW, the
    experts' weights N-major for dx): every one a kernel that reads them as they are (hot), no packed copy. Control: a
    weight whose rows are not 16 bytes apart is packed."""
    from ptxgen.api import plan

    def m(*shape):
        return torch.empty(*shape, dtype=torch.bfloat16, device="meta")
    t, d, f, e = 8192, 4096, 14336, 8
    offs = torch.empty(e, dtype=torch.int32, device="meta")
    calls = []
    for k, n in ((d, f), (f, d)):
        x, w, dz = m(t, k), m(n, k), m(t, n)
        calls += [("gemm", (x, w, m(t, n)), dict(bias=m(n), activation="gelu_tanh", aux=m(t, n))),
                  ("gemm", (dz, w.t()), {}), ("gemm", (dz.t(), x.t()), {})]
    for k, n in ((d, 2 * f), (f, d)):
        calls += [("grouped_gemm", (m(2 * t, k), m(e, n, k), offs), {}),
                  ("grouped_gemm", (m(2 * t, n), m(e, n, k).transpose(1, 2), offs, m(2 * t, k)), {})]
    for op_name, args, kw in calls:
        p = plan(op_name, *args, device="h100", **kw)
        assert p.path.value == "hot" and not p.packed, (op_name, [tuple(a.shape) for a in args], p.path, p.why)
    odd = m(d, f + 1)[:, :f]  # a weight whose rows are 28674 bytes apart
    q = plan("gemm", m(t, f), odd, device="h100")
    assert q.path.value in ("packed", "narrow"), (q.path, q.why)
