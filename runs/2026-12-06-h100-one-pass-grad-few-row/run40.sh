#!/bin/bash
# the one-pass activation backward + bias gradient (L3 tests, its speed, the MLP training step), the dact epilogue's
# new gelu forms (gpu tests), host time per call of the new paths; then the few-row probes; on an H200 the GEMM sets
export PYTHONUNBUFFERED=1
L=/tmp/x37_$$; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-540} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv > $L/env.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $L/env.txt 2>&1
git log -1 --format=%h >> $L/env.txt 2>/dev/null
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc37
step pytest 110 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_actgrad.py tests/test_fusion_aux.py
step actgrad_bench 40 python3 .exp/actgrad_bench.py
step hostcall 25 python3 .exp/hostcall.py
step training 90 python3 tools/bench_training.py --model mlp --tokens 8192 --rounds 3 --no-compile --ablate --act-grad-kernel on --json $L/training.jsonl
step names 30 python3 .exp/fewrow_probe.py names
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
grep -q H200 $L/env.txt || step ncu 120 "$NCU" --clock-control none --section SpeedOfLight --metrics lts__t_bytes.sum,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active python3 .exp/fewrow_probe.py ncu
if grep -q H200 $L/env.txt; then
  mkdir -p $L/sets; OUT=$L/sets BUDGET=$(( $(left) - 20 )) bash tools/gpu_run.sh bench-gemm > $L/gpu_run_sets.log 2>&1
  echo "sets exit $?" >> $L/summary.txt
fi
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; cat $L/env.txt; tail -n 4 $L/pytest.log; cat $L/actgrad_bench.log | tail -3
grep -E "vs |step ms|MLP" $L/training.log | head; tail -4 $L/hostcall.log; grep NAMES $L/names.log | cut -c1-300
cat $L/sets/summary.txt 2>/dev/null | tail -15
grep -E "^  [a-z_]+.*Context|Duration|L2 Cache Thr|DRAM Thr|Compute \(SM\)|qgmma_cycles|lts__t_bytes|dram__bytes" $L/ncu.log 2>/dev/null | head -80
