#!/usr/bin/env bash
# Device script (issue 17): DeepGEMM's SM90 FP8 1D2D kernel beside torch's blockwise _scaled_mm and our default
# block-FP8 kernel (n192-s4-tma), tools/ref/bench_deepgemm.py, in one command.
# Needs, next to the checkout (both git-ignored, carried to the device):
#   dg-headers.tar.gz  DeepGEMM's deep_gemm/include + CUTLASS's include/{cute,cutlass} (VERSIONS inside)
#   prebuilt/          the shared objects built on the workstation (nvcc 13.0, same flags); anything missing or stale
#                      is rebuilt here with nvcc from the headers
# Usage (device machine, repository root): OUT=$OUT bash tools/ref/gpu_deepgemm.sh
set -u
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-8}
PASSES=${PASSES:-2}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
BUDGET=${BUDGET:-330}
T_BENCH=${T_BENCH:-280}
BATCH_MS=${BATCH_MS:-25}
. tools/gpu_common.sh
gpu_begin 2026-12-02-deepgemm-reference
{ command -v nvcc; nvcc --version | tail -2; cat VERSIONS 2>/dev/null; } >> "$OUT/env.txt" 2>&1
DG=/tmp/dgref
mkdir -p "$DG" && tar xzf dg-headers.tar.gz -C "$DG" && cat "$DG/VERSIONS" | tee -a "$OUT/env.txt"
mkdir -p prebuilt
t "$T_BENCH" python3 tools/ref/bench_deepgemm.py $SHAPES --rounds "$ROUNDS" --passes "$PASSES" --batch-ms "$BATCH_MS" ${EXTRA:+--extra "$EXTRA"} \
  --dg-include "$DG/deepgemm/include" --cutlass-include "$DG/cutlass/include" --build-dir prebuilt --jobs 16 \
  --json "$OUT/bench_deepgemm.jsonl" --smi "$OUT/smi.csv" > "$OUT/bench_deepgemm.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_deepgemm.log"
cat "$OUT/bench_deepgemm.log"
# build logs of anything rebuilt here (ptxas -v): one file
cat prebuilt/*.log > "$OUT/build_logs.txt" 2>/dev/null
gzip -f "$OUT/smi.csv" 2>/dev/null
echo "== gpu_deepgemm done: $SECONDS s"
