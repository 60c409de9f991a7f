#!/usr/bin/env bash
# Issue 18 (grouped GEMM) on the GPU, in one command: the gpu tests of tests/test_grouped.py (per-group torch
# matmuls, odd sizes, empty groups, untrusted offs, a CUDA graph replayed with offs changed, compute-sanitizer on
# the flagship) and tools/bench_grouped.py against torch._grouped_mm. Logs go to $OUT (default ./out).
# The kernels are compiled first, in parallel (tools/grouped_warm.py, NVRTC ~3-5 s each), so the two GPU steps only
# load cubins; each step is bounded by a timeout.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-issue18}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 120 python3 tools/grouped_warm.py 12 > "$OUT/warm.log" 2>&1
echo "warm exit $?" >> "$OUT/warm.log"
tail -3 "$OUT/warm.log"
timeout 200 python3 -m pytest tests/test_grouped.py -m gpu -q -rs -p no:cacheprovider > "$OUT/grouped_pytest.log" 2>&1
echo "pytest exit $?" >> "$OUT/grouped_pytest.log"
tail -25 "$OUT/grouped_pytest.log"
timeout 200 python3 tools/bench_grouped.py --json "$OUT/bench_grouped.jsonl" ${BENCH_ARGS:---candidates} > "$OUT/bench_grouped.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_grouped.log"
cat "$OUT/bench_grouped.log"
