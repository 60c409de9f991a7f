#!/usr/bin/env bash
# Issue 16 on the H200: one fat command per device call (logs under $OUT). Usage: tools/gpu_issue16.sh exp1|measure
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-issue16 PYTHONUNBUFFERED=1
PY=python3
case "${1:-exp1}" in
exp1)
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; } > "$OUT/env.log" 2>&1
  timeout 55 $PY tools/exp_shapes16.py pitch > "$OUT/pitch.log" 2>&1
  timeout 60 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
      $PY tools/exp_shapes16.py ncu > "$OUT/ncu.log" 2>&1
  timeout 25 $PY tools/exp_shapes16.py names > "$OUT/names.log" 2>&1
  timeout 70 $PY tools/exp_shapes16.py smallm > "$OUT/smallm.log" 2>&1
  HELD=$($PY tools/heldout_shapes.py)
  timeout 50 $PY tools/exp_shapes16.py shapes "5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000,$HELD" > "$OUT/shapes.log" 2>&1
  tail -n 3 "$OUT"/*.log
  ;;
measure)
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; git log --oneline -1 2>/dev/null; } > "$OUT/env.log" 2>&1
  timeout 60 $PY -c "
import sys; sys.path[:0] = ['.', 'tests']
from pathlib import Path
from ptxgen.runtime.batch import run_batch
from test_gpu import chosen_jobs
rs = run_batch(chosen_jobs('sm_90a'), Path('/tmp/validate.jsonl'), 30)
[print(r['verdict']) for r in rs]; print(sum(r['passed'] for r in rs), 'of', len(rs), 'passed')" > "$OUT/validate.log" 2>&1
  timeout 75 $PY tools/exp_shapes16.py variants > "$OUT/variants.log" 2>&1
  HELD=$($PY tools/heldout_shapes.py)
  SMALL=""
  for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do SMALL="$SMALL${SMALL:+,}${m}x$nk"; done; done
  for class in "unaligned 5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000" "small_m $SMALL" \
               "few_waves 333x8192x8192,12000x1000x6000,2500x10000x4000" "heldout $HELD" \
               "tuned6 4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384"; do
    set -- $class
    echo "== $1: ptxgen bench --dtype bf16 --iters 30 --json --shapes $2" >> "$OUT/bench.log"
    printf '{"class": "%s", "result": ' "$1" >> "$OUT/bench.jsonl"
    timeout 60 $PY -m ptxgen bench --dtype bf16 --iters 30 --json --shapes "$2" > /tmp/b.json 2>> "$OUT/bench.log"
    echo "exit $?" >> "$OUT/bench.log"
    if [ -s /tmp/b.json ]; then tr -d '\n' < /tmp/b.json >> "$OUT/bench.jsonl"; else printf 'null' >> "$OUT/bench.jsonl"; fi
    echo '}' >> "$OUT/bench.jsonl"
  done
  tail -n 2 "$OUT"/*.log
  ;;
esac
