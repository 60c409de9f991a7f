"""ptxgen.scaled_gemm on the GPU (``gpu`` tier; skips without a GPU or a CUDA build of torch): the dense FP8 kernel
with the chain's rowscale step (and the bias fused after it) against float64 and torch._scaled_mm's row-wise recipe at
odd shapes (M, N not tile multiples, M = 1, N odd), scale tensors with unusual strides, e4m3 / e5m2 and the mixes
torch takes, bias and no bias, the prepared launch of a repeat call; autograd of torch.ops.ptxgen.scaled_gemm against
torch's eager autograd of the dequantized product. The CPU tier: tests/test_rowscale_chain.py, test_scaled_autograd.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

from test_training_gpu import torch  # noqa: E402,F401 - the fixture: CUDA torch with ptxgen's operators registered

E4, E5 = "float8_e4m3fn", "float8_e5m2"


def _operands(torch, m, n, k, da=E4, db=E4, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed + m + n + k)
    a = (torch.randn(m, k, device="cuda", generator=g) * 2).to(getattr(torch, da))
    b = (torch.randn(n, k, device="cuda", generator=g) * 2).to(getattr(torch, db))
    sa = torch.rand(m, 1, device="cuda", generator=g) + 0.25
    sb = torch.rand(1, n, device="cuda", generator=g) + 0.25
    bias = torch.randn(n, device="cuda", generator=g).bfloat16()
    return a, b, sa, sb, bias


def _exact(torch, a, b, sa, sb, bias):
    y = (a.double() @ b.double().T) * sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
    return y if bias is None else y + bias.double()


def _check_elements(torch, got, exact, a, b, sa, sb, out_ulp):
    """|got - exact| <= half an output ulp of |exact| (the one rounding) + an accumulation bound: the FP8 wgmma
    accumulator keeps about 14 bits (DeepSeek-V3's report), so each of the K / 32 steps may lose 2^-14 of the running
    magnitude (at least 2^-12 in all)."""
    mag = (a.double().abs() @ b.double().abs().T) * sa.double().reshape(-1, 1).abs() * sb.double().reshape(1, -1).abs()
    acc = 2.0 ** -14 * max(4.0, a.shape[1] / 32)
    bound = out_ulp * exact.abs() + acc * mag + 1e-30
    err = (got.double() - exact).abs()
    assert bool((err <= bound).all()), f"max excess {float((err - bound).max())}"


def _rel(torch, got, ref) -> float:
    return float(torch.linalg.norm(got.double() - ref.double()) / max(float(torch.linalg.norm(ref.double())), 1e-30))


def _no_farther_than_torch(torch, got, exact, a, b, sa, sb, bias, fast: bool):
    """ptxgen's distance from float64 at most twice torch._scaled_mm's in the same accumulation mode (+ 2^-9)."""
    try:
        ref = torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=torch.bfloat16, use_fast_accum=fast)
    except RuntimeError as e:  # a mix this torch build refuses with row-wise scales: float64 only
        assert "e4m3" in str(e) or "e5m2" in str(e) or "dtype" in str(e).lower(), e
        return
    ours, theirs = _rel(torch, got, exact), _rel(torch, ref, exact)
    assert ours <= 2 * theirs + 2.0 ** -9, (ours, theirs)


def _dense_kernel(torch, a, b, sa, sb, bias, out_dtype="bf16"):
    import ptxgen.api

    return ptxgen.api.plan("scaled_gemm", a, b, sa, sb, out_dtype=out_dtype, bias=bias).kernel


SHAPES = [(333, 200, 256), (1, 72, 128), (129, 201, 96), (2048, 3584, 512), (64, 4096, 1024), (7, 24, 80)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("with_bias", (False, True))
def test_dense_rowwise_against_float64_and_torch(torch, m, n, k, with_bias):
    import ptxgen

    a, b, sa, sb, bias = _operands(torch, m, n, k)
    bias = bias if with_bias else None
    assert "_fq" in _dense_kernel(torch, a, b, sa, sb, bias)
    got = ptxgen.scaled_gemm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16
    exact = _exact(torch, a, b, sa, sb, bias)
    _check_elements(torch, got, exact, a, b, sa, sb, 2.0 ** -8)
    if n % 16 == 0 and k % 16 == 0:
        _no_farther_than_torch(torch, got, exact, a, b, sa, sb, bias, fast=True)


@pytest.mark.parametrize("m,n,k", [(333, 208, 256), (2048, 3584, 512), (64, 4096, 1024)])
def test_accumulates_as_torch_fast_accum(torch, m, n, k):
    """The dense kernel accumulates as torch._scaled_mm with use_fast_accum=True does (no promotion): its result within
    1e-4 (relative Frobenius) of torch's in that mode (1.0e-5 to 1.5e-5 measured on the H100); torch's default, which
    promotes, is the control: farther from ours than torch's fast mode is."""
    import ptxgen

    a, b, sa, sb, bias = _operands(torch, m, n, k)
    got = ptxgen.scaled_gemm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias)
    fast = torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=torch.bfloat16, use_fast_accum=True)
    default = torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=torch.bfloat16)
    assert _rel(torch, got, fast) < 1e-4
    if k >= 512:  # enough K-steps for the promotion to show
        assert _rel(torch, got, default) > _rel(torch, got, fast)


@pytest.mark.parametrize("out_dtype, ulp", [("float16", 2.0 ** -11), ("float32", 2.0 ** -23)])
def test_other_outputs(torch, out_dtype, ulp):
    import ptxgen

    a, b, sa, sb, bias = _operands(torch, 200, 136, 192, seed=1)
    got = ptxgen.scaled_gemm(a, b, sa, sb, out_dtype=getattr(torch, out_dtype), bias=bias.float())
    assert got.dtype == getattr(torch, out_dtype)
    _check_elements(torch, got, _exact(torch, a, b, sa, sb, bias.float()), a, b, sa, sb, ulp)


