#!/usr/bin/env bash
# Issue 18, the grouped call's host time (groupedperf): on the H200, in one command, bounded to ~3 minutes.
# 1. the grouped gpu tests (tests/test_grouped.py, tests/test_grouped_hotpath.py: per-group torch matmuls, odd sizes,
#    empty groups, CUDA-graph replay with offs changed, compute-sanitizer on the flagship);
# 2. tools/bench_grouped.py --candidates against torch._grouped_mm (host us per call for both sides);
# 3. tools/grouped_hostprofile.py (CPU only, simulated device) on this tree and, if present, on the tree before the
#    change ($BEFORE), on this machine's CPU.
# Logs go to $OUT (default ./out). Kernels are compiled into $PTXGEN_CACHE_DIR first (tools/grouped_warm.py).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-groupedperf}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 60 python3 tools/grouped_warm.py 14 > "$OUT/warm.log" 2>&1
echo "warm exit $?" >> "$OUT/warm.log"
tail -2 "$OUT/warm.log"
timeout 100 python3 -m pytest tests/test_grouped.py tests/test_grouped_hotpath.py -m gpu -q -rs -p no:cacheprovider > "$OUT/grouped_pytest.log" 2>&1
echo "pytest exit $?" >> "$OUT/grouped_pytest.log"
tail -8 "$OUT/grouped_pytest.log"
timeout 100 python3 tools/bench_grouped.py --json "$OUT/bench_grouped.jsonl" ${BENCH_ARGS:---candidates} > "$OUT/bench_grouped.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_grouped.log"
cat "$OUT/bench_grouped.log"
{
  echo "== after (this tree)"; timeout 20 python3 tools/grouped_hostprofile.py --calls 5000
  if [ -n "${BEFORE:-}" ] && [ -d "$BEFORE" ]; then
    echo "== before ($BEFORE)"; (cd "$BEFORE" && PYTHONPATH=$PWD timeout 20 python3 "$OLDPWD/tools/grouped_hostprofile.py" --calls 5000)
  fi
} > "$OUT/hostprofile.log" 2>&1
cat "$OUT/hostprofile.log"
