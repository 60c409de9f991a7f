#!/usr/bin/env bash
# 2026-12-02 s7: shapes no issue names (LLM projections, odd squares), bf16 and e4m3, `ptxgen bench` with no tile flags
# (the chooser's picks) against cuBLAS through torch, same process, alternating rounds. Usage: OUT=$OUT bash tools/gpu_s7-shapes.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-250}
. tools/gpu_common.sh
gpu_begin s7
LLM=2048x7168x4096,4096x7168x16384,1024x4096x4096,4096x14336x4096,8192x28672x4096,4096x4096x14336,2048x2048x2048,3072x3072x3072,6144x6144x6144,768x3072x768,8192x1024x8192,4000x4000x4000
for dt in bf16 e4m3; do
  t 110 python3 -m ptxgen bench --dtype $dt --iters 20 --json --shapes "$LLM" > "$OUT/bench_shapes_$dt.json" 2> "$OUT/bench_shapes_$dt.err"
  echo "exit $?" >> "$OUT/bench_shapes_$dt.err"
  bench_summary "$OUT/bench_shapes_$dt.json" "$dt"
done
