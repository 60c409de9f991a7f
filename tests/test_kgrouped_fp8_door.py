"""The row-wise FP8 training forms through ptxgen.scaled_grouped_gemm: the K-grouped form (2-D a and b, offs along K;
--grouped offs_k_rowwise) and the N-grouped form (3-D a, 2-D b; the M-grouped row-wise kernel with the operands
swapped). No GPU: the binding, ptxgen.api.plan and the launch path on a simulated device. On a GPU (marked gpu): against
float64 at odd shapes (empty groups, a group of 1 K row, K per group not a multiple of 128) and CUDA-graph capture.
The kernel's own checks: tests/test_kgrouped_fp8.py."""

from __future__ import annotations

from dataclasses import replace

import pytest


# ---- the binding and api.plan (no GPU) ----------------------------------------------------------------------------------
def _meta(torch, *shape, dtype):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_decide_takes_torchs_2d_2d_layouts_and_refuses_others():
    torch = pytest.importorskip("torch")
    from ptxgen.kgrouped import decide
    from ptxgen.runtime.launch.arrays import DL_CUDA, ArgumentError, DTypeError, read_array

    f8, f32 = torch.float8_e4m3fn, torch.float32
    m, n, k, g = 16, 32, 256, 4

    def info(x, name):  # a meta tensor read as if it were on a GPU (what ptxgen.api.plan does with device=...)
        return replace(read_array(x, name), device=(DL_CUDA, 0))

    def run(a, b, sa, sb, offs=None, out=None, out_dtype=None):
        offs = _meta(torch, g, dtype=torch.int32) if offs is None else offs
        infos = [info(x, name) for x, name in ((a, "a"), (b, "b"), (offs, "offs"))]
        return decide(*infos, None if out is None else info(out, "out"), out_dtype, "sm_90a",
                      (info(sa, "scale_a"), info(sb, "scale_b")))

    a, b = _meta(torch, m, k, dtype=f8), _meta(torch, n, k, dtype=f8)
    sa, sb = _meta(torch, g * m, dtype=f32), _meta(torch, g * n, dtype=f32)
    spec, p, out_dtype = run(a, b, sa, sb)
    assert spec.grouped.value == "offs_k_rowwise" and out_dtype == "bf16"  # torch's default out for the scaled forms
    assert (p.m, p.n, p.k, p.groups, p.lda, p.ldb, p.ldd) == (m, n, k, g, k, k, n)
    strided = _meta(torch, m, k + 64, dtype=f8)[:, :k]  # torch's strided case: rows k + 64 apart
    assert run(strided, b, sa, sb)[1].lda == k + 64
    assert run(a, b, sa.view(g, m), sb.view(g, n), out_dtype="f32")[0].out_dtype.value == "f32"
    assert run(a, _meta(torch, n, k, dtype=torch.float8_e5m2), sa, sb)[0].b_dtype.value == "e5m2"
    with pytest.raises(ArgumentError, match="K-major only"):
        run(_meta(torch, k, m, dtype=f8).t(), b, sa, sb)  # an M-major a: no wgmma reads it
    with pytest.raises(ArgumentError, match="K-major only"):
        run(a, _meta(torch, k, n, dtype=f8).t(), sa, sb)
    with pytest.raises(ArgumentError, match="4 x 16 values"):
        run(a, b, _meta(torch, m, dtype=f32), sb)  # the M-grouped form's scale_a (one per row): not this form's
    with pytest.raises(ArgumentError, match="4 x 32 values"):
        run(a, b, sa, _meta(torch, n, dtype=f32))
    with pytest.raises(DTypeError):
        run(a, b, sa.half(), sb)
    with pytest.raises(DTypeError, match="FP8"):
        run(_meta(torch, m, k, dtype=torch.bfloat16), _meta(torch, n, k, dtype=torch.bfloat16), sa, sb)


