#!/usr/bin/env bash
# The seventh session's first device call (issue 17): what s6 built at L1/L2 and never ran, in one command:
# 1. every block-FP8 gpu test of tests/test_epilogue_ops.py (the per-warp stage release of 93334b3 changed every block-FP8
#    kernel; --fp8-scale-load tma's recipe tests; compute-sanitizer memcheck/racecheck/synccheck on the default and the
#    tma-scale kernel, whose racecheck found 3 hazards before the fix) and stream-K's sk4 case;
# 2. tools/bench_blockfp8.py: the default (n192-s4-tma) against the A scales by TMA (-tmasf), the per-tensor twin, a
#    128 x 160 tile (10.9 waves at 4096x7168 against 128 x 192's 9.2; direct epilogue: TMA store wants BN % 64 == 0) and
#    BM = 192 with TMA scales, alternating rounds with torch's blockwise _scaled_mm.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s7-first.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-tmasf,plain-n192-s4-tma,n160-s5-direct,m192-n128-s4-tma-tmasf}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-240}
T_SK=${T_SK:-40}
T_BENCH=${T_BENCH:-220}
. tools/gpu_common.sh
gpu_begin s7
export PTXGEN_ARTIFACTS="$OUT"
gpu_pytest pytest_blockfp8_gpu.log "$T_TEST" tests/test_epilogue_ops.py $XDIST -k "block_fp8" --durations 15
gpu_pytest pytest_streamk_gpu.log "$T_SK" \
  "tests/test_blockfp8_streamk.py::test_block_fp8_stream_k_matches_the_recipe_bit_for_bit_thrice[sk4]"
bfp8_bench s7first
