"""The N-grouped form of ptxgen.grouped_gemm (torch._grouped_mm's 3-D a x 2-D b, offsets along N): the M-grouped
kernel with the operands swapped, out returned M-major. CPU: the argument checks before any GPU work; ``gpu``: against
float64 and torch._grouped_mm at odd shapes (an empty group, a group of one column, N not a multiple of the tile,
columns past the last offset left alone)."""

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
from ptxgen.runtime.launch.arrays import ArgumentError  # noqa: E402


def _args(g=3, m=4, k=16, n=20):
    return (torch.zeros(g, m, k, dtype=torch.bfloat16), torch.zeros(n, k, dtype=torch.bfloat16),
            torch.tensor([5, 5, n], dtype=torch.int32))


@pytest.mark.parametrize("change,match", [
    (lambda a, b, o: ((a, b[:, :8], o), {}), "both must have K columns"),
    (lambda a, b, o: ((a, b, o[:2]), {}), "offs must hold G = 3"),
    (lambda a, b, o: ((a, b, o), {"out": torch.zeros(4, 20, dtype=torch.bfloat16)}), "out must be M-major"),
    (lambda a, b, o: ((a, b, o), {"out": torch.zeros(21, 4, dtype=torch.bfloat16).t()}), "N-grouped product is 4 x 20"),
])
def test_n_grouped_checks(change, match):
    args, kw = change(*_args())
    with pytest.raises(ArgumentError, match=match):
        ptxgen.grouped_gemm(*args, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("sizes,tail", [([0, 1, 300, 129], 0), ([200, 0, 56], 8)])
def test_n_grouped_against_float64_and_torch(gpu, sizes, tail):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    g, m, k = len(sizes), 333, 200
    ends = [sum(sizes[:i + 1]) for i in range(g)]
    n_total = ends[-1] + tail
    gen = torch.Generator(device="cuda").manual_seed(n_total)
    a = torch.randn(g, m, k, device="cuda", generator=gen).bfloat16()
    b = torch.randn(n_total, k, device="cuda", generator=gen).bfloat16()
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    out = ptxgen.grouped_gemm(a, b, offs)
    assert out.shape == (m, n_total) and out.stride(0) == 1
    start = 0
    for gi, end in enumerate(ends):
        if end > start:
            ref = a[gi].double() @ b[start:end].double().T
            err = float((out[:, start:end].double() - ref).norm() / ref.norm())
            assert err < 1e-2, (gi, err)
        start = end
    cols = slice(0, ends[-1])
    if all(s % 8 == 0 for s in sizes):  # torch's kernel asserts (on the device) 16-byte multiples along N
        theirs = torch._grouped_mm(a, b.t(), offs=offs)
        assert float((out[:, cols].double() - theirs[:, cols].double()).norm() / theirs[:, cols].double().norm()) < 1e-2
    # an out passed in: M-major, columns past offs[-1] untouched
    full = torch.full((n_total, 336), 7.0, device="cuda", dtype=torch.bfloat16)
    given = full[:, :m].t()
    assert ptxgen.grouped_gemm(a, b, offs, given) is not None
    torch.cuda.synchronize()
    assert torch.equal(given[:, cols], out[:, cols]) and (given[:, ends[-1]:] == 7).all()
