"""The swap-AB rules of the chooser (``runtime.choose``): D^T = B A^T with an M-major D, where few rows of A would waste the MMA's M.

``swap_ab`` (chosen_by ``swap-ab``): M <= rules.SWAP_AB_MAX_M against large weights, the tile from ``swap_ab_tile``;
``swap_fit`` (``cost-model+swap-ab``): M > SMALL_M_MAX where a swapped tile that fits M is predicted faster than every
unswapped kernel. ``walk.choose`` decides when each is asked (``rules.SWAP_AB_RULE`` and ``rules.SWAP_FIT_RULE`` switches);
``rules.SWAP_TMA_STORE`` picks how both store D^T (direct one-element stores, or the TMA store of an M-major D).
"""

from __future__ import annotations

import dataclasses

from ...derive.tile.spec import TileSpec
from ...isa.types import Cluster, DMajor, Epilogue, Schedule, SpecError
from .choice import SM_COUNT, SMALL_M_MAX, Choice, narrow_spec
from . import rules
from .candidates import BY_NAME
from .costmodel import SWAP_BM, CostModel, swap_tiles



def _swapped(like: TileSpec, bm: int, bn: int, stages) -> TileSpec | None:
    """The swapped kernel: ``narrow_spec`` with an M-major D (and, with rules.SWAP_TMA_STORE, the TMA store), at the first of
    ``stages`` that fits shared memory; None where none does."""
    for s in stages:
        try:
            spec = dataclasses.replace(narrow_spec(like, bm, bn, s), d_major=DMajor.M, split_k=1, stream_k=1)
            return dataclasses.replace(spec, epilogue=Epilogue.TMA) if rules.SWAP_TMA_STORE else spec
        except SpecError:
            continue
    return None


def streamk_form(swapped: TileSpec, splits: int) -> TileSpec | None:
    """A swapped kernel persistent with ``splits`` stream-K splits of its last round, at its own stages or fewer (down to
    2: the persistent TMA store's second staging buffer), the first that fits; None where none does."""
    for s in range(swapped.stages, 1, -1):
        try:
            return dataclasses.replace(swapped, schedule=Schedule.PERSISTENT, stream_k=splits, stages=s)
        except SpecError:
            continue
    return None


def _swapped_streamk(like: TileSpec, bn: int, splits: int) -> TileSpec | None:
    """The swapped 128 x ``bn`` kernel (the deepest of rules.SWAP_FIT_STAGES that fits) in its stream-K form."""
    spec = _swapped(like, SWAP_BM, bn, rules.SWAP_FIT_STAGES)
    return None if spec is None else streamk_form(spec, splits)


def paired(spec: TileSpec, m_tiles: int) -> TileSpec:
    """Two swapped tiles over M as one 1x2 cluster (rules.SWAP_PAIR_CLUSTER: both read the same weight rows, loaded
    once for the pair), where the spec allows it; else the spec unchanged."""
    if m_tiles != 2 or not rules.SWAP_PAIR_CLUSTER:
        return spec
    try:
        return dataclasses.replace(spec, cluster=Cluster.C1X2)
    except SpecError:
        return spec


