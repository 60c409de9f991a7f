#!/usr/bin/env bash
# s8 (issue 17): block-FP8 tiles and options again after the loop fixes (warp-uniform warpgroup index, K loop unrolled
# twice): tools/bench_blockfp8.py at the shapes, alternating rounds with torch's blockwise call.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-tiles.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,s5-tma,m192-n128-s4-tma,m192-n128-s4-tma-tmasf,n192-s4-tma-c2x1,n192-s4-tma-g16,n192-s4-tma-tmasf,plain-n192-s4-tma}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_BENCH=${T_BENCH:-240}
. tools/gpu_common.sh
gpu_begin s8tiles
bfp8_bench s8tiles
echo "== s8-tiles done: $SECONDS s"
