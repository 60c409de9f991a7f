#!/usr/bin/env bash
# Batched GEMM (3-D tensor maps, issue 15 item 6) and grouped GEMM with an N-major b (issue 18 item 1) on the GPU, in
# one command: compile the kernels in parallel (tools/batched_warm.py), the gpu tests of tests/test_batched.py,
# tests/test_grouped_nmajor.py and the batched test of tests/test_api_torch.py, then tools/bench_batched.py against
# torch.matmul. Logs go to $OUT (default ./out); each step is bounded by a timeout.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-cache-3dmap}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  cat .commit 2>/dev/null || git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 20 python3 setup.py -q build_ext --inplace > "$OUT/build_ext.log" 2>&1 || echo "compiled launcher not built" >> "$OUT/build_ext.log"
timeout 40 python3 tools/batched_warm.py 12 > "$OUT/warm.log" 2>&1
echo "warm exit $?" >> "$OUT/warm.log"
tail -3 "$OUT/warm.log"
timeout 60 python3 -m pytest tests/test_batched.py tests/test_grouped_nmajor.py "tests/test_api_torch.py::test_batched_a_with_a_shared_b_is_one_launch" \
  -m gpu -q -rs -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest_gpu.log"
tail -15 "$OUT/pytest_gpu.log"
timeout 25 python3 tools/bench_batched.py --json "$OUT/bench_batched.json" > "$OUT/bench_batched.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_batched.log"
cat "$OUT/bench_batched.log"
