#!/usr/bin/env bash
# The fifth session's confirming device call, after the closing run switched the swapped kernels to the M-major TMA
# store (swaprules.SWAP_TMA_STORE): `OUT=dir BUDGET=seconds bash tools/gpu_s5confirm.sh`. The swap tests (gpu), then
# `ptxgen bench` with no tile flags on issue 16's unaligned/few-wave seven and small-M twelve (bf16) and a few f16
# and e4m3 shapes the swap rules take. Logs under $OUT/confirm/.
set -u
OUT=${OUT:-out}; LOGS=$OUT/confirm; BUDGET=${BUDGET:-200}
mkdir -p "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5confirm-cache}
. tools/gpu_common.sh
env_header "$LOGS/env.txt"
ISSUE16=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
SMALLM=$(for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do printf '%sx%s,' $m $nk; done; done | sed 's/,$//')
( t 80 python3 tools/exp_cost.py precompile "$ISSUE16,$SMALLM" > "$LOGS/precompile.log" 2>&1; echo "exit $?" >> "$LOGS/precompile.log" ) &
t 90 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider tests/test_mstore.py tests/test_dmajor.py > "$LOGS/pytest_gpu.log" 2>&1; echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"
wait; tail -3 "$LOGS/pytest_gpu.log"
for spec in "issue16 bf16 $ISSUE16" "smallm bf16 $SMALLM" "swapf16 f16 333x8192x8192,200x8192x8192,16x16384x4096,64x4096x4096" "swape4m3 e4m3 16x4096x4096,64x7168x16384,16x7168x16384"; do
  set -- $spec
  t 70 python3 -m ptxgen bench --dtype $2 --iters 20 --json --shapes $3 > "$LOGS/bench_$1.json" 2> "$LOGS/bench_$1.err"; echo "exit $?" >> "$LOGS/bench_$1.err"
  bench_summary "$LOGS/bench_$1.json" $1
done
echo "== done: $SECONDS s"
