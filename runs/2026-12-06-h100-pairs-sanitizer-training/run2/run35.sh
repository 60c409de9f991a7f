#!/bin/bash
# one short device call: the tail kernel's gpu tests and the training gpu tests, memcheck without the API probes, the training steps
export PYTHONUNBUFFERED=1
L=/tmp/x35; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-300} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc35
step pytest_tail 90 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_tailzero.py tests/test_training_gpu.py
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
step memcheck_carry 40 "$SAN" --tool memcheck --report-api-errors no python3 .exp/san33.py
step training 120 python3 tools/bench_training.py --model moe,mlp --tokens 8192 --rounds 5 --json $L/training.jsonl
step profile 150 python3 tools/profile_training.py --model moe --compile --steps 5 --reps 3 --out $L/profile
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; head -2 $L/env.txt; tail -n 3 $L/pytest_tail.log; grep -E "ERROR SUMMARY" $L/memcheck_carry.log
grep -E "vs |step ms" $L/training.log; head -12 $L/profile/profile_training.txt 2>/dev/null