def wide_pair(like: TileSpec, m: int, n: int, sm_count: int, device_slug: str) -> TileSpec | None:
    """rules.SWAP_WIDE_PAIR: two 192-row swapped tiles over M as one 1x2 cluster, where 128-row tiles would take more
    than one round of ``sm_count`` CTAs and the 192-row pair fits one, its ring at least rules.SWAP_WIDE_MIN_STAGES
    deep, on a device the rule was measured on (rules.SWAP_WIDE_PAIR_DEVICES); None where the rule does not apply."""
    if not rules.SWAP_WIDE_PAIR or device_slug not in rules.SWAP_WIDE_PAIR_DEVICES:
        return None
    bn = next((b for b, tiles in swap_tiles(m) if tiles == 2), None)  # two tiles over M
    if bn is None:
        return None
    if -(-n // SWAP_BM) * 2 <= sm_count or -(-n // rules.SWAP_WIDE_BM) * 2 > sm_count:
        return None
    spec = _swapped(like, rules.SWAP_WIDE_BM, bn, range(max(rules.SWAP_FIT_STAGES), rules.SWAP_WIDE_MIN_STAGES - 1, -1))
    if spec is None:
        return None
    spec = paired(spec, 2)
    return spec if spec.cluster is Cluster.C1X2 else None


def _store_note() -> str:
    return " through the TMA store (stmatrix.trans)" if rules.SWAP_TMA_STORE else ""


def swap_ab_tile(m: int, n: int, stage_row_bytes: int, sm_count: int = SM_COUNT) -> tuple[int, int, int, int] | None:
    """(BM, BN, stages, CTAs) of the swap-AB kernel for M <= rules.SWAP_AB_MAX_M, or None where its CTAs would fill less than
    rules.SWAP_AB_MIN_FILL of the SMs. BN: M rounded up to 8 (the wgmma N the few rows need); BM: of rules.SWAP_AB_BM the one with
    the most CTAs (ceil(N / BM)) in one wave (the 128-row tile where none fits one); stages: as many as
    rules.SWAP_AB_STAGE_BYTES holds (``stage_row_bytes``: bytes of one row of a stage, BK x the element size), at most
    rules.SWAP_AB_MAX_STAGES. The swapped kernel has no split of K: its CTAs each stream BM whole rows of the weights."""
    if m > rules.SWAP_AB_MAX_M:
        return None
    bn = max(8, -(-m // 8) * 8)
    options = [(bm, -(-n // bm) * -(-m // bn)) for bm in rules.SWAP_AB_BM]
    one_wave = [o for o in options if o[1] <= sm_count]
    if one_wave:
        bm, ctas = max(one_wave, key=lambda o: (o[1], o[0]))
        if ctas < rules.SWAP_AB_MIN_FILL * sm_count:
            return None
    else:
        bm, ctas = max(options, key=lambda o: o[0])
    stages = min(rules.SWAP_AB_MAX_STAGES[bm], rules.SWAP_AB_STAGE_BYTES // ((bm + bn) * stage_row_bytes))
    return bm, bn, stages, ctas


def swap_ab(like: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, note: str, sm_count: int = SM_COUNT) -> Choice | None:
    """The ``swap-ab`` rule: D^T = B A^T with an M-major D for M <= rules.SWAP_AB_MAX_M against weights of at least
    rules.SWAP_AB_MIN_WEIGHT elements whose swap tiles fill the SMs (``swap_ab_tile``; sm_90a); None where it does not apply."""
    if arch != "sm_90a" or dtype not in rules.SWAP_AB_DTYPES or n * k < rules.SWAP_AB_MIN_WEIGHT:
        return None
    tile = swap_ab_tile(m, n, like.bk * like.dtype.bytes, sm_count)
    if tile is None:
        return None
    bm, bn, stages, ctas = tile
    # the stages of swap_ab_tile, or (the TMA store's staging buffers) one or two fewer where those do not fit
    spec = _swapped(like, bm, bn, (stages, stages - 1, stages - 2) if rules.SWAP_TMA_STORE else (stages,))
    if spec is None:
        return None
    why = (f"M = {m} <= {rules.SWAP_AB_MAX_M} against N x K = {n} x {k}: swap-AB, D^T = B A^T with {bm} x {bn} tiles over N x M "
           f"({ctas} CTAs for {sm_count} SMs), D^T stored M-major into the row-major D{_store_note()}")
    return Choice(spec, why + note, "swap-ab", swap_ab=True)


def swap_fit(picked: Choice, like: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, off_sector: bool,
             model: CostModel, note: str, stream_k: bool) -> Choice | None:
    """The swap-ab rule for M > SMALL_M_MAX (``cost-model+swap-ab``): D^T = B A^T with 128 x BN' tiles over N x M, BN' a
    multiple of 8 that covers M in few tiles (``CostModel.swap``: 333 rows as 2 x 168 = 336 where 128-row tiles pad
    them to 384), one CTA per tile, D stored M-major; taken where the cost model (the swapped family's own fitted
    constants, ``CostModel.swap_costs``) predicts it rules.SWAP_FIT_MIN_GAIN faster than every unswapped candidate (their
    stream-K forms included when ``stream_k``), in one round of CTAs, rows on a 32-byte sector, on a shape inside the box
    of those the swapped family was fitted on (``costmodel.swap_calibrated``). None where it does not apply (16-bit
    inputs, sm_90a)."""
    if arch != "sm_90a" or m <= SMALL_M_MAX or off_sector:
        return None
    costs, swap_costs = model.costs(dtype, arch), model.swap_costs(dtype, arch)
    if costs is None or swap_costs is None:
        return None
    eb, sm_count = like.dtype.bytes, model.sm_count
    if not model.swap_calibrated(m, n, k):  # the box of the shapes the constants were fitted on
        return None
    sw = model.swap(swap_costs, m, n, k, element_bytes=eb)
    # one round of one or two tiles over M (two rounds of swapped tiles lost at 350 x 16384 x 4096), or, with
    # rules.SWAP_STREAM_K, more rounds with the last split along K (the persistent swapped kernel's stream-K form)
    one = sw if sw is not None and sw.rounds == 1 and sw.m_tiles <= rules.SWAP_FIT_MAX_M_TILES else None
    sk = model.swap_streamk(swap_costs, m, n, k, element_bytes=eb) if stream_k and rules.SWAP_STREAM_K else None
    sk = sk if sk is not None and sk.m_tiles <= rules.SWAP_FIT_MAX_M_TILES else None
    if one is None and sk is None:
        return None
    use_sk = one is None or (sk is not None and sk.predicted_us < one.predicted_us)
    predicted, bn, m_tiles, ctas = ((sk.predicted_us, sk.bn, sk.m_tiles, sk.ctas) if use_sk
                                    else (one.predicted_us, one.bn, one.m_tiles, one.ctas))
    plain = model.rank({name: c for name, c in costs.items() if not BY_NAME[name].narrow}, m, n, k, element_bytes=eb,
                       stream_k=stream_k)
    if not plain or predicted > plain[0].predicted_us * (1 - rules.SWAP_FIT_MIN_GAIN):
        return None
    spec = _swapped_streamk(like, bn, sk.splits) if use_sk else _swapped(like, SWAP_BM, bn, rules.SWAP_FIT_STAGES)
    if spec is None:
        return None
    spec = paired(spec, m_tiles)
    best = plain[0]
    wide = wide_pair(like, m, n, sm_count, model.calibration.device.slug)
    if wide is not None:
        why = (f"swap-AB: D^T = B A^T with {wide.bm} x {wide.bn} tiles over N x M (2 tiles of {wide.bn} cover M = {m} as "
               f"{2 * wide.bn} rows) as one 1x2 cluster (the weight rows loaded once for both), "
               f"{-(-n // wide.bm) * 2} CTAs in one round of {sm_count} where {SWAP_BM}-row tiles take "
               f"{-(-n // SWAP_BM) * 2} (the wide-pair rule), D^T stored M-major into the row-major D{_store_note()}; "
               f"cost model: {predicted:.1f} us predicted for {SWAP_BM} x {bn}{' (stream-K form)' if use_sk else ''} against "
               f"{best.predicted_us:.1f} us for {best.candidate.name}, the best unswapped kernel")
        return Choice(wide, why + note, "cost-model+swap-ab", swap_ab=True)
    rounds_note = (f"{ctas} CTAs for {sm_count} SMs, persistent, the last round split {sk.splits} ways along K (stream-K)"
                   if use_sk else f"{ctas} CTAs in one round of {sm_count}")
    why = (f"swap-AB: D^T = B A^T with {SWAP_BM} x {bn} tiles over N x M ({m_tiles} tile{'s' if m_tiles > 1 else ''} "
           f"of {bn} cover M = {m} as {m_tiles * bn} rows; {rounds_note}), D^T stored "
           f"M-major into the row-major D{_store_note()}"
           f"{'; the two tiles over M one 1x2 cluster (the weight rows loaded once for both)' if spec.cluster is Cluster.C1X2 else ''}"
           f"; cost model: {predicted:.1f} us predicted against {best.predicted_us:.1f} us "
           f"for {best.candidate.name}{' (stream-K form)' if best.streamk else ''}, the best unswapped kernel (the other "
           f"rules' pick: {picked.chosen_by}, {picked.spec.bm} x {picked.spec.bn})")
    return Choice(spec, why + note, "cost-model+swap-ab", swap_ab=True)
