"""Every tensor torch takes, through the grouped and block-FP8 doors: float32 (tf32 kernels) and mixed e4m3 x e5m2 grouped
GEMM, packed copies (said once with ``warnings.warn``) of an M-major ``a``, of rows not 16-byte aligned, of ``b``'s groups
with gaps between them, of 3-D batches with gaps; block FP8 with torch's own padded ``scale_b``.

CPU tier: the rules (``api.arrays.groupedpack.pack_plan``) on array metadata, with controls (what a kernel reads as it is is not
copied; other libraries' arrays are left to the binding's refusal). GPU tier (``gpu``): against float64 products."""

from __future__ import annotations

import warnings

import pytest

from ptxgen.api.arrays import packing
from ptxgen.api.arrays.groupedpack import a_problem, b_problem, pack_plan
from ptxgen.runtime.launch.arrays import ArrayInfo


def info(name, shape, strides=None, dtype="bf16", itemsize=2, ptr=0x10000, library="torch"):
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    return ArrayInfo(name, ptr, tuple(shape), tuple(strides), dtype, itemsize, (2, 0), library, library)


def test_what_a_kernel_reads_is_not_packed():
    a, b, o = info("a", (700, 256)), info("b", (5, 300, 256)), info("out", (700, 300), (304, 1))
    assert pack_plan(a, b, o, n_major_ok=True) == {}
    nb = info("b", (5, 300, 256), (256 * 304, 1, 304))  # N-major, rows 304 apart: read through the 3-D map (16-bit)
    assert pack_plan(a, nb, o, n_major_ok=True) == {}


def test_the_packing_rules():
    a, b, o = info("a", (700, 256)), info("b", (5, 300, 256)), info("out", (700, 300), (304, 1))
    assert "not K-major" in a_problem(info("a", (700, 256), (1, 700)))
    assert "16-byte aligned" in a_problem(info("a", (700, 250), (250, 1)))
    assert "16-byte aligned" in a_problem(info("a", (700, 256), ptr=0x10008))
    assert "no gap" in b_problem(info("b", (5, 300, 256), (2 * 300 * 256, 256, 1)), True)
    assert "broadcast" in b_problem(info("b", (5, 300, 256), (0, 256, 1)), True)
    assert "only K-major" in b_problem(info("b", (5, 300, 256), (300 * 256, 1, 300), "e4m3", 1), False)
    assert pack_plan(a, b, info("out", (700, 300), (1, 700)), True) == {"out": "it is not row-major"}
    assert pack_plan(a, b, info("out", (700, 300)), True) == {"out": "its rows start 600 B apart, not a multiple of 16 B"}
    # the control: a library nothing copies keeps its arrays (the binding refuses them with its rule)
    assert pack_plan(info("a", (700, 256), (1, 700), library="jax"), b, o, True) == {}


# ---- GPU --------------------------------------------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _grouped_ref(torch, a, b, offs):
    out, start = [], 0
    for g, end in enumerate(offs):
        out.append(a[start:end].double() @ b[g].double().T)
        start = end
    return torch.cat(out)


def _once(torch, fn, match):

    packing._WARNED.clear()
    with pytest.warns(UserWarning, match=match):
        r = fn()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        fn()
    torch.cuda.synchronize()
    return r


@pytest.mark.gpu
def test_float32_grouped_is_tf32(gpu):
    import ptxgen

    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(3)
    sizes, n, k = [64, 0, 200, 37], 96, 160
    a = torch.randn(sum(sizes), k, device="cuda", generator=gen)
    b = torch.randn(len(sizes), n, k, device="cuda", generator=gen)
    offs_list = [int(x) for x in torch.tensor(sizes).cumsum(0)]
    out = ptxgen.grouped_gemm(a, b, torch.tensor(offs_list, device="cuda", dtype=torch.int32), precision="tf32")
    torch.cuda.synchronize()
    assert out.dtype == torch.float32
    ref = _grouped_ref(torch, a, b, offs_list)
    torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2 * k ** 0.5)  # tf32: 10-bit mantissa products


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["m_major_a", "b_gaps", "unaligned_k", "n_major_f32_b"])
def test_packed_grouped_inputs(gpu, case):
    import ptxgen

    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(4)
    dt = torch.float32 if case == "n_major_f32_b" else torch.bfloat16
    sizes, n, k = [16, 48, 0, 64], 64, 250 if case == "unaligned_k" else 256
    m = sum(sizes)
    a = torch.randn(m, k, device="cuda", generator=gen).to(dt)
    b = torch.randn(len(sizes), n, k, device="cuda", generator=gen).to(dt)
    if case == "m_major_a":
        a = a.t().contiguous().t()
    elif case == "b_gaps":
        b = torch.randn(2 * len(sizes), n, k, device="cuda", generator=gen).to(dt)[::2]
    elif case == "n_major_f32_b":
        b = b.transpose(-2, -1).contiguous().transpose(-2, -1)
    offs_list = [int(x) for x in torch.tensor(sizes).cumsum(0)]
    offs = torch.tensor(offs_list, device="cuda", dtype=torch.int32)
    # float32 as tf32: the operands as they are (3xtf32 would split them into fresh K-major copies, nothing to pack)
    out = _once(torch, lambda: ptxgen.grouped_gemm(a, b, offs, precision="tf32"), "computing with a packed K-major copy")
    ref = _grouped_ref(torch, a, b, offs_list)
    tol = 2e-2 * k ** 0.5
    torch.testing.assert_close(out.double(), ref.to(out.dtype).double(), rtol=2e-2, atol=tol)


