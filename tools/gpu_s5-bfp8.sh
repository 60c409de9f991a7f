#!/usr/bin/env bash
# Block-scaled FP8 (issue 17, session 5) on the GPU in one command: the gpu tests of --fp8-scale-load ahead against the
# float64 recipe, tools/bench_blockfp8.py against torch's blockwise _scaled_mm (variants in alternating rounds, outputs
# checked), then an ncu profile (warp-stall sampling per SASS instruction) of the default and the ahead kernel.
# Logs go to $OUT; each step is bounded by a timeout. KCACHE: a kernel cache folder filled before the call.
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-10}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-block,n192-s4-tma-complete,n192-s4-tma-complete-yield,plain-n192-s4-tma}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
NCU_VARIANTS=${NCU_VARIANTS:-n192-s4-tma n192-s4-tma-smem}
T_TEST=${T_TEST:-60}
T_BENCH=${T_BENCH:-130}
T_NCU=${T_NCU:-100}
. tools/gpu_common.sh  # ncu_summaries
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${KCACHE:-/tmp/ptxgen-cache-s5-bfp8}
export PTXGEN_ARTIFACTS="$OUT"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || true
  ls "$PTXGEN_CACHE_DIR" 2>/dev/null | wc -l
  which ncu cuobjdump 2>&1; ls /usr/local/cuda/bin/cuobjdump 2>&1
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ "$T_TEST" != 0 ]; then
  timeout "$T_TEST" python3 -m pytest tests/test_epilogue_ops.py -k "block_fp8" -m gpu -q -rs \
    -p no:cacheprovider > "$OUT/pytest_blockfp8_gpu.log" 2>&1
  echo "pytest exit $?" >> "$OUT/pytest_blockfp8_gpu.log"
  tail -5 "$OUT/pytest_blockfp8_gpu.log"
fi
timeout "$T_BENCH" python3 tools/bench_blockfp8.py $SHAPES --rounds "$ROUNDS" \
  --variants "$VARIANTS" --json "$OUT/bench_blockfp8.jsonl" > "$OUT/bench_blockfp8.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_blockfp8.log"
cat "$OUT/bench_blockfp8.log"
if [ "$T_NCU" != 0 ]; then
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout "$T_NCU" "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section SourceCounters --import-source no -k regex:ptxgen --launch-skip 1 --launch-count 1 -o /tmp/s5b_prof -f \
    python3 tools/ncu_blockfp8.py 4096x7168x16384 $(echo $NCU_VARIANTS | cut -d' ' -f1) > "$OUT/ncu.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu.log"
  for v in $(echo $NCU_VARIANTS | cut -d' ' -f2-); do
    timeout "$T_NCU" "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section SourceCounters --import-source no -k regex:ptxgen --launch-skip 1 --launch-count 1 -o /tmp/s5b_prof_$v -f \
      python3 tools/ncu_blockfp8.py 4096x7168x16384 $v >> "$OUT/ncu.log" 2>&1
    echo "ncu exit $?" >> "$OUT/ncu.log"
  done
  ncu_summaries s5b_prof
  tail -c 6000 "$OUT/ncu_details.log"; head -c 5000 "$OUT/ncu_sass_summary.log"
fi
