#!/usr/bin/env bash
# The session's last device call: the grouped/batched/API gpu tests after ptxgen/grouped.py was split, and the host
# time of a hot call down to the compiled launcher's raw launch (tools/host_breakdown.py).   OUT=dir bash tools/gpu_s3last.sh
set -u
OUT=${OUT:-out}; LOGS=${LOGS:-/tmp/s3last}; mkdir -p "$OUT" "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s3last-cache}
trap 'tar czf "$OUT/s3last.tgz" -C "$LOGS" .' EXIT
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "commit $(cat .commit 2>/dev/null)"; } > "$LOGS/env.txt" 2>&1
timeout 60 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" >> "$LOGS/build.log"
timeout 150 python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider tests/test_grouped.py tests/test_grouped_nmajor.py \
    tests/test_batched.py tests/test_api.py tests/test_launcher.py > "$LOGS/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"; tail -3 "$LOGS/pytest_gpu.log"
for s in 1024x1024x1024 4096x4096x4096; do timeout 40 python3 tools/host_breakdown.py $s; done > "$LOGS/host_breakdown.log" 2>&1
cat "$LOGS/host_breakdown.log"
