#!/usr/bin/env bash
# The closing device run of the 2026-12-02 eighth session, in ONE call:
#   OUT=dir [NAME=s8final] [S5_BUDGET=360] [T_GPU=240] [T_EPI=60] bash tools/gpu_s8final.sh
# 1. tools/gpu_s5final.sh (the whole gpu tier with the block-FP8 sanitizer cases, selftest, the chooser's kernels, then
#    every benchmark of the closing runs; BUDGET=$S5_BUDGET), block FP8: tma_scales_spec (what fp8blocks.gemm runs where
#    TMA reads scale_a), the 128 x 192 default and its per-tensor twin;
# 2. the fused epilogue (issue 17 part 1): tools/bench_epilogue.py 8192^3 and 4096^3 with the FP8-output chain.
# Logs: one archive $OUT/$NAME.tgz.
set -u
OUT=${OUT:-out}
NAME=${NAME:-s8final}
LOGS=/tmp/$NAME
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT NAME=$NAME LOGS=$LOGS BUDGET=${S5_BUDGET:-360} T_GPU=${T_GPU:-240} \
  BFP8_VARIANTS=${BFP8_VARIANTS:-m192-n128-s4-tma-tmasf,n192-s4-tma,plain-n192-s4-tma} bash tools/gpu_s5final.sh
export PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5final-cache}
timeout ${T_EPI:-60} python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 \
  --json "$LOGS/bench_epilogue.jsonl" > "$LOGS/bench_epilogue.log" 2>&1; echo "exit $?" >> "$LOGS/bench_epilogue.log"
tail -n 25 "$LOGS/bench_epilogue.log"
tar czf "$OUT/$NAME.tgz" -C "$LOGS" .
echo "== s8final done: $SECONDS s"
