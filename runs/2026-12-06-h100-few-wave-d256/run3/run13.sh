#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=/tmp/x13; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
export PTXGEN_CACHE_DIR=/tmp/pc_new
step build_ext 90 python3 setup.py -q build_ext --inplace
step pytest_attention 200 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py tests/test_swap_streamk.py tests/test_accumulate_gpu.py
cp templates/attention_parts.cuh.j2 /tmp/new_parts.j2
for r in 1 2; do
  cp .exp/old_attention_parts.cuh.j2 templates/attention_parts.cuh.j2
  PTXGEN_CACHE_DIR=/tmp/pc_old step bench_old_$r 60 python3 tools/bench_attention.py --seqlens 512,2048 --repeats 5 --json $L/bench_old_$r.json
  cp /tmp/new_parts.j2 templates/attention_parts.cuh.j2
  step bench_new_$r 60 python3 tools/bench_attention.py --seqlens 512,2048 --repeats 5 --json $L/bench_new_$r.json
done
step bench_variants 90 python3 tools/bench_attention.py --seqlens 512,2048 --repeats 5 --variants default,pingpong:128:128:2:persistent,overlap:192:128:2:persistent,overlap:128:128:2:persistent --json $L/bench_variants.json
step train_gemms 60 python3 .exp/train_gemms.py
if grep -q H200 $L/env.txt; then
TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
UNALIGNED=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
SMALLM=$(for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do printf '%sx%s,' $m $nk; done; done)
SMALLM=${SMALLM%,}
FP8=5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024,16x4096x4096,64x7168x16384,128x16384x4096,336x8192x8192,12000x1008x6000,2512x10000x4000,8192x8192x8192,4096x4096x4096
BFP8_SHAPES="4096x7168x16384 8192x8192x8192 2048x7168x4096"
  held=$(python3 tools/heldout_shapes.py --set 30)
  step bench_heldout30_bf16 80 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $held > $L/bench_heldout30_bf16.json"
  step bench_unaligned 70 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $UNALIGNED,400x10000x6000,2048x11008x4096,1024x4096x4096,3000x5000x7000 > $L/bench_unaligned.json"
  step bench_tuned 60 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $TUNED > $L/bench_tuned.json"
  step bench_e4m3 60 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $FP8 > $L/bench_e4m3.json"
  step bench_heldout30_e4m3 60 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $held > $L/bench_heldout30_e4m3.json"
fi
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
