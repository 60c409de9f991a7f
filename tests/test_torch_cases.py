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
