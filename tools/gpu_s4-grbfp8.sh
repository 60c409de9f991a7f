#!/usr/bin/env bash
# Grouped GEMM with DeepSeek block scales (issue 18 item 1 with issue 17's recipe) on the GPU, in one command: the gpu
# tests (tests/test_grouped_blockfp8.py: the float64 recipe per group, the dense block kernel per group, empty groups,
# untrusted offs, a CUDA graph replayed with offs changed), then tools/bench_grouped_blockfp8.py (one grouped launch
# against per-group dense block-FP8 calls and per-group torch._scaled_mm blockwise). Logs go to $OUT (default ./out).
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-s4-grbfp8}
export PTXGEN_ARTIFACTS="$OUT"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout ${TEST_S:-40} python3 -m pytest tests/test_grouped_blockfp8.py -m gpu -q -rs -p no:cacheprovider > "$OUT/pytest_grouped_blockfp8_gpu.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest_grouped_blockfp8_gpu.log"
tail -15 "$OUT/pytest_grouped_blockfp8_gpu.log"
timeout ${BENCH_S:-35} python3 tools/bench_grouped_blockfp8.py --cases 8x2048,64x0-512 --n 4096 --k 7168 --rounds "$ROUNDS" \
  --json "$OUT/bench_grouped_blockfp8.jsonl" > "$OUT/bench_grouped_blockfp8.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_grouped_blockfp8.log"
cat "$OUT/bench_grouped_blockfp8.log"
