#!/usr/bin/env bash
# Block-scaled FP8 (issue 17, DeepSeek recipe) with wide tiles (BN 144..192: a tile spanning two 128-column scale blocks
# of B) on the GPU, in one command: the gpu tests of the recipe against float64 (tests/test_epilogue_ops.py -k block_fp8,
# every variant the bench times), then tools/bench_blockfp8.py against torch's blockwise _scaled_mm, with per-tensor FP8
# kernels of the same tiles as a reference. Logs go to $OUT (default ./out); each step is bounded by a timeout.
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-12}
VARIANTS=${VARIANTS:-s4-tma,s5-direct,n192-s4-tma,n192-s5-direct,n160-s5-direct,n144-s5-direct,plain-s4-tma,plain-n192-s4-tma}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-s4-blockfp8}
export PTXGEN_ARTIFACTS="$OUT"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 95 python3 -m pytest tests/test_epilogue_ops.py -k block_fp8 -m gpu -q -rs -p no:cacheprovider > "$OUT/pytest_blockfp8_gpu.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest_blockfp8_gpu.log"
tail -8 "$OUT/pytest_blockfp8_gpu.log"
timeout 170 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds "$ROUNDS" \
  --variants "$VARIANTS" --json "$OUT/bench_blockfp8.jsonl" > "$OUT/bench_blockfp8.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_blockfp8.log"
cat "$OUT/bench_blockfp8.log"
