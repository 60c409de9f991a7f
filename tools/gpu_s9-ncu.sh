#!/usr/bin/env bash
# s9 (issue 17): where the 256 x 128 two-slab kernel (--consumer-slabs 2) loses to the 192 x 128 TMA-scale kernel per
# tile (s9 run1: 1158 TFLOP/s both at 4096x7168x16384, though 256 x 128 runs 7 rounds of 132 tiles there and 192 x 128
# 9.33): ncu (no clock control; speed of light, warp states, per-instruction stall samples) of one launch each at
# 4096x7168x16384, summarized by tools/ncu_blockfp8.py.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s9-ncu.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-400}
SHAPE=${SHAPE:-4096x7168x16384}
NCU_VARIANTS=${NCU_VARIANTS:-m256-n128-s3-tma-tmasf-cs2 m192-n128-s4-tma-tmasf}
. tools/gpu_common.sh
gpu_begin s9ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in $NCU_VARIANTS; do
  t 150 "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section SourceCounters --import-source no --metrics sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active \
    -k regex:ptxgen --launch-skip 1 --launch-count 1 -o /tmp/s9_prof_$v -f \
    python3 tools/ncu_blockfp8.py "$SHAPE" $v >> "$OUT/ncu.log" 2>&1
  echo "ncu $v exit $?" >> "$OUT/ncu.log"
done
ncu_summaries s9_prof
grep -E "Duration|tensor_op|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|SM Frequency|===" "$OUT/ncu_details.log"
head -c 4000 "$OUT/ncu_sass_summary.log"
# then, where budget is left, the split last round again (run2's sk3 against whole tiles), more rounds at one shape
if [ -n "${SK_VARIANTS:-}" ] && [ "$(left)" -gt 80 ]; then
  SHAPES=$SHAPE VARIANTS=$SK_VARIANTS ROUNDS=${ROUNDS:-16} T_BENCH=$(( $(left) - 20 )) bfp8_bench s9sk2
fi
echo "== s9-ncu done: $SECONDS s"
