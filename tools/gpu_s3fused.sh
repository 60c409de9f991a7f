#!/usr/bin/env bash
# Issue 17 part 1 on the H200, one lease (run from this tree's copy under <main>/.gpu/s3-fused). Steps (default all):
#   tests  tests/test_epilogue_ops.py -m gpu (every op against float64 at odd shapes, the interior and checked paths);
#   exp    tools/exp_fused.py: plain vs the fused variants ($EXP_VARIANTS, default the script's) vs torch, one process,
#          alternating rounds; main's fused kernels rendered by main's tree (fused_main);
#   bench  tools/bench_epilogue.py (the issue's bench, with the plain_twin control) on this tree.
# Logs to $OUT: env.txt, epilogue_ops_pytest.log, exp_fused.log, exp_fused.jsonl, bench_epilogue.log, bench_epilogue.jsonl
# Runs: run1/run2 = "tests exp bench" (cyclic order), run4 = "exp bench" with ROUNDS=30, shuffled order.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
BR=$PWD
ROOT=$(cd ../.. && pwd)
ROUNDS=${ROUNDS:-20}
STEPS=${*:-tests exp bench}
export PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-s3fused
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; echo "branch $(cat .commit 2>/dev/null)"; echo "main $(git -C "$ROOT" log --oneline -1 2>/dev/null)"
  echo "steps: $STEPS; rounds $ROUNDS; variants ${EXP_VARIANTS:-default}"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
(cd "$ROOT" && PYTHONPATH=$ROOT timeout 60 python3 "$BR/tools/exp_fused.py" --write-src /tmp/s3f_old 8192x8192x8192 4096x4096x4096) 2>&1 | tail -3
export PYTHONPATH=$BR
for step in $STEPS; do
  case $step in
    tests)
      XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
      timeout 150 python3 -m pytest tests/test_epilogue_ops.py -m gpu -q -rs -p no:cacheprovider $XDIST > "$OUT/epilogue_ops_pytest.log" 2>&1
      echo "epilogue ops rc=$?"; tail -4 "$OUT/epilogue_ops_pytest.log" ;;
    exp)
      timeout 200 python3 tools/exp_fused.py 8192x8192x8192 4096x4096x4096 --rounds "$ROUNDS" --old-src /tmp/s3f_old ${EXP_VARIANTS:+--variants $EXP_VARIANTS} \
        --json "$OUT/exp_fused.jsonl" > "$OUT/exp_fused.log" 2>&1
      echo "exp_fused rc=$?"; cat "$OUT/exp_fused.log" ;;
    bench)
      timeout 150 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds "$ROUNDS" --json "$OUT/bench_epilogue.jsonl" > "$OUT/bench_epilogue.log" 2>&1
      echo "bench_epilogue rc=$?"; cat "$OUT/bench_epilogue.log" ;;
  esac
done
