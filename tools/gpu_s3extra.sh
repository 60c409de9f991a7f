#!/usr/bin/env bash
# The third session's second device call: compute-sanitizer on the two new epilogue paths (C through TMA, FP8 through the
# TMA store) over their gpu tests, the fused FP8-output line of bench_epilogue again (its first run was void), grouped
# GEMM with an N-major b against torch._grouped_mm, and where a hot call's host time goes.
#   OUT=dir bash tools/gpu_s3extra.sh      (logs come back as $OUT/s3extra.tgz)
set -u
OUT=${OUT:-out}
LOGS=${LOGS:-/tmp/s3extra}
mkdir -p "$OUT" "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s3extra-cache}
trap 'tar czf "$OUT/s3extra.tgz" -C "$LOGS" .' EXIT
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; echo "commit $(cat .commit 2>/dev/null)"; } > "$LOGS/env.txt" 2>&1
timeout 60 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" >> "$LOGS/build.log"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# compile the kernels once outside the sanitizer
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_epilogue_ops.py -k "c_through_tma or fp8_through" > "$LOGS/pytest_plain.log" 2>&1
echo "pytest exit $?" >> "$LOGS/pytest_plain.log"; tail -2 "$LOGS/pytest_plain.log"
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = memcheck ] && extra="--report-api-errors no"
  timeout 110 "$SAN" --tool $tool $extra --error-exitcode 99 python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/test_epilogue_ops.py -k "c_through_tma or fp8_through" > "$LOGS/sanitizer_$tool.log" 2>&1
  echo "c-through-TMA + FP8-TMA-store tests under $tool: rc=$?" | tee -a "$LOGS/sanitizer.log"
  grep -a "ERROR SUMMARY\|passed\|failed" "$LOGS/sanitizer_$tool.log" | tail -3
done
timeout 100 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 --json "$LOGS/bench_epilogue.jsonl" > "$LOGS/bench_epilogue.log" 2>&1
echo "exit $?" >> "$LOGS/bench_epilogue.log"; tail -12 "$LOGS/bench_epilogue.log"
timeout 90 python3 tools/bench_grouped.py --b-major mn --cases 8x2048,64x0-512 --rounds 15 --json "$LOGS/bench_grouped_nmajor.jsonl" > "$LOGS/bench_grouped_nmajor.log" 2>&1
echo "exit $?" >> "$LOGS/bench_grouped_nmajor.log"; tail -5 "$LOGS/bench_grouped_nmajor.log"
for s in 1024x1024x1024 4096x4096x4096; do timeout 40 python3 tools/host_breakdown.py $s; done > "$LOGS/host_breakdown.log" 2>&1
cat "$LOGS/host_breakdown.log"
