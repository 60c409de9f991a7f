#!/usr/bin/env bash
# The M-major TMA-store epilogue (swap-AB's D^T through stmatrix.trans + TMA store; runtime.choose.rules.SWAP_TMA_STORE), in ONE
# device call:   OUT=dir BUDGET=seconds bash tools/gpu_s5-mstore.sh
# 1. NVRTC the benchmark's kernels (tools/bench_mstore.py precompile, all cores) while the gpu tests run
#    (tests/test_mstore.py: the kernels against float64 through validate's runner, ptxgen.gemm with the switch on at odd
#    M and N; tests/test_dmajor.py: the direct M-major stores, unchanged);
# 2. alone on the GPU: tools/bench_mstore.py (direct vs TMA store vs cuBLAS, alternating rounds, outputs checked).
# Every step has a timeout within $BUDGET; logs in $OUT.
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-240}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5mstore-cache}
t() {
  local want=$1; shift
  local have=$(( BUDGET - SECONDS - 5 ))
  if [ "$have" -lt 5 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  echo "commit $(cat .commit 2>/dev/null || git rev-parse HEAD 2>/dev/null)"
} > "$OUT/env.txt" 2>&1
( t 60 python3 tools/bench_mstore.py precompile > "$OUT/precompile.log" 2>&1; echo "exit $?" >> "$OUT/precompile.log" ) &
pre=$!
t 150 python3 -m pytest -q -m gpu tests/test_mstore.py tests/test_dmajor.py -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
echo "exit $?" >> "$OUT/pytest_gpu.log"
wait $pre
t 90 python3 tools/bench_mstore.py --json "$OUT/bench_mstore.jsonl" > "$OUT/bench_mstore.log" 2>&1
echo "exit $?" >> "$OUT/bench_mstore.log"
tail -n 3 "$OUT/pytest_gpu.log"; cat "$OUT/bench_mstore.log"
