#!/usr/bin/env bash
# s8 (issue 17): block FP8 with two 64-row slabs per consumer warpgroup sharing one partial (--consumer-slabs 2,
# DeepGEMM's 256 x 128 configuration; ptxgen.derive.bfp8slabs), written at L1/L2 (tests/test_blockfp8_slabs.py), never
# run: its gpu tests (the recipe at odd shapes, few K blocks, several tiles a CTA), compute-sanitizer on it, then the
# bench against torch's blockwise _scaled_mm beside tma_scales_spec (m192-n128-s4-tma-tmasf), alternating rounds.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-slabs.sh   (about 4-6 minutes after the start)
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-m256-n128-s3-tma-tmasf-cs2,m192-n128-s4-tma-tmasf,m256-n128-s3-tma-cs2}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_BENCH=${T_BENCH:-200}
BUDGET=${BUDGET:-560}
. tools/gpu_common.sh
gpu_begin s8slabs
# correctness first: a kernel that fails the recipe is not benched
PTXGEN_ARTIFACTS=$OUT gpu_pytest pytest_slabs_gpu.log $(( $(left) > 300 ? 200 : $(left) - 100 )) $XDIST \
  tests/test_epilogue_ops.py -k "consumer_slabs or (compute_sanitizer and m256-cs2)"
gate_then_bench pytest_slabs_gpu.log s8slabs
echo "== 2026-12-02-consumer-slabs done: $SECONDS s"
