#!/usr/bin/env bash
# The closing device run of the 2026-12-02 eighth session, in ONE call:
#   OUT=dir [NAME=s8final] [S5_BUDGET=360] [T_GPU=240] [T_EPI=60] bash tools/gpu_s8final.sh
# tools/gpu_s7final.sh with the eighth session's block-FP8 variants (tma_scales_spec, what fp8blocks.gemm runs where TMA
# reads scale_a; the 128 x 192 default; its per-tensor twin) and without the f32-store bench (T_F32=0).
# Logs: one archive $OUT/$NAME.tgz.
exec env NAME="${NAME:-s8final}" S5_BUDGET="${S5_BUDGET:-360}" T_GPU="${T_GPU:-240}" T_EPI="${T_EPI:-60}" T_F32="${T_F32:-0}" \
  BFP8_VARIANTS="${BFP8_VARIANTS:-m192-n128-s4-tma-tmasf,n192-s4-tma,plain-n192-s4-tma}" bash tools/gpu_s7final.sh
