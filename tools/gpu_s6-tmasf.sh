#!/usr/bin/env bash
# Block FP8 with the A scales by TMA (issue 17; 2026-12-02 s6-tmasf: --fp8-scale-load tma, derive.sfa_tma; built at L1/L2,
# never run) on the GPU in one command:
# 1. the new gpu tests of tests/test_epilogue_ops.py: the tma kernels against the float64 recipe (5 tiles x 6 shapes with
#    M % 4 == 0, N and K odd, 1500 x 3000 x 400 with several tiles a CTA) and the padded-stride / misaligned-M refusal test;
# 2. compute-sanitizer memcheck, racecheck, synccheck on the tma kernel (and the default, the control) at 1500 x 3000 x 400;
# 3. tools/bench_blockfp8.py: the default (n192-s4-tma, scale warp) against n192-s4-tma-tmasf, and the BM = 192 kernel
#    (m192-n128-s4-tma) against its tmasf form, alternating rounds with torch's blockwise _scaled_mm.
# Logs go to $OUT; each step is bounded by a timeout (about 380 s in all). Usage (device machine, repository root):
#   OUT=$OUT bash tools/gpu_s6-tmasf.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-tmasf,m192-n128-s4-tma,m192-n128-s4-tma-tmasf}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-90}
T_SAN=${T_SAN:-200}
T_BENCH=${T_BENCH:-90}
. tools/gpu_common.sh
gpu_begin s6-tmasf
export PTXGEN_ARTIFACTS="$OUT"
gpu_pytest pytest_tmasf_gpu.log "$T_TEST" tests/test_epilogue_ops.py $XDIST -k "block_fp8_tma_scales"
gpu_pytest pytest_tmasf_sanitizer.log "$T_SAN" tests/test_epilogue_ops.py $XDIST -k "block_fp8_compute_sanitizer_clean"
bfp8_bench tmasf
