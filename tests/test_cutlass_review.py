"""The problems a review of the sm_100a kernels against CUTLASS found (issue 19), each with the check that
catches it. L1 (models) and L2 (compiler output); none of this has run on a Blackwell GPU."""

from __future__ import annotations

import pytest

from ptxgen.derive.kernel import plan_kernel
from ptxgen.derive.spec import make_spec
from ptxgen.model.check_pipeline import config_of


# ---- fix 4: TMEM for one accumulator where a CTA computes one tile ------------------------------------------
def test_one_tile_per_cta_allocates_one_accumulator():
    """Schedule 'tile': a CTA accumulates one tile, so a second TMEM accumulator is never used; allocating 256
    columns for BN = 128 would let only 2 CTAs (of 512 columns) share an SM and the rest spin in tcgen05.alloc."""
    tile = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    assert tile.accumulator_stages == 1 and tile.tmem_alloc_columns == 128
    assert plan_kernel(tile).pipeline.acc_stages == 1
    persistent = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", schedule="persistent")
    assert persistent.accumulator_stages == 2 and persistent.tmem_alloc_columns == 256
    # block-scaled: the scale factors come after the one accumulator
    mx = make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0")
    assert mx.accumulator_stages == 1 and mx.tmem_alloc_columns == 256  # 128 + 2 stages x 8 SF columns -> 256


# ---- fix 5: one tcgen05.wait::ld per group of TMEM loads, the loaded registers tied to it -------------------
def _ptx_counts(spec):
    from ptxgen.runtime.artifacts import generate

    art = generate(spec, sass=False)
    ptx = art.compiled.ptx
    return ptx.count("tcgen05.ld.sync.aligned"), ptx.count("tcgen05.wait::ld"), art.files["kernel.cu"]


@pytest.mark.parametrize("kw", [
    dict(bm=128, bn=128, bk=32, a="kmajor-sw64"),  # the seed: direct epilogue, 4 loads of 32 columns a warp
    dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=3,
         schedule="persistent", epilogue="tma"),  # TMA-store chunks of 64 columns, and the direct path beside it
])
def test_tmem_loads_wait_once_per_group(kw):
    """Waiting after every 32-column load serializes the TMEM reads; CUTLASS issues a subtile's loads, then one
    tcgen05.wait::ld (fence_view_async_tmem_load). Here a group is 64 columns: 2 loads of 32 per wait."""
    import re

    n_ld, n_wait, cu = _ptx_counts(make_spec(**kw))
    assert n_ld >= 4 and n_wait * 2 == n_ld, (n_ld, n_wait)
    # the wait names every register its group loaded ("+r"), so no use of them can be scheduled before it
    waits = re.findall(r'asm volatile\("tcgen05\.wait::ld\.sync\.aligned;"\s*:([^;]*);', cu)
    assert waits and all(w.count('"+r"') == 64 for w in waits), waits