def test_out_of_one_row_a_group_takes_the_group_stride_as_its_row_pitch():
    """M = 1 with G > 1: out[g] starts g M ldd = g ldd elements in, so ldd is out's group stride, not N (the H100 run of
    2026-12-07 found groups written 16 elements apart into an out whose groups were 24 apart); overlapping groups are
    refused."""
    from ptxgen.kgrouped import bind_kgrouped
    from ptxgen.runtime.launch.arrays import ArgumentError
    from test_blockfp8 import CaiArray

    def bind(out_strides, m=1, n=16, g=3):
        a = CaiArray((m, 512), "float8_e4m3fn", (512, 1), 0x100000)
        b = CaiArray((n, 512), "float8_e4m3fn", (512, 1), 0x200000)
        offs = _I32((g,), 0x300000)
        out = CaiArray((g, m, n), "bfloat16", out_strides, 0x400000)
        from ptxgen.runtime.launch.arrays import read_array
        return bind_kgrouped(*(read_array(x, name) for x, name in ((a, "a"), (b, "b"), (offs, "offs"), (out, "out"))),
                             rowwise=True)[2]

    assert bind((24, 24, 1)).ldd == 24
    assert bind((16, 16, 1)).ldd == 16
    assert bind((24, 24, 1), g=1).ldd == 16  # one group: the pitch is never used past its row
    assert bind((24 * 2, 24, 1), m=2).ldd == 24  # more rows: the row stride, as before
    with pytest.raises(ArgumentError, match="overlap"):
        bind((8, 8, 1))


class _I32:
    """A 1-D int32 device array at a made-up address (offs)."""

    def __init__(self, shape, ptr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<i4", "data": (ptr, False), "version": 3,
                                          "stream": None, "strides": None}

    def __dlpack_device__(self):
        return (2, 0)


def test_api_plan_answers_for_the_scaled_training_forms():
    torch = pytest.importorskip("torch")
    import ptxgen.api

    f8, f32, i32 = torch.float8_e4m3fn, torch.float32, torch.int32
    a, b = _meta(torch, 200, 1024, dtype=f8), _meta(torch, 136, 1024, dtype=f8)
    sa, sb, offs = _meta(torch, 8 * 200, dtype=f32), _meta(torch, 8 * 136, dtype=f32), _meta(torch, 8, dtype=i32)
    p = ptxgen.api.plan("scaled_grouped_gemm", a, b, sa, sb, offs, device="h100")
    assert p.path.value == "hot" and p.kernel.endswith("c2x1_groupedoffs_k_rowwise") and "2-D x 2-D" in p.why
    assert "128 x 256 in a 2x1 cluster multicasting B" in p.why  # M = 200: two tile rows
    one_row = ptxgen.api.plan("scaled_grouped_gemm", _meta(torch, 100, 1024, dtype=f8), b, _meta(torch, 800, dtype=f32), sb,
                              offs, device="h100")
    assert "c2x1" not in one_row.kernel and "without a cluster (M within one tile row)" in one_row.why
    p = ptxgen.api.plan("scaled_grouped_gemm", _meta(torch, 1024, 200, dtype=f8).t(), b, sa, sb, offs, device="h100")
    assert p.path.value == "refused" and p.error == "ArgumentError" and "K-major only" in p.why
    # the N-grouped form: a G x M x K, b N_total x K, scale_a G x M, scale_b N_total
    a3, b2 = _meta(torch, 4, 16, 64, dtype=f8), _meta(torch, 128, 64, dtype=f8)
    p = ptxgen.api.plan("scaled_grouped_gemm", a3, b2, _meta(torch, 4, 16, dtype=f32), _meta(torch, 128, dtype=f32),
                        _meta(torch, 4, dtype=i32), device="h100")
    assert p.path.value == "hot" and p.kernel.endswith("groupedoffs_rowwise") and "N-grouped" in p.why
    p = ptxgen.api.plan("scaled_grouped_gemm", a3, b2, _meta(torch, 16, dtype=f32), _meta(torch, 128, dtype=f32),
                        _meta(torch, 4, dtype=i32), device="h100")
    assert p.path.value == "refused" and p.error == "ArgumentError" and "scale_a" in p.why


