"""``accumulate="f16"`` on the GPU: ptxgen.gemm's float16 kernels with an f16 accumulator against a float64 reference.

Bound: wgmma adds each K-step's 16 products to the f16 accumulator and rounds it once (as the f32 accumulator is modelled
in tools/accumulation_model.py, one rounding per K-step), by at most 2^-10 of the running sum (to nearest or toward
zero), so on inputs in [0, 1) |ours - exact| <= (ceil(K / 16) + 1) 2^-10 max(a @ b.T) (the output's rounding in the
+ 1): 0.25 of the result at K = 4096, where a wrong kernel misses by the result. (The issue's worst case, one rounding
per product, K 2^-11, is 2 there: a bound no result could miss.) Beside it, torch's own f16-accumulate result
(``allow_fp16_accumulation``, cuBLAS CUBLAS_COMPUTE_16F) where torch has the flag and its result shows f16 accumulation:
ptxgen is no farther from float64 than 4 times torch's distance plus one output ulp (not bit-equal: the order of the
additions differs). Controls: the f32-accumulate kernel is nearer float64 than the f16 one, and its result differs."""

from __future__ import annotations

import pytest
from test_accumulate import _torch_flag

pytestmark = pytest.mark.gpu
FACTOR = 4  # ptxgen's distance from float64 at most FACTOR x torch's f16-accumulate distance (plus one output ulp)


def _operands(torch, m, n, k, batch=None, a_t=False):
    g = torch.Generator(device="cuda").manual_seed(11)
    lead = () if batch is None else (batch,)
    a = torch.rand(*lead, m, k, device="cuda", generator=g).half()
    b = torch.rand(*lead, n, k, device="cuda", generator=g).half()
    if a_t:  # an M-major A: the transposed view of a K x M tensor
        a = a.t().contiguous().t()
    return a, b


def _dist(torch, x, ref):
    """max |x - ref| relative to max |ref| (inputs in [0, 1): ref is |a| @ |b|.T)."""
    return float((x.double() - ref).abs().max() / ref.abs().max())


# (m, n, k, batch, a_t): the tuned pick, swap-AB, the stream-K pick's shape, split-K's taken whole, ping-pong, M-major A,
# batched, 8-byte rows
SHAPES = [(4096, 4096, 4096, None, False), (16, 4096, 4096, None, False), (400, 10000, 4096, None, False),
          (128, 4096, 4096, None, False), (256, 256, 4096, None, False),
          (2048, 2048, 1024, None, True), (512, 256, 1024, 4, False), (300, 200, 300, None, False)]


@pytest.mark.parametrize("m,n,k,batch,a_t", SHAPES, ids=lambda x: str(x))
def test_f16_accumulate_against_float64_and_torch(torch_cuda, m, n, k, batch, a_t):
    import ptxgen

    torch = torch_cuda
    a, b = _operands(torch, m, n, k, batch, a_t)
    ref = a.double() @ b.double().transpose(-1, -2)
    kernel = ptxgen.api.plan("gemm", a, b, accumulate="f16").kernel
    assert "_f16_f16_" in kernel, kernel
    ours = ptxgen.gemm(a, b, accumulate="f16")
    ours_f32 = ptxgen.gemm(a, b, accumulate="f32")
    wide = ptxgen.gemm(a, b, accumulate="f16", out_dtype="f32")  # the accumulator's error without the output's rounding
    torch.cuda.synchronize()
    d16, d32, dwide = _dist(torch, ours, ref), _dist(torch, ours_f32, ref), _dist(torch, wide, ref)
    steps = -(-k // 16)
    assert dwide <= (steps + 1) * 2.0 ** -10 and d16 <= (steps + 2) * 2.0 ** -10, (d16, dwide)
    assert not torch.equal(ours, ours_f32) and d32 < d16, (d32, d16)  # control: the mode changed the kernel
    assert d32 <= 2.0 ** -10, d32
    if not hasattr(torch.backends.cuda.matmul, "allow_fp16_accumulation") or batch is not None:
        return
    with _torch_flag(torch, False):
        theirs32 = a @ b.T
    with _torch_flag(torch, True):
        theirs16 = a @ b.T
    torch.cuda.synchronize()
    t16, t32 = _dist(torch, theirs16, ref), _dist(torch, theirs32, ref)
    if t16 > 2 * t32:  # torch's result shows f16 accumulation: ptxgen's is as near float64, up to FACTOR
        assert d16 <= FACTOR * t16 + 2.0 ** -11, (d16, t16)


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (16, 4096, 4096)])
def test_the_door_follows_torch_flag_call_by_call(torch_cuda, m, n, k):
    """Calls on the same tensors as the flag flips: the f16 kernel while it is on, the f32 one while off (hot paths kept
    apart: each mode's repeat call is bit-equal to its first)."""
    import ptxgen

    torch = torch_cuda
    if not hasattr(torch.backends.cuda.matmul, "allow_fp16_accumulation"):
        pytest.skip("this torch has no allow_fp16_accumulation")
    a, b = _operands(torch, m, n, k)
    runs = []
    for flag in (False, True, False, True):
        with _torch_flag(torch, flag):
            runs.append(ptxgen.gemm(a, b))
    explicit16, explicit32 = ptxgen.gemm(a, b, accumulate="f16"), ptxgen.gemm(a, b, accumulate="f32")
    torch.cuda.synchronize()
    assert torch.equal(runs[0], explicit32) and torch.equal(runs[2], explicit32)
    assert torch.equal(runs[1], explicit16) and torch.equal(runs[3], explicit16)
    assert not torch.equal(explicit16, explicit32)


def test_bf16_ignores_the_flag(torch_cuda):
    import ptxgen

    torch = torch_cuda
    if not hasattr(torch.backends.cuda.matmul, "allow_fp16_accumulation"):
        pytest.skip("this torch has no allow_fp16_accumulation")
    a, b = (x.bfloat16() for x in _operands(torch, 1024, 1024, 1024))
    with _torch_flag(torch, True):
        on = ptxgen.gemm(a, b)
    off = ptxgen.gemm(a, b)
    torch.cuda.synchronize()
    assert torch.equal(on, off)
    with pytest.raises(ptxgen.ArgumentError, match="takes float16 inputs"):
        ptxgen.gemm(a, b, accumulate="f16")
