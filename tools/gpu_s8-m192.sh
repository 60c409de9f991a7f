#!/usr/bin/env bash
# s8 (issue 17): the 192 x 128 TMA-scale block-FP8 kernel's stages and raster order, and the fused epilogue with the
# branch-free epilogue order (alternate-uniform) now that the warpgroup index is warp-uniform; one command.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-m192.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s3-tma-tmasf,m192-n128-s4-tma-tmasf-g16,n192-s4-tma}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_BENCH=${T_BENCH:-150}
BUDGET=${BUDGET:-280}
. tools/gpu_common.sh
gpu_begin s8m192
bfp8_bench s8m192
t 100 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --epilogue-order alternate-uniform --rounds 20 \
  --json "$OUT/bench_epilogue.jsonl" > "$OUT/bench_epilogue.log" 2>&1
echo "exit $?" >> "$OUT/bench_epilogue.log"; cat "$OUT/bench_epilogue.log"
echo "== s8-m192 done: $SECONDS s"
