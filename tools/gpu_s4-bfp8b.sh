#!/usr/bin/env bash
# Block-scaled FP8 (issue 17) with --fp8-overlap halves (each column half of the tile promoted while the other half's
# wgmma group runs) on the GPU, in one command: the gpu tests of the halves kernels and of the default against the
# float64 recipe, then tools/bench_blockfp8.py against torch's blockwise _scaled_mm, variants in alternating rounds.
# Logs go to $OUT (default ./out); each step is bounded by a timeout. KCACHE: a kernel cache folder filled before the
# call (ptxgen.runtime.cache; a toolchain that differs only costs the compiles).
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-10}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-halves,s4-tma-halves}
T_TEST=${T_TEST:-70}
T_BENCH=${T_BENCH:-100}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${KCACHE:-/tmp/ptxgen-cache-s4-bfp8b}
export PTXGEN_ARTIFACTS="$OUT"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format='commit %H' 2>/dev/null || true
  ls "$PTXGEN_CACHE_DIR" 2>/dev/null | grep -c cubin
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout "$T_TEST" python3 -m pytest tests/test_epilogue_ops.py -k "block_fp8 and (halves or n192-tma or few_k)" -m gpu -q -rs \
  -p no:cacheprovider > "$OUT/pytest_blockfp8_gpu.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest_blockfp8_gpu.log"
tail -8 "$OUT/pytest_blockfp8_gpu.log"
timeout "$T_BENCH" python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds "$ROUNDS" \
  --variants "$VARIANTS" --json "$OUT/bench_blockfp8.jsonl" > "$OUT/bench_blockfp8.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_blockfp8.log"
cat "$OUT/bench_blockfp8.log"
