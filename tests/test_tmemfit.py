"""Issue 37, F3: a CTA pair whose CTAs allocate all 512 TMEM columns asks for enough shared memory that one CTA fits on
an SM (derive.roles.tmemfit, printed by explain); other kernels keep their plan's shared memory. L1 arithmetic on the CPU."""

from __future__ import annotations

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.sweep import load_grid

SMEM_PER_SM, RESERVED_PER_BLOCK, THREADS_PER_SM = 233472, 1024, 2048  # CUDA guide, compute capability 10.0


def _fit_by_hand(smem: int, threads: int) -> int:
    """Written out here, not through ptxgen.derive.roles.tmemfit: 128-byte granules plus the 1 KB reserved per block."""
    return min(SMEM_PER_SM // ((smem + 127) // 128 * 128 + RESERVED_PER_BLOCK), THREADS_PER_SM // threads)


NVFP4_PAIR = dict(bm=256, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", cta_group=2, stages=2)
SM100_SPECS = [t for t in list(load_grid("ci").specs) if t.arch.value == "sm_100a"]


def test_the_issue_cases_ask_for_one_cta_per_sm():
    """Block-scaled 256 x 256 and 256 x 192 at 2 stages allocate 512 columns; their plans alone would fit 2 and 3."""
    for bn, before in ((256, 2), (192, 3)):
        t = make_spec(**dict(NVFP4_PAIR, bn=bn))
        p = plan_kernel(t)
        assert t.tmem_alloc_columns == 512
        assert _fit_by_hand(p.layout.smem.dynamic_bytes, p.pipeline.threads) == before
        assert _fit_by_hand(p.abi.dynamic_smem_bytes, p.pipeline.threads) == 1
        assert p.tmem.one_cta_per_sm and p.tmem.ctas_per_sm == 1 and p.tmem.columns_per_sm == 512
        # the least such request: 128 bytes less and two would fit
        assert _fit_by_hand(p.abi.dynamic_smem_bytes - 128, p.pipeline.threads) == 2


def test_every_ci_pair_with_512_columns_fits_once_and_nothing_else_moves():
    raised, kept = 0, 0
    for t in SM100_SPECS:
        p = plan_kernel(t)
        plan_bytes = p.layout.smem.dynamic_bytes
        if t.pair and t.tmem_alloc_columns == 512:
            assert _fit_by_hand(p.abi.dynamic_smem_bytes, p.pipeline.threads) == 1, t.kernel_name
            raised += p.abi.dynamic_smem_bytes != plan_bytes
            kept += p.abi.dynamic_smem_bytes == plan_bytes  # already past half an SM's shared memory
        else:
            assert p.abi.dynamic_smem_bytes == plan_bytes and not p.tmem.one_cta_per_sm, t.kernel_name
        assert p.abi.dynamic_smem_bytes <= 232448  # never past what a block may opt into
    # the grid holds both: block-scaled fp4 pairs at 2 stages (raised) and pairs whose stages already fill more than half
    # an SM (kept: e4m3 block-scaled, dense persistent BN = 256 at 4 stages)
    assert raised >= 4 and kept >= 4


def test_control_a_single_cta_kernel_with_512_columns_keeps_its_shared_memory():
    t = make_spec(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=2)
    p = plan_kernel(t)
    assert t.tmem_alloc_columns == 512 and not t.pair
    assert p.abi.dynamic_smem_bytes == p.layout.smem.dynamic_bytes and not p.tmem.one_cta_per_sm


def test_control_the_derivation_is_what_the_check_sees():
    """Without the raise (the plan's bytes) the by-hand count says 2: the check above can fail."""
    p = plan_kernel(make_spec(**NVFP4_PAIR))
    assert _fit_by_hand(p.tmem.plan_smem_bytes, p.pipeline.threads) == 2 != p.tmem.ctas_per_sm


@pytest.mark.parametrize("kw,raised", [(NVFP4_PAIR, True), (dict(NVFP4_PAIR, bm=128, cta_group=1), False)])
def test_explain_says_which_way_out(capsys, kw, raised):
    from ptxgen.cli import main

    t = make_spec(**kw)
    assert main(["explain", *t.cli_args().split()]) == 0
    out = capsys.readouterr().out
    assert "tmem_occupancy" in out
    assert ("one_cta_per_sm" in out and "DeepGEMM" in out and "not CUTLASS's permit" in out) is raised
    p = plan_kernel(t)
    assert f"shared memory: {p.abi.dynamic_smem_bytes} B" in out
