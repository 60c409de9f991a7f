#!/usr/bin/env bash
# The closing device run of the 2026-12-02 seventh session, in ONE call:
#   OUT=dir [NAME=s7final] [T_GPU=330] bash tools/gpu_s7final.sh
# 1. tools/gpu_s5final.sh (the whole gpu tier with the block-FP8 sanitizer cases, selftest, the chooser's kernels, then
#    every benchmark of the closing runs; BUDGET=$S5_BUDGET), block FP8 with the default, TMA scales and the per-tensor twin;
# 2. the fused epilogue (issue 17 part 1): tools/bench_epilogue.py 8192^3 and 4096^3 with the FP8-output chain;
# 3. if present and T_F32 is not 0, tools/bench_f32store.py (f32 outputs: direct stores against the TMA store);
# 4. if T_BAPI is set and not 0, tools/bench_blockfp8_api.py (fp8blocks.gemm's host time and call ratios, s9).
# Logs: one archive $OUT/$NAME.tgz (gpu_s5final's, repacked with the extras).
set -u
OUT=${OUT:-out}
NAME=${NAME:-s7final}
LOGS=/tmp/$NAME
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT NAME=$NAME LOGS=$LOGS BUDGET=${S5_BUDGET:-380} T_GPU=${T_GPU:-330} \
  BFP8_VARIANTS=${BFP8_VARIANTS:-n192-s4-tma,n192-s4-tma-tmasf,plain-n192-s4-tma} bash tools/gpu_s5final.sh
export PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5final-cache}
timeout ${T_EPI:-100} python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 \
  --json "$LOGS/bench_epilogue.jsonl" > "$LOGS/bench_epilogue.log" 2>&1; echo "exit $?" >> "$LOGS/bench_epilogue.log"
tail -n 25 "$LOGS/bench_epilogue.log"
if [ -f tools/bench_f32store.py ] && [ "${T_F32:-110}" != 0 ]; then  # T_F32=0: skipped
  timeout ${T_F32:-110} python3 tools/bench_f32store.py --json "$LOGS/bench_f32store.jsonl" > "$LOGS/bench_f32store.log" 2>&1
  echo "exit $?" >> "$LOGS/bench_f32store.log"; tail -n 25 "$LOGS/bench_f32store.log"
fi
if [ -f tools/bench_blockfp8_api.py ] && [ "${T_BAPI:-0}" != 0 ]; then  # what a caller of fp8blocks.gemm sees (s9)
  timeout ${T_BAPI} python3 tools/bench_blockfp8_api.py ${BAPI_SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096 32x4096x7168} \
    --json "$LOGS/bench_blockfp8_api.jsonl" > "$LOGS/bench_blockfp8_api.log" 2>&1
  echo "exit $?" >> "$LOGS/bench_blockfp8_api.log"; tail -n 8 "$LOGS/bench_blockfp8_api.log"
fi
tar czf "$OUT/$NAME.tgz" -C "$LOGS" .
echo "== $NAME done: $SECONDS s"
