#!/usr/bin/env bash
# MN-major operands with atoms adjacent along K (64 x 64 TMA boxes) against the default order (64 x 8 boxes): the plain
# kernel both ways (tools/exp_order.py), grouped GEMM with an N-major b (now order k), and the gpu tests that run
# MN-major operands (grouped N-major, batched, the API's transposed views).   OUT=dir bash tools/gpu_s3order.sh
set -u
OUT=${OUT:-out}; LOGS=${LOGS:-/tmp/s3order}; mkdir -p "$OUT" "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s3order-cache}
trap 'tar czf "$OUT/s3order.tgz" -C "$LOGS" .' EXIT
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "commit $(cat .commit 2>/dev/null)"; } > "$LOGS/env.txt" 2>&1
timeout 60 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" >> "$LOGS/build.log"
timeout 150 python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider tests/test_grouped_nmajor.py tests/test_batched.py \
    tests/test_api.py tests/test_api_torch.py tests/test_grouped.py > "$LOGS/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"; tail -4 "$LOGS/pytest_gpu.log"
timeout 120 python3 tools/exp_order.py > "$LOGS/exp_order.jsonl" 2> "$LOGS/exp_order.err"; echo "exit $?" >> "$LOGS/exp_order.err"
cat "$LOGS/exp_order.jsonl" | cut -c1-220; tail -2 "$LOGS/exp_order.err"
timeout 90 python3 tools/bench_grouped.py --b-major mn --cases 8x2048,64x0-512 --rounds 15 --json "$LOGS/bench_grouped_nmajor.jsonl" > "$LOGS/bench_grouped_nmajor.log" 2>&1
echo "exit $?" >> "$LOGS/bench_grouped_nmajor.log"; tail -4 "$LOGS/bench_grouped_nmajor.log"
