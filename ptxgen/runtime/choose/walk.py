"""Which kernel runs a shape: the one place that decides (``ptxgen bench`` without tile flags, ``ptxgen.gemm``).

Rules, in order; each names itself in ``Choice.chosen_by`` (``bench --json`` reports it):

``tuned``        the shape is in the tuning table: its measured winner.
``swap-ab``      M <= ``rules.SWAP_AB_MAX_M`` (64) against weights N x K >= ``rules.SWAP_AB_MIN_WEIGHT`` (4096 x 4096) on sm_90a, bf16/f16
                 and e4m3: the kernel computes D^T = B A^T (the weights' N rows take the MMA's M, the few rows of A a
                 BN of M rounded up to 8) and stores it M-major (``--d-major m``, ``derive.store.output``) into the row-major
                 D; the caller swaps the operands (``Choice.swap_ab``). One CTA per BM x BN tile, no split of K; BM 64
                 or 128, whichever gives the most CTAs in one wave (``swap.swap_ab_tile``), and only where they fill at least
                 ``rules.SWAP_AB_MIN_FILL`` (40%) of the SMs. Measured on the H200 (runs/2026-12-01-swapab-small-m run 1,
                 a one-off experiment of 2026-12-01: kernel time against cuBLAS / torch._scaled_mm and the rules below in one
                 process): bf16 M in {1, 16, 17, 24, 32, 48, 64} x (N, K) in {(4096, 4096), (7168, 16384), (16384,
                 4096)}: this rule's tile was the fastest candidate or within 1.5% of it on all 21 (59.7-63.9 us at
                 7168 x 16384, 3.68-3.94 TB/s of weights; 11.6-14.2 us at 4096 x 4096 where split-K took 16.0-18.5);
                 the earlier rules' picks took 1-59% longer on 19 of them (0.2% and 0.7% less at 16 and 1 x 16384 x
                 4096). At M = 128 the swap tiles lost (15.2 / 24.6 against 14.3 us at 4096 x 4096). e4m3 at M = 16
                 and 64: 1.007-3.2 x torch._scaled_mm's speed where the earlier rules ran 0.92-1.69 (64 x 7168 x
                 16384: 35.5 against 39.0 us). Before (runs/2026-12-01-swapab): M <= 16, N x K >= 16384 x 4096.
``small-m``      M <= 128 against a wide N: a BM = 64 tile whose CTAs fill between 40% and 100% of the SMs in one
                 wave (the widest such BN of 128, 64; the most CTAs when none reaches 40%). Measured on the H200
                 (docs/performance.md, run 25: 12 decode shapes, 8 tiles each): the tuned 128 x 192 / 128 x 256 tiles
                 run 0.48-0.96 of cuBLAS there, because N / 256 CTAs leave most SMs idle and a 128-row tile of
                 which 1..127 rows are real streams twice the weights per useful row. Where every BM = 64 tile
                 needs two waves (N > 8448 at M > 64), the cost table's 128 x 128 persistent ping-pong kernel
                 (``rules.SMALL_M_WIDE_KERNEL``) where its CTAs fill 40-100% of the SMs (``small_m_wide_ctas``): at 128 x
                 16384 x 4096 the fastest of six (runs/2026-12-01-swapab-small-m run 3: bf16 40.2 us against nearest-fit's
                 128 x 192 at 43.3; e4m3 23.2 against its 128 x 256 at 26.5 us, which ran 0.82-0.89 of
                 torch._scaled_mm in three of four earlier runs); at 96 x 12288 x 4096 the 128 x 128 tile-scheduled
                 kernel gained 8% (bf16) and 29% (e4m3) over nearest-fit (the ping-pong one was not run there).
``small-n``      N <= 128 (and M > 128): the mirror image, BN = 64 and BM of 128 or 64 by the same rule. Added after
                 run 25 had measured the held-out set with the older rules (10711 x 12 x 7832 ran at 0.625 there),
                 by symmetry with ``small-m``, not fitted to any shape. Where every such tile needs two waves (N in
                 65..128 past 8448 rows, N <= 64 past 16896 on 132 SMs): 128 x 128 persistent tiles with the 2x1
                 cluster multicasting B (``narrow.small_n_wide_kernel``: BN 64 for N <= 64, else 128), since each M-tile otherwise reads all of B
                 from L2 again (H100, runs/2026-12-06-h100-small-n: 12453 x 120 x 14800 0.735 -> 1.017 of cuBLAS).
``split-k``      a ``small-m`` tile whose CTAs leave SMs idle, against N x K >= ``rules.SPLIT_MIN_WEIGHT``: the same tile
                 with K split S ways (grid z; f32 partials that the last split to arrive sums in a fixed order, one launch, ``derive.store.splitk``),
                 S the largest that keeps the CTAs in one wave with at least ``rules.SPLIT_MIN_K_TILES`` K-tiles a split.
                 Measured on the H200 (docs/performance.md, run 27): 0.74-0.99 -> 0.98-1.43 on the decode shapes
                 it splits. Not for few waves: split 128 x 192 / 128 x 256 tiles ran 0.54-0.63 of cuBLAS on
                 333 x 8192 x 8192, 2500 x 10000 x 4000, 12000 x 1000 x 6000 and 128 x 16384 x 4096 (run 27).
                 ``rules.SPLIT_K_RULE`` turns it off. At any weight (``rules.TINY_SPLIT_RULE``): a ``small-m`` or
                 ``small-n`` tile (e4m3 too) whose CTAs fill at most ``rules.TINY_SPLIT_MAX_FILL`` (1/4) of the SMs
                 against a long K, split the most ways up to ``rules.TINY_SPLIT_MAX`` (8) that keep one wave and
                 ``rules.SPLIT_MIN_K_TILES`` a split (``narrow.tiny_splits``; 5 x 2 x 6816: one CTA and 107 K-tiles -> 8
                 splits); its why says "few tiles, long K". Measured on the H100 (tools/exp_tiny_split.py, rules.py).
``cost-model``   the least predicted time of ``costmodel``'s kernel families, from constants measured on the
                 H200 (ties within 2% to the table's kernels) on sm_90a, where the shape is compute-bound with K of at
                 least 1024 (the range the constants were fitted on). 16-bit inputs: the calibration's ``16bit`` family (H200: ptxgen/tuning/h200_calibration.json),
                 measured in the same process against the rule before it (runs/2026-12-01-cost-model, run 4): 5000^3
                 0.93 against 0.90, 3000 x 7000 x 5000, 1500 x 9000 x 3000, 2500 x 10000 x 4000 +1-3%. e4m3:
                 its ``e4m3`` family (its own sweep, runs/2026-12-01-fp8-shapes run 1), not at M or
                 N <= 128 and not for rows 32/64/96 B past a 128-byte line (phases its calibration did not see); same
                 process against nearest-fit (runs 1 and 2): rows off a sector 0.82-0.99 -> 0.96-1.19 (the 2x1
                 kernels), 8192 x 8192 x 1024 1.11-1.12 -> 1.17-1.22. ``rules.COST_MODEL`` turns it off.
``cost-model+swap-ab``  (16-bit inputs, sm_90a, M > 128; after ``tuned``, ``cost-model`` and ``nearest-fit``, which it may
                 replace) swap-AB with a tile that fits M: D^T = B A^T with 128 x BN' tiles over N x M, BN' the least multiple
                 of 8 that covers M in one or two tiles (333 rows: 2 x 168 = 336, where 128-row tiles pad them to 384), one
                 CTA per tile, D stored M-major; taken where the cost model, with the swapped family's own constants
                 (``CostModel.swap_costs``, fitted from runs/2026-12-01-swap-waves run 1 by tools/fit_cost.py
                 fitswap), predicts it ``rules.SWAP_FIT_MIN_GAIN`` faster than every unswapped candidate, in one round, rows on a
                 32-byte sector, K >= 1024 and compute-bound. Measured on the H200, same process, against the kernel the
                 rules before it pick (runs 1-2): 333 x 8192 x 8192 -2.5% time (0.916/0.935 -> 0.935/0.951 of cuBLAS),
                 300 x 8192 x 8192 -8%, 400 x 8192 x 6144 -16%, 200 x 8192 x 8192 -26%; on three shapes measured after the
                 fit, 207 x 16384 x 8192 -8%, 331 x 8200 x 8192 -12% and -1% (two rounds), 455 x 8192 x 8192 +1.8% (a
                 loss). ``rules.SWAP_FIT_RULE``
                 turns it off.
``+stream-k``    (after ``cost-model``, 16-bit and e4m3 inputs) the cost model ranked each persistent cooperative kernel also
                 with its last, partial round of tiles split along K over the otherwise idle CTAs (``derive.store.streamk``,
                 ``costmodel.best_streamk``; that form counts where it is predicted ``STREAMK_MIN_GAIN`` faster), and
                 the pick is such a form. Measured on the H200 (docs/performance.md, "Stream-K for the last wave", runs
                 1-2 of 2026-12-01-streamk). ``rules.STREAM_K_RULE`` turns it off. ``ptxgen bench`` and ``ptxgen.gemm`` run
                 it (gemm: a workspace per device and stream, ``api.launch.launchplan.streamk_workspace``). e4m3 (``rules.STREAM_K_FAMILIES``)
                 from runs/2026-12-01-swapab-small-m run 1: 5120^3 224.0 -> 207.7 us (0.94 -> 1.02 of torch._scaled_mm),
                 5120 x 5120 x 5008 206.6 -> 198.2 us, 1504 x 9008 x 3024 77.9 -> 77.1 us. For e4m3 a stream-K form
                 must beat the whole kernels beyond the tie tolerance (``rules.STREAM_K_WHOLE_FIRST``): at 3008 x 7008 x 5008
                 the 128 x 256 2x1 kernel's form, a tie with the whole 128 x 192 2x1 one by the table's order, ran
                 174.1 / 166.2 against 166.7 / 163.4 us (runs 1 / 3). After ``nearest-fit`` too (``_nearest_stream_k``),
                 where the cost table has nearest-fit's kernel and the shape is in its calibrated range: e4m3 rows
                 32/64/96 B past a line
                 (2512 x 10000 x 4000: 190.2 -> 178.0 us, 0.955 -> 1.020).
``nearest-fit``  of the winners of the three nearest tuned shapes (log distance), the one whose tiles waste the
                 least work (tile padding x the last wave's occupancy: ``tile_fit``); the nearest on ties.
``default``      no tuned entry for the type and arch.

``small-m``, ``small-n`` and ``+off-sector`` on nearest-fit picks apply to 16-bit inputs (measured on bf16). e4m3
takes ``small-m`` (BM = 64, the table's BK = 128) and ``split-k`` against N x K >= ``FP8_SMALL_M_MIN_WEIGHT``
(4096 x 4096, the 16-bit rule's ``rules.SPLIT_MIN_WEIGHT``): at 7168 x 16384 the table's 128 x 256 tile ran 0.48-0.55 of
torch._scaled_mm (runs/2026-12-01-gpu-tier/extra2) and the rule 0.92-1.03 (runs/2026-12-01-fp8rules); at 4096 x 4096,
16384 x 4096 and three more small-M shapes the rule's kernels took 17-27 us where the 128 x 256 tile took 22-43 us, in
the same process (runs/2026-12-01-fp8-shapes run 2). No small-n rule for e4m3. Rows off a sector in e4m3 get the 2x1
cluster through the e4m3 cost table's measured off-sector factors (the cost-model rule), not through nearest-fit.

Operand rows that do not start on a 32-byte L2 sector (K x element bytes not a multiple of 32 with tight rows):
their tensor maps take 128-byte L2 promotion at launch (``derive.operands.tma.l2_promotion_for_rows``), and a persistent
cooperative kernel runs in a 2x1 cluster that multicasts B (``+off-sector`` in ``chosen_by``).
"""


