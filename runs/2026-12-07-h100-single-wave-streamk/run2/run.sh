#!/bin/bash
# Validation of single-wave stream-K with the split round's fixed cost (.exp/wt = 04ac056 + fills_sms + STREAM_K_SINGLE_WAVE
# + STREAMK_FIXUP_US): a second seeded draw (none of run 1's shapes), the held-out shapes whose pick changed (measured
# only), then ptxgen bench's classes and a fresh calibration + the held-out 30 (bf16, e4m3 form) under the new chooser.
export PYTHONUNBUFFERED=1
mkdir -p $OUT
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
cd .exp/wt && export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc79
python3 setup.py -q build_ext --inplace > /dev/null 2>&1
L=/tmp/l79; mkdir -p $L
echo "04ac056 + KernelABI.fills_sms + rules.STREAM_K_SINGLE_WAVE + costmodel.STREAMK_FIXUP_US = 3.0 (.exp/wt)" > $L/tree.txt
left() { echo $(( ${DEADLINE:-540} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
step sw2 170 python3 tools/exp_single_wave_streamk.py --out $L/sw2 --seed 20261208 --no-named --budget-s 150
step sw_held 70 python3 tools/exp_single_wave_streamk.py --out $L/sw_held --budget-s 55 \
  --shapes bf16:200x1311x2640,bf16:12771x9037x5568,e4m3:200x1312x2640,e4m3:336x8192x8192
B=$(( $(left) - 15 ))
[ $B -gt 60 ] && CAL_S=60 BUDGET=$B OUT=$OUT/rows bash tools/gpu_run.sh bench-gemm calibrate > /dev/null 2>&1
tar czf $OUT/logs.tgz -C /tmp l79; cp $L/sw2/summary.txt $OUT/sw2_summary.txt 2>/dev/null; cp $L/sw_held/summary.txt $OUT/sw_held_summary.txt 2>/dev/null
cat $L/summary.txt; cut -c1-200 $OUT/sw2_summary.txt $OUT/sw_held_summary.txt 2>/dev/null; grep -E "^==|geomean" $OUT/rows/summary.txt | cut -c1-220
