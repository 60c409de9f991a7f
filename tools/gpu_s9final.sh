#!/usr/bin/env bash
# The closing device run of the 2026-12-02 ninth session, in ONE call:
#   OUT=dir [NAME=s9final] [S5_BUDGET=320] [T_GPU=230] [T_EPI=55] [T_BAPI=45] bash tools/gpu_s9final.sh
# tools/gpu_s8final.sh (the gpu tier, sanitizers, selftest, the chooser's kernels, every closing bench, block FP8 and the
# fused epilogue) and fp8blocks.gemm as a caller sees it (tools/bench_blockfp8_api.py). Logs: one archive $OUT/$NAME.tgz.
exec env NAME="${NAME:-s9final}" T_BAPI="${T_BAPI:-45}" bash tools/gpu_s8final.sh
