#!/bin/bash
# one device call: the issue-35 sets on the GPU that came, head dim 256's gpu tests and speed, attention, the MLP's GEMM forms
export PTXGEN_CACHE_DIR=/tmp/pc PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=/tmp/x; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
step build_ext 90 python3 setup.py -q build_ext --inplace
step pytest_swapsk 120 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_swap_streamk.py
step pytest_d256 140 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py -k 256
step candidates_400 100 python3 tools/exp_candidates_run.py --out $L/cand400 --budget-s 90 --only 400x10000x6000
held=$(python3 tools/heldout_shapes.py --set 30)
step bench_heldout30_bf16 80 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $held > $L/bench_heldout30_bf16.json"
step bench_unaligned 70 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $UNALIGNED,400x10000x6000,2048x11008x4096,1024x4096x4096,3000x5000x7000 > $L/bench_unaligned.json"
step bench_tuned 60 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $TUNED > $L/bench_tuned.json"
step bench_heldout30_e4m3 70 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $held > $L/bench_heldout30_e4m3.json"
step bench_e4m3 60 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $FP8 > $L/bench_e4m3.json"
step bw 30 python3 .exp/bw.py
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
