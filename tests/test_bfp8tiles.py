"""derive.scaled.bfp8tiles: the block-FP8 tile fp8blocks.gemm picks without a spec (pure arithmetic)."""

import itertools

import pytest

from ptxgen.derive.scaled.bfp8tiles import TMA_SCALE_TILES, Bfp8Tile, few_tile_splits, pick_tile, tile_cost

# The best measured tile form at shapes where one form led clearly (by 10% or more over the other tiles' best; the 2026-12-02 sweep's
# sweep, runs/2026-12-02-blockfp8-tile-model/run2/bench_blockfp8_shapes.jsonl, ratios to torch's blockwise _scaled_mm in
# brackets): (M, N, K) -> (BM, BN)
MEASURED_BEST = {
    (64, 7168, 16384): (64, 128),  # 64 x 128 sk8 1.254, 128 x 128 sk8 0.903, 192 x 128 sk8 0.639
    (64, 4096, 7168): (64, 128),  # 2.519 / 1.263 / 0.978
    (64, 2112, 7168): (64, 128),  # 2.306 / 1.478 / 1.263
    (128, 7168, 16384): (128, 128),  # 128 x 128 sk8 1.481, 64 x 128 sk8 1.264, 192 x 128 sk8 0.804
    (512, 4096, 7168): (128, 128),  # 128 x 128 1.329, 192 x 128 1.110 / sk8 1.048, 64 x 128 0.970
    (512, 7168, 2048): (128, 128),  # 2.085 / 1.746 / 1.586
    (4096, 24576, 1536): (192, 128),  # 192 x 128 1.242, 128 x 128 1.054, 64 x 128 0.639
    (4096, 32768, 512): (192, 128),  # 1.420 / 1.189 / 0.692
    (4096, 2112, 7168): (192, 128),  # 1.326 / 0.994 / 0.727
}


@pytest.mark.parametrize("shape", sorted(MEASURED_BEST), ids=lambda s: "x".join(map(str, s)))
def test_the_pick_is_the_measured_best(shape):
    t = pick_tile(*shape, 132, 8)
    assert (t.bm, t.bn) == MEASURED_BEST[shape]


def test_one_tile_for_every_shape_would_miss_the_measured_best():
    """Control: with the 192 x 128 tile alone (the pick before 2026-12-02's tile model) the check above fails at small M."""
    only = (TMA_SCALE_TILES[0],)
    missed = [s for s, best in MEASURED_BEST.items() if (pick_tile(*s, 132, 8, only).bm, pick_tile(*s, 132, 8, only).bn) != best]
    assert len(missed) == 6


def test_splits_exhaustive_small():
    for tiles, kb, sms, most in itertools.product(range(1, 40), range(1, 12), (8, 16, 33, 132), (1, 4, 8)):
        s = few_tile_splits(tiles, kb, sms, most)
        if 2 * tiles > sms:
            assert s == 1
        else:
            assert 1 <= s <= min(most, kb) and tiles * s <= sms
            assert s == min(most, kb) or tiles * (s + 1) > sms  # as many as the SMs and the K blocks allow


def test_cost_counts_rounds_and_k_blocks():
    t = Bfp8Tile(192, 128, 4, 1.0)
    # 22 x 56 = 1232 tiles: 10 rounds on 132 SMs, 128 K blocks each
    assert tile_cost(4096, 7168, 16384, t, 132, 8) == 10 * 128
    # 1 x 56 tiles split 2 ways (112 of 132 SMs): one round of 64 K blocks
    assert tile_cost(64, 7168, 16384, t, 132, 8) == 64
    half = Bfp8Tile(96, 128, 4, 0.5)  # half the area at half the speed: the same time per tile
    assert tile_cost(4096, 7168, 16384, half, 132, 8) == 19 * 128  # 43 x 56 = 2408 tiles: 19 rounds


def test_ties_keep_the_larger_tile():
    same = (Bfp8Tile(192, 128, 4, 1.0), Bfp8Tile(96, 128, 4, 0.5))
    assert tile_cost(192, 128 * 66, 128, same[0], 132, 8) == tile_cost(192, 128 * 66, 128, same[1], 132, 8)
    assert pick_tile(192, 128 * 66, 128, 132, 8, same) is same[0]  # 66 vs 132 tiles, one K block: one round each
    assert pick_tile(192, 128 * 66, 128, 132, 8, same[::-1]) is same[1]


@pytest.mark.parametrize("tile", TMA_SCALE_TILES[1:], ids=lambda t: f"{t.bm}x{t.bn}")
@pytest.mark.parametrize("stream_k", [1, 8])
def test_the_new_picks_compile_without_local_memory(tile, stream_k):
    """Codegen tier: the tiles the model adds to 192 x 128 (scale_a by TMA; stream-K where the tiles are few) pass the
    SASS gate with the pinned NVRTC, with no local memory."""
    from ptxgen.api.fp8blocks import default_spec
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = default_spec(bm=tile.bm, bn=tile.bn, stages=tile.stages, fp8_scale_load="tma", stream_k=stream_k)
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in c.log


