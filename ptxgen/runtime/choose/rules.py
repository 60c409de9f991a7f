"""The chooser's rules as data: the order the rules are tried in, their switches and their thresholds.

Every rule module of ``ptxgen.runtime.choose`` reads these at call time (``rules.NAME``), so a switch set here (a test's
monkeypatch, an experiment) turns a rule off everywhere. Where each number was measured is said next to it; the rules
themselves are described in ``ptxgen.runtime.choose.walk``.
"""

# The rules in the order ``walk.choose`` tries them; each names itself in ``Choice.chosen_by`` (suffixes: +off-sector,
# +stream-k). ``cost-model+swap-ab`` may replace the pick of tuned, cost-model and nearest-fit.
ORDER = ("tuned", "swap-ab", "small-m", "small-n", "split-k", "cost-model", "nearest-fit", "cost-model+swap-ab", "default")

# -- tuned, nearest-fit, small-m, small-n, split-k, cost-model, stream-K (walk) ---------------------------------------
NEAREST_CANDIDATES = 3
SMALL_M_BM = 64
SMALL_M_TILES = ((128, 8), (64, 8))  # (BN, stages) of the BM = 64 tiles, widest first: run 25's best two
MEASURED_DTYPES = ("bf16", "f16")  # 16-bit inputs: run 25/26 measured bf16; e4m3 keeps the table's kernels
SMALL_M_MIN_FILL = 0.4  # the fewest CTAs, as a fraction of the SMs, for which the wider tile still wins (run 25)
SMALL_M_WIDE = True  # small-m takes SMALL_M_WIDE_KERNEL where every BM = 64 tile needs two waves (small_m_wide_ctas)
SMALL_N_WIDE = True  # small-n takes narrow.SMALL_N_WIDE_KERNEL where every BM x 64 tile needs two waves (small_n_wide_ctas)
FP8_SMALL_N = True  # e4m3 with N <= 128 < M: small-n takes narrow.fp8_small_n_kernel (unless the tiny split-k rule splits K)
SMALL_M_WIDE_KERNEL = "pp128x128"  # 128 CTAs at N = 16384: the fastest of 6 there (runs/2026-12-01-swapab-small-m run 3)
SPLIT_K_RULE = True  # the split-k rule is on
SPLIT_MAX = 8  # at most this many splits of K per tile
SPLIT_MIN_K_TILES = 8  # each split keeps at least this many K-tiles (its pipeline fills and drains once per split)
SPLIT_MIN_WEIGHT = 4096 * 4096  # N x K: the smallest operand B on which run 27 measured the split to win
# split-k for few tiles and a long K, at any weight (narrow.tiny_splits): GEMV-like calls (M and/or N in 1..~256, K in
# the thousands) whose narrow tiles leave most SMs idle while one CTA per tile walks every K-tile (5 x 2 x 6816: one
# CTA, 107 K-tiles). Measured on the H100 (runs/2026-12-06-h100-attention-q-buffers run 2, tools/exp_tiny_split.py,
# 14 bf16 shapes against cuBLAS): with 13-16 splits the pick ran 0.94-1.92x its unsplit form (geomean of the ratios to
# cuBLAS 2.21 against 1.71; 5 x 2 x 6816: 16.5 -> 8.6 us, cuBLAS 20.2); forced 8 splits beat 16 on 9 of the 14, and
# 1 x 1088 x 8192 (17 tiles, over the first 1/8 fill) ran 1.56x faster split 4 ways: the cap is 8, the fill 1/4.
TINY_SPLIT_RULE = True  # the rule is on
TINY_SPLIT_MAX_FILL = 1 / 4  # the narrow tile's CTAs fill at most this fraction of the SMs (33 of 132)
TINY_SPLIT_MAX = 8  # at most this many splits (each keeps >= SPLIT_MIN_K_TILES K-tiles; the CTAs stay in one wave)
TINY_SPLIT_DTYPES = ("bf16", "f16", "e4m3")  # e4m3: its split kernels (BK 128) are the heavy-weight rule's, checked
# against float64 on the GPU (tests/test_splitk.py); their speed at these shapes is not measured
COST_MODEL = True  # the cost-model rule is on (off: nearest-fit, the rule before it)
SWAP_AB_RULE = True  # the swap-ab rule is on
STREAM_K_RULE = True  # the cost model ranks each kernel's stream-K form (costmodel.rank(stream_k=True))
STREAM_K_SINGLE_WAVE = True  # ... also where the tiles fill less than one round: the stream-K grid is every SM
STREAM_K_WHOLE_FIRST = ("e4m3",)  # ties (costmodel.pick) go to whole kernels before stream-K forms (s5-fp8m runs 1-2)
STREAM_K_FAMILIES = ("16bit", "e4m3")  # the cost tables (costmodel.COST_FAMILY) whose kernels are ranked with their stream-K form
SWAP_FIT_RULE = True  # swap-AB for M > 128 where a tile that fits M is predicted faster (cost-model+swap-ab)
BORROWS_TABLE = {"f16": "bf16"}  # f16 inputs run bf16's tuning: the same element width and wgmma rate (runs/2026-12-01-gpu-tier-swap-tmastore)

