"""The narrow-tile rules (small-m, small-n, split-k) and the tile-fit measure of nearest-fit: tile arithmetic for a
device of ``sm_count`` SMs, no cost model."""

from __future__ import annotations

import dataclasses

from ...derive.tile.spec import TileSpec
from ...isa.types import Cluster, Consumers, Epilogue, Schedule
from . import rules
from .candidates import BY_NAME, Candidate
from .choice import SM_COUNT, SMALL_M_MAX


def tile_fit(spec: TileSpec, m: int, n: int, sm_count: int = SM_COUNT) -> float:
    """The fraction of the launched MMA work that is useful: tile padding along M and N times the last wave's
    occupancy (tiles spread over ``sm_count`` CTAs, one tile per CTA at a time)."""
    tm, tn = -(-m // spec.bm), -(-n // spec.bn)
    padding = (m * n) / (tm * spec.bm * tn * spec.bn)
    tiles = tm * tn
    waves = -(-tiles // sm_count)
    return padding * tiles / (waves * sm_count)


def small_m_tile(m: int, n: int, sm_count: int = SM_COUNT) -> tuple[int, int, int] | None:
    """(BN, stages, CTAs) of the BM = 64 tile for an M <= 128 shape, or None when every such tile needs more than one
    wave (then the large tiles of the table fit better: run 25, 128 x 16384 x 4096)."""
    if m > SMALL_M_MAX:
        return None
    options = [(bn, stages, -(-m // rules.SMALL_M_BM) * -(-n // bn)) for bn, stages in rules.SMALL_M_TILES]
    one_wave = [o for o in options if o[2] <= sm_count]
    if not one_wave:
        return None
    filled = [o for o in one_wave if o[2] >= rules.SMALL_M_MIN_FILL * sm_count]
    return filled[0] if filled else max(one_wave, key=lambda o: (o[2], -o[0]))  # the most CTAs; ties: the narrower


def small_m_wide_ctas(m: int, n: int, sm_count: int = SM_COUNT) -> int | None:
    """CTAs of the 128 x 128 kernel ``rules.SMALL_M_WIDE_KERNEL`` for an M <= 128 shape whose BM = 64 tiles all need more than
    one wave (``small_m_tile`` None), where they fit one wave and fill at least rules.SMALL_M_MIN_FILL of the SMs; else None."""
    if not rules.SMALL_M_WIDE or m > SMALL_M_MAX or small_m_tile(m, n, sm_count) is not None:
        return None
    c = BY_NAME[rules.SMALL_M_WIDE_KERNEL]
    ctas = -(-m // c.bm) * -(-n // c.bn)
    return ctas if rules.SMALL_M_MIN_FILL * sm_count <= ctas <= sm_count else None


def small_m_splits(ctas: int, k: int, bk: int, sm_count: int = SM_COUNT, most: int | None = None) -> int:
    """Splits of K for a ``small-m`` tile launching ``ctas`` CTAs: the most (at most ``most``, None: rules.SPLIT_MAX) that
    keep every CTA in one wave and every split at least rules.SPLIT_MIN_K_TILES K-tiles (1: no split)."""
    k_tiles, cap = -(-k // bk), rules.SPLIT_MAX if most is None else most
    s = 1
    while s < cap and ctas * (s + 1) <= sm_count and k_tiles // (s + 1) >= rules.SPLIT_MIN_K_TILES:
        s += 1
    return s


def tiny_splits(ctas: int, k: int, bk: int, sm_count: int = SM_COUNT) -> int:
    """Splits of K for a narrow tile of few CTAs against a long K, at any weight (the tiny split-k rule): where the
    ``ctas`` CTAs fill at most rules.TINY_SPLIT_MAX_FILL of the SMs, the most splits up to rules.TINY_SPLIT_MAX that
    keep one wave and rules.SPLIT_MIN_K_TILES K-tiles a split (``small_m_splits``); 1 elsewhere (no split)."""
    if ctas > rules.TINY_SPLIT_MAX_FILL * sm_count:
        return 1
    return small_m_splits(ctas, k, bk, sm_count, most=rules.TINY_SPLIT_MAX)


def tiny_tile(m: int, n: int, sm_count: int = SM_COUNT) -> tuple[int, int, int, int, str] | None:
    """(BM, BN, stages, CTAs, the side that is small) of the narrow tile a tiny split-k splits where no other narrow rule
    offers one (e4m3 below rules.FP8_SMALL_M_MIN_WEIGHT): ``small_m_tile`` at M <= 128, else ``small_n_tile`` at
    N <= 128; None where both are wider."""
    if m <= SMALL_M_MAX:
        t = small_m_tile(m, n, sm_count)
        return None if t is None else (rules.SMALL_M_BM, t[0], t[1], t[2], "m")
    t = small_n_tile(m, n, sm_count) if n <= SMALL_M_MAX else None
    return None if t is None else (t[0], rules.SMALL_M_BM, t[1], t[2], "n")


def split_spec(like: TileSpec, splits: int) -> TileSpec:
    """The kernel family of ``like`` with K split ``splits`` ways: one CTA per (tile, split), f32 partial tiles in the
    workspace summed by the last split to arrive (one launch), no cluster."""
    return dataclasses.replace(like, schedule=Schedule.TILE, consumers=Consumers.COOPERATIVE, epilogue=Epilogue.DIRECT,
                               cluster=Cluster.C1X1, split_k=splits)


# N <= 128 against many rows, where every BM x 64 tile needs two waves: all of B is one tile column, so every M-tile
# reads all of B again from L2 (M / BM times the weights); the 2x1 cluster multicasts each B tile to both CTAs of a
# pair along M and halves that traffic. Measured on the H100 (runs/2026-12-06-h100-small-n, same process as cuBLAS):
# 12453 x 120 x 14800 ran 0.735 under nearest-fit's 128 x 192, 0.90-0.95 on eleven 1x1 tiles of BN 120 / 128
# (ping-pong, stream-K, split-K), 1.017 with this kernel. N <= 64 takes the 128 x 64 form: 20000 x 64 x 4096 ran
# 0.955 with it, 0.921 without the cluster, 0.803-0.817 with 128 x 128 tiles (runs/2026-12-06-h100-new-forms).
SMALL_N_WIDE_KERNEL = Candidate("p128x128c2", 128, 128, 6, cluster="2x1", epilogue="direct")
SMALL_N_WIDE_KERNEL_64 = Candidate("p128x64c2", 128, 64, 8, cluster="2x1", epilogue="direct")


# e4m3, N <= 128 against many rows (M > 128), where the FP8 cost model has no calibration and nearest-fit took the
# 128 x 256 tile of the 8192-cube entry (half or more of each tile past N). Measured on the H100 (`ptxgen tune --dtype e4m3`,
# every e4m3 tile against torch._scaled_mm in the same process; six shapes, none of the held-out sets;
# runs/2026-12-07-h100-e4m3-narrow-n run 2): 128 x 128 with six stages and the TMA store 1.025 / 1.018 / 1.053 / 0.839
# at 16384 x 112 x 4096, 9008 x 128 x 8192, 12000 x 128 x 16384, 6000 x 96 x 12288 (nearest-fit 0.796 / 0.669 / 0.577 /
# 0.517); up to 64 columns 256 x 128 (three stages, raster groups of 16) 0.956 / 1.083 at 20000 x 64 x 4096 and
# 30000 x 32 x 8192 (nearest-fit 0.618 / 0.669, 128 x 128 0.824 / 0.986): half as many tiles, each reading B once.
FP8_SMALL_N_KERNEL = Candidate("p128x128s6", 128, 128, 6)
FP8_SMALL_N_KERNEL_64 = Candidate("p256x128s3", 256, 128, 3, raster_group=16)


def fp8_small_n_kernel(n: int) -> Candidate:
    """The e4m3 small-n kernel for N <= 128 columns: 256 x 128 up to 64 columns, else 128 x 128."""
    return FP8_SMALL_N_KERNEL_64 if n <= 64 else FP8_SMALL_N_KERNEL


def small_n_wide_kernel(n: int) -> Candidate:
    """The small-n wide kernel for N columns: BN 64 up to 64 columns, else 128."""
    return SMALL_N_WIDE_KERNEL_64 if n <= SMALL_N_WIDE_KERNEL_64.bn else SMALL_N_WIDE_KERNEL


def small_n_wide_ctas(m: int, n: int, sm_count: int = SM_COUNT) -> int | None:
    """Tiles of ``SMALL_N_WIDE_KERNEL`` for an N <= 128 shape (M > 128) whose BM x 64 tiles all need more than one
    wave, or None where the rule does not apply."""
    if not rules.SMALL_N_WIDE or n > SMALL_M_MAX or m <= SMALL_M_MAX or small_n_tile(m, n, sm_count) is not None:
        return None
    return -(-m // SMALL_N_WIDE_KERNEL.bm)


def small_n_tile(m: int, n: int, sm_count: int = SM_COUNT) -> tuple[int, int, int] | None:
    """(BM, stages, CTAs) for an N <= 128 shape: the mirror of :func:`small_m_tile` (BN = 64, BM of 128 or 64)."""
    return small_m_tile(n, m, sm_count)
