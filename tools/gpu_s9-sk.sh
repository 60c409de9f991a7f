#!/usr/bin/env bash
# s9 (issue 17): stream-K's split last round on the 192 x 128 TMA-scale kernel (tma_scales_spec, --stream-k S with
# --fp8-scale-load tma since s9). At 4096x7168x16384 its 1232 tiles are 9 rounds of 132 and 44 (S = 3); 8192^3 and
# 2048x7168x4096 do not split (what stream-K costs a kernel that runs whole tiles). The gpu tests first (the recipe,
# bit-identical thrice, flags reset), then the bench against torch's blockwise _scaled_mm, alternating rounds.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s9-sk.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf-sk3,m192-n128-s4-tma-tmasf}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_BENCH=${T_BENCH:-240}
BUDGET=${BUDGET:-560}
. tools/gpu_common.sh
gpu_begin s9sk
PTXGEN_ARTIFACTS=$OUT gpu_pytest pytest_sk_gpu.log 240 $XDIST tests/test_blockfp8_streamk.py -k "tmasf"
gate_then_bench pytest_sk_gpu.log s9sk
echo "== s9-sk done: $SECONDS s"
