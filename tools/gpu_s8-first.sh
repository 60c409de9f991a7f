#!/usr/bin/env bash
# The eighth session's first device call (issue 17), in one command:
# 1. the block-FP8 ping-pong recipe tests (m64-n192-pp-tma, -direct in tests/test_epilogue_ops.py; L2 until now);
# 2. tools/bench_blockfp8.py: the default against block-FP8 ping-pong 64 x 192 (5 and 6 stages) and the per-tensor twins,
#    alternating rounds with torch's blockwise _scaled_mm; nvidia-smi samples clocks and power beside it (smi.csv);
# 3. tools/bench_f32store.py once (s7's review moved it onto runtime.bench.alternate_medians and Launch: first GPU run since).
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-first.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-n192-s4-tma,m64-n192-s6-tma-pp,m64-n192-s5-tma-pp,plain-n192-s4-tma,plain-m64-n192-s6-tma-pp}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
T_TEST=${T_TEST:-120}
T_BENCH=${T_BENCH:-200}
T_F32=${T_F32:-80}
. tools/gpu_common.sh
gpu_begin s8
export PTXGEN_ARTIFACTS="$OUT"
gpu_pytest pytest_pp_gpu.log "$T_TEST" tests/test_epilogue_ops.py $XDIST -k "block_fp8 and pp"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" 2>&1 &
SMI=$!
bfp8_bench s8first
kill $SMI 2>/dev/null
timeout "$T_F32" python3 tools/bench_f32store.py --json "$OUT/bench_f32store.jsonl" > "$OUT/bench_f32store.log" 2>&1
echo "exit $?" >> "$OUT/bench_f32store.log"; tail -n 12 "$OUT/bench_f32store.log"
gzip -f "$OUT/smi.csv"
echo "== s8-first done: $SECONDS s"
