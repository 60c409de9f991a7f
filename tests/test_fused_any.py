"""The fused door takes every tensor the plain door takes (``api.arrays.fusedany``).

CPU tier: which ``c`` / ``residual`` / ``bias`` layouts the epilogue reads as they are and which it copies first, with
the readable forms as controls. GPU tier: the fused call on what the kernels cannot read directly (rows aligned to 2,
4 or 8 bytes, transposed float32, baddbmm's 3-D batches, N = 1, odd row strides, strided bias), each against a float64
reference computed by torch.
"""

from __future__ import annotations

import pytest

import ptxgen
from ptxgen.api.arrays.binding import ArrayInfo
from ptxgen.api.arrays.fusedany import matrix_problem, vector_problem
from test_fused_hotpath import _rel


def info(shape, strides, ptr=0x10000, itemsize=2, library="torch"):
    return ArrayInfo("c", ptr, shape, strides, "bf16", itemsize, (2, 0), library, library)


def test_matrix_layouts_the_epilogue_reads_as_they_are():
    assert matrix_problem(info((300, 200), (200, 1)), 300, 200) is None
    assert matrix_problem(info((300, 200), (208, 1)), 300, 200) is None
    assert matrix_problem(info((1, 201), (201, 1)), 1, 201) is None  # one row: its stride is never used


@pytest.mark.parametrize("shape,strides,ptr,why", [
    ((300, 201), (201, 1), 0x10000, "its rows are 201 elements apart"),
    ((300, 1), (1, 1), 0x10000, "its rows are 1 elements apart"),  # N = 1: column pairs need an even stride
    ((300, 200), (1, 300), 0x10000, "it is not row-major"),
    ((300, 200), (200, 1), 0x10002, "its rows are 200 elements apart"),  # base not 4-byte aligned
])
def test_matrix_layouts_that_are_copied(shape, strides, ptr, why):
    assert matrix_problem(info(shape, strides, ptr), *shape).startswith(why)


def test_only_torch_and_cupy_arrays_are_copied():
    assert matrix_problem(info((300, 201), (201, 1), library="jax"), 300, 201) is None  # the checks then refuse it


def test_vectors():
    assert vector_problem(info((200,), (1,))) is None
    assert vector_problem(info((200,), (2,))) == "it is not contiguous"
    assert vector_problem(info((200,), (1,), ptr=0x10004)) == "it does not start 8-byte aligned"
    assert vector_problem(info((1,), (7,))) is None  # one element: its stride is never used


# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 10, 50, 68, 264])  # rows of 2, 20, 100, 136 bytes (bf16), and aligned
def test_gpu_fused_on_any_row_alignment(torch_cuda, k):
    torch = torch_cuda
    m, n = 200, 96
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    with _no_error():
        y = ptxgen.gemm(a, w, bias=bias, activation="gelu_tanh")
    ref = torch.nn.functional.gelu(a.double() @ w.double().t() + bias.double(), approximate="tanh")
    assert _rel(torch, y, ref) < 1e-2


class _no_error:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)
        return False


@pytest.mark.gpu
@pytest.mark.parametrize("precision,tol", [("tf32", 5e-3), ("3xtf32", 1e-5)])
def test_gpu_fused_transposed_float32(torch_cuda, precision, tol):
    """tf32 reads the transposed view through a packed K-major copy; 3xtf32 through its split (K-major copies)."""
    torch = torch_cuda
    m, n, k = 256, 192, 128
    at = torch.randn(k, m, device="cuda")  # a = at.t(): M-major float32, which the tensor cores read only K-major
    w = torch.randn(n, k, device="cuda")
    bias = torch.randn(n, device="cuda")
    with _no_error():
        y = ptxgen.gemm(at.t(), w, bias=bias, activation="relu", precision=precision)
    ref = torch.relu(at.double().t() @ w.double().t() + bias.double())
    assert _rel(torch, y, ref) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("shared_b", [False, True])
def test_gpu_fused_baddbmm(torch_cuda, shared_b):
    torch = torch_cuda
    batch, m, n, k = 3, 128, 64, 96
    a = torch.randn(batch, m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) if shared_b else torch.randn(batch, n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(batch, m, n, device="cuda", dtype=torch.bfloat16)
    y = ptxgen.gemm(a, b, c=c, alpha=0.5, beta=2.0)
    bt = b.double().t() if shared_b else b.double().transpose(1, 2)
    ref = torch.baddbmm(c.double(), a.double(), bt.expand(batch, k, n) if shared_b else bt, beta=2.0, alpha=0.5)
    assert y.shape == (batch, m, n) and _rel(torch, y, ref) < 1e-2


@pytest.mark.gpu
def test_gpu_fused_n1_odd_strides_and_strided_bias(torch_cuda):
    torch = torch_cuda
    m, k = 200, 64
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    c1 = torch.randn(m, 1, device="cuda", dtype=torch.bfloat16)
    out1 = torch.empty(m, 1, device="cuda", dtype=torch.bfloat16)
    with _no_error():
        y1 = ptxgen.gemm(a, w1, out1, c=c1, beta=1.0)
    assert y1 is out1 and _rel(torch, out1, a.double() @ w1.double().t() + c1.double()) < 1e-2
    n = 97  # odd: out, c and residual rows an odd number of elements apart
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    res = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(2 * n, device="cuda", dtype=torch.bfloat16)[::2]  # strided
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    with _no_error():
        y = ptxgen.gemm(a, w, out, bias=bias, activation="silu", residual=res)
    ref = torch.nn.functional.silu(a.double() @ w.double().t() + bias.double()) + res.double()
    assert y is out and _rel(torch, out, ref) < 1e-2


def test_c_of_another_float_type_is_converted_and_other_types_are_left_to_the_checks():
    from ptxgen.api.arrays.fusedany import type_problem

    c = info((300, 200), (200, 1))  # bf16
    assert type_problem(c, "bf16") is None
    assert type_problem(c, "f32") == "it is bf16 and the epilogue reads it as the output's type, f32"
    assert type_problem(info((300, 200), (200, 1), library="jax"), "f32") is None  # not ours to copy: the check refuses
    s8 = ArrayInfo("c", 0x10000, (300, 200), (200, 1), "s8", 1, (2, 0), "torch", "torch")
    assert type_problem(s8, "f32") is None  # not a float: the check says what is wrong


@pytest.mark.gpu
def test_gpu_addmm_with_a_bf16_c_into_f32(torch_cuda):
    """torch.addmm(c_bf16, a, b, out_dtype=float32): C read in the output's type (a converted copy)."""
    torch = torch_cuda
    m, n, k = 128, 96, 64
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    with _no_error():
        y = ptxgen.gemm(a, w, c=c, beta=1.0, out_dtype="f32")
    assert y.dtype == torch.float32
    assert _rel(torch, y, a.double() @ w.double().t() + c.double()) < 1e-5
