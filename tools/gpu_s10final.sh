#!/usr/bin/env bash
# The closing device run of the 2026-12-02 tenth session, in ONE call:
#   OUT=dir [NAME=s10final] [S5_BUDGET=330] [T_GPU=240] [T_EPI=45] [T_BAPI=45] bash tools/gpu_s10final.sh
# tools/gpu_s9final.sh (the gpu tier, sanitizers, selftest, the chooser's kernels, every closing bench, block FP8, the
# fused epilogue, fp8blocks.gemm as a caller sees it) with the gpu tier's time raised to what it needs (s9 cut it at
# 200 s) and small-M shapes in the fp8blocks.gemm bench (derive.bfp8tiles' picks). Logs: one archive $OUT/$NAME.tgz.
exec env NAME="${NAME:-s10final}" S5_BUDGET="${S5_BUDGET:-330}" T_GPU="${T_GPU:-240}" T_EPI="${T_EPI:-45}" \
  T_BAPI="${T_BAPI:-45}" BAPI_SHAPES="${BAPI_SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096 64x7168x16384 128x4096x7168 32x4096x7168}" \
  bash tools/gpu_s9final.sh
