#!/usr/bin/env bash
# Issue 18, the grouped tile by mean rows per group (groupedtile): on the H200, one command, bounded to ~4 minutes.
# 1. compile the grouped kernels into $PTXGEN_CACHE_DIR (tools/grouped_warm.py);
# 2. the grouped gpu tests (tests/test_grouped.py, not the sanitizer ones);
# 3. tools/bench_grouped.py --candidates on the cases and on cases that locate the threshold between the
#    64 x 256 ping-pong tile and the 128 x 256 tile (16 groups of 384..1536 rows, 32 groups of 0..1024 and 512..1536).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-groupedtile}
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; cat .commit 2>/dev/null; } > "$OUT/env.txt" 2>&1
timeout 50 python3 tools/grouped_warm.py 14 > "$OUT/warm.log" 2>&1; echo "warm exit $?" >> "$OUT/warm.log"
tail -2 "$OUT/warm.log"
timeout 60 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_grouped.py -k "not sanitizer" > "$OUT/grouped_pytest.log" 2>&1
echo "pytest exit $?" >> "$OUT/grouped_pytest.log"; tail -4 "$OUT/grouped_pytest.log"
timeout 120 python3 tools/bench_grouped.py --candidates --rounds 15 --json "$OUT/bench_grouped.jsonl" \
  --cases ${CASES:-8x2048,64x0-512,8x1-256,16x384,16x512,16x768,16x1024,16x1536,32x0-1024,32x512-1536} > "$OUT/bench_grouped.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_grouped.log"
cat "$OUT/bench_grouped.log"