from __future__ import annotations

import dataclasses
import math

from ...derive.tile.spec import TileSpec, make_spec
from ...isa.types import DType, SpecError
from . import rules
from .calibration import calibration_for
from .candidates import BY_NAME, COST_FAMILY
from .choice import SM_COUNT, SMALL_M_MAX, Choice, Device, Problem, narrow_spec
from .costmodel import STREAMK_MIN_GAIN, CostModel, k_tiles, rounds, tile_grid
from .narrow import (fp8_small_n_kernel, small_n_wide_kernel, small_m_splits, small_m_tile, small_m_wide_ctas, small_n_tile,
                     small_n_wide_ctas, split_spec, tile_fit, tiny_splits, tiny_tile)
from .pitch import mid_line, pitch_note, with_pitch
from .swap import swap_ab, swap_fit
from .tune import default_spec, table_entries


def choose(problem: Problem | str, device: Device | str | None = None, m: int | None = None, n: int | None = None,
           k: int | None = None, table: list[dict] | None = None, *, lda: int | None = None, ldb: int | None = None,
           sm_count: int | None = None, allow_swap: bool = True) -> Choice:
    """The kernel for a problem on a device: ``choose(Problem(...), device)``. The device (``choice.Device``) picks the
    calibration (``calibration.calibration_for``), the tuning table (``calibration.table_name``) and the SM count; None:
    the reference calibration and table on ``SM_COUNT`` SMs. Spelled out, ``choose(dtype, arch, m, n, k, table, lda=,
    ldb=, sm_count=, allow_swap=)`` is the same problem with no device. ``table``: tuned entries instead of the device's
    table; ``sm_count``: SMs instead of the device's."""
    if isinstance(problem, Problem):
        p, dev = problem, device if isinstance(device, Device) else None
    else:
        p, dev = Problem(problem, str(device), m, n, k, lda, ldb, allow_swap), None
    sms = sm_count or (dev.sm_count if dev is not None else SM_COUNT)
    return _walk(p, CostModel(calibration_for(dev), sms), table_entries(table, dev))


