"""The swap-AB rules of ``runtime.choose``: D^T = B A^T with an M-major D, where few rows of A would waste the MMA's M.

``swap_ab`` (chosen_by ``swap-ab``): M <= SWAP_AB_MAX_M against large weights, the tile from ``swap_ab_tile``;
``swap_fit`` (``cost-model+swap-ab``): M > SMALL_M_MAX where a swapped tile that fits M is predicted faster than every
unswapped kernel. ``runtime.choose`` decides when each is asked (its ``SWAP_AB_RULE`` and ``SWAP_FIT_RULE`` switches);
``SWAP_TMA_STORE`` here picks how both store D^T (direct one-element stores, or the TMA store of an M-major D).
"""

from __future__ import annotations

import dataclasses

from ..derive.spec import TileSpec
from ..isa.types import DMajor, Epilogue, SpecError
from .choice import SM_COUNT, SMALL_M_MAX, Choice, narrow_spec
from .costmodel import (BY_NAME, COST_FAMILY, SWAP_BM, SWAP_FAMILY_BN, best_swap, calibrated, rank, shipped_costs,
                        shipped_swap_costs)

SWAP_AB_MAX_M = 64  # M = 1..64 won against every other pick, M = 128 did not (runs/2026-12-01-swapab-small-m run 1)
SWAP_AB_MIN_WEIGHT = 4096 * 4096  # N x K: the smallest weights measured (run 1 of 2026-12-01-swapab-small-m: won there too)
SWAP_AB_MIN_FILL = 0.4  # choose.SMALL_M_MIN_FILL's value; the swap tiles' CTAs fill at least this fraction of the SMs in one wave
SWAP_AB_BM = (64, 128)  # BM over N: the most CTAs that fit in one wave (64: 4096 / 7168 rows; 128: 16384)
SWAP_AB_MAX_STAGES = {64: 12, 128: 10}  # stages of each BM (2026-12-01-swapab: 128 x 16 best with 10)
SWAP_AB_STAGE_BYTES = 200 * 1024  # shared memory the stages of a swap tile take at most
SWAP_AB_DTYPES = ("bf16", "f16", "e4m3")  # measured: bf16 (2026-12-01-swapab, 2026-12-01-swapab-small-m run 1), e4m3 (2026-12-01-swapab-small-m run 1)
SWAP_FIT_MIN_GAIN = 0.05  # ... faster than every unswapped candidate by this much (the fit's median error is 2.2%)
SWAP_FIT_STAGES = (6, 5, 4)  # the deepest ring that fits shared memory
SWAP_FIT_MAX_M_TILES = 2  # swapped tiles over M: run 1 measured one or two (M <= 512)
# Both rules' kernels store D^T through the TMA-store epilogue (stmatrix.trans into shared memory, one TMA store per
# chunk: derive.epilogue) instead of one 2-byte store per element. On since the full GPU-tier run of 2026-12-01
# (runs/2026-12-01-gpu-tier-swap-tmastore, tools/bench_mstore.py): faster on all five swapped shapes, TMA/direct time 0.951-0.998
# (geomean 0.982; 333 x 8192 x 8192: 67.9 -> 64.5 us), outputs bitwise equal; the gpu tests passed with it on. The
# staging buffers may cost a stage (128 x 168: 6 -> 5; measured with it). False: the direct stores.
SWAP_TMA_STORE = True


def _swapped(like: TileSpec, bm: int, bn: int, stages) -> TileSpec | None:
    """The swapped kernel: ``narrow_spec`` with an M-major D (and, with SWAP_TMA_STORE, the TMA store), at the first of
    ``stages`` that fits shared memory; None where none does."""
    for s in stages:
        try:
            spec = dataclasses.replace(narrow_spec(like, bm, bn, s), d_major=DMajor.M, split_k=1, stream_k=1)
            return dataclasses.replace(spec, epilogue=Epilogue.TMA) if SWAP_TMA_STORE else spec
        except SpecError:
            continue
    return None


def _store_note() -> str:
    return " through the TMA store (stmatrix.trans)" if SWAP_TMA_STORE else ""


