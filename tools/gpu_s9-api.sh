#!/usr/bin/env bash
# s9 (issue 17): fp8blocks.gemm's prepared launches (ptxgen.api.fp8launch): the gpu tests that call it repeatedly
# (tests/test_blockfp8_prepared.py, the block-FP8 recipe tests of tests/test_epilogue_ops.py), then its host time and
# single-call / back-to-back ratios against torch's blockwise _scaled_mm (tools/bench_blockfp8_api.py).
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s9-api.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-300}
. tools/gpu_common.sh
gpu_begin s9api
PTXGEN_ARTIFACTS=$OUT gpu_pytest pytest_prepared_gpu.log 150 $XDIST tests/test_blockfp8_prepared.py tests/test_epilogue_ops.py tests/test_blockfp8_streamk.py -k "${K_EXPR:-prepared or (block_fp8 and not sanitizer)}"
t 120 python3 tools/bench_blockfp8_api.py ${SHAPES:-4096x7168x16384 2048x7168x4096 128x7168x2048 32x4096x7168} \
  --json "$OUT/bench_blockfp8_api.jsonl" > "$OUT/bench_blockfp8_api.log" 2>&1
echo "exit $?" >> "$OUT/bench_blockfp8_api.log"; cat "$OUT/bench_blockfp8_api.log"
echo "== s9-api done: $SECONDS s"
