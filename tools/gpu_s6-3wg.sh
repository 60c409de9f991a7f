#!/usr/bin/env bash
# Block FP8 with three consumer warpgroups (issue 17; 2026-12-02 s6-3wg: BM = 192, BN = 128, one m64n128 chain per slab;
# producer 32 / consumers 160 registers; built at L1/L2, never run) on the GPU in one command:
# 1. every block-FP8 gpu test of tests/test_epilogue_ops.py against the float64 recipe (the new m192 variants at 4 odd
#    shapes, 1-2 K blocks and 192 tiles on 132 CTAs, and all the others: the scale warp's loads changed for every smem kernel in s6-3wg), and the
#    stream-K smem case (sk4; its scale warp starts at K block kt_first and steps);
# 2. tools/bench_blockfp8.py: the default (n192-s4-tma) against m192-n128-s4-tma (and its 3-stage form: 5 stages do not
#    fit shared memory with the TMA-store staging) and the per-tensor kernels of both tiles, alternating rounds with
#    torch's blockwise _scaled_mm.
# Logs go to $OUT; each step is bounded by a timeout (about 200 s in all). Usage (device machine, repository root):
#   OUT=$OUT bash tools/gpu_s6-3wg.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,m192-n128-s4-tma,plain-m192-n128-s4-tma,plain-n192-s4-tma,m192-n128-s3-tma}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_NEW=${T_NEW:-40}
T_TEST=${T_TEST:-60}
T_SK=${T_SK:-35}
T_BENCH=${T_BENCH:-70}
. tools/gpu_common.sh
gpu_begin s6-3wg
export PTXGEN_ARTIFACTS="$OUT"
# the new m192 variants first, then every other block-FP8 gpu test, then stream-K's sk4 case
[ "$T_TEST" != 0 ] && gpu_pytest pytest_3wg_gpu.log "$T_NEW" tests/test_epilogue_ops.py $XDIST -k "block_fp8 and m192"
gpu_pytest pytest_blockfp8_others_gpu.log "$T_TEST" tests/test_epilogue_ops.py $XDIST -k "block_fp8 and not m192"
gpu_pytest pytest_3wg_streamk_gpu.log "$T_SK" \
  "tests/test_blockfp8_streamk.py::test_block_fp8_stream_k_matches_the_recipe_bit_for_bit_thrice[sk4]"
bfp8_bench 3wg
