#!/usr/bin/env bash
# 2026-12-02 s7: the f32 TMA-store epilogue (st.shared.v2.f32; docs/design.md) on the H200, in one call:
# 1. its gpu tests: plain kernels against float64 (a sentinel past column N), fused chains, block FP8 against the recipe;
# 2. tools/bench_f32store.py: direct stores against the TMA store, block FP8 128 x 192 and bf16 -> f32, against torch.
# Usage (device machine, repository root): OUT=$OUT BUDGET=300 bash tools/gpu_s7-f32store.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-300}
. tools/gpu_common.sh
gpu_begin s7-f32store
t 170 python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider tests/test_epilogue_ops.py -k f32_tma_store \
  > "$OUT/pytest_f32store.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest_f32store.log"; tail -15 "$OUT/pytest_f32store.log"
t 110 python3 tools/bench_f32store.py --json "$OUT/bench_f32store.jsonl" > "$OUT/bench_f32store.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_f32store.log"; cat "$OUT/bench_f32store.log"
