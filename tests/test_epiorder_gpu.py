"""--epilogue-order alternate on the GPU (``gpu`` tier, L3 on an H200): ordered persistent cooperative kernels (2 and 3
consumer warpgroups, the TMA store and the direct stores, TMA and cp.async loads, a fused bias + gelu chain; both forms
of the order, alternate and alternate-uniform) against a
float64 reference at shapes off every tile multiple, from CTAs with no tile to many tiles per CTA with one or two
K-tiles; each output must also equal, bit for bit, the unordered kernel's (the order moves no arithmetic).

    python -m pytest -q -m gpu tests/test_epiorder_gpu.py        (tools/gpu_run.sh tests)
"""

from __future__ import annotations

import pytest

from ptxgen.derive.tile.spec import make_spec

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

BASE = dict(bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a", stages=4,
            schedule="persistent")
SPECS = {
    "128x256-tma": dict(BASE, bm=128, bn=256, epilogue="tma"),
    "128x192-tma": dict(BASE, bm=128, bn=192, epilogue="tma", raster_group=16),
    "128x256-direct": dict(BASE, bm=128, bn=256),
    "192x128-3wg-tma": dict(BASE, bm=192, bn=128, epilogue="tma"),
    "128x128-cpasync-direct": dict(BASE, bm=128, bn=128, loader="cp.async"),
}
# (M, N, K): a few tiles (most CTAs have none), K-tiles 3; 1-2 tiles per CTA, 2 K-tiles (the last partial); 3-6 tiles
# per CTA with one K-tile (the case the generations are most at risk in); 9 K-tiles
SHAPES = [(197, 250, 136), (1999, 3001, 72), (3001, 4001, 64), (1100, 2100, 520)]
SENTINEL = -777.0


def _inputs(m, n, k, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)
    return a, b


def _out(m, n):
    ldd = -(-(n + 5) // 8) * 8  # 16-byte rows with at least 5 columns of padding
    full = torch.full((m, ldd), SENTINEL, dtype=torch.bfloat16, device="cuda")
    return full, full[:, :n]


def _run_plain(spec, a, b, m, n):
    from ptxgen.api.dispatch import kernel_for

    full, out = _out(m, n)
    kernel_for(spec)(a, b, out)
    torch.cuda.synchronize()
    return full, out


def _check(got, ref, k, fused=False):
    # bf16 rounding of an f32 sum of exact bf16 products: half an ulp of bf16 plus the f32 sum's error; a fused gelu
    # (tanh.approx) as tests/test_epilogue_ops.py bounds it
    bound = (2.0 ** -7 * ref.abs() + 2e-3 * (1 + ref.abs().mean()) if fused
             else 2.0 ** -8 * ref.abs() + k * 2.0 ** -22 * 8 + 1e-3)
    bad = ~((got.double() - ref).abs() <= bound)
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} outputs wrong; first {bad.nonzero()[:3].tolist()}"


ORDERS = ["alternate", "alternate-uniform"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("order", ORDERS)
def test_ordered_kernel_matches_float64_and_the_unordered_twin(gpu, order, name, shape):
    m, n, k = shape
    ordered = make_spec(**SPECS[name], epilogue_order=order)
    plain = make_spec(**SPECS[name])
    assert ordered.epilogue_order.value == order and plain.epilogue_order.value == "none"
    a, b = _inputs(m, n, k, seed=m + n + k)
    full, got = _run_plain(ordered, a, b, m, n)
    _check(got, a.double() @ b.double().T, k)
    assert (full[:, n:] == SENTINEL).all(), "padding past column N written"
    _, twin = _run_plain(plain, a, b, m, n)
    assert torch.equal(got.view(torch.int16), twin.view(torch.int16)), "the order changed an output bit"


def test_control_a_shifted_reference_fails(gpu):
    """The comparison can fail: the same output against the reference one column over."""
    m, n, k = 1999, 3001, 72
    a, b = _inputs(m, n, k, seed=1)
    _, got = _run_plain(make_spec(**SPECS["128x256-tma"], epilogue_order="alternate"), a, b, m, n)
    ref = a.double() @ b.double().T
    with pytest.raises(AssertionError):
        _check(got[:, 1:], ref[:, :-1], k)


FUSED = {"128x256-tma": SPECS["128x256-tma"], "128x256-direct": SPECS["128x256-direct"]}


@pytest.mark.parametrize("shape", [(1999, 3001, 72), (3001, 4001, 64)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(FUSED))
@pytest.mark.parametrize("order", ORDERS)
def test_ordered_fused_bias_gelu(gpu, order, name, shape):
    """The issue's chain (bias per column, gelu tanh, bf16 out) with the order: against float64 and bit for bit against
    the unordered fused kernel."""
    import ptxgen.api.fused

    m, n, k = shape
    a, b = _inputs(m, n, k, seed=7)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    outs = []
    for o in (order, "none"):
        spec = make_spec(**FUSED[name], epilogue_order=o)
        outs.append(ptxgen.api.fused.gemm(a, b, spec=spec, bias=bias, activation="gelu_tanh", out_dtype="bf16"))
    torch.cuda.synchronize()
    ref = torch.nn.functional.gelu(a.double() @ b.double().T + bias.double(), approximate="tanh")
    _check(outs[0], ref, k, fused=True)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the order changed an output bit"
