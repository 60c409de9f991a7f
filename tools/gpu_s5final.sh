#!/usr/bin/env bash
# The closing device run of the 2026-12-01 fifth session, in ONE call:
#   OUT=dir BUDGET=seconds [NAME=s6final] [T_GPU=300] bash tools/gpu_s5final.sh
# (also the sixth session's: NAME names the log folder and the archive, $OUT/$NAME.tgz; block FP8 runs first of the benchmarks)
# 1. correctness, sharing the GPU: the whole gpu test tier (tests/, -m gpu), `ptxgen selftest`, and the float64 check
#    of the kernels the chooser picks (tests/test_gpu.py chosen_jobs); the benchmarks' kernels compile beside them;
# 2. benchmarks, alone on the GPU, `ptxgen bench` with no tile flags: the tuned six, issue 16's unaligned/few-wave
#    shapes, its small-M set (bf16) and FP8 classes (e4m3), the seeded held-out 20, f16 on the borrowed rules against
#    f16's old default kernel (tile flags); `ptxgen bench --api`; tools/host_breakdown.py; block FP8
#    (tools/bench_blockfp8.py); the M-major TMA-store epilogue against the direct one (tools/bench_mstore.py, if there).
# Every step has a timeout and the whole script keeps to $BUDGET seconds (steps that would not fit are skipped and say
# so); logs come back as one archive, $OUT/$NAME.tgz (gpu_tier.tgz by default).
set -u
OUT=${OUT:-out}
NAME=${NAME:-s5final}
LOGS=${LOGS:-/tmp/$NAME}
BUDGET=${BUDGET:-480}
mkdir -p "$OUT" "$LOGS"
export LOGS PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$LOGS PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5final-cache}
pack() { tar czf "$OUT/$NAME.tgz" -C "$LOGS" . ; }
trap pack EXIT
. tools/gpu_common.sh
env_header "$LOGS/env.txt"
t 60 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" | tee -a "$LOGS/build.log"

TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
SMALLM=$(for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do printf '%sx%s,' $m $nk; done; done | sed 's/,$//')
FP8=5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024,16x4096x4096,64x7168x16384,128x16384x4096,336x8192x8192,12000x1008x6000,2512x10000x4000,8192x8192x8192,4096x4096x4096
ISSUE16=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
HELD=$(python3 tools/heldout_shapes.py)
F16=4096x4096x4096,8192x8192x8192,2048x2048x8192,5000x5000x5000,333x8192x8192,2500x10000x4000,64x4096x4096,16x16384x4096,128x7168x16384,1x7168x16384
F16_OLD=$(python3 -c "from ptxgen.runtime.tune import candidates; print(candidates('f16', 'sm_90a')[1].cli_args())")

# ---- 1. correctness (sharing the GPU; the benchmarks' kernels compile beside them, NVRTC only) --------------------
( t 200 python3 tools/exp_cost.py precompile "$TUNED,$ISSUE16,$SMALLM,$HELD" > "$LOGS/precompile.log" 2>&1; echo "precompile exit $?" >> "$LOGS/precompile.log"
  t 120 python3 tools/exp_cost_e4m3.py precompile "$FP8" >> "$LOGS/precompile.log" 2>&1; echo "precompile e4m3 exit $?" >> "$LOGS/precompile.log"
  [ -f tools/bench_mstore.py ] && { t 90 python3 tools/bench_mstore.py precompile >> "$LOGS/precompile.log" 2>&1; echo "precompile mstore exit $?" >> "$LOGS/precompile.log"; } ) &
pre=$!
( t 200 python3 -m ptxgen selftest > "$LOGS/selftest.log" 2>&1; echo "selftest exit $?" >> "$LOGS/selftest.log" ) &
self=$!
( t 200 python3 - > "$LOGS/chosen.log" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, "tests")
from pathlib import Path
from test_gpu import chosen_jobs
from ptxgen.runtime.batch import run_batch
results = run_batch(chosen_jobs("sm_90a"), Path(os.environ["LOGS"]) / "chosen.jsonl", timeout_s=90)
for r in results:
    print(r["verdict"])
bad = [r for r in results if not r["passed"]]
print(f"chosen kernels: {len(results) - len(bad)} of {len(results)} pass")
sys.exit(1 if bad else 0)
PY
  echo "chosen exit $?" >> "$LOGS/chosen.log" ) &
chosen=$!
t ${T_GPU:-300} python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider tests/ > "$LOGS/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"
tail -15 "$LOGS/pytest_gpu.log"
wait $self $chosen $pre
tail -5 "$LOGS/selftest.log"; tail -3 "$LOGS/chosen.log"; grep -c '^ok' "$LOGS/precompile.log"; grep "exit" "$LOGS/precompile.log"
echo "== after correctness: $SECONDS s"

# ---- 2. benchmarks (alone on the GPU) ----------------------------------------------------------------------------
bench() {  # name dtype shapes [tile flags...]
  local name=$1 dtype=$2 shapes=$3; shift 3
  echo "== ptxgen bench --dtype $dtype --iters 20 --json --shapes $shapes $*" > "$LOGS/bench_$name.err"
  t 100 python3 -m ptxgen bench --dtype "$dtype" --iters 20 --json --shapes "$shapes" "$@" > "$LOGS/bench_$name.json" 2>> "$LOGS/bench_$name.err"
  echo "exit $?" >> "$LOGS/bench_$name.err"
  bench_summary "$LOGS/bench_$name.json" "$name"
}
BFP8_VARIANTS=${BFP8_VARIANTS:-}
t 120 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 8 ${BFP8_VARIANTS:+--variants $BFP8_VARIANTS} \
    --json "$LOGS/bench_blockfp8.jsonl" > "$LOGS/bench_blockfp8.log" 2>&1; echo "exit $?" >> "$LOGS/bench_blockfp8.log"
tail -n 20 "$LOGS/bench_blockfp8.log"
bench issue16 bf16 "$ISSUE16"
bench tuned bf16 "$TUNED"
bench smallm bf16 "$SMALLM"
bench e4m3 e4m3 "$FP8"
t 60 python3 -m ptxgen bench --api --shapes 4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192 --json \
    > "$LOGS/bench_api.json" 2> "$LOGS/bench_api.err"; echo "exit $?" >> "$LOGS/bench_api.err"
tail -c 1500 "$LOGS/bench_api.json"; echo
t 40 python3 tools/host_breakdown.py 1024x8192x8192 > "$LOGS/host_breakdown.log" 2>&1; echo "exit $?" >> "$LOGS/host_breakdown.log"
tail -n 12 "$LOGS/host_breakdown.log"
if [ -f tools/bench_mstore.py ]; then
  t 70 python3 tools/bench_mstore.py run > "$LOGS/bench_mstore.log" 2>&1; echo "exit $?" >> "$LOGS/bench_mstore.log"
  tail -n 15 "$LOGS/bench_mstore.log"
fi
bench f16 f16 "$F16"
bench f16old f16 "$F16" $F16_OLD
bench heldout bf16 "$HELD"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$LOGS/env.txt"
echo "== done: $SECONDS s"
