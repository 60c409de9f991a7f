#!/usr/bin/env bash
# The e4m3 cost model on the H200 (issue 16 item 5), logs under $OUT (at most 6 files).
# Usage: tools/gpu_s4fp8.sh [calibrate | confirm]
# confirm (run 2; the shipped ptxgen/tuning/h200_cost_e4m3.json): precompile; the small-m rule's e4m3 weight threshold
#   against the one before it on small-M shapes (tools/exp_cost_e4m3.py compare-smallm); ptxgen bench as in 4. below on
#   the same shapes and three more small-M ones; the cost model's picks against nearest-fit's again (5. below)
# calibrate (run 1), one device call:
#   1. precompile the e4m3 candidates and the old rule's picks (tools/exp_cost_e4m3.py precompile)
#   2. calibrate: every big cost-model candidate in e4m3 on 9 calibration shapes, against torch._scaled_mm
#   3. fit the e4m3 constants on the device (tools/fit_cost.py fit) and install them in this copy's
#      ptxgen/tuning/h200_cost_e4m3.json (the file to commit comes back in $OUT)
#   4. ptxgen bench --dtype e4m3 with no tile flags on issue 16's classes and the FP8 shapes measured before
#   5. the chooser's new pick against its pick with the cost model off, same process, where they differ
# Launch: see HELPERS.md (copy the worktree to /work/main/.gpu/s4-fp8shapes, carry it), then
#   cd .gpu/s4-fp8shapes && export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 && OUT=$OUT bash tools/gpu_s4fp8.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-s4fp8 PYTHONUNBUFFERED=1
PY=python3
LOG="$OUT/run.log"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  $PY -c "import torch; print('torch', torch.__version__)"; echo "commit $(cat .commit 2>/dev/null)"; } > "$LOG" 2>&1
SHAPES=5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024
for m in 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do SHAPES="$SHAPES,${m}x$nk"; done; done
SHAPES="$SHAPES,336x8192x8192,12000x1008x6000,2512x10000x4000"
TUNED=8192x8192x8192,4096x4096x4096,6144x6144x6144,16384x16384x4096,8192x8192x1024
step() { echo "== $(date -u +%T) $*" >> "$LOG"; }
if [ "${1:-calibrate}" = confirm ]; then
  SMALL=$(echo "$SHAPES" | tr , '\n' | grep -E '^(16|64|128)x' | tr '\n' , )32x12288x4096,128x2048x8192,48x8192x8192
  step precompile
  timeout 25 $PY tools/exp_cost_e4m3.py precompile "$SHAPES,$TUNED,$SMALL" >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
  step compare-smallm
  timeout 40 $PY tools/exp_cost_e4m3.py compare-smallm "$SMALL" > "$OUT/compare_smallm.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
  step bench
  echo "ptxgen bench --dtype e4m3 --iters 20 --json --shapes $SHAPES,$TUNED,32x12288x4096,128x2048x8192,48x8192x8192" >> "$LOG"
  timeout 50 $PY -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes "$SHAPES,$TUNED,32x12288x4096,128x2048x8192,48x8192x8192" \
    > "$OUT/bench_e4m3.json" 2>> "$LOG"; echo "exit $?" >> "$LOG"
  step compare
  timeout 30 $PY tools/exp_cost_e4m3.py compare "$SHAPES,$TUNED" > "$OUT/compare_e4m3.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
  step done
  grep -E "exit|==|FAIL" "$LOG" | tail -20
  exit 0
fi
step precompile
timeout 25 $PY tools/exp_cost_e4m3.py precompile "$SHAPES,$TUNED" >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
step calibrate
timeout 55 $PY tools/exp_cost_e4m3.py calibrate > "$OUT/cal_e4m3.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
step fit
if $PY tools/fit_cost.py fit "$OUT/cal_e4m3.jsonl" > /tmp/h200_cost_e4m3.json 2>> "$LOG"; then
  sed -i "s#\"source\": \"tools/fit_cost.py fit [^\"]*\"#\"source\": \"tools/fit_cost.py fit runs/2026-12-01-fp8-shapes/cal_e4m3.jsonl\"#" /tmp/h200_cost_e4m3.json
  cp /tmp/h200_cost_e4m3.json "$OUT/h200_cost_e4m3.json" && cp /tmp/h200_cost_e4m3.json ptxgen/tuning/h200_cost_e4m3.json
  $PY tools/fit_cost.py residuals "$OUT/cal_e4m3.jsonl" > "$OUT/fit.log" 2>&1
else
  echo "fit failed: the bench runs the rule before the e4m3 cost model" >> "$LOG"
fi
step bench
echo "ptxgen bench --dtype e4m3 --iters 20 --json --shapes $SHAPES,$TUNED" >> "$LOG"
timeout 45 $PY -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes "$SHAPES,$TUNED" > "$OUT/bench_e4m3.json" 2>> "$LOG"
echo "exit $?" >> "$LOG"
step compare
timeout 30 $PY tools/exp_cost_e4m3.py compare "$SHAPES,$TUNED" > "$OUT/compare_e4m3.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
step done
tail -n 5 "$OUT/fit.log" 2>/dev/null; grep -c ours_us "$OUT/cal_e4m3.jsonl"; grep -E "exit|==|FAIL" "$LOG" | tail -20
