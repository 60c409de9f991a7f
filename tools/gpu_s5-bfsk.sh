#!/usr/bin/env bash
# Block-FP8 stream-K (issue 17; 2026-12-01 s5-bfsk, built at L1/L2, never run) on the GPU in one command:
# 1. tests/test_blockfp8_streamk.py's gpu tier (7 variants, each in its own process with a timeout: against the float64
#    recipe, three calls bit-identical, the launch split, the flags zero after);
# 2. tools/bench_blockfp8.py, the default against its stream-K forms (-sk4, -sk8) in alternating rounds with torch's
#    blockwise _scaled_mm (on 132 SMs only 4096x7168x16384 splits: 1216 tiles = 9 x 132 + 28, 28 split 4 ways; 8192^3 and
#    2048x7168x4096 leave 112 and 80 tiles in the last round, too many to split, so their -skS rows run whole: a control).
# Logs go to $OUT; each step is bounded by a timeout. Usage (device machine, repository root):
#   OUT=$OUT bash tools/gpu_s5-bfsk.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-10}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-sk4,n192-s4-tma-sk8}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-240}
T_BENCH=${T_BENCH:-150}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${KCACHE:-/tmp/ptxgen-cache-s5-bfsk}
export PTXGEN_ARTIFACTS="$OUT"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format=%H
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ "$T_TEST" != 0 ]; then
  timeout "$T_TEST" python3 -m pytest tests/test_blockfp8_streamk.py -m gpu -q -rs -p no:cacheprovider \
    > "$OUT/pytest_blockfp8_streamk_gpu.log" 2>&1
  echo "pytest exit $?" >> "$OUT/pytest_blockfp8_streamk_gpu.log"
  tail -5 "$OUT/pytest_blockfp8_streamk_gpu.log"
fi
timeout "$T_BENCH" python3 tools/bench_blockfp8.py $SHAPES --rounds "$ROUNDS" \
  --variants "$VARIANTS" --json "$OUT/bench_blockfp8_streamk.jsonl" > "$OUT/bench_blockfp8_streamk.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_blockfp8_streamk.log"
cat "$OUT/bench_blockfp8_streamk.log"
