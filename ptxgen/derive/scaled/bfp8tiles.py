"""Which block-FP8 tile a problem gets (``ptxgen.api.fp8blocks.chosen_spec``), pure arithmetic: rounds of tiles on the
SMs (each tile split along K by stream-K where the tiles fill at most half the SMs) times a tile's work over its
measured speed.

The speeds are per unit of tile work (BM x BN x one 128-block of K) relative to the 192 x 128 tile, all with scale_a by
TMA. They were fitted to a sweep on the H200 (2026-12-02, runs/2026-12-02-blockfp8-tile-model/run2: 24
DeepSeek-V3 shapes, M = 64 / 128 / 512 / 4096, eight tile forms each against torch's blockwise ``_scaled_mm``): any
128 x 128 speed in 0.85-0.92 with any 64 x 128 speed in 0.5-0.7 picks within 5% of the best measured form (geomean
0.950 of the best; the 192 x 128 tile everywhere: 0.708, worst 0.39 at 64 x 4096 x 7168). On 20 held-out shapes
(runs/2026-12-02-gpu-tier-blockfp8-tiles, M = 32 / 256 / 1024 / 2048) the picks are 0.970 of the best form measured, 1.143 of torch in
the geomean (the 192 x 128 tile everywhere: 0.886).
"""

from __future__ import annotations

from dataclasses import dataclass

K_BLOCK = 128  # the recipe's K block: one stage, one promotion


@dataclass(frozen=True)
class Bfp8Tile:
    bm: int
    bn: int
    stages: int
    speed: float  # tile work per unit time, relative to the 192 x 128 tile (module docstring)


TMA_SCALE_TILES = (Bfp8Tile(192, 128, 4, 1.0), Bfp8Tile(128, 128, 5, 0.88), Bfp8Tile(64, 128, 6, 0.6))
# the 1x128 x 1x128 recipe's tiles with the cp.async scale warp (no stream-K), measured on the H100 (2026-12-07,
# runs/2026-12-07-h100-scale-copies): 128 x 128's speed is the median of its speed over 192 x 128's at five shapes of
# M >= 2048 (run 2: 0.78-0.94); the 64-row tiles' from one shape where each runs one round (run 6, 128 x 7168 x 16384:
# 64 x 128 at 540 TFLOP/s and 64 x 64 at 418 in two rounds against 128 x 128's 368). With these the model picks the
# fastest tile measured at all thirteen shapes of runs 2 and 6 (M = 64 to 16384; tests/test_bfp8tiles.py)
COLUMNS_TILES = (Bfp8Tile(192, 128, 4, 1.0), Bfp8Tile(128, 128, 4, 0.85), Bfp8Tile(64, 128, 6, 0.62),
                 Bfp8Tile(64, 64, 6, 0.48))


def tile_count(m: int, n: int, bm: int, bn: int) -> int:
    """BM x BN tiles of an M x N output."""
    return -(-m // bm) * -(-n // bn)


def few_tiles(tiles: int, sm_count: int) -> bool:
    """The tiles fill at most half of ``sm_count`` SMs: one round, most SMs idle (gemm splits them with stream-K)."""
    return 2 * tiles <= sm_count


def few_tile_splits(tiles: int, k_blocks: int, sm_count: int, most: int) -> int:
    """Stream-K's splits per tile where the tiles are few (:func:`few_tiles`; up to ``most``, at most one K block each,
    at most the SMs a tile has); 1 otherwise."""
    if not few_tiles(tiles, sm_count):
        return 1
    return max(1, min(most, sm_count // max(1, tiles), k_blocks))


def tile_cost(m: int, n: int, k: int, tile: Bfp8Tile, sm_count: int, most_splits: int) -> float:
    """Modelled time of M x N x K in ``tile``s, in units of one 192 x 128 tile's K block: rounds of (split) tiles x the
    K blocks of a split x the tile's area over its speed."""
    tiles = tile_count(m, n, tile.bm, tile.bn)
    k_blocks = max(1, -(-k // K_BLOCK))
    s = few_tile_splits(tiles, k_blocks, sm_count, most_splits)
    rounds = -(-tiles * s // sm_count)
    return rounds * -(-k_blocks // s) * (tile.bm * tile.bn) / (192 * 128) / tile.speed


def pick_tile(m: int, n: int, k: int, sm_count: int, most_splits: int, tiles=TMA_SCALE_TILES) -> Bfp8Tile:
    """The tile of least modelled time; on a tie the earlier (larger) one."""
    return min(tiles, key=lambda t: tile_cost(m, n, k, t, sm_count, most_splits))