# -- swap-AB (swap) ---------------------------------------------------------------------------------------------------
SWAP_AB_MAX_M = 64  # M = 1..64 won against every other pick, M = 128 did not (runs/2026-12-01-swapab-small-m run 1)
SWAP_AB_MIN_WEIGHT = 4096 * 4096  # N x K: the smallest weights measured (run 1 of s5-fp8m: won there too)
SWAP_AB_MIN_FILL = 0.4  # choose.SMALL_M_MIN_FILL's value; the swap tiles' CTAs fill at least this fraction of the SMs in one wave
SWAP_AB_BM = (64, 128)  # BM over N: the most CTAs that fit in one wave (64: 4096 / 7168 rows; 128: 16384)
SWAP_AB_MAX_STAGES = {64: 12, 128: 10}  # stages of each BM (s4-swapab: 128 x 16 best with 10)
SWAP_AB_STAGE_BYTES = 200 * 1024  # shared memory the stages of a swap tile take at most
SWAP_AB_DTYPES = ("bf16", "f16", "e4m3")  # measured: bf16 (s4-swapab, s5-fp8m run 1), e4m3 (s5-fp8m run 1)
SWAP_FIT_MIN_GAIN = 0.05  # ... faster than every unswapped candidate by this much (the fit's median error is 2.2%)
SWAP_FIT_STAGES = (6, 5, 4)  # the deepest ring that fits shared memory
SWAP_STREAM_K = True  # cost-model+swap-ab also prices the swapped kernel persistent with its last round split (stream-K)
SWAP_FIT_MAX_M_TILES = 2  # swapped tiles over M: run 1 measured one or two (M <= 512)
# Two swapped tiles over M read the same 128 weight rows: a 1x2 cluster loads them once for both (A multicast). At
# 400 x 10000 x 6000 each tile reads 1.5 MB of weight rows and 2.4 MB of the other operand from L2, so the pair moves
# 6.3 MB instead of 7.8 (arithmetic from the tile sizes, not a measured traffic). Measured on
# the H100 (runs/2026-12-06-h100-carry-kgrouped run 3; two shapes, one process): 400 x 10000 x 6000 83.8 against
# 88.5 us (1.021 of cuBLAS, was 0.968), 333 x 8192 x 8192 71.3 against 71.6 us.
SWAP_PAIR_CLUSTER = True
# Where the 128-row swapped tiles take more than one round (ceil(N / 128) x 2 > the SMs) and two 192-row tiles over
# M fit one (three consumer warpgroups of 64 weight rows each), the 192-row pair is taken instead of the 128-row
# stream-K form, if its ring keeps at least SWAP_WIDE_MIN_STAGES stages. Measured on the H100
# (runs/2026-12-07-h100-hot-paths-wide-swap; one process, alternating rounds, outputs checked): 300 x 12288 x 6000
# 78.8-80.1 against 97.3-99.6 us (1.085-1.155 of cuBLAS, was 0.879-0.924), 300 x 10240 x 8192 93.6 against 99.0,
# 280 x 12288 x 8192 93.6 against 101.9; at 384 x 12288 x 6000 the 192 x 192 ring holds only 3 stages and lost
# (100.0 against 98.6 us), at 333 x 8192 x 8192 (128-row tiles in one round) 89.3 against 70.1.
# Measured on the H100 SXM only: the rule applies to calibrations of these device slugs (calibration.Device.slug).
SWAP_WIDE_PAIR = True
SWAP_WIDE_PAIR_DEVICES = ("h100-80gb-hbm3",)
SWAP_WIDE_BM = 192
SWAP_WIDE_MIN_STAGES = 4
# Both rules' kernels store D^T through the TMA-store epilogue (stmatrix.trans into shared memory, one TMA store per
# chunk: derive.store.epilogue) instead of one 2-byte store per element. On since 2026-12-01
# (runs/2026-12-01-gpu-tier-swap-tmastore, tools/bench_mstore.py): faster on all five swapped shapes, TMA/direct time 0.951-0.998
# (geomean 0.982; 333 x 8192 x 8192: 67.9 -> 64.5 us), outputs bitwise equal; the gpu tests passed with it on. The
# staging buffers may cost a stage (128 x 168: 6 -> 5; measured with it). False: the direct stores.
SWAP_TMA_STORE = True
FP8_SMALL_M_MIN_WEIGHT = 4096 * 4096  # e4m3: N x K from which small-m (+ split-k) replaces the table's tile (s4-fp8shapes run 2)