def _walk(p: Problem, model: CostModel, entries: list[dict]) -> Choice:
    """The rules in ``rules.ORDER``, each asking the cost model (``model``) and the tile arithmetic below it."""
    dtype, arch, m, n, k, lda, ldb, allow_swap = p.dtype, p.arch, p.m, p.n, p.k, p.lda, p.ldb, p.allow_swap
    sm_count = model.sm_count
    entries, borrowed = _entries(dtype, arch, entries)
    if borrowed:
        c = _walk(dataclasses.replace(p, dtype=borrowed), model, entries)
        return dataclasses.replace(c, spec=_retyped_spec(c.spec, dtype),
                                   why=c.why + f" ({borrowed}'s tuning for {dtype} inputs: same width and MMA rate)")
    if not entries:
        # a type with no tuned entries of its own nor borrowed: the swap-ab kernel (bandwidth-bound, the input type's
        # width is what matters) still applies, from the default kernel's family
        swapped = (swap_ab(default_spec(dtype, arch), dtype, arch, m, n, k, pitch_note(k, 2, lda, ldb), sm_count)
                   if rules.SWAP_AB_RULE and allow_swap else None)
        return swapped or Choice(default_spec(dtype, arch), "default (no tuned entry for this type and arch)", "default")

    def distance(e: dict) -> float:
        return sum(abs(math.log(x) - math.log(e[d])) for x, d in ((m, "m"), (n, "n"), (k, "k")))

    ranked = sorted(entries, key=distance)
    first = TileSpec.from_json(ranked[0]["spec"])
    note = pitch_note(k, first.dtype.bytes, lda, ldb)
    measured = dtype in rules.MEASURED_DTYPES  # the narrow tiles and the cluster variant were measured on bf16 only
    off_sector = bool(note) and measured

    def or_swap(c: Choice) -> Choice:  # the swap-ab rule for M > 128 (cost-model+swap-ab) may replace the pick
        s = (swap_fit(c, first, dtype, arch, m, n, k, off_sector, model, note, rules.STREAM_K_RULE)
             if rules.SWAP_FIT_RULE and allow_swap and measured else None)
        return s or c

    if distance(ranked[0]) == 0:
        return or_swap(with_pitch(Choice(first, "tuned for this shape" + note, "tuned"), off_sector))
    swapped = swap_ab(first, dtype, arch, m, n, k, note, sm_count) if rules.SWAP_AB_RULE and allow_swap else None
    if swapped is not None:
        return swapped
    small = _narrow(first, dtype, arch, m, n, k, measured, sm_count, note)
    if small is not None:
        return small
    # the cost model ranks with each kernel's own measured off-sector factor, so it takes the rows' phase for e4m3 too.
    # e4m3 has no small-n rule and no cost-model calibration at M or N <= 128 (nearest-fit there), and its calibration
    # saw rows on a 128-byte line and rows off a sector only: rows 32/64/96 B past a line stay with nearest-fit
    unmeasured = not measured and (min(m, n) <= SMALL_M_MAX or mid_line(k, first.dtype.bytes, lda, ldb))
    picked = _cost_model(first, dtype, arch, m, n, k, bool(note), model, note) if rules.COST_MODEL and not unmeasured else None
    if picked is not None:
        return or_swap(picked)
    near = [(e, TileSpec.from_json(e["spec"])) for e in ranked[:rules.NEAREST_CANDIDATES]]
    fits = [round(tile_fit(spec, m, n, sm_count), 2) for _, spec in near]
    i = fits.index(max(fits))  # the first (nearest) of the best fits
    e, spec = near[i]
    why = f"tuned for {e['m']}x{e['n']}x{e['k']}, " + ("the nearest shape" if i == 0 else f"of the {len(near)} nearest shapes the best tile fit")
    c = with_pitch(Choice(spec, why + f" ({fits[i]:.2f} of the launched tiles' work is useful)" + note, "nearest-fit"), off_sector)
    return or_swap(_nearest_stream_k(c, dtype, arch, m, n, k, bool(note), model) if rules.STREAM_K_RULE and rules.COST_MODEL else c)


