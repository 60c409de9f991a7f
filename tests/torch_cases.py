"""PyTorch's own GEMM test cases, as data: the referee (tests/test_torch_referee.py) runs each through ptxgen's equivalent.

Extracted by hand from pytorch/pytorch's sources as stored for this project (the parametrize lists, shapes, dtypes,
layouts and tolerances; no code is copied):

- ``test/test_matmul_cuda.py`` at commit 0040fe0d0ed6a2400c7aa65a5fdf352b81c88b1e (class TestMatmulCuda);
- ``test/test_scaled_matmul_cuda.py`` at commit 00166b21d1129b5cdfac0408018c25eb9659d288 (class TestFP8Matmul; the
  row-wise ``scaled_grouped_mm_helper`` tolerance is the same in every stored version).

These are the stored versions, not checked against torch 2.11's own tag: where 2.11 differs, the table is what these
commits say. Each case cites ``file::Class::test`` and its parameters; ``expressible`` False carries the reason (the
training forms and recipes ptxgen has no door for), so the referee's summary can say "not expressible" with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

MATMUL = "test/test_matmul_cuda.py::TestMatmulCuda"
SCALED = "test/test_scaled_matmul_cuda.py::TestFP8Matmul"
COMMITS = {"test/test_matmul_cuda.py": "0040fe0d0ed6a2400c7aa65a5fdf352b81c88b1e",
           "test/test_scaled_matmul_cuda.py": "00166b21d1129b5cdfac0408018c25eb9659d288"}

# torch.testing's default tolerances (assertEqual / assert_close without atol/rtol), by dtype
DEFAULT_TOL = {"float16": (1e-5, 1e-3), "bfloat16": (1e-5, 1.6e-2), "float32": (1e-5, 1.3e-6)}


@dataclass(frozen=True)
class Case:
    source: str  # file::Class::test
    kind: str  # the referee's runner: addmm, mm, linear_alignment, baddbmm_large, grouped_2d_3d, grouped_3d_3d,
    #            scaled_grouped_2d_3d, scaled_grouped_3d_3d, scaled_grouped_2d_2d, scaled_grouped_3d_2d, blockwise, or the
    #            kind of a case that is not expressible
    params: tuple  # ((name, value), ...) as the test's parametrize gives them
    atol: float | None = None
    rtol: float | None = None
    expressible: bool = True
    why_not: str = ""
    extra: tuple = field(default=())  # further checks the test makes ((name, value), ...), e.g. cosine similarity

    @property
    def id(self) -> str:
        return self.source.rsplit("::", 1)[1] + "[" + ",".join(f"{k}={v}" for k, v in self.params) + "]"

    def p(self, name: str):
        return dict(self.params)[name]


def _cases_matmul() -> list[Case]:
    out = []
    dims = (1, 32, 64)
    for dtype, m, n, k, batch, backend in product(("float32", "float16", "bfloat16"), dims, dims, dims, (None, 1, 16),
                                                  ("cublas", "cublaslt")):
        out.append(Case(f"{MATMUL}::test_mm_bmm_dtype_overload", "mm",
                        (("input_dtype", dtype), ("M", m), ("N", n), ("K", k), ("batch_size", batch), ("backend", backend)),
                        1e-3, 1e-3))
    for dtype, m, n, k, batch, backend in product(("float32", "float16", "bfloat16"), dims, dims, dims, (None, 1, 32),
                                                  ("cublas", "cublaslt")):
        out.append(Case(f"{MATMUL}::test_addmm_baddmm_dtype_overload", "addmm",
                        (("input_dtype", dtype), ("M", m), ("N", n), ("K", k), ("batch_size", batch), ("backend", backend)),
                        1e-3, 1e-3))
    for dtype, size in product(("float16", "bfloat16", "float32"), (100, 1000, 10000)):
        out.append(Case(f"{MATMUL}::test_cublas_addmm", "cublas_addmm", (("dtype", dtype), ("size", size)), 1e-1, 1e-1))
    for idx, offset in product(range(3), range(1, 3)):
        out.append(Case(f"{MATMUL}::test_cublas_addmm_alignment", "linear_alignment",
                        (("dtype", "float16"), ("perturbed", "XAB"[idx]), ("offset", offset)), 1e-3, 2e-3))
    for dtype, (bs, n, m, p) in product(("float32", "float16", "bfloat16"),
                                        ((2, 100, 100, 100), (2, 1000, 1000, 1000), (1, 10000, 1000, 10000),
                                         (1, 10000, 10000, 10000))):
        atol, rtol = (1e-5, 1.1e-5) if dtype == "float32" else DEFAULT_TOL[dtype]
        out.append(Case(f"{MATMUL}::test_cublas_baddbmm_large_input", "baddbmm_large",
                        (("dtype", dtype), ("batch_size", bs), ("N", n), ("M", m), ("P", p)), atol, rtol))
    for strided, a_rm, b_rm in product((False, True), repeat=3):
        params = (("strided", strided), ("a_row_major", a_rm), ("b_row_major", b_rm))
        atol, rtol = DEFAULT_TOL["bfloat16"]
        out.append(Case(f"{MATMUL}::test_grouped_gemm_2d_3d", "grouped_2d_3d", params, atol, rtol,
                        extra=(("backward", "not run: gradients are the training forms"),)))
        out.append(Case(f"{MATMUL}::test_grouped_gemm_3d_3d", "grouped_3d_3d", params, atol, rtol,
                        extra=(("backward", "not run: gradients are the training forms"),)))
        out.append(Case(f"{MATMUL}::test_grouped_gemm_2d_2d", "grouped_2d_2d", params, atol, rtol,
                        extra=(("backward", "not run: gradients are the training forms"),)))
        out.append(Case(f"{MATMUL}::test_grouped_gemm_3d_2d", "grouped_3d_2d", params, atol, rtol,
                        extra=(("backward", "not run: gradients are the training forms"),
                               ("check_zero_size", "both, in the test's own loop: offs[0] = offs[1], then not"))))
    return out


def _cases_scaled() -> list[Case]:
    out = []
    rowwise_tol = (5e-2, 5e-4)  # scaled_grouped_mm_helper: assertEqual(out, out_ref, atol=5e-2, rtol=5e-4)
    for fast, strided, wrap, zero in product((False, True), (False, True), (True, False), (True, False)):
        out.append(Case(f"{SCALED}::test_scaled_grouped_gemm_2d_3d", "scaled_grouped_2d_3d",
                        (("fast_accum", fast), ("strided", strided), ("wrap_v2", wrap), ("check_zero_size", zero)),
                        *rowwise_tol))
    for fast, strided in product((False, True), (False, True)):
        params = (("fast_accum", fast), ("strided", strided))
        out.append(Case(f"{SCALED}::test_scaled_grouped_gemm_3d_3d", "scaled_grouped_3d_3d", params, *rowwise_tol))
        out.append(Case(f"{SCALED}::test_scaled_grouped_gemm_3d_2d", "scaled_grouped_3d_2d", params, *rowwise_tol,
                        extra=(("check_zero_size", "both, in the test's own loop: offs[0] = offs[1], then not"),)))
        for wrap in (True, False):
            out.append(Case(f"{SCALED}::test_scaled_grouped_gemm_2d_2d", "scaled_grouped_2d_2d",
                            params + (("wrap_v2", wrap),), *rowwise_tol))
    blocks = ((1, 1), (128, 1), (1, 128))
    for out_dt, (lb, rb), mnk, case in product(("bfloat16", "float32"), blocks, ((256, 768, 512), (384, 128, 1280), (512, 512, 512)),
                                               ("x_eye_b_eye", "x_ones_y_ones_calc_scales", "x_ones_y_ones_set_scales",
                                                "x_ones_y_ones_modify_scales", "data_random_scales_one",
                                                "data_random_calc_scales")):
        if case == "x_eye_b_eye" and len(set(mnk)) > 1:
            continue  # the test returns unittest.skip for it: only defined for M = N = K
        atol, rtol = (6e-1, 7e-2) if out_dt == "bfloat16" else (7e-1, 2e-3)
        params = (("output_dtype", out_dt), ("lhs_block", lb), ("rhs_block", rb), ("M", mnk[0]), ("N", mnk[1]),
                  ("K", mnk[2]), ("test_case", case))
        # every pair is a recipe of ptxgen.api.fp8blocks: 1x128 x 128x128 (DeepSeek's 1D2D), 1x128 x 1x128 (1D1D) and
        # 128x128 x 1x128 (the 1D2D kernel on (b, a), D written M-major)
        out.append(Case(f"{SCALED}::test_scaled_mm_block_wise_numerics", "blockwise", params, atol, rtol,
                        extra=(("cosine_similarity_min", 0.999),)))
    for out_dt, (lb, rb), mnk in product(("bfloat16", "float32"), blocks, ((256, 128, 256), (256, 256, 128))):
        out.append(Case(f"{SCALED}::test_scaled_mm_vs_emulated_block_wise_verify_small_shapes", "blockwise_runs",
                        (("output_dtype", out_dt), ("lhs_block", lb), ("rhs_block", rb), ("M", mnk[0]), ("N", mnk[1]),
                         ("K", mnk[2]))))
    return out

CASES: tuple[Case, ...] = tuple(_cases_matmul() + _cases_scaled())
