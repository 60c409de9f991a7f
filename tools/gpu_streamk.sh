#!/usr/bin/env bash
# Stream-K for the last wave on the H200 (issue 16 item 3): one fat command, logs under $OUT (tools/exp_streamk.py).
#   precompile; then, side by side (correctness only): the gpu tests of tests/test_streamk.py (float64 numpy,
#   poisoned D and workspace), exp_streamk.py check (float64 torch, three launches bit for bit, against the same kernel
#   without stream-K), compute-sanitizer memcheck on one stream-K launch; then alone (timing): ptxgen bench --json
#   with no tile flags on issue 16's seven shapes and the tuned six, and exp_streamk.py compare (the chooser's pick
#   against its pick with STREAM_K_RULE off, and the sweep's variants, same process, alternating).
# run2 (after run 1, once the cost model ranked every kernel's stream-K form): the sanitizer without the driver-API
#   probes' errors, the bench on the seven, and the pick against the pick on the seven and the generalization set.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-streamk PYTHONUNBUFFERED=1
PY=python3
SEVEN=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
if [ "${1:-}" = run2 ]; then  # the chooser that ranks stream-K forms: bench on the seven, pick against pick (+ generalization)
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; cat .commit 2>/dev/null; date -u; } > "$OUT/env.log" 2>&1
  GEN=$($PY -c "import sys; sys.path.insert(0, 'tools'); from exp_cost import generalization_shapes as g; print(','.join('%dx%dx%d' % s for s in g()))")
  timeout 60 $PY tools/exp_streamk.py precompile "$SEVEN,$GEN" > "$OUT/precompile.log" 2>&1 &
  P1=$!
  ( timeout 80 compute-sanitizer --tool memcheck --report-api-errors no --print-limit 200 $PY tools/exp_streamk.py sanitize > "$OUT/sanitizer.log" 2>&1; echo "exit $?" >> "$OUT/sanitizer.log" ) &
  P2=$!
  wait $P1 $P2; echo "exit $?" >> "$OUT/precompile.log"
  { echo "== ptxgen bench --dtype bf16 --iters 20 --json --shapes $SEVEN"; date -u; } > "$OUT/bench.err"
  timeout 60 $PY -m ptxgen bench --dtype bf16 --iters 20 --json --shapes "$SEVEN" > "$OUT/bench.json" 2>> "$OUT/bench.err"; echo "exit $?" >> "$OUT/bench.err"
  NOSWEEP=1 timeout 120 $PY tools/exp_streamk.py compare "$SEVEN,$GEN" > "$OUT/compare.jsonl" 2> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
  tail -n 4 "$OUT"/sanitizer.log "$OUT"/bench.err "$OUT"/compare.err "$OUT"/precompile.log
  exit 0
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; cat .commit 2>/dev/null; date -u; } > "$OUT/env.log" 2>&1
timeout 60 $PY tools/exp_streamk.py precompile "$SEVEN,$TUNED" > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log"
( timeout 70 $PY -m pytest -q -x -m gpu tests/test_streamk.py -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1; echo "exit $?" >> "$OUT/pytest_gpu.log" ) &
P1=$!
( timeout 70 $PY tools/exp_streamk.py check > "$OUT/check.jsonl" 2> "$OUT/check.err"; echo "exit $?" >> "$OUT/check.err" ) &
P2=$!
( timeout 80 compute-sanitizer --tool memcheck --print-limit 20 $PY tools/exp_streamk.py sanitize > "$OUT/sanitizer.log" 2>&1; echo "exit $?" >> "$OUT/sanitizer.log" ) &
P3=$!
wait $P1 $P2 $P3
{ echo "== ptxgen bench --dtype bf16 --iters 20 --json --shapes $SEVEN,$TUNED"; date -u; } > "$OUT/bench.err"
timeout 100 $PY -m ptxgen bench --dtype bf16 --iters 20 --json --shapes "$SEVEN,$TUNED" > "$OUT/bench.json" 2>> "$OUT/bench.err"; echo "exit $?" >> "$OUT/bench.err"
timeout 80 $PY tools/exp_streamk.py compare "$SEVEN" > "$OUT/compare.jsonl" 2> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
tail -n 4 "$OUT"/pytest_gpu.log "$OUT"/check.err "$OUT"/sanitizer.log "$OUT"/bench.err "$OUT"/compare.err "$OUT"/precompile.log
cat "$OUT"/check.jsonl