def _narrow(first: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, measured: bool, sm_count: int,
            note: str) -> Choice | None:
    """The small-m, small-n and split-k rules (``narrow``), or None where none applies."""
    narrow = []
    fp8_small_m = dtype == "e4m3" and n * k >= rules.FP8_SMALL_M_MIN_WEIGHT  # measured on e4m3 at that weight only
    tiny_ok = arch == "sm_90a" and rules.TINY_SPLIT_RULE and dtype in rules.TINY_SPLIT_DTYPES
    if arch == "sm_90a" and dtype == "e4m3" and rules.FP8_SMALL_N and n <= SMALL_M_MAX < m and not fp8_small_m:
        tiny = _tiny_split_only(first, m, n, k, sm_count, note) if tiny_ok else None
        return tiny or _fp8_small_n(first, dtype, arch, m, n, sm_count, note)
    if arch == "sm_90a" and not (measured or fp8_small_m) and tiny_ok:
        return _tiny_split_only(first, m, n, k, sm_count, note)  # e4m3 at a light weight: a split tile, or the rules below
    if arch == "sm_90a" and (measured or fp8_small_m):
        small = small_m_tile(m, n, sm_count)
        if small is not None:
            bn, stages, ctas = small
            narrow.append((rules.SMALL_M_BM, bn, stages, f"M = {m} <= {SMALL_M_MAX}", ctas, "small-m"))
        wide = small_m_wide_ctas(m, n, sm_count)
        spec = _candidate_spec(BY_NAME[rules.SMALL_M_WIDE_KERNEL], first, dtype, arch) if wide is not None else None
        if spec is not None:
            return Choice(spec, f"M = {m} <= {SMALL_M_MAX} and BM = 64 tiles would take two waves: the cost table's "
                          f"{rules.SMALL_M_WIDE_KERNEL} kernel (128 x 128, persistent ping-pong), {wide} CTAs for {sm_count} SMs"
                          + note, "small-m")
        small = small_n_tile(m, n, sm_count) if m > SMALL_M_MAX and measured else None
        tiles = small_n_wide_ctas(m, n, sm_count) if measured else None
        wide = small_n_wide_kernel(n)
        spec = _candidate_spec(wide, first, dtype, arch) if tiles is not None else None
        if spec is not None:
            return Choice(spec, f"N = {n} <= {SMALL_M_MAX} and BM x 64 tiles would take two waves: 128 x {wide.bn} tiles, "
                          f"persistent, the 2x1 cluster multicasting B ({tiles} tiles for {sm_count} SMs)" + note, "small-n")
        if small is not None:
            bm, stages, ctas = small
            narrow.append((bm, rules.SMALL_M_BM, stages, f"N = {n} <= {SMALL_M_MAX}", ctas, "small-n"))
    for bm, bn, stages, what, ctas, rule in narrow:
        try:
            spec = narrow_spec(first, bm, bn, stages)
        except SpecError:
            continue
        why = f"{what}: {bm} x {bn} tiles, {ctas} CTA{'s' if ctas > 1 else ''} for {sm_count} SMs in one wave"
        split_ok = rules.SPLIT_K_RULE and rule == "small-m" and n * k >= rules.SPLIT_MIN_WEIGHT
        splits = small_m_splits(ctas, k, spec.bk, sm_count) if split_ok else 1
        if splits > 1:
            return Choice(split_spec(spec, splits), why + f", K split {splits} ways: {ctas * splits} CTAs" + note, "split-k")
        tiny = tiny_splits(ctas, k, spec.bk, sm_count) if tiny_ok else 1
        if tiny > 1:
            return Choice(split_spec(spec, tiny), why + _tiny_why(ctas, tiny, k, spec.bk, sm_count) + note, "split-k")
        return Choice(spec, why + note, rule)
    return None


