"""A cost model of the shipped kernel families: predicted time of a shape from each kernel's measured constants.

For a kernel with a BM x BN x BK tile on ``sm_count`` SMs (issue 16 item 4):

    tiles   = ceil(M / BM) x ceil(N / BN)          (a 2x1 cluster pairs tiles along M: ceil(M / 2BM) x 2 rows of them)
    rounds  = ceil(tiles / (sm_count x slots))     (slots: CTAs resident per SM; 1 for every kernel here)
    k_tiles = ceil(K / BK)                         (BK = 128 bytes of K: 64 for 16-bit inputs, 128 for e4m3;
                                                    the K tail costs a whole K-tile)
    compute = launch + rounds x (per_tile + k_tiles x per_k_tile x (off_sector if rows are off a 32-byte sector))
    floor   = launch + (A + B + D bytes) / bandwidth
    time    = max(compute, floor)

The last partial wave counts whole (``rounds``), tile padding counts as work (the tile computes its padded rows),
the row-pitch phase scales the K loop (rows off a sector cost extra L2 work: docs/performance.md, run 25), and the
bandwidth floor bounds thin shapes. The constants (launch, per_tile, per_k_tile, off_sector, bandwidth) are fitted
per kernel from one device sweep over calibration shapes that are neither issue 16's named shapes nor the held-out
set (tools/exp_cost.py calibrate, tools/fit_cost.py); they ship as data, one table per input family:
the ``16bit`` and ``e4m3`` families of a calibration (``calibration``; the H200's: ptxgen/tuning/h200_calibration.json; e4m3 has its own device sweep:
tools/exp_cost_e4m3.py calibrate; FP8 does twice the MMA work per byte of K, so no constant carries over).

Stream-K (``best_streamk``): a persistent cooperative kernel with BM <= 128 may split its last, partial round along K
(ptxgen.derive.store.streamk); its time is the full rounds as above plus one round of per_tile + ceil(T / S) K-tiles + S
partial tiles of f32 through one SM (STREAMK_SM_BYTES_PER_US). ``rank(..., stream_k=True)`` ranks such a kernel by
that time where it is STREAMK_MIN_GAIN faster than the kernel whole.

Pure arithmetic: no GPU, no compiler.
"""


from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import rules
from .calibration import Calibration, Costs, Family, calibration_for, parse_kernels
from .candidates import BY_NAME, CANDIDATES, COST_FAMILY, Candidate, k_tiles