@pytest.mark.gpu
def test_batched_form_with_gaps(gpu):
    import ptxgen

    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(5)
    g, m, n, k = 4, 16, 32, 64
    a = torch.randn(2 * g, m, 2 * k, device="cuda", generator=gen, dtype=torch.bfloat16)[::2, :, :k]  # torch's strided case
    b = torch.randn(2 * g, n, 2 * k, device="cuda", generator=gen, dtype=torch.bfloat16)[::2, :, :k]
    out = torch.zeros(2 * g, m, n, device="cuda", dtype=torch.bfloat16)[::2]
    r = _once(torch, lambda: ptxgen.grouped_gemm(a, b, out=out), "contiguous")
    assert r is out
    ref = torch.bmm(a.double(), b.double().transpose(1, 2))
    torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2 * k ** 0.5)


@pytest.mark.gpu
@pytest.mark.parametrize("a_t, b_t", [("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_mixed_fp8_rowwise_grouped(gpu, a_t, b_t):
    import ptxgen

    torch = _torch()
    types = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    gen = torch.Generator(device="cuda").manual_seed(6)
    sizes, n, k = [32, 0, 96, 17], 128, 256
    m = sum(sizes)
    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(types[a_t])
    b = (torch.randn(len(sizes), n, k, device="cuda", generator=gen) * 0.5).to(types[b_t])
    sa = torch.rand(m, device="cuda", generator=gen) + 0.5
    sb = torch.rand(len(sizes), n, device="cuda", generator=gen) + 0.5
    offs_list = [int(x) for x in torch.tensor(sizes).cumsum(0)]
    out = ptxgen.scaled_grouped_gemm(a, b, sa, sb, torch.tensor(offs_list, device="cuda", dtype=torch.int32))
    torch.cuda.synchronize()
    ref, start = [], 0
    for gi, end in enumerate(offs_list):
        ref.append((a[start:end].double() @ b[gi].double().T) * sa[start:end, None].double() * sb[gi].double())
        start = end
    torch.testing.assert_close(out.double(), torch.cat(ref).to(torch.bfloat16).double(), rtol=1e-2, atol=5e-2)  # bf16 out


@pytest.mark.gpu
def test_blockfp8_with_torchs_padded_scale_b(gpu):
    """torch's test_scaled_mm_block_wise_numerics case that needs the padding: 384 x 128 x 1280 (10 K blocks, 12 rows)."""
    import ptxgen.api.fp8blocks as fb

    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(8)
    m, n, k = 384, 128, 1280
    kb, l4 = 10, 12
    a = (torch.randn(m, k, device="cuda", generator=gen)).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda", generator=gen)).to(torch.float8_e4m3fn)
    sa = (torch.rand(kb, m, device="cuda", generator=gen) + 0.5).t()  # outer-dim-major, strides (1, M)
    sb_rows = torch.rand(1, kb, device="cuda", generator=gen) + 0.5  # (N/128, K/128), as torch's test builds it
    sb = torch.nn.functional.pad(sb_rows, (0, l4 - kb)).t()  # (L4, N/128), strides (1, L4): torch's padded tensor
    assert sb.shape == (l4, 1) and sb.stride() == (1, l4)
    out = fb.gemm(a, b, sa, sb)
    torch.cuda.synchronize()
    af = a.double().view(m, kb, 128) * sa.double()[:, :, None]
    bf = b.double().view(n, kb, 128) * sb_rows.double()[0][None, :, None]
    ref = af.reshape(m, k) @ bf.reshape(n, k).T
    torch.testing.assert_close(out.double(), ref.to(torch.bfloat16).double(), rtol=7e-2, atol=6e-1)  # torch's bf16 tolerance
