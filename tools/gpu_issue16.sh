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
esac
