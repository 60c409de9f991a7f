#!/usr/bin/env bash
# s10: derive.bfp8tiles' tile choice for fp8blocks.gemm without a spec. (1) the gpu tests of gemm without a spec (its
# new 64 x 128 / 128 x 128 picks at odd shapes) and compute-sanitizer on those kernels; (2) held-out shapes the model
# was not fitted to (M 32 / 256 / 1024 / 2048, Llama-70B-like N x K): the three tiles with and without stream-K against
# torch, to compare the model's pick with the best measured form and the 192 x 128 rule before it; (3) what a caller
# sees through fp8blocks.gemm at a few of them (tools/bench_blockfp8_api.py); (4) energy without the promotion.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s10-check.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-440}
. tools/gpu_common.sh
gpu_begin s10check
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-sk8,s5-tma-tmasf,s5-tma-tmasf-sk8,m64-n128-s6-tma-tmasf,m64-n128-s6-tma-tmasf-sk8}
t 60 python3 tools/bench_blockfp8.py --compile-only --jobs 12 --variants "$VARIANTS" > "$OUT/compile.log" 2>&1
PTXGEN_ARTIFACTS=$OUT gpu_pytest pytest_pick_gpu.log ${T_GPU:-200} $XDIST tests/test_epilogue_ops.py tests/test_blockfp8_prepared.py \
  -k "${K_EXPR:-gemm_without_a_spec or prepared or (sanitizer and (m64 or m128))}"
MS=${MS:-32 256 1024 2048}
NKS=${NKS:-8192x8192 28672x8192 8192x28672 10240x8192 2112x7168}
SHAPES=$(for m in $MS; do for nk in $NKS; do printf "%sx%s " "$m" "$nk"; done; done)
T_BENCH=$(( $(left) - 210 )) ROUNDS=${ROUNDS:-5} bfp8_bench heldout > /dev/null
tail -2 "$OUT/bench_blockfp8_heldout.log"
t 60 python3 tools/bench_blockfp8_api.py ${API_SHAPES:-32x8192x8192 256x28672x8192 1024x8192x28672 2048x10240x8192} \
  --rounds 10 --json "$OUT/bench_blockfp8_api.jsonl" > "$OUT/bench_blockfp8_api.log" 2>&1
echo "exit $?" >> "$OUT/bench_blockfp8_api.log"; cat "$OUT/bench_blockfp8_api.log"
# (4) the block structure's energy without the promotion arithmetic (power_probe's -nopromo diagnostic) beside the
# recipe kernel and its per-tensor twin at 4096x7168x16384
t 130 python3 tools/power_probe.py 4096x7168x16384 --variants ${PVARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-nopromo,plain-m192-n128-s4-tma} \
  --seconds 3 --json "$OUT/power_probe.jsonl" --smi-log "$OUT/smi.csv" > "$OUT/power_probe.log" 2>&1
echo "exit $?" >> "$OUT/power_probe.log"; cat "$OUT/power_probe.log"; gzip -f "$OUT/smi.csv"
echo "== s10-check done: $SECONDS s"
