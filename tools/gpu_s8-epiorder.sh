#!/usr/bin/env bash
# 2026-12-02-epilogue-order's device call (issue 17: fused bias + gelu within 3% of the plain GEMM), one command:
# 1. the gpu tests of --epilogue-order (both forms) (tests/test_epiorder_gpu.py: ordered kernels against float64 and bit
#    for bit against their unordered twins, 2 and 3 consumer warpgroups, TMA store and direct, TMA and cp.async, fused);
#    the bench kernels compile in the background meanwhile (NVRTC only);
# 2. tools/bench_epilogue.py at 8192^3 and 4096^3 with plain_ordered and fused_ordered beside plain/fused (20 rounds);
# 3. the plain comparison: tools/bench_epilogue.py --plain-only on shapes the chooser does not run at 8192^3 / 4096^3.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-epiorder.sh   (the call of runs/2026-12-02-epilogue-order)
# The uniform form's measurement: OUT=$OUT ORDER=alternate-uniform bash tools/gpu_s8-epiorder.sh (not yet run).
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-190}
ROUNDS=${ROUNDS:-20}
SHAPES=${SHAPES:-8192x8192x8192 4096x4096x4096}
PLAIN_SHAPES=${PLAIN_SHAPES:-8192x8192x1024 2048x2048x8192 16384x16384x4096 4096x4096x16384}
ORDER=${ORDER:-alternate}  # or alternate-uniform (the form without branches on wg in the tile loop)
. tools/gpu_common.sh
gpu_begin 2026-12-02-epilogue-order
export PTXGEN_ARTIFACTS="$OUT"
( python3 tools/bench_epilogue.py $SHAPES --epilogue-order "$ORDER" --compile-only --jobs 6
  python3 tools/bench_epilogue.py $PLAIN_SHAPES --plain-only --epilogue-order "$ORDER" --compile-only --jobs 6 ) > "$OUT/precompile.log" 2>&1 &
PRE=$!
gpu_pytest pytest_epiorder_gpu.log "$(( $(left) - 95 > 100 ? 100 : $(left) - 95 ))" tests/test_epiorder_gpu.py $XDIST
wait $PRE; echo "precompile exit $?" >> "$OUT/precompile.log"; tail -2 "$OUT/precompile.log"
t 75 python3 tools/bench_epilogue.py $SHAPES --epilogue-order "$ORDER" --rounds "$ROUNDS" --json "$OUT/bench_epilogue.jsonl" \
  > "$OUT/bench_epilogue.log" 2>&1
echo "exit $?" >> "$OUT/bench_epilogue.log"; cat "$OUT/bench_epilogue.log"
t 45 python3 tools/bench_epilogue.py $PLAIN_SHAPES --plain-only --epilogue-order "$ORDER" --rounds "$ROUNDS" \
  --json "$OUT/bench_plain.jsonl" > "$OUT/bench_plain.log" 2>&1
echo "exit $?" >> "$OUT/bench_plain.log"; cat "$OUT/bench_plain.log"
echo "== 2026-12-02-epilogue-order done: $SECONDS s"