def tile_grid(m: int, n: int, bm: int, bn: int, cluster_m: int = 1) -> int:
    """Tiles launched: ceil(M / BM) x ceil(N / BN), the row count rounded up to whole clusters along M."""
    tm = -(-m // bm)
    tm = -(-tm // cluster_m) * cluster_m
    return tm * -(-n // bn)


def rounds(tiles: int, slots: int) -> int:
    """Rounds of ``slots`` concurrent tiles that ``tiles`` take: the last partial round counts whole."""
    return -(-tiles // slots) if tiles > 0 else 0


def time_terms_us(c: Candidate, costs: Costs, m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
                  element_bytes: int = 2) -> tuple[float, float]:
    """(compute, floor): the two terms of the prediction (see the module's docstring), microseconds."""
    r = rounds(tile_grid(m, n, c.bm, c.bn, c.cluster_m), sm_count * costs.slots_per_sm)
    per_k = costs.ktile_us * (costs.off_sector if off_sector else 1.0)
    compute = costs.launch_us + r * (costs.tile_us + k_tiles(k, element_bytes) * per_k)
    nbytes = element_bytes * (m * k + n * k + m * n)
    floor = costs.launch_us + nbytes / (costs.bandwidth_tbps * 1e6)
    return compute, floor


def predict_us(c: Candidate, costs: Costs, m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
               element_bytes: int = 2) -> float:
    """Predicted time of ``c`` on an M x N x K problem: the larger of the compute and the bandwidth terms."""
    return max(time_terms_us(c, costs, m, n, k, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes))


# -- stream-K for the last wave (ptxgen.derive.store.streamk) -----------------------------------------------------------------
STREAMK_MAX_SPLITS = 16  # the most splits the model considers (derive.tile.rules.MAX_STREAM_K)
STREAMK_MIN_K_TILES = 4  # derive.store.streamk.MIN_K_TILES_PER_SPLIT
# One SM's f32 partial-tile traffic to and from L2, bytes per microsecond. ASSUMED, not fitted (no stream-K kernel had
# run when it was written): about 100 GB/s per SM, the order of 64 B a clock per SM at 1.7 GHz. Run 1 of
# 2026-12-01-streamk measured the split round within 2x of it (docs/performance.md, "Stream-K for the last wave").
STREAMK_SM_BYTES_PER_US = 100e3
# A split round's fixed cost beyond its K-tiles and partial-tile bytes: the partials' store, the flag's release and the
# owner's acquire and reload, a memory round trip or two. Fitted on the H100 (runs/2026-12-07-h100-single-wave-streamk:
# run 1: 41 few-tile bf16 and e4m3 picks, one round split 2-9 ways, measured 2.9 us (median) over the model without it;
# run 2, a draw no fit saw: the split's predictions within 0.8-2.6 us (median) of the measured times).
STREAMK_FIXUP_US = 3.0


@dataclass(frozen=True)
class StreamKPrediction:
    splits: int  # S (1: no split)
    last_items: int  # L: the last round's items (tiles, or cluster tiles)
    plain_last_us: float  # the last round as a whole round
    split_last_us: float  # the last round split S ways, the owners' sum included
    predicted_us: float  # the whole kernel with the split last round


def streamk_cap(items: int, clusters: int, k_tile_count: int, max_splits: int) -> tuple[int, int]:
    """(S, L) as the kernel computes them (derive.store.streamk.StreamKPlan.layout) for at most ``max_splits`` splits."""
    last = items % clusters
    s = min(max_splits, clusters // last, k_tile_count // STREAMK_MIN_K_TILES) if last else 1
    return (s, last) if s >= 2 else (1, last)


def predict_streamk(c: Candidate, costs: Costs, m: int, n: int, k: int, max_splits: int, *, off_sector: bool = False,
                    sm_count: int = 132, element_bytes: int = 2) -> StreamKPrediction:
    """The compute term with the last round split along K (``max_splits`` at most): full rounds as in
    :func:`time_terms_us`, then one round of per_tile + ceil(T / S) K-tiles + the fixup: each split z > 0 stores a
    BM x BN f32 tile, its owner reads S - 1 of them (at STREAMK_SM_BYTES_PER_US per SM)."""
    items = tile_grid(m, n, c.bm, c.bn, c.cluster_m) // c.cluster_m
    # a stream-K grid fills every SM (derive.tile.abi.KernelABI.fills_sms), so fewer items than clusters split too (before
    # 2026-12-07 the grid was min(items, SMs): 838 x 1309 x 8000's 42 tiles predicted "3 ways" never split, 0.53x).
    # rules.STREAM_K_SINGLE_WAVE off: no split predicted below one full round (the picks before that change)
    clusters = sm_count * costs.slots_per_sm // c.cluster_m
    clusters = clusters if rules.STREAM_K_SINGLE_WAVE else min(items, clusters)
    t = k_tiles(k, element_bytes)
    per_k = costs.ktile_us * (costs.off_sector if off_sector else 1.0)
    whole = costs.tile_us + t * per_k
    s, last = streamk_cap(items, clusters, t, max_splits)
    full = items // clusters
    plain_last = whole if last else 0.0
    tile_bytes = c.bm * c.bn * 4
    split_last = (costs.tile_us + -(-t // s) * per_k + tile_bytes * s / STREAMK_SM_BYTES_PER_US + STREAMK_FIXUP_US
                  if s > 1 else plain_last)
    return StreamKPrediction(s, last, plain_last, split_last, costs.launch_us + full * whole + split_last)


def best_streamk(c: Candidate, costs: Costs, m: int, n: int, k: int, *, off_sector: bool = False,
                 sm_count: int = 132, element_bytes: int = 2) -> StreamKPrediction | None:
    """The split count (2..STREAMK_MAX_SPLITS) with the least predicted time, or None where the kernel has no stream-K
    form (not persistent cooperative with BM <= 128, or a narrow tile) or no split is possible."""
    if c.schedule != "persistent" or c.consumers != "cooperative" or c.bm > 128 or c.narrow:
        return None
    preds = [predict_streamk(c, costs, m, n, k, s, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes)
             for s in range(2, STREAMK_MAX_SPLITS + 1)]
    preds = [p for p in preds if p.splits > 1]
    return min(preds, key=lambda p: (p.predicted_us, p.splits)) if preds else None


# -- swap-AB with a tile that fits M (runtime.choose's swap-ab rule for M > 128) ------------------------------------------
# D^T = B A^T: the kernel's M is the caller's N (128-row tiles), its N the caller's M, covered by t tiles of BN' = M / t
# rounded up to a multiple of 8 (a wgmma N). 333 rows: 2 tiles of 168 (336 rows) where a 128-row tile pads them to 384.
# One CTA per tile (the tile schedule, direct M-major stores). Its constants: the cost table's "swap" entry, fitted from
# one device sweep of swapped tiles of several BN' (tools/exp_waves.py swap, tools/fit_cost.py fitswap): per K-tile
# ktile_us x BN' / SWAP_FAMILY_BN (a wgmma's issue time and a stage's B bytes grow with N).
SWAP_BM = 128
SWAP_FAMILY_BN = 192  # the swap entry's ktile_us is per K-tile of a 128 x 192 tile
SWAP_MIN_BN = 104  # the narrowest swapped tile measured (runs/2026-12-01-swap-waves run 1)
SWAP_MAX_BN = 256  # the widest wgmma N


@dataclass(frozen=True)
class SwapPrediction:
    bn: int  # BN' (over the caller's M)
    m_tiles: int  # tiles over the caller's M
    ctas: int  # ceil(N / SWAP_BM) x m_tiles
    rounds: int
    predicted_us: float


def swap_tiles(m: int) -> list[tuple[int, int]]:
    """(BN', tiles over M) for every tile count t whose BN' = ceil(M / t) rounded up to a multiple of 8 lies in
    SWAP_MIN_BN..SWAP_MAX_BN, fewest tiles first (each BN' once)."""
    out: list[tuple[int, int]] = []
    for t in range(1, m // SWAP_MIN_BN + 2):
        bn = -(-(-(-m // t)) // 8) * 8
        if SWAP_MIN_BN <= bn <= SWAP_MAX_BN and all(bn != b for b, _ in out):
            out.append((bn, -(-m // bn)))
    return out


def predict_swap(costs: Costs, family_bn: int, m: int, n: int, k: int, bn: int, *, off_sector: bool = False,
                 sm_count: int = 132, element_bytes: int = 2) -> SwapPrediction:
    """The swapped kernel's compute term on the caller's M x N x K: ceil(N / 128) x ceil(M / BN') CTAs in rounds of
    ``sm_count``, each per_tile + K-tiles x per_k_tile x BN' / ``family_bn``."""
    m_tiles = -(-m // bn)
    ctas = -(-n // SWAP_BM) * m_tiles
    r = rounds(ctas, sm_count * costs.slots_per_sm)
    per_k = costs.ktile_us * bn / family_bn * (costs.off_sector if off_sector else 1.0)
    return SwapPrediction(bn, m_tiles, ctas, r, costs.launch_us + r * (costs.tile_us + k_tiles(k, element_bytes) * per_k))


@dataclass(frozen=True)
class SwapStreamKPrediction:
    bn: int  # BN' (over the caller's M)
    m_tiles: int
    ctas: int  # the swapped tiles: ceil(N / SWAP_BM) x m_tiles, more than one round of them
    splits: int  # S of the last round (derive.store.streamk)
    predicted_us: float


def predict_swap_streamk(costs: Costs, family_bn: int, m: int, n: int, k: int, bn: int, max_splits: int, *,
                         sm_count: int = 132, element_bytes: int = 2) -> SwapStreamKPrediction:
    """The swapped kernel persistent, its last partial round split along K (at most ``max_splits``): :func:`predict_streamk`
    of the 128 x ``bn`` tile over the kernel's N x M problem with the swapped family's constants (per K-tile scaled by
    BN' / ``family_bn``). The constants were fitted on the one-CTA-per-tile kernel; the persistent loop and the fix-up's
    traffic are the stream-K terms."""
    tile = Candidate(f"swap{SWAP_BM}x{bn}", SWAP_BM, bn, stages=0)
    scaled = dataclasses.replace(costs, ktile_us=costs.ktile_us * bn / family_bn)
    p = predict_streamk(tile, scaled, n, m, k, max_splits, sm_count=sm_count, element_bytes=element_bytes)
    m_tiles = -(-m // bn)
    return SwapStreamKPrediction(bn, m_tiles, -(-n // SWAP_BM) * m_tiles, p.splits, p.predicted_us)


def best_swap_streamk(costs: Costs, family_bn: int, m: int, n: int, k: int, *, sm_count: int = 132,
                      element_bytes: int = 2) -> SwapStreamKPrediction | None:
    """Of the swapped tiles with more than one round and a split last round, the least predicted time (ties: fewer
    splits, then fewer tiles over M), or None where there is none."""
    preds = [predict_swap_streamk(costs, family_bn, m, n, k, bn, sp, sm_count=sm_count, element_bytes=element_bytes)
             for bn, _ in swap_tiles(m) for sp in range(2, STREAMK_MAX_SPLITS + 1)]
    preds = [p for p in preds if p.splits > 1 and p.ctas > sm_count * costs.slots_per_sm]
    return min(preds, key=lambda p: (p.predicted_us, p.splits, p.m_tiles)) if preds else None


def best_swap(costs: Costs, family_bn: int, m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
              element_bytes: int = 2) -> SwapPrediction | None:
    """The swapped tile with the least predicted time (ties: the fewer tiles over M), or None where M has none."""
    preds = [predict_swap(costs, family_bn, m, n, k, bn, off_sector=off_sector, sm_count=sm_count,
                          element_bytes=element_bytes) for bn, _ in swap_tiles(m)]
    return min(preds, key=lambda p: (p.predicted_us, p.m_tiles)) if preds else None


# The shapes the swapped family's constants are fitted on, (M, N, K, BN'): ``ptxgen tune --calibrate`` measures these
# (runtime.choose.calibrate), the H200's were fitted on the same shapes and 333 x 8192 x 8192 (runs/2026-12-01-swap-waves
# run 1): one and two rounds of swapped tiles, M 200 to 450.
SWAP_FIT_POINTS = ((300, 8192, 8192, 152), (400, 8192, 6144, 200), (350, 16384, 4096, 176), (450, 6144, 8192, 232),
                   (200, 8192, 8192, 104))


def swap_calibrated(m: int, n: int, k: int) -> bool:
    """Whether the caller's M x N x K lies in the box of SWAP_FIT_POINTS, where the swapped family's constants were
    fitted. The kernels' test (``calibrated``: compute-bound by COMPUTE_MARGIN) does not fit this family: its own fit
    points read B once from memory at 2.2-2.6 TB/s on the H100 (300 x 8192 x 8192 in 66.3 us,
    runs/2026-12-06-h100-calibration), so that test refused even the shapes the constants came from."""
    box = [(min(p[i] for p in SWAP_FIT_POINTS), max(p[i] for p in SWAP_FIT_POINTS)) for i in range(3)]
    return all(lo <= x <= hi for x, (lo, hi) in zip((m, n, k), box))


MIN_K_TILES = 16  # the calibration's shortest K: 1024, 16 K-tiles of 64 (16-bit inputs; 8 K-tiles of 128 for e4m3)
COMPUTE_MARGIN = 1.25  # the compute term must exceed the bandwidth floor by this much


def calibrated(c: Candidate, costs: Costs, m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
               element_bytes: int = 2) -> bool:
    """Whether the shape is where the constants were fitted: K of at least MIN_K_TILES K-tiles, and compute-bound (the
    compute term at least COMPUTE_MARGIN x the floor). Outside it (launch- or bandwidth-bound shapes) the model ranks
    by constants it never saw matter: on the H200 (run 4) its picks there lost 12-13% (128 x 16384 x 4096 and
    513 x 9929 x 64) against the nearest-fit rule's."""
    compute, floor = time_terms_us(c, costs, m, n, k, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes)
    min_k_tiles = MIN_K_TILES * element_bytes // 2  # the same shortest K (1024) in this type's K-tiles
    return k_tiles(k, element_bytes) >= min_k_tiles and compute >= COMPUTE_MARGIN * floor


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    predicted_us: float
    streamk: StreamKPrediction | None = None  # the candidate's stream-K form, where predicted_us is that form's time


STREAMK_MIN_GAIN = 0.02  # a stream-K form counts only where it is predicted this much faster than the kernel whole


def _ranked(c: Candidate, costs: Costs, m: int, n: int, k: int, off_sector: bool, sm_count: int, stream_k: bool,
            element_bytes: int) -> Ranked:
    plain = predict_us(c, costs, m, n, k, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes)
    sk = (best_streamk(c, costs, m, n, k, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes)
          if stream_k else None)
    if sk is not None:
        floor = time_terms_us(c, costs, m, n, k, off_sector=off_sector, sm_count=sm_count, element_bytes=element_bytes)[1]
        sk_us = max(sk.predicted_us, floor)
        if sk_us < plain * (1 - STREAMK_MIN_GAIN):
            return Ranked(c, sk_us, sk)
    return Ranked(c, plain)


def rank(costs: dict[str, Costs], m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
         narrow: bool = True, element_bytes: int = 2, stream_k: bool = False) -> list[Ranked]:
    """Every candidate with constants in ``costs``, fastest predicted first (ties: the order of CANDIDATES). With
    ``stream_k``, a candidate whose stream-K form is predicted STREAMK_MIN_GAIN faster is ranked by that form."""
    out = [_ranked(c, costs[c.name], m, n, k, off_sector, sm_count, stream_k, element_bytes)
           for c in CANDIDATES if c.name in costs and (narrow or not c.narrow)]
    return sorted(out, key=lambda r: r.predicted_us)  # stable: CANDIDATES order on ties


TIE_TOLERANCE = 0.02  # predictions closer than this are ties: the fit's median error is 2.2% (runs/2026-12-01-cost-model)


def pick(costs: dict[str, Costs], m: int, n: int, k: int, *, off_sector: bool = False, sm_count: int = 132,
         narrow: bool = True, tolerance: float = TIE_TOLERANCE, element_bytes: int = 2,
         stream_k: bool = False, whole_first: bool = False) -> tuple[Ranked, list[Ranked]]:
    """(the pick, the ranking): of the candidates predicted within ``tolerance`` of the fastest, the first in
    CANDIDATES order (the tuning table's winners first, then their cluster variants, then the BN = 160 / 224 tiles): a
    difference the model cannot resolve is no reason to leave the kernels measured most. ``whole_first``: of those, the
    kernels ranked whole before the stream-K forms (the stream-K term was fitted on 16-bit runs)."""
    ranked = rank(costs, m, n, k, off_sector=off_sector, sm_count=sm_count, narrow=narrow, element_bytes=element_bytes,
                  stream_k=stream_k)
    if not ranked:
        raise ValueError("no candidate has costs")
    close = {r.candidate.name for r in ranked if r.predicted_us <= ranked[0].predicted_us * (1 + tolerance)}
    order = (lambda r: (whole_first and r.streamk is not None, CANDIDATES.index(r.candidate)))
    first = next(r for r in sorted(ranked, key=order) if r.candidate.name in close)
    return first, ranked


def parse_costs(doc: dict) -> dict[str, Costs]:
    """The ``kernels`` object of a calibration's family: name -> Costs (names not in CANDIDATES are left out)."""
    return parse_kernels(doc, BY_NAME)


def family_doc(family: str = "16bit") -> dict | None:
    """The reference calibration's JSON object of an input family (``calibration.REFERENCE``), or None."""
    f = calibration_for(None).families.get(family)
    return f.doc if f else None


def shipped_costs(family: str = "16bit") -> tuple[tuple[str, str], dict[str, Costs]] | None:
    """((dtype family, arch), costs) of an input family in the reference calibration, or None where it has none."""
    return CostModel(calibration_for(None)).family_costs(family)


def shipped_swap_costs(family: str = "16bit") -> Costs | None:
    """The swapped family's constants in the reference calibration (its ``swap`` entry), or None where it has none."""
    f = calibration_for(None).families.get(family)
    return f.swap if f else None


@dataclass(frozen=True)
class CostModel:
    """The one cost model of a chooser call: a device's calibration and SM count. The cost-model rule, the swap rule for
    M > 128 and the stream-K forms all ask it; it asks nothing of the rules."""

    calibration: Calibration
    sm_count: int = 132

    def family(self, dtype: str, arch: str) -> Family | None:
        """The constants for ``dtype`` inputs on ``arch``, or None where the calibration has none."""
        f = self.calibration.families.get(COST_FAMILY.get(dtype, ""))
        return f if f is not None and f.arch == arch else None

    def family_costs(self, family: str) -> tuple[tuple[str, str], dict[str, Costs]] | None:
        f = self.calibration.families.get(family)
        return ((family, f.arch), dict(f.kernels)) if f else None

    def costs(self, dtype: str, arch: str) -> dict[str, Costs] | None:
        f = self.family(dtype, arch)
        return dict(f.kernels) if f else None

    def swap_costs(self, dtype: str, arch: str) -> Costs | None:
        f = self.family(dtype, arch)
        return f.swap if f else None

    def predict(self, c: Candidate, costs: Costs, m: int, n: int, k: int, **kw) -> float:
        return predict_us(c, costs, m, n, k, sm_count=self.sm_count, **kw)

    def calibrated(self, c: Candidate, costs: Costs, m: int, n: int, k: int, **kw) -> bool:
        return calibrated(c, costs, m, n, k, sm_count=self.sm_count, **kw)

    def streamk(self, c: Candidate, costs: Costs, m: int, n: int, k: int, **kw) -> StreamKPrediction | None:
        return best_streamk(c, costs, m, n, k, sm_count=self.sm_count, **kw)

    def swap_streamk(self, costs: Costs, m: int, n: int, k: int, **kw) -> SwapStreamKPrediction | None:
        return best_swap_streamk(costs, SWAP_FAMILY_BN, m, n, k, sm_count=self.sm_count, **kw)

    def swap_calibrated(self, m: int, n: int, k: int) -> bool:
        return swap_calibrated(m, n, k)

    def swap(self, costs: Costs, m: int, n: int, k: int, **kw) -> SwapPrediction | None:
        return best_swap(costs, SWAP_FAMILY_BN, m, n, k, sm_count=self.sm_count, **kw)

    def rank(self, costs: dict[str, Costs], m: int, n: int, k: int, **kw) -> list[Ranked]:
        return rank(costs, m, n, k, sm_count=self.sm_count, **kw)

    def pick(self, costs: dict[str, Costs], m: int, n: int, k: int, **kw) -> tuple[Ranked, list[Ranked]]:
        return pick(costs, m, n, k, sm_count=self.sm_count, **kw)
