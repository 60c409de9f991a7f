#!/usr/bin/env bash
# The cost model on the H200 (issue 16 item 4): one fat command per device call, logs under $OUT.
# Usage: tools/gpu_cost.sh calibrate | calibrate2 | validate | generalize
#   calibrate: every cost-model candidate on the calibration shapes (tools/exp_cost.py calibrate) + small-M variants
#   calibrate2: the candidates added after run 1 (tools/exp_cost.py calibrate2)
#   generalize: the chooser's pick against its pick before the cost model on the seeded generalization set only
#   validate (ISSUE_COMPARE=0: without the pick-against-pick comparison on the issue's shapes; run 4 has it):  ptxgen bench --json with no tile flags on issue 16's classes, the held-out 20 and the tuned six; then the
#              chooser's pick against its pick before the cost model, where they differ (tools/exp_cost.py compare)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-cost PYTHONUNBUFFERED=1
PY=python3
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; cat .commit 2>/dev/null; } > "$OUT/env.log" 2>&1
SMALL=""
for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do SMALL="$SMALL${SMALL:+,}${m}x$nk"; done; done
UNAL=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000
FEW=333x8192x8192,12000x1000x6000,2500x10000x4000
TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
HELD=$($PY tools/heldout_shapes.py)
case "${1:-calibrate}" in
calibrate)
  timeout 60 $PY tools/exp_cost.py precompile > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log"
  timeout 150 $PY tools/exp_cost.py calibrate > "$OUT/cal.jsonl" 2> "$OUT/cal.err"; echo "exit $?" >> "$OUT/cal.err"
  timeout 40 $PY tools/exp_cost.py smallm > "$OUT/smallm.jsonl" 2>> "$OUT/cal.err"; echo "exit $?" >> "$OUT/cal.err"
  wc -l "$OUT"/*.jsonl; tail -n 3 "$OUT"/cal.err "$OUT"/precompile.log
  ;;
calibrate2)
  timeout 60 $PY tools/exp_cost.py precompile > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log"
  timeout 150 $PY tools/exp_cost.py calibrate2 > "$OUT/cal2.jsonl" 2> "$OUT/cal2.err"; echo "exit $?" >> "$OUT/cal2.err"
  wc -l "$OUT"/*.jsonl; tail -n 3 "$OUT"/cal2.err "$OUT"/precompile.log
  ;;
generalize)
  GEN=$($PY -c "import sys; sys.path.insert(0, 'tools'); from exp_cost import generalization_shapes as g; print(','.join('%dx%dx%d' % s for s in g()))")
  timeout 60 $PY tools/exp_cost.py precompile "$GEN" > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log"
  timeout 120 $PY tools/exp_cost.py compare generalization > "$OUT/compare.jsonl" 2> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
  echo '{"class": "none", "result": null}' > /tmp/none.jsonl
  $PY tools/fit_cost.py summary /tmp/none.jsonl "$OUT/compare.jsonl" > "$OUT/summary.log" 2>&1
  tail -n 30 "$OUT"/summary.log; tail -n 3 "$OUT"/compare.err "$OUT"/precompile.log
  ;;
validate)
  timeout 60 $PY tools/exp_cost.py precompile "$UNAL,$FEW,$SMALL,$TUNED,$HELD" > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log"
  bench() {  # class shapes rounds
    echo "== $1: ptxgen bench --dtype bf16 --iters $3 --json --shapes $2" >> "$OUT/bench.log"
    printf '{"class": "%s", "result": ' "$1" >> "$OUT/bench.jsonl"
    timeout 75 $PY -m ptxgen bench --dtype bf16 --iters "$3" --json --shapes "$2" > /tmp/b.json 2>> "$OUT/bench.log"
    echo "exit $?" >> "$OUT/bench.log"
    if [ -s /tmp/b.json ]; then tr -d '\n' < /tmp/b.json >> "$OUT/bench.jsonl"; else printf 'null' >> "$OUT/bench.jsonl"; fi
    echo '}' >> "$OUT/bench.jsonl"
  }
  bench unaligned "$UNAL" 30
  bench few_waves "$FEW" 30
  bench small_m "$SMALL" 30
  bench heldout "$HELD" 30
  bench tuned6 "$TUNED" 30
  [ "${ISSUE_COMPARE:-1}" = 1 ] && timeout 90 $PY tools/exp_cost.py compare "$UNAL,$FEW,$SMALL,$HELD" > "$OUT/compare.jsonl" 2> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
  timeout 90 $PY tools/exp_cost.py compare generalization >> "$OUT/compare.jsonl" 2>> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
  [ "${VALIDATE:-1}" = 1 ] && timeout 90 $PY -c "
import sys; sys.path[:0] = ['.', 'tests']
from pathlib import Path
from ptxgen.runtime.batch import run_batch
from test_gpu import chosen_jobs
rs = run_batch(chosen_jobs('sm_90a'), Path('/tmp/validate.jsonl'), 60)
[print(r['verdict']) for r in rs]; print(sum(r['passed'] for r in rs), 'of', len(rs), 'passed')" > "$OUT/validate.log" 2>&1; echo "exit $?" >> "$OUT/validate.log"
  [ "${BAND:-0}" = 1 ] && timeout 40 $PY tools/exp_cost.py band "$UNAL,$FEW" > "$OUT/band.jsonl" 2>> "$OUT/compare.err"; echo "exit $?" >> "$OUT/compare.err"
  $PY tools/fit_cost.py summary "$OUT/bench.jsonl" "$OUT/compare.jsonl" > "$OUT/summary.log" 2>&1
  tail -n 40 "$OUT"/summary.log; tail -n 3 "$OUT"/compare.err "$OUT"/precompile.log "$OUT"/validate.log
  ;;
esac