def _candidate_spec(c, first: TileSpec, dtype: str, arch: str) -> TileSpec | None:
    """Candidate ``c``'s kernel for ``dtype`` with the table's output type (``first``'s), or None where it is illegal."""
    try:
        return dataclasses.replace(c.spec(dtype, arch), out_dtype=first.out_dtype)
    except SpecError:
        return None


def _fp8_small_n(first: TileSpec, dtype: str, arch: str, m: int, n: int, sm_count: int, note: str) -> Choice | None:
    """e4m3, N <= 128 < M: narrow.fp8_small_n_kernel (128 x 128, or 256 x 128 up to 64 columns), or None where its spec
    is illegal (the rules after the narrow ones)."""
    c = fp8_small_n_kernel(n)
    spec = _candidate_spec(c, first, dtype, arch)
    if spec is None:
        return None
    tiles = -(-m // c.bm)
    return Choice(spec, f"N = {n} <= {SMALL_M_MAX} (e4m3): {c.bm} x {c.bn} tiles, {spec.stages} stages, persistent, TMA "
                  f"stores ({tiles} tiles for {sm_count} SMs)" + note, "small-n")


def _tiny_why(ctas: int, splits: int, k: int, bk: int, sm_count: int) -> str:
    return (f", K split {splits} ways: {ctas * splits} CTAs (few tiles, long K: {ctas} tile{'s' if ctas > 1 else ''} "
            f"<= {rules.TINY_SPLIT_MAX_FILL:g} of {sm_count} SMs, {-(-k // bk)} K-tiles of {bk}; the split "
            "rule for tiny problems at any weight, measured on the H100)")


def _tiny_split_only(first: TileSpec, m: int, n: int, k: int, sm_count: int, note: str) -> Choice | None:
    """The tiny split-k rule for a type the narrow rules do not take at this weight (e4m3 below
    rules.FP8_SMALL_M_MIN_WEIGHT): the narrow tile split along K where ``tiny_splits`` splits it, else None (the rules
    after the narrow ones)."""
    t = tiny_tile(m, n, sm_count)
    if t is None:
        return None
    bm, bn, stages, ctas, side = t
    splits = tiny_splits(ctas, k, first.bk, sm_count)
    if splits < 2:
        return None
    try:
        spec = split_spec(narrow_spec(first, bm, bn, stages), splits)
    except SpecError:
        return None
    what = f"M = {m} <= {SMALL_M_MAX}" if side == "m" else f"N = {n} <= {SMALL_M_MAX}"
    why = f"{what}: {bm} x {bn} tiles, {ctas} CTA{'s' if ctas > 1 else ''} for {sm_count} SMs in one wave"
    return Choice(spec, why + _tiny_why(ctas, splits, k, first.bk, sm_count) + note, "split-k")


def _nearest_stream_k(c: Choice, dtype: str, arch: str, m: int, n: int, k: int, off_sector: bool, model: CostModel) -> Choice:
    """nearest-fit's pick in its stream-K form where the cost table has the same kernel, the shape is in the range its
    constants were fitted on (``costmodel.calibrated``) and the form is predicted STREAMK_MIN_GAIN faster: e4m3 rows 32, 64
    or 96 B past a line, which the cost model does not rank (2512 x 10000 x 4000: 128 x 256 tiles in 7 rounds for 6.06
    rounds of work; its stream-K form ran 178.5 us against 190.2 whole, runs/2026-12-01-swapab-small-m run 1). ``c`` unchanged
    otherwise."""
    family = COST_FAMILY.get(dtype)
    costs = model.costs(dtype, arch) if family in rules.STREAM_K_FAMILIES else None
    if costs is None or c.spec.stream_k > 1:
        return c
    eb = c.spec.dtype.bytes
    for name, cost in costs.items():
        try:
            same = dataclasses.replace(BY_NAME[name].spec(dtype, arch), out_dtype=c.spec.out_dtype) == c.spec
        except SpecError:
            continue
        if same:
            cand = BY_NAME[name]
            break
    else:
        return c
    kw = dict(off_sector=off_sector, element_bytes=eb)
    if not model.calibrated(cand, cost, m, n, k, **kw):
        return c
    plain = model.predict(cand, cost, m, n, k, **kw)
    sk = model.streamk(cand, cost, m, n, k, **kw)
    if sk is None or sk.predicted_us >= plain * (1 - STREAMK_MIN_GAIN):
        return c
    why = (f"; stream-K: the last round's {sk.last_items} {'cluster ' if cand.cluster_m > 1 else ''}tiles split {sk.splits} ways "
           f"along K, {plain:.1f} -> {sk.predicted_us:.1f} us predicted ({name} of the cost table)")
    return Choice(dataclasses.replace(c.spec, stream_k=sk.splits), c.why + why, c.chosen_by + "+stream-k", c.swap_ab)


def _cost_model(like: TileSpec, dtype: str, arch: str, m: int, n: int, k: int, off_sector: bool, model: CostModel,
                note: str) -> Choice | None:
    """The candidate of ``costmodel`` with the least predicted time (ties within ``TIE_TOLERANCE``: the first in
    ``CANDIDATES``), or None where no cost table applies (no table, another arch or type) or the shape is outside the
    range the constants were fitted on (``costmodel.calibrated``)."""
    family, costs = COST_FAMILY.get(dtype), model.costs(dtype, arch)
    if costs is None:
        return None
    eb, sm_count = like.dtype.bytes, model.sm_count
    # the narrow tiles stay with the small-m / small-n rules: the formula fits them worst (up to 40% off on their own
    # calibration shapes, runs/2026-12-01-cost-model/run3_fit.log), so they are not ranked here
    usable = {}
    for name, cost in costs.items():
        try:
            usable[name] = (cost, BY_NAME[name].spec(dtype, arch))
        except SpecError:
            continue
    if not usable:
        return None
    r, ranked = model.pick({name: v[0] for name, v in usable.items()}, m, n, k, off_sector=off_sector,
                           narrow=False, element_bytes=eb, stream_k=rules.STREAM_K_RULE and family in rules.STREAM_K_FAMILIES,
                     whole_first=family in rules.STREAM_K_WHOLE_FIRST)
    c, spec = r.candidate, usable[r.candidate.name][1]
    if not model.calibrated(c, usable[c.name][0], m, n, k, off_sector=off_sector, element_bytes=eb):
        return None  # launch- or bandwidth-bound: the nearest-fit rule (measured better there, run 4)
    if spec.out_dtype is not like.out_dtype:
        spec = dataclasses.replace(spec, out_dtype=like.out_dtype)
    tiles = tile_grid(m, n, c.bm, c.bn, c.cluster_m)
    best = ranked[0]
    sk_why, rule = "", "cost-model" + ("+off-sector" if off_sector else "")
    sk = r.streamk
    if sk is not None:  # the pick's stream-K form: ranked by it (costmodel.rank), so it won by STREAMK_MIN_GAIN
        spec = dataclasses.replace(spec, stream_k=sk.splits)
        rule += "+stream-k"
        plain = model.predict(c, usable[c.name][0], m, n, k, off_sector=off_sector, element_bytes=eb)
        sk_why = (f"; stream-K: the last round's {sk.last_items} {'cluster ' if c.cluster_m > 1 else ''}tiles split "
                  f"{sk.splits} ways along K, last round {sk.plain_last_us:.1f} -> {sk.split_last_us:.1f} us predicted "
                  f"({plain:.1f} us without)")
    why = (f"cost model: {c.name} ({c.bm} x {c.bn}, {c.schedule}{', ' + c.consumers if c.consumers != 'cooperative' else ''}"
           f"{', cluster ' + c.cluster if c.cluster != '1x1' else ''}, {c.epilogue} stores) predicted {r.predicted_us:.1f} us: "
           f"{tiles} tiles in {rounds(tiles, sm_count)} rounds of {sm_count}, {k_tiles(k, eb)} K-tiles of {spec.bk}"
           + (", rows off a 32-byte sector" if off_sector else "")
           + (f"; {best.candidate.name} predicted {best.predicted_us:.1f} us, within the model's tolerance"
              if best.candidate is not c else "") + sk_why)
    return Choice(spec, why + note, rule)


def _entries(dtype: str, arch: str, entries: list[dict]) -> tuple[list[dict], str | None]:
    """The tuned entries for ``dtype`` on ``arch``, and None; or, for a type with none of its own that rules.BORROWS_TABLE names,
    the lender's entries and the lender's type (choose runs as the lender, then retypes the spec)."""
    own = [e for e in entries if e["dtype"] == dtype and e["arch"] == arch]
    lender = rules.BORROWS_TABLE.get(dtype)
    if own or lender is None:
        return own, None
    lent = [e for e in entries if e["dtype"] == lender and e["arch"] == arch]
    return (lent, lender) if lent else ([], None)


def _retyped_spec(spec: TileSpec, dtype: str) -> TileSpec:
    """``spec`` with ``dtype`` inputs; an output of the input type follows it (bf16 -> f16), a wider one stays."""
    out = DType(dtype) if spec.out_dtype is spec.dtype else spec.out_dtype
    return make_spec(**{**spec.to_json(), "dtype": dtype, "b_dtype": dtype, "out_dtype": out.value})


def choose_spec(dtype: str, arch: str, m: int, n: int, k: int, table: list[dict] | None = None) -> tuple[TileSpec, str]:
    """(spec, why) of :func:`choose` (tight rows), for callers that do not need the rule's name."""
    c = choose(dtype, arch, m, n, k, table)
    return c.spec, c.why

