#!/usr/bin/env bash
# Few waves and rows off a sector, fifth session (issue 16, bf16), in ONE device call:
#   OUT=dir BUDGET=seconds bash tools/gpu_s5-waves.sh
# 1. compile every kernel the run times (NVRTC, all cores) while the gpu tests the change touches run (swap-AB:
#    tests/test_dmajor.py, float64);
# 2. alone on the GPU: `ptxgen bench` with no tile flags on issue 16's seven unaligned / few-wave shapes (the chooser with
#    the swap rule for M > 128), tools/exp_waves.py swap (the swapped tiles against the picks and the rule's controls),
#    the tuned six and the held-out 20 with no tile flags, tools/exp_cost.py compare generalization (the seeded set: the
#    chooser against the rules before the cost model and against the fourth session's chooser), tools/exp_waves.py big
#    (stream-K counts, tiles, raster group, ping-pong in a 2x1 cluster on the unaligned / few-wave shapes and neighbours).
# run2 (bash tools/gpu_s5-waves.sh run2): the gpu tests again, `ptxgen bench` on the seven with the fitted swap rule, the
#    rule's picks on three shapes run 1 did not measure, and the big sweep's four shapes run 1 lost.
# Every step has a timeout within $BUDGET; logs in $OUT (one archive, s5waves.tgz, and the main logs beside it).
set -u
OUT=${OUT:-out}
LOGS=${LOGS:-/tmp/s5waves}
BUDGET=${BUDGET:-200}
mkdir -p "$OUT" "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5waves-cache}
pack() { tar czf "$OUT/s5waves.tgz" -C "$LOGS" . ; cp "$LOGS"/bench_issue16.json "$LOGS"/swap.jsonl "$LOGS"/big.jsonl "$LOGS"/generalize.jsonl "$OUT"/ 2>/dev/null; }
trap pack EXIT
t() {
  local want=$1; shift
  local have=$(( BUDGET - SECONDS - 6 ))
  if [ "$have" -lt 5 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  echo "commit $(cat .commit 2>/dev/null)"
} > "$LOGS/env.txt" 2>&1
if [ "${1:-}" = run2 ]; then  # after run 1: the fitted swap rule confirmed, its unmeasured picks, the big sweep's rest
  SEVEN=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
  ( t 40 python3 tools/exp_waves.py precompile run2 > "$LOGS/precompile.log" 2>&1; echo "exit $?" >> "$LOGS/precompile.log" ) &
  pre=$!
  ( t 50 python3 -m pytest -q -m gpu tests/test_dmajor.py -p no:cacheprovider > "$LOGS/pytest_gpu.log" 2>&1; echo "exit $?" >> "$LOGS/pytest_gpu.log" ) &
  tst=$!
  wait $pre $tst
  grep -v '^ok' "$LOGS/precompile.log" | head; tail -n 3 "$LOGS/pytest_gpu.log"
  echo "== ptxgen bench --dtype bf16 --iters 20 --json --shapes $SEVEN" > "$LOGS/bench_issue16.err"
  t 30 python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes "$SEVEN" > "$LOGS/bench_issue16.json" 2>> "$LOGS/bench_issue16.err"; echo "exit $?" >> "$LOGS/bench_issue16.err"
  t 15 python3 tools/exp_waves.py swap run2 > "$LOGS/swap.jsonl" 2> "$LOGS/swap.err"; echo "exit $?" >> "$LOGS/swap.err"
  t 60 python3 tools/exp_waves.py big run2 > "$LOGS/big.jsonl" 2> "$LOGS/big.err"; echo "exit $?" >> "$LOGS/big.err"
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$LOGS/env.txt"
  echo "total ${SECONDS}s"
  exit 0
fi
SEVEN=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
HELD=$(python3 tools/heldout_shapes.py)
( t 60 python3 tools/exp_waves.py precompile > "$LOGS/precompile.log" 2>&1; echo "exit $?" >> "$LOGS/precompile.log"
  t 60 python3 tools/exp_cost.py precompile "$SEVEN,$TUNED,$HELD" >> "$LOGS/precompile.log" 2>&1; echo "exit $?" >> "$LOGS/precompile.log" ) &
pre=$!
( t 90 python3 -m pytest -q -m gpu tests/test_dmajor.py -p no:cacheprovider > "$LOGS/pytest_gpu.log" 2>&1; echo "exit $?" >> "$LOGS/pytest_gpu.log" ) &
tst=$!
wait $pre $tst
grep -c '^ok' "$LOGS/precompile.log"; grep -v '^ok' "$LOGS/precompile.log" | head; tail -n 3 "$LOGS/pytest_gpu.log"
bench() {  # name shapes
  echo "== ptxgen bench --dtype bf16 --iters 20 --json --shapes $2" > "$LOGS/bench_$1.err"
  t 60 python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes "$2" > "$LOGS/bench_$1.json" 2>> "$LOGS/bench_$1.err"
  echo "exit $?" >> "$LOGS/bench_$1.err"
  python3 - "$LOGS/bench_$1.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no json: {e}")
for r in d["shapes"]:
    print(f"{r['m']}x{r['n']}x{r['k']} {r['ratio']:.3f} {r['ours_ms']*1e3:.1f}us cublas {r['cublas_ms']*1e3:.1f}us {r['chosen_by']} {r['kernel'][28:]}")
print("geomean", round(d["geomean_ratio"], 4))
PY
}
bench issue16 "$SEVEN"
t 40 python3 tools/exp_waves.py swap > "$LOGS/swap.jsonl" 2> "$LOGS/swap.err"; echo "exit $?" >> "$LOGS/swap.err"
bench tuned "$TUNED"
bench heldout "$HELD"
t 60 python3 tools/exp_cost.py compare generalization > "$LOGS/generalize.jsonl" 2> "$LOGS/generalize.err"; echo "exit $?" >> "$LOGS/generalize.err"
t 80 python3 tools/exp_waves.py big > "$LOGS/big.jsonl" 2> "$LOGS/big.err"; echo "exit $?" >> "$LOGS/big.err"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$LOGS/env.txt"
echo "total ${SECONDS}s"