def swap_ab_tile(m: int, n: int, stage_row_bytes: int, sm_count: int = SM_COUNT) -> tuple[int, int, int, int] | None:
    """(BM, BN, stages, CTAs) of the swap-AB kernel for M <= SWAP_AB_MAX_M, or None where its CTAs would fill less than
    SWAP_AB_MIN_FILL of the SMs. BN: M rounded up to 8 (the wgmma N the few rows need); BM: of SWAP_AB_BM the one with
    the most CTAs (ceil(N / BM)) in one wave (the 128-row tile where none fits one); stages: as many as
    SWAP_AB_STAGE_BYTES holds (``stage_row_bytes``: bytes of one row of a stage, BK x the element size), at most
    SWAP_AB_MAX_STAGES. The swapped kernel has no split of K: its CTAs each stream BM whole rows of the weights."""
    if m > SWAP_AB_MAX_M:
        return None
    bn = max(8, -(-m // 8) * 8)
    options = [(bm, -(-n // bm) * -(-m // bn)) for bm in SWAP_AB_BM]
    one_wave = [o for o in options if o[1] <= sm_count]
    if one_wave:
        bm, ctas = max(one_wave, key=lambda o: (o[1], o[0]))
        if ctas < SWAP_AB_MIN_FILL * sm_count:
            return None
    else:
        bm, ctas = max(options, key=lambda o: o[0])
    stages = min(SWAP_AB_MAX_STAGES[bm], SWAP_AB_STAGE_BYTES // ((bm + bn) * stage_row_bytes))
    return bm, bn, stages, ctas


def swap_ab(like: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, note: str, sm_count: int = SM_COUNT) -> Choice | None:
    """The ``swap-ab`` rule: D^T = B A^T with an M-major D for M <= SWAP_AB_MAX_M against weights of at least
    SWAP_AB_MIN_WEIGHT elements whose swap tiles fill the SMs (``swap_ab_tile``; sm_90a); None where it does not apply."""
    if arch != "sm_90a" or dtype not in SWAP_AB_DTYPES or n * k < SWAP_AB_MIN_WEIGHT:
        return None
    tile = swap_ab_tile(m, n, like.bk * like.dtype.bytes, sm_count)
    if tile is None:
        return None
    bm, bn, stages, ctas = tile
    # the stages of swap_ab_tile, or (the TMA store's staging buffers) one or two fewer where those do not fit
    spec = _swapped(like, bm, bn, (stages, stages - 1, stages - 2) if SWAP_TMA_STORE else (stages,))
    if spec is None:
        return None
    why = (f"M = {m} <= {SWAP_AB_MAX_M} against N x K = {n} x {k}: swap-AB, D^T = B A^T with {bm} x {bn} tiles over N x M "
           f"({ctas} CTAs for {sm_count} SMs), D^T stored M-major into the row-major D{_store_note()}")
    return Choice(spec, why + note, "swap-ab", swap_ab=True)


def swap_fit(picked: Choice, like: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, off_sector: bool,
              sm_count: int, note: str, stream_k: bool) -> Choice | None:
    """The swap-ab rule for M > SMALL_M_MAX (``cost-model+swap-ab``): D^T = B A^T with 128 x BN' tiles over N x M, BN' a
    multiple of 8 that covers M in few tiles (``costmodel.best_swap``: 333 rows as 2 x 168 = 336 where 128-row tiles pad
    them to 384), one CTA per tile, D stored M-major; taken where the cost model (the swapped family's own fitted
    constants, ``shipped_swap_costs``) predicts it SWAP_FIT_MIN_GAIN faster than every unswapped candidate (their stream-K
    forms included when ``stream_k``), in one round of CTAs, rows on a 32-byte sector, on a compute-bound shape with K >= 1024 (what the
    swapped family was measured on: runs/2026-12-01-swap-waves run 1). None where it does not apply (16-bit inputs, sm_90a)."""
    if arch != "sm_90a" or m <= SMALL_M_MAX or off_sector:
        return None
    family = COST_FAMILY.get(dtype)
    shipped = shipped_costs(family) if family else None
    swap_costs = shipped_swap_costs(family) if family else None
    if shipped is None or shipped[0] != (family, arch) or swap_costs is None:
        return None
    costs, eb = shipped[1], like.dtype.bytes
    sw = best_swap(swap_costs, SWAP_FAMILY_BN, m, n, k, sm_count=sm_count, element_bytes=eb)
    # one round (two rounds of swapped tiles lost at 350 x 16384 x 4096) of one or two tiles over M, K >= 1024 and
    # compute-bound: the swapped problem (N x M x K) in the range the constants were fitted on
    like_family = BY_NAME["t128x192"]
    if (sw is None or sw.rounds > 1 or sw.m_tiles > SWAP_FIT_MAX_M_TILES or not calibrated(like_family, swap_costs, n, m, k, sm_count=sm_count, element_bytes=eb)):
        return None
    plain = rank({name: c for name, c in costs.items() if not BY_NAME[name].narrow}, m, n, k, sm_count=sm_count,
                 element_bytes=eb, stream_k=stream_k)
    if not plain or sw.predicted_us > plain[0].predicted_us * (1 - SWAP_FIT_MIN_GAIN):
        return None
    spec = _swapped(like, SWAP_BM, sw.bn, SWAP_FIT_STAGES)
    if spec is None:
        return None
    best = plain[0]
    why = (f"swap-AB: D^T = B A^T with {SWAP_BM} x {sw.bn} tiles over N x M ({sw.m_tiles} tile{'s' if sw.m_tiles > 1 else ''} "
           f"of {sw.bn} cover M = {m} as {sw.m_tiles * sw.bn} rows; {sw.ctas} CTAs in one round of {sm_count}), D^T stored "
           f"M-major into the row-major D{_store_note()}; cost model: {sw.predicted_us:.1f} us predicted against {best.predicted_us:.1f} us "
           f"for {best.candidate.name}{' (stream-K form)' if best.streamk else ''}, the best unswapped kernel (the other "
           f"rules' pick: {picked.chosen_by}, {picked.spec.bm} x {picked.spec.bn})")
    return Choice(spec, why + note, "cost-model+swap-ab", swap_ab=True)
