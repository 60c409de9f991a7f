"""The split-k rule for few tiles and a long K at any weight (``rules.TINY_SPLIT_*``, ``narrow.tiny_splits``): GEMV-like
calls whose narrow tiles leave most SMs idle (5 x 2 x 6816: one CTA walked all 107 K-tiles of 64).

CPU tier: where it fires (small M, small N, both tiny; bf16, f16, e4m3) with the splits worked out by hand from the
thresholds (K-tiles = ceil(K / BK), the most splits S <= TINY_SPLIT_MAX (8) with CTAs x S <= 132 and K-tiles // S >= 8);
where it must not (short K, many tiles, the heavy-weight split-k rule's shapes, the swap and wide rules): the pick
equals the pick with the rule off; its boundaries (33 tiles split, 34 not; 16 K-tiles split, 15 not); the control
(the switch off gives back the small-m / small-n / nearest-fit pick); and ``ptxgen.gemm`` on a simulated device runs
the new pick in one launch, grid z = the splits, the stream's workspace (sized for the partial tiles, counters zeroed
once) as W. L2: the picks' kernels pass the split-K kernel's NVRTC + SASS checks (tests/test_splitk.py's).

GPU tier (``gpu``): ``ptxgen.gemm`` at five picks against float64, three calls bit-identical.
"""

from __future__ import annotations

import dataclasses

import pytest

from ptxgen.runtime.choose import choose
from ptxgen.runtime.choose import rules
from ptxgen.runtime.choose.narrow import tiny_splits, tiny_tile

SMS = 132


def pick(dtype, m, n, k, **kw):
    return choose(dtype, "sm_90a", m, n, k, **kw)


def off(monkeypatch, dtype, m, n, k, **kw):
    monkeypatch.setattr(rules, "TINY_SPLIT_RULE", False)
    try:
        return pick(dtype, m, n, k, **kw)
    finally:
        monkeypatch.undo()


# (dtype, M, N, K, side, (BM, BN), CTAs, splits): the splits by hand. bf16 BK = 64, e4m3 BK = 128; 64 x 64 tiles
FIRES = [
    ("bf16", 5, 2, 6816, "M", (64, 64), 1, 8),  # 107 K-tiles: the cap (107 // 8 = 13 K-tiles a split)
    ("bf16", 1, 1, 8192, "M", (64, 64), 1, 8),  # 128 K-tiles: 8 splits of 16
    ("bf16", 16, 64, 16384, "M", (64, 64), 1, 8),  # 256 K-tiles: the cap
    ("bf16", 64, 2, 4096, "M", (64, 64), 1, 8),  # 64 K-tiles: 8 of 8
    ("bf16", 100, 12, 7832, "M", (64, 64), 2, 8),  # both small, M decides; 123 K-tiles
    ("bf16", 128, 1, 12288, "M", (64, 64), 2, 8),  # 2 tile rows
    ("bf16", 32, 128, 8192, "M", (64, 64), 2, 8),
    ("bf16", 1, 1024, 8192, "M", (64, 64), 16, 8),  # 16 tiles: 8 splits fill 128 CTAs
    ("bf16", 1, 1088, 8192, "M", (64, 64), 17, 7),  # 17 tiles (<= 132 / 4): 7 splits keep one wave (119 CTAs)
    ("bf16", 200, 2, 8192, "N", (64, 64), 4, 8),  # small N: 4 tiles of 64 rows (the most CTAs)
    ("bf16", 256, 16, 8192, "N", (64, 64), 4, 8),
    ("f16", 5, 2, 6816, "M", (64, 64), 1, 8),  # bf16's tuning lent to f16: the same rule
    ("e4m3", 5, 2, 6816, "M", (64, 64), 1, 6),  # 54 K-tiles of 128: 54 // 6 = 9, // 7 = 7
    ("e4m3", 16, 64, 16384, "M", (64, 64), 1, 8),  # 128 K-tiles of 128
    ("e4m3", 200, 2, 8192, "N", (64, 64), 4, 8),  # 64 K-tiles of 128
]


