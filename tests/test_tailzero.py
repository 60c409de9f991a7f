"""ptxgen.ops.tailzero: the kernel (written with ptxgen.author) that zeroes the rows of a grouped product's output past
its last group, for the expert bank's dx. L2 (no GPU): each output type's kernel compiles for sm_90a with no MMA and no
local memory. gpu: on an output filled with NaN, exactly the rows at or past offs[-1] become 0 (the groups' rows keep
their NaN: nothing but the tail is written), for clamped, strided and f32 outputs; where every row belongs to a group
nothing changes (the control: a kernel that wrote from offs[0] would fail the first case)."""

from __future__ import annotations

import pytest

from ptxgen.ops import tailzero


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_the_kernel_compiles_without_mma_or_local_memory(dtype):
    from ptxgen.author import build

    built = build(tailzero.kernel_for(dtype))
    assert built.sass.ok and built.sass.counts == {"HGMMA": 0} and built.sass.local_bytes == 0, built.sass.problems
    assert ("float* __restrict__ out" if dtype == "f32" else "unsigned short* __restrict__ out") in built.source


def test_an_output_type_without_a_kernel_is_refused():
    with pytest.raises(ValueError, match="bf16, f16 or f32"):
        tailzero.kernel_for("e4m3")


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("offs,m,cols,ld", [([3, 3, 9], 20, 7, 7), ([5], 5, 64, 64), ([2, 40], 12, 33, 48),
                                            ([-4], 6, 8, 8), ([0, 1000, 2000], 3000, 136, 136), ([1], 4, 600, 640)])
def test_exactly_the_rows_past_the_last_group_become_zero(torch, dtype, offs, m, cols, ld):
    """offs[-1] = 9 of 20 rows; 5 of 5 (no tail: nothing written); 40 clamped to 12 (no tail); -4 clamped to 0 (every row);
    a 3000 x 136 output with a 1000-row tail (more rows than the grid has CTAs: the row loop); rows of 600 columns, 640
    apart (more columns than a CTA has threads: the column loop)."""
    dt = getattr(torch, dtype)
    store = torch.full((m, ld), float("nan"), device="cuda", dtype=dt)
    out = store[:, :cols]
    tailzero.zero_tail(torch, out, torch.tensor(offs, device="cuda", dtype=torch.int32))
    torch.cuda.synchronize()
    end = min(max(offs[-1], 0), m)
    assert store[:end].isnan().all(), "a row of a group was written"
    assert not out[end:].any() and not out[end:].isnan().any(), "a row past the last group is not zero"
    assert store[:, cols:].isnan().all(), "a column past the output's width was written"


@pytest.mark.gpu
def test_the_expert_banks_dx_has_zero_rows_past_the_last_group_on_a_dirty_allocator(torch):
    """Through the operator: the allocator's blocks are filled with NaN first (so an unwritten row cannot read as 0 by
    luck), then dx of a bank with 3 rows past offs[-1]: those rows 0, the groups' rows finite."""
    import ptxgen

    ptxgen.register_torch_ops()
    for _ in range(4):
        torch.full((64, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor([10, 10, 29], device="cuda", dtype=torch.int32)
    dy = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3, 256, 64, device="cuda", dtype=torch.bfloat16)
    dx = torch.ops.ptxgen.grouped_gemm(dy, w.transpose(1, 2), offs, None, True)
    assert dx.shape == (32, 64) and not dx[29:].any() and dx[:29].isfinite().all()
