#!/usr/bin/env bash
# Block-FP8 stream-K (issue 17; 2026-12-01 s5-bfsk, built at L1/L2, never run) on the GPU in one command:
# 1. tests/test_blockfp8_streamk.py's gpu tier (7 variants, each in its own process with a timeout: against the float64
#    recipe, three calls bit-identical, the launch split, the flags zero after);
# 2. tools/bench_blockfp8.py, the default against its stream-K forms (-sk4, -sk8) in alternating rounds with torch's
#    blockwise _scaled_mm (on 132 SMs only 4096x7168x16384 splits: 1216 tiles = 9 x 132 + 28, 28 split 4 ways; 8192^3 and
#    2048x7168x4096 leave 112 and 80 tiles in the last round, too many to split, so their -skS rows run whole: a control).
# Logs go to $OUT; each step is bounded by a timeout. Usage (device machine, repository root):
#   OUT=$OUT bash tools/gpu_s5-bfsk.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-10}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-sk4,n192-s4-tma-sk8}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-240}
T_BENCH=${T_BENCH:-150}
. tools/gpu_common.sh
gpu_begin s5-bfsk
export PTXGEN_ARTIFACTS="$OUT"
gpu_pytest pytest_blockfp8_streamk_gpu.log "$T_TEST" tests/test_blockfp8_streamk.py
bfp8_bench streamk