# The 1x128 x 1x128 recipe with the cp.async scale warp, H100, 2026-12-07 (runs/2026-12-07-h100-scale-copies, run 2 and
# run 6 bench_blockfp8.log: TFLOP/s, f32 out): (M, N, K) -> the fastest tile measured there. Run 2 timed 192 x 128 and
# 128 x 128 (and 128 x 192) at all but two; run 6 timed 128 x 128, 128 x 64, 64 x 128 and 64 x 64 at the six smallest
# (comments: TFLOP/s); at the seven larger ones the comments give run 2's ratios to torch, 192 x 128 / 128 x 128
COLUMNS_MEASURED_BEST = {
    (64, 7168, 16384): (64, 64),  # run 6: 64 x 64 320, 64 x 128 299, 128 x 64 193, 128 x 128 190; run 2: 192 x 128 168
    (128, 7168, 16384): (64, 128),  # 540, 128 x 64 527, 64 x 64 418, 128 x 128 368; run 2: 192 x 128 319
    (64, 4096, 7168): (64, 64),  # 232, 64 x 128 163, 128 x 64 161, 128 x 128 101
    (128, 2048, 7168): (64, 64),  # 238, 64 x 128 166, 128 x 64 157, 128 x 128 105
    (256, 7168, 4096): (128, 128),  # 626, 64 x 128 544, 128 x 64 528, 64 x 64 417; run 2: 128 x 128 608, 192 x 128 544
    (512, 4096, 7168): (128, 128),  # 743, 64 x 128 623, 128 x 64 614, 64 x 64 475; run 2: 719 / 607 (192 x 128)
    (1024, 7168, 4096): (192, 128),  # 0.958 / 0.839
    (3008, 7008, 5008): (192, 128),  # 0.944 / 0.838
    (4096, 4096, 4096): (192, 128),  # 0.949 / 0.858
    (16384, 4096, 4096): (192, 128),  # 1.090 / 0.809
    (4096, 7168, 16384): (192, 128),  # 0.956 / 0.783
    (8192, 8192, 8192): (192, 128),  # 1.064 / 0.793
    (2048, 7168, 4096): (192, 128),  # 0.993 / 0.827
}


@pytest.mark.parametrize("shape", sorted(COLUMNS_MEASURED_BEST), ids=lambda s: "x".join(map(str, s)))
def test_the_columns_pick_is_the_measured_best(shape):
    from ptxgen.derive.scaled.bfp8tiles import COLUMNS_TILES

    t = pick_tile(*shape, 132, 1, COLUMNS_TILES)
    assert (t.bm, t.bn) == COLUMNS_MEASURED_BEST[shape]


def test_the_columns_door_takes_the_pick():
    """fp8blocks.columns_chosen: the pick's tile with the cp.async scale warp, with and without C."""
    from ptxgen.api.fp8blocks import columns_chosen

    small, large = columns_chosen("f32", False, 128, 7168, 16384, 132), columns_chosen("bf16", True, 4096, 7168, 16384, 132)
    assert (small.bm, small.bn, small.stages, small.scale_load.value, small.fuse) == (64, 128, 6, "cpasync", None)
    assert (large.bm, large.bn, large.scale_load.value, large.fuse.c) == (192, 128, "cpasync", True)


def test_one_columns_tile_would_miss_the_measured_best():
    """Control: with any one tile alone the pick check above fails at four shapes or more."""
    from ptxgen.derive.scaled.bfp8tiles import COLUMNS_TILES

    for only in COLUMNS_TILES:
        picks = {s: pick_tile(*s, 132, 1, (only,)) for s in COLUMNS_MEASURED_BEST}
        assert sum((t.bm, t.bn) != COLUMNS_MEASURED_BEST[s] for s, t in picks.items()) >= 4


@pytest.mark.parametrize("out, c", [("bf16", False), ("f32", True)], ids=["bf16", "f32-c"])
@pytest.mark.parametrize("i", range(4), ids=["192x128", "128x128", "64x128", "64x64"])
def test_every_columns_pick_compiles_without_local_memory(i, out, c):
    """Codegen tier: each tile the 1D1D door can pick (COLUMNS_TILES, the cp.async scale warp), 16-bit out and f32 with C,
    passes the SASS gate under the pinned NVRTC with no local memory."""
    from ptxgen.api.fp8blocks import columns_spec
    from ptxgen.derive.scaled.bfp8tiles import COLUMNS_TILES
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    t = COLUMNS_TILES[i]
    spec = columns_spec(out, c=c, bm=t.bm, bn=t.bn, stages=t.stages)
    cc = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, cc.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "C7514" not in cc.log and "C7517" not in cc.log
