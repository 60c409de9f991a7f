"""ptxgen.api.fp8blocks.gemm reads torch's own BlockWise128x128 ``scale_b``: ceil(K/128) rows padded to a multiple of 4,
strides (1, L4), as torch's test_scaled_matmul_cuda.py (_pad_128x128_scales, test_scaled_mm_block_wise_numerics) and
cuBLAS allocate it. On a simulated H200 (no GPU): the padded array launches exactly what the unpadded view of its first
ceil(K/128) rows launches (same pointer, same row pitch), and a shape that is neither is refused (the control)."""

from __future__ import annotations

import pytest

import ptxgen.api.fp8blocks as fb
from ptxgen.runtime.launch.arrays import ArgumentError
from test_blockfp8 import CaiArray
from test_blockfp8_prepared import arrays, call, launches  # noqa: F401 (the fixture)

# K = 1280: 10 K blocks, padded to 12 rows (torch's "Requires padding for 128x128 scale" case, 384 x 128 x 1280)
M, N, K = 200, 10240, 1280
KB, NB, L4 = 10, 80, 12


def test_padded_rows_are_the_rule_torch_allocates():
    assert [fb.padded_scale_rows(kb) for kb in (1, 2, 4, 5, 10, 12)] == [4, 4, 4, 8, 12, 12]


def test_torch_padded_scale_b_launches_what_the_unpadded_view_does(launches):  # noqa: F811
    x = arrays(m=M, n=N, k=K)
    sb = x["sb"].__cuda_array_interface__
    assert sb["shape"] == (KB, NB) and sb["strides"] == (4, 4 * L4)  # the helper's view: torch's array without its pad
    call(x)
    unpadded = launches[-1]
    fb._BY_INFO.clear()
    x["sb"] = CaiArray((L4, NB), "float32", (1, L4), sb["data"][0])  # torch's own tensor: 12 rows, the last 2 zeros
    call(x)
    assert launches[-1] == unpadded


@pytest.mark.parametrize("rows", [KB + 1, L4 + 4])
def test_other_row_counts_are_refused(launches, rows):  # noqa: F811
    x = arrays(m=M, n=N, k=K)
    x["sb"] = CaiArray((rows, NB), "float32", (1, L4 + 4), x["sb"].__cuda_array_interface__["data"][0])
    with pytest.raises(ArgumentError, match=rf"scale_b has shape \({rows}, {NB}\); it must be \({KB}, {NB}\) or torch's "
                                            rf"padded \({L4}, {NB}\)"):
        call(x)
