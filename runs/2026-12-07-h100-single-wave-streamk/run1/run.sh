#!/bin/bash
# H200: issue 35's and 34's rows at the committed tree (.exp/head = git archive of 04ac056 without runs/ and generated/):
#   attention, bench-gemm, a fresh calibration + held-out 30; then the single-wave stream-K comparison (.exp/wt).
# H100: stream-K over every SM (.exp/wt = 04ac056 + KernelABI.fills_sms + the cost model's single-wave split): the
#   stream-K gpu tests, tools/exp_single_wave_streamk.py, e4m3 few-wave N 640-1024 with the 128x128 tile's stream-K forced.
export PYTHONUNBUFFERED=1
mkdir -p $OUT
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
ROOT=$PWD
if grep -q H200 $OUT/smi.txt; then
  (cd .exp/head && export PYTHONPATH=$PWD && python3 setup.py -q build_ext --inplace > /dev/null 2>&1
   CAL_S=60 BUDGET=330 OUT=$OUT/rows bash tools/gpu_run.sh attention bench-gemm calibrate > /dev/null 2>&1
   grep -E "^==" $OUT/rows/summary.txt | cut -c1-200)
fi
cd $ROOT/.exp/wt && export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc78
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
L=/tmp/l78; mkdir -p $L
echo "04ac056 + KernelABI.fills_sms for every stream-K kernel + rules.STREAM_K_SINGLE_WAVE (.exp/wt)" > $L/tree.txt
left() { echo $(( ${DEADLINE:-555} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
MID8=6000x768x4096,4000x896x6144,7000x640x3072,5000x1024x4096
E="--dtype e4m3 --a kmajor-sw128 --b kmajor-sw128 --a-order k --b-order k --bk 128 --acc f32 --out-dtype bf16 --schedule persistent --epilogue tma --iters 20 --json"
grep -q H200 $OUT/smi.txt || step pytest 150 python3 -m pytest -q -m gpu -n 4 tests/test_streamk.py tests/test_swap_streamk.py tests/test_blockfp8_streamk.py tests/test_streamk_api.py
B=$(( $(left) - 20 )); [ $B -gt 260 ] && B=260
step single_wave $((B + 15)) python3 tools/exp_single_wave_streamk.py --out $L/sw --budget-s $B
for s in 1 2 4; do
  step e8mid_sk$s 40 sh -c "python3 -m ptxgen bench $E --bm 128 --bn 128 --stages 6 --stream-k $s --shapes $MID8 > $L/e8mid_sk$s.json"
done
tar czf $OUT/logs.tgz -C /tmp l78; cp $L/summary.txt $OUT/l78_summary.txt; cp $L/sw/summary.txt $OUT/single_wave_summary.txt 2>/dev/null; cat $L/summary.txt; tail -3 $L/pytest.log 2>/dev/null; cat $L/sw/summary.txt 2>/dev/null | cut -c1-260
python3 - <<PY
import json, glob, os
for f in sorted(glob.glob("$L/e8mid*.json")):
    try: d = json.load(open(f))
    except Exception as e: print(os.path.basename(f), "unreadable", e); continue
    for s in d["shapes"]: print(os.path.basename(f)[:-5], s["m"], s["n"], s["k"], round(s.get("ratio") or 0, 3), round(1000 * (s.get("ours_ms") or 0), 1), s.get("checked_ok"))
PY