def test_unusual_scale_strides(torch):
    """scale_a M x 1 with a stride of 7 along its size-1 dim, scale_b 1 x N cut from a larger buffer at an odd offset
    (4-byte aligned only: copied), 1-D scales; the same values as contiguous ones."""
    import ptxgen

    m, n, k = 257, 144, 128
    a, b, sa, sb, bias = _operands(torch, m, n, k, seed=2)
    want = ptxgen.scaled_gemm(a, b, sa, sb, bias=bias).clone()
    sa_odd = torch.empty(m * 7, device="cuda").as_strided((m, 1), (1, 7))
    sa_odd.copy_(sa)
    buf = torch.empty(n + 3, device="cuda")
    sb_odd = buf[1:n + 1].reshape(1, n)
    sb_odd.copy_(sb)
    torch.testing.assert_close(ptxgen.scaled_gemm(a, b, sa_odd, sb_odd, bias=bias), want, rtol=0, atol=0)
    torch.testing.assert_close(ptxgen.scaled_gemm(a, b, sa.reshape(m), sb.reshape(n), bias=bias), want,
                               rtol=0, atol=0)
    _no_farther_than_torch(torch, want, _exact(torch, a, b, sa, sb, bias), a, b, sa, sb, bias, fast=True)


@pytest.mark.parametrize("da, db", [(E4, E5), (E5, E4), (E5, E5)])
def test_fp8_type_mixes(torch, da, db):
    """e5m2 x e5m2 runs the dense kernel; e4m3 x e5m2 either way the grouped one (the chooser takes one input type).
    Compared with torch._scaled_mm where torch takes the mix with row-wise scales (never e5m2 x e5m2), with float64
    always."""
    import ptxgen

    m, n, k = 300, 144, 256
    a, b, sa, sb, bias = _operands(torch, m, n, k, da, db, seed=3)
    kernel = _dense_kernel(torch, a, b, sa, sb, bias)
    assert ("groupedoffs_rowwise" in kernel) == (da != db)
    got = ptxgen.scaled_gemm(a, b, sa, sb, bias=bias)
    exact = _exact(torch, a, b, sa, sb, bias)
    # the grouped path rounds twice (GEMM to bf16, then + bias): one more ulp
    _check_elements(torch, got, exact, a, b, sa, sb, 2.0 ** -8 if da == db else 2.0 ** -7)
    if da != db:
        _no_farther_than_torch(torch, got, exact, a, b, sa, sb, bias, fast=True)


def test_repeat_call_takes_the_prepared_launch(torch):
    """A second call with the same shapes and new tensors runs the prepared launch (fused._HOT) and reads the new ones."""
    import ptxgen
    from ptxgen.api import fused

    a, b, sa, sb, bias = _operands(torch, 384, 264, 128, seed=4)
    ptxgen.scaled_gemm(a, b, sa, sb, bias=bias)
    entries = len(fused._HOT)
    a2, b2, sa2, sb2, bias2 = _operands(torch, 384, 264, 128, seed=5)
    got = ptxgen.scaled_gemm(a2, b2, sa2, sb2, bias=bias2)
    assert len(fused._HOT) == entries
    _check_elements(torch, got, _exact(torch, a2, b2, sa2, sb2, bias2), a2, b2, sa2, sb2, 2.0 ** -8)


def test_k_zero_gives_the_bias(torch):
    import ptxgen

    a, b, sa, sb, bias = _operands(torch, 5, 8, 0, seed=6)
    got = ptxgen.scaled_gemm(a, b, sa, sb, bias=bias)
    assert torch.equal(got, bias.float().expand(5, 8).bfloat16())


@pytest.mark.parametrize("m,n,k", [(333, 200, 256), (1, 64, 128)])
def test_autograd_against_torch_eager(torch, m, n, k):
    """Gradients of scale_a, scale_b and the bias (torch.ops.ptxgen.scaled_gemm's backward on ptxgen's bf16 GEMMs)
    and scaled_input_grads' da, db against torch's eager autograd of the dequantized product in f32."""
    from ptxgen.ops import opsgrad

    a, b, sa, sb, bias = _operands(torch, m, n, k, seed=7)
    sa, sb, bias = (t.detach().float().requires_grad_() for t in (sa, sb, bias))
    y = torch.ops.ptxgen.scaled_gemm(a, b, sa, sb, "bf16", bias)
    dy = torch.randn(m, n, device="cuda").bfloat16()
    mine = torch.autograd.grad(y, (sa, sb, bias), dy)
    af, bf = a.float().requires_grad_(), b.float().requires_grad_()
    sa2, sb2, bias2 = (t.detach().clone().requires_grad_() for t in (sa, sb, bias))
    y2 = (af * sa2) @ (bf * sb2.reshape(n, 1)).t() + bias2
    ref = torch.autograd.grad(y2, (sa2, sb2, bias2, af, bf), dy.float())

    def rel(x, r):
        return float(torch.linalg.norm(x.double() - r.double()) / max(float(torch.linalg.norm(r.double())), 1e-30))

    for x, r in zip(mine, ref[:3]):
        assert x.shape == r.shape and rel(x, r) < 1e-2
    da, db = opsgrad.scaled_input_grads(dy, a, b, sa.detach(), sb.detach())
    assert rel(da, ref[3]) < 1e-2 and rel(db, ref[4]) < 1e-2