def test_launch_path_with_a_simulated_device(monkeypatch):
    """Everything up to cuLaunchKernel, no GPU: the maps (A over M x K_total, B over N x K_total, K inner), the grid from
    G, M and N, the scales' pointers in ABI order after offs; the door of every layout reaches the same launch."""
    from test_grouped import CaiArray, _fake_encode, read_block, simulate_device

    import ptxgen.grouped as grouped
    import ptxgen.kgrouped as kgrouped
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.runtime.launch.gpu import Device

    fake = Device(0, "simulated H100", (9, 0), None, None, 132)
    launched, funcs = [], {}
    spec = kgrouped.kgrouped_spec("e4m3", None, "sm_90a", "k", "k", rowwise=True, variant=kgrouped.fp8_variant("bf16"))
    kinds = [q.kind for q in plan_kernel(spec).abi.params]

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            self.func = id(self)
            funcs[self.func] = (name, smem)

        def max_active_clusters(self, size, block):  # the 2x1 cluster's grid is capped at what fits at once
            return 5

    class FakeDriver:
        encode = staticmethod(_fake_encode)

        def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            launched.append(dict(grid=(gx, gy, gz), name=funcs[func][0], stream=stream, args=read_block(params, kinds)))
            return 0

    simulate_device(monkeypatch, fake, FakeKernel, FakeDriver(), kgrouped, ("_KERNELS", "_PREPARED"))
    m, n, k, g = 200, 136, 1024, 8
    a = CaiArray((m, k), "|u1", 1, 0x100000, dtype="float8_e4m3fn")
    b = CaiArray((n, k), "|u1", 1, 0x200000, dtype="float8_e4m3fn")
    offs = CaiArray((g,), "<i4", 4, 0x300000)
    out = CaiArray((g, m, n), "<f2", 2, 0x400000, dtype="bfloat16")
    sa = CaiArray((g * m,), "<f4", 4, 0x500000)
    sb = CaiArray((g * n,), "<f4", 4, 0x600000)
    assert grouped.scaled_grouped_gemm(a, b, sa, sb, offs, out, stream=0x77) is out
    call = launched[0]
    assert call["name"] == spec.kernel_name and call["stream"] == 0x77
    assert spec.cluster.value == "2x1" and call["grid"] == (2 * 5, 1, 1)  # G x ceil(2 / 2) x 1 = 8 items, 5 clusters fit
    args = call["args"]
    word = lambda x, i: int.from_bytes(x[8 * i:8 * i + 8], "little")  # noqa: E731
    assert (word(args[0], 0), word(args[0], 1), word(args[0], 2), word(args[0], 3)) == (0x100000, k, m, k)
    assert (word(args[1], 0), word(args[1], 1), word(args[1], 2), word(args[1], 3)) == (0x200000, k, n, k)
    # D's tensor map (the TMA store through the (N, M, G) map; a bf16 output: the 128 x 256 tile), then D, offs, the
    # scales and the problem
    assert spec.epilogue.value == "tma" and spec.bn == 256
    assert (word(args[2], 0), word(args[2], 1), word(args[2], 2), word(args[2], 3)) == (0x400000, n, m, g)
    assert args[3:] == [0x400000, 0x300000, 0x500000, 0x600000, m, n, k, g, n]
    from ptxgen.runtime.launch.arrays import ArgumentError

    with pytest.raises(ArgumentError, match="scale_a"):
        grouped.scaled_grouped_gemm(a, b, CaiArray((m,), "<f4", 4, 0x500000), sb, offs, out)


# ---- GPU: against float64 ---------------------------------------------------------------------------------------------
def _reference64(torch, a, b, sa, sb, offs_list):
    g, m, n = len(offs_list), a.shape[0], b.shape[0]
    out = torch.zeros(g, m, n, dtype=torch.float64, device=a.device)
    lo = 0
    for i, hi in enumerate(offs_list):
        if hi > lo:
            out[i] = a[:, lo:hi].double() @ b[:, lo:hi].double().t()
        out[i] *= sa.double().view(g, m)[i][:, None] * sb.double().view(g, n)[i][None, :]
        lo = max(lo, hi)
    return out