@pytest.mark.parametrize("dtype,m,n,k,side,tile,ctas,splits", FIRES)
def test_the_rule_splits_few_tiles_against_a_long_k(dtype, m, n, k, side, tile, ctas, splits):
    c = pick(dtype, m, n, k)
    bk = 128 if dtype == "e4m3" else 64
    assert c.chosen_by == "split-k" and not c.swap_ab
    assert (c.spec.bm, c.spec.bn, c.spec.bk, c.spec.split_k) == (*tile, bk, splits)
    assert c.spec.schedule.value == "tile" and c.spec.epilogue.value == "direct" and c.spec.cluster.value == "1x1"
    assert c.spec.dtype.value == dtype
    assert -(-m // tile[0]) * -(-n // tile[1]) == ctas and ctas * splits <= SMS  # one wave
    assert -(-k // bk) // splits >= rules.SPLIT_MIN_K_TILES  # every split keeps its K-tiles
    assert c.why.startswith(f"{side} = {m if side == 'M' else n} <= 128: {tile[0]} x {tile[1]} tiles")
    assert f"K split {splits} ways: {ctas * splits} CTAs" in c.why and "few tiles, long K" in c.why
    assert "measured on the H100" in c.why


@pytest.mark.parametrize("dtype,m,n,k,side,tile,ctas,splits", FIRES)
def test_control_the_switch_off_gives_the_earlier_pick(monkeypatch, dtype, m, n, k, side, tile, ctas, splits):
    before = off(monkeypatch, dtype, m, n, k)
    assert before.spec.split_k == 1
    if dtype == "e4m3" and side == "N":  # e4m3's small-n kernel (256 x 128 up to 64 columns), whole
        assert before.chosen_by == "small-n" and (before.spec.bm, before.spec.bn) == (256, 128) and n <= 64
    elif dtype == "e4m3":  # no narrow rule for e4m3 at small M below FP8_SMALL_M_MIN_WEIGHT: the table's tile
        # (its one partial round split along K over the idle SMs since 2026-12-07: nearest-fit+stream-k)
        assert before.chosen_by.startswith("nearest-fit") and (before.spec.bm, before.spec.bn) == (128, 256)
    else:  # the same narrow tile, whole
        assert before.chosen_by == ("small-m" if side == "M" else "small-n")
        assert (before.spec.bm, before.spec.bn) == tile and "K split" not in before.why
        assert pick(dtype, m, n, k).spec == dataclasses.replace(before.spec, split_k=splits)  # only the split differs


# shapes the rule must leave as they were: short K, many tiles, the heavy-weight split, swap-ab, the wide kernels,
# the cost model, the tuned table
UNCHANGED = [
    ("bf16", 5, 2, 256, "small-m"),  # 4 K-tiles
    ("bf16", 5, 2, 960, "small-m"),  # 15 K-tiles: no two splits of 8
    ("bf16", 128, 4096, 4096, "split-k"),  # 64 CTAs: the heavy-weight rule's 2 splits
    ("bf16", 1, 4096, 4096, "swap-ab"),
    ("bf16", 16, 4000, 8192, "swap-ab"),
    ("bf16", 4000, 16, 8192, "small-n"),  # 63 CTAs
    ("bf16", 1, 3500, 4096, "small-m"),  # 55 tiles of 64 x 64 > 132 / 4
    ("bf16", 16, 4096, 512, "small-m"),
    ("bf16", 128, 16384, 4096, "small-m"),  # the wide 128 x 128 kernel
    ("bf16", 12453, 120, 14800, "small-n"),  # the B-multicast kernel
    ("bf16", 300, 300, 8192, None),  # both past 128: not a narrow rule's
    ("bf16", 4096, 4096, 4096, "tuned"),
    ("bf16", 7000, 9000, 1152, "cost-model"),
    ("e4m3", 5, 2, 256, "nearest-fit"),
    ("e4m3", 16, 4096, 2048, "nearest-fit"),
    ("e4m3", 16, 7168, 16384, "swap-ab"),
]


@pytest.mark.parametrize("dtype,m,n,k,rule", UNCHANGED)
def test_the_rule_leaves_many_tiles_and_short_k_as_they_were(monkeypatch, dtype, m, n, k, rule):
    on = pick(dtype, m, n, k)
    before = off(monkeypatch, dtype, m, n, k)
    assert (on.spec, on.chosen_by, on.why, on.swap_ab) == (before.spec, before.chosen_by, before.why, before.swap_ab)
    if rule is not None:
        assert on.chosen_by == rule
    assert "few tiles, long K" not in on.why


def test_the_heavy_weight_rule_keeps_its_cap_where_both_apply():
    """1 x 1024 x 16384: N x K = 16384 x 1024 >= SPLIT_MIN_WEIGHT, 16 tiles: the heavy-weight split-k (at most SPLIT_MAX =
    8 splits) decides, not the tiny rule (which could take 16 at 8 tiles: 1 x 512 x 32768)."""
    c = pick("bf16", 1, 1024, 16384)
    assert c.chosen_by == "split-k" and c.spec.split_k == 8 and "few tiles" not in c.why
    c = pick("bf16", 1, 512, 32768)  # 8 tiles, weight 512 x 32768 = 16M: heavy rule, SPLIT_MAX = 8
    assert c.chosen_by == "split-k" and c.spec.split_k == 8 and "few tiles" not in c.why


def test_boundaries_of_the_fill_and_of_k():
    assert tiny_splits(16, 8192, 64, SMS) == 8
    assert tiny_splits(33, 8192, 64, SMS) == 4  # 33 <= 132 / 4: 4 splits fill 132 CTAs
    assert tiny_splits(34, 8192, 64, SMS) == 1
    assert tiny_splits(1, 1024, 64, SMS) == 2  # 16 K-tiles: two splits of 8
    assert tiny_splits(1, 1023, 64, SMS) == 2  # ceil(1023 / 64) = 16
    assert tiny_splits(1, 960, 64, SMS) == 1  # 15 K-tiles
    assert tiny_splits(1, 10**6, 64, SMS) == rules.TINY_SPLIT_MAX
    assert tiny_splits(16, 10**6, 64, 64) == 4  # a 64-SM part: 16 tiles = 64 / 4, 4 splits fill it
    assert tiny_splits(17, 10**6, 64, 64) == 1
    assert tiny_tile(5, 2) == (64, 64, 8, 1, "m") and tiny_tile(200, 2) == (64, 64, 8, 4, "n")
    assert tiny_tile(300, 300) is None


def test_thresholds_move_the_rule(monkeypatch):
    """The thresholds in rules.py are read at call time: a cap of 4 splits, or a fill of 1/132, changes the pick."""
    monkeypatch.setattr(rules, "TINY_SPLIT_MAX", 4)
    assert pick("bf16", 5, 2, 6816).spec.split_k == 4
    monkeypatch.setattr(rules, "TINY_SPLIT_MAX_FILL", 1 / SMS)
    assert pick("bf16", 5, 2, 6816).spec.split_k == 4  # 1 tile
    assert pick("bf16", 200, 2, 8192).chosen_by == "small-n"  # 4 tiles > 1
    monkeypatch.setattr(rules, "TINY_SPLIT_DTYPES", ("bf16", "f16"))
    assert pick("e4m3", 5, 2, 6816).chosen_by.startswith("nearest-fit") and pick("e4m3", 5, 2, 6816).spec.split_k == 1


def test_the_heldout_shape_and_the_device_sm_count():
    """5 x 2 x 6816 (tools/heldout30.json) on the H100's calibration (its device key, 132 SMs), and on fewer SMs."""
    from ptxgen.runtime.choose import Problem
    from ptxgen.runtime.choose.calibration import shipped

    h100 = shipped()["h100-80gb-hbm3"].device
    c = choose(Problem("bf16", "sm_90a", 5, 2, 6816), h100)
    assert c.chosen_by == "split-k" and c.spec.split_k == 8
    assert choose("bf16", "sm_90a", 5, 2, 6816, sm_count=16).spec.split_k == 8  # 1 tile <= 16 / 4; 8 CTAs <= 16
    assert choose("bf16", "sm_90a", 5, 2, 6816, sm_count=4).spec.split_k == 4  # 1 tile <= 4 / 4; 4 CTAs fill it
    assert choose("bf16", "sm_90a", 5, 2, 6816, sm_count=3).chosen_by == "small-m"  # 1 tile > 3 / 4


# -- the launch path (simulated device) ---------------------------------------------------------------------------------
def test_gemm_runs_the_pick_in_one_launch_with_the_streams_workspace(monkeypatch):
    import ptxgen
    from ptxgen.derive.store.streamk import FLAG_REGION_BYTES
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.runtime.launch.launch import Problem, workspace_bytes
    from test_api import FakeArray, SimulatedGPU, kmajor
    from test_streamk_api import Recorder, Stream, big_ptr

    sim = SimulatedGPU(monkeypatch)
    rec = Recorder(monkeypatch, sim)
    m, n, k = 5, 2, 6816
    spec, why = ptxgen.api.gemm_spec(kmajor(m, k, ptr=big_ptr()), kmajor(n, k, ptr=big_ptr()),
                                     FakeArray((m, n), "bfloat16", strides=(8, 1), ptr=big_ptr()), arch="sm_90a")
    assert spec.split_k == 8 and "few tiles, long K" in why
    a, b = kmajor(m, k, ptr=big_ptr()), kmajor(n, k, ptr=big_ptr())
    out = FakeArray((m, n), "bfloat16", strides=(8, 1), ptr=big_ptr())  # rows padded to 16 B
    s = Stream(0x61)
    for _ in range(2):
        assert ptxgen.gemm(a, b, out, stream=s) is out
    launches, allocs, memsets = rec.of("launch"), rec.of("alloc"), rec.of("memset")
    assert len(launches) == 2 and len(allocs) == 1 and len(memsets) == 1  # one launch a call; the workspace once
    grids = [d["grid"] for d in sim.launches]
    assert grids == [(1, 1, 8)] * 2  # one tile, grid z = the splits
    need = workspace_bytes(plan_kernel(spec), Problem(m, n, k, k, k, 8), SMS)
    assert need >= FLAG_REGION_BYTES + 8 * 64 * 64 * 4  # 8 f32 partial tiles of 64 x 64
    assert allocs[0][2] >= need and memsets[0][1:4] == (allocs[0][1], 0, FLAG_REGION_BYTES // 4)


# -- NVRTC + SASS (L2) of the picks -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,m,n,k", [("bf16", 5, 2, 6816), ("bf16", 1, 1, 8192), ("bf16", 200, 2, 8192),
                                         ("e4m3", 5, 2, 6816)])
def test_the_picks_compile_as_one_function_without_local_memory(dtype, m, n, k):
    """The kernels the rule picks (8 splits of 64 x 64 bf16 tiles, 6 of the e4m3 one): the split-K kernel's
    checks of tests/test_splitk.py (SASS gate, one function, no local memory, the one counter add, 16-byte partials)."""
    from test_splitk import test_split_kernel_compiles_as_one_function_without_local_memory as split_kernel_checks

    spec = pick(dtype, m, n, k).spec
    assert spec.split_k > 1
    split_kernel_checks(spec)


# -- on the H100/H200 (gpu tier) ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(5, 2, 6816), (1, 1, 8192), (64, 2, 4096), (200, 2, 8192), (2, 885, 2432)])
def test_gemm_runs_the_pick_right_and_repeatably(torch_cuda, m, n, k):
    """``ptxgen.gemm`` at shapes the rule splits (small M, both tiny, small N, 14 tiles): against float64 within what
    torch's own error allows, three calls bit-identical (the counters back at zero, the sum order fixed)."""
    import ptxgen

    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    spec, why = ptxgen.api.gemm_spec(a, b)
    if spec.split_k < 2:
        pytest.skip(f"the chooser picks {spec.kernel_name} on this GPU, not a split-K kernel")
    assert "few tiles, long K" in why
    outs = [ptxgen.gemm(a, b) for _ in range(3)]
    torch.cuda.synchronize()
    ref = a.double() @ b.double().T
    theirs = float((torch.mm(a, b.T).double() - ref).abs().max())
    err = float((outs[0].double() - ref).abs().max())
    assert err <= max(2 * theirs, 8e-3 * float(ref.abs().max())), (err, theirs)
    assert all(torch.equal(o.view(torch.int16), outs[0].view(torch.int16)) for o in outs[1:])
