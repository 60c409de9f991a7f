"""The shape of the referee's case table (tests/torch_cases.py), on CPU: every case cites file::Class::test of a file
whose commit is recorded, ids are unique, every expressible case has a runner and its test's tolerance, every other
case says why it is not expressible."""

from __future__ import annotations

import re
from collections import Counter

from test_torch_referee import RUNNERS
from torch_cases import CASES, COMMITS


def test_every_case_cites_its_test():
    for c in CASES:
        m = re.fullmatch(r"(test/test_\w+\.py)::(Test\w+)::(test_\w+)", c.source)
        assert m and m.group(1) in COMMITS, c.source
        assert re.fullmatch(r"[0-9a-f]{40}", COMMITS[m.group(1)])
        assert all(isinstance(k, str) for k, _ in c.params) and c.params


def test_ids_are_unique_and_every_case_is_runnable_or_says_why_not():
    ids = Counter(c.id for c in CASES)
    assert max(ids.values()) == 1
    for c in CASES:
        if c.expressible:
            assert c.kind in RUNNERS, c.kind
            assert (c.atol is None) == (c.kind == "blockwise_runs"), c.id  # the tests that compare give a tolerance
        else:
            assert c.why_not, c.id


def test_the_table_covers_the_named_tests():
    named = {"test_addmm_baddmm_dtype_overload", "test_mm_bmm_dtype_overload", "test_cublas_addmm",
             "test_cublas_addmm_alignment", "test_cublas_baddbmm_large_input", "test_grouped_gemm_2d_3d",
             "test_grouped_gemm_3d_3d", "test_scaled_grouped_gemm_2d_3d", "test_scaled_mm_block_wise_numerics"}
    assert named <= {c.source.rsplit("::", 1)[1] for c in CASES}
    # the parametrize products (test_addmm_baddmm_dtype_overload: 3 dtypes x 3^3 sizes x 3 batch sizes x 2 backends)
    per_test = Counter(c.source.rsplit("::", 1)[1] for c in CASES)
    assert per_test["test_addmm_baddmm_dtype_overload"] == 3 * 27 * 3 * 2
    assert per_test["test_cublas_addmm_alignment"] == 6 and per_test["test_grouped_gemm_2d_3d"] == 8
    # x_eye_b_eye only where M = N = K: 2 dtypes x 3 block pairs x (3 shapes x 5 cases + 1)
    assert per_test["test_scaled_mm_block_wise_numerics"] == 2 * 3 * (3 * 5 + 1)


def test_float32_cases_run_as_3xtf32():
    """The referee's float32 setting (torch's default, "highest") makes ptxgen's float32 doors compute 3xTF32, and
    api.plan says so for the float32 forms the referee calls (mm, addmm with c, baddbmm over expanded views); control:
    torch's "high" gives tf32."""
    import pytest

    torch = pytest.importorskip("torch")
    import ptxgen.api as api
    from test_torch_referee import float32_defaults

    before = torch.get_float32_matmul_precision()
    try:
        assert float32_defaults(torch) == "3xtf32"
        a, b = torch.empty(64, 33, device="meta"), torch.empty(33, 32, device="meta")
        c = torch.empty(64, 32, device="meta")
        for p in (api.plan("gemm", a, b.t(), device="h100"), api.plan("gemm", a, b.t(), c=c, beta=1.0, device="h100"),
                  api.plan("gemm", a.expand(2, 64, 33), b.t().expand(2, 32, 33), c=c.expand(2, 64, 32), beta=1.0,
                           device="h100")):
            assert p.path.value != "refused", p
            assert p.precision == "3xtf32" and "3xTF32" in p.why and p.spec.dtype.value == "tf32", p
        torch.set_float32_matmul_precision("high")
        p = api.plan("gemm", a, b.t(), device="h100")
        assert p.precision == "tf32" and "3xTF32" not in p.why
    finally:
        torch.set_float32_matmul_precision(before)