GPU_CASES = [  # (M, N, offs): K_total is offs[-1] + 16 rounded up to 16 (rows of K-major FP8 16-byte aligned)
    (128, 128, [128]),  # G = 1, one K-tile
    (200, 136, [0, 1, 1, 129, 260, 260, 500, 517]),  # empty groups, a group of 1 K row, tails not multiples of 128
    (72, 264, [17]),  # K < BK
    (16, 32, [64, 128, 192, 256]),  # PyTorch's test_scaled_grouped_gemm_2d_2d shape
    (136, 8, [0, 0, 0]),  # every group empty: zeros
    (1, 16, [5, 300, 301]),  # one row
    (256, 384, [1000, 1999, 2063, 4096]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
@pytest.mark.parametrize("b_type", ["e4m3", "e5m2"])
def test_scaled_kgrouped_against_float64(gpu, out_dtype, b_type):
    """Inputs of small integers (-3..3, exact in e4m3 and e5m2) and power-of-two scales: every partial sum is an integer
    below 2^13 (checked), which the tensor core's FP8 accumulation holds exactly, and the scales only shift exponents (it keeps fewer bits than
    IEEE f32, so random inputs over K in the thousands differ from float64 by accumulation alone: on the H100 the same
    error as torch._scaled_grouped_mm's, 2026-12-06). So an f32 output must equal the float64 product exactly and a bf16
    one its rounding; a K row of another group, a missed row or a wrong scale changes an integer."""
    import torch

    import ptxgen

    gen = torch.Generator(device="cuda").manual_seed(0)
    bt = torch.float8_e4m3fn if b_type == "e4m3" else torch.float8_e5m2

    def ints(rows, cols, dtype):
        return torch.randint(-3, 4, (rows, cols), device="cuda", generator=gen).to(torch.float32).to(dtype)

    def pow2(count):
        return torch.exp2(torch.randint(-2, 3, (count,), device="cuda", generator=gen).to(torch.float32))

    for m, n, offs_list in GPU_CASES:
        g = len(offs_list)
        k_total = -(-(offs_list[-1] + 16) // 16) * 16
        a, b = ints(m, k_total, torch.float8_e4m3fn), ints(n, k_total, bt)
        sa, sb = pow2(g * m), pow2(g * n)
        offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
        out = ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs, out_dtype=out_dtype)
        torch.cuda.synchronize()
        assert out.shape == (g, m, n) and out.dtype == (torch.bfloat16 if out_dtype == "bf16" else torch.float32)
        ref = _reference64(torch, a, b, sa, sb, offs_list)
        bound = max((float((a[:, lo:hi].float().abs() @ b[:, lo:hi].float().abs().t()).max()) if hi > lo else 0.0)
                    for lo, hi in zip([0] + offs_list[:-1], offs_list))
        assert bound < 2 ** 13  # every partial sum is an integer the accumulator holds exactly
        want = ref.to(torch.bfloat16).double() if out_dtype == "bf16" else ref
        assert torch.equal(out.double(), want), f"{m}x{n} offs {offs_list}: {int((out.double() != want).sum())} elements differ"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["tma", "tma-s6", "tma-n256", "tma-n256-s3", "direct-n256", "pp-tma", "pp-tma-s5", "tma-c2",
                                     "tma-n256-c2", "tma-n256-s3-c2", "pp-tma-c2"])
def test_scaled_kgrouped_variants_against_float64(gpu, variant):
    """Each row-wise FP8 variant (ptxgen.kgrouped.KGROUPED_FP8_VARIANTS) on the exact integer inputs above: f32 out equal
    to float64, bf16 its rounding; out with rows padded and NaN-filled keeps its padding (the TMA store clips at N)."""
    import torch

    from ptxgen.kgrouped import scaled_grouped_gemm_k_variant

    gen = torch.Generator(device="cuda").manual_seed(2)

    def ints(rows, cols):
        return torch.randint(-3, 4, (rows, cols), device="cuda", generator=gen).to(torch.float32).to(torch.float8_e4m3fn)

    for out_dtype, tdt in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        for m, n, offs_list in GPU_CASES:
            g = len(offs_list)
            k_total = -(-(offs_list[-1] + 16) // 16) * 16
            a, b = ints(m, k_total), ints(n, k_total)
            sa = torch.exp2(torch.randint(-2, 3, (g * m,), device="cuda", generator=gen).float())
            sb = torch.exp2(torch.randint(-2, 3, (g * n,), device="cuda", generator=gen).float())
            offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
            per = 16 // tdt.itemsize
            full = torch.full((g, m, -(-n // per) * per + per), float("nan"), dtype=tdt, device="cuda")
            out = full[:, :, :n]
            assert scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, out, variant=variant) is out
            torch.cuda.synchronize()
            ref = _reference64(torch, a, b, sa, sb, offs_list)
            want = ref.to(torch.bfloat16).double() if out_dtype == "bf16" else ref
            assert torch.equal(out.double(), want), f"{variant} {out_dtype} {m}x{n} offs {offs_list}"
            assert torch.isnan(full[:, :, n:]).all(), f"{variant}: the padding past N was written"


@pytest.mark.gpu
def test_scaled_kgrouped_strided_a_and_graph_capture(gpu):
    """torch's strided 2-D x 2-D case (rows of a and b K_total + 64 apart) and a CUDA graph replayed with new offs."""
    import torch

    import ptxgen

    m, n, k_total, g = 256, 128, 704, 3
    a = torch.randn(m, k_total + 64, device="cuda").to(torch.float8_e4m3fn)[:, :k_total]
    b = torch.randn(n, k_total + 64, device="cuda").to(torch.float8_e4m3fn)[:, :k_total]
    sa, sb = torch.rand(g * m, device="cuda"), torch.rand(g * n, device="cuda")
    offs = torch.tensor([100, 100, 700], dtype=torch.int32, device="cuda")
    out = torch.empty(g, m, n, dtype=torch.bfloat16, device="cuda")
    ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs, out)  # prepares the launch outside the capture
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), _reference64(torch, a, b, sa, sb, [100, 100, 700]), rtol=2e-2, atol=5e-2)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs, out)
    offs.copy_(torch.tensor([1, 400, 650], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), _reference64(torch, a, b, sa, sb, [1, 400, 650]), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("offs_list", [[32, 64, 96, 128], [0, 40, 40, 200]], ids=["even", "empty-groups"])
def test_scaled_ngrouped_against_float64(gpu, offs_list):
    """3-D a (G x M x K) with 2-D b (N_total x K): out[:, cols of g] = (a[g] @ b[cols of g].T) x scale_a[g] (rows) x
    scale_b[cols of g] (torch._scaled_grouped_mm 3-D x 2-D)."""
    import torch

    import ptxgen

    g, m, k = len(offs_list), 16, 96
    n_total = offs_list[-1]
    a = torch.randn(g, m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n_total, k, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(g, m, device="cuda") + 0.5
    sb = torch.rand(n_total, device="cuda") + 0.5
    offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
    out = ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs)
    torch.cuda.synchronize()
    assert out.shape == (m, n_total)
    lo = 0
    for i, hi in enumerate(offs_list):
        if hi > lo:
            ref = (a[i].double() @ b[lo:hi].double().t()) * sa[i].double()[:, None] * sb[lo:hi].double()[None, :]
            torch.testing.assert_close(out[:, lo:hi].double(), ref, rtol=2e-2, atol=5e-2)
        lo = hi


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_clean_on_the_fp8_kgrouped_flagship(gpu, tool, artifact_dir):
    """The K tail's zeroing is generic-proxy shared stores between TMA's writes and wgmma's reads: memcheck (global
    reads and writes inside the arrays), racecheck (the zeroing against the other consumers' reads, across the named
    barrier) and synccheck (the named barrier's thread count)."""
    from sanitize import check_case

    check_case("kgrouped_fp8_sanitizer_case.py", tool, artifact_dir, "kgrouped_fp8_sanitizer.log")
