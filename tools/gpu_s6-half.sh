#!/usr/bin/env bash
# Block-FP8 --fp8-stagger half (issue 17; 2026-12-02 2026-12-02-blockfp8-half, built at L1/L2, never run) on the GPU in one command:
# 1. the half variants of tests/test_epilogue_ops.py's block-FP8 gpu tests against the float64 recipe (4 odd shapes x
#    4 variants, 1-2 K blocks x 3 variants) and the several-tiles-per-CTA test of all three staggers (issue, complete,
#    half: 192 tiles on at most 132 CTAs, the barriers spanning a CTA's tiles);
# 2. tools/bench_blockfp8.py: the default (n192-s4-tma, no stagger) against -half, -issue and the per-tensor kernel of
#    the same tile, alternating rounds with torch's blockwise _scaled_mm.
# Logs go to $OUT; each step is bounded by a timeout (about 200 s in all). Usage (device machine, repository root):
#   OUT=$OUT bash tools/gpu_s6-half.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-half,n192-s4-tma-issue,plain-n192-s4-tma}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-110}
T_BENCH=${T_BENCH:-90}
. tools/gpu_common.sh
gpu_begin 2026-12-02-blockfp8-half
export PTXGEN_ARTIFACTS="$OUT"
gpu_pytest pytest_half_gpu.log "$T_TEST" tests/test_epilogue_ops.py $XDIST -k "(half and not halves) or several_tiles"
bfp8_bench half
