#!/usr/bin/env bash
# Issue 15 on the H200, one lease: ptxgen bench --api, the host-time profile, the API GPU tests.
# Usage: OUT=dir tools/gpu_issue15.sh [bench] [profile] [tests] [api_tests]   (default: all four, in that order)
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT
STEPS=${*:-bench profile tests api_tests}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
  python3 -c "import sys, torch, cuda.bindings; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for step in $STEPS; do
  case $step in
    bench)
      timeout 120 python3 -m ptxgen bench --api --shapes ${SHAPES:-4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192} --json \
        > "$OUT/bench_api.json" 2> "$OUT/bench_api.log"; echo "bench --api exit $?" >> "$OUT/bench_api.log"
      cat "$OUT/bench_api.log" "$OUT/bench_api.json" ;;
    profile)
      timeout 40 python3 tools/api_hostprofile.py > "$OUT/hostprofile.log" 2>&1; echo "profile exit $?" >> "$OUT/hostprofile.log"
      cat "$OUT/hostprofile.log" ;;
    tests)
      timeout 130 python3 -m pytest tests/test_api_torch.py tests/test_hotpath.py -q -rs -p no:cacheprovider > "$OUT/pytest_torch.log" 2>&1
      echo "pytest exit $?" >> "$OUT/pytest_torch.log"; tail -30 "$OUT/pytest_torch.log" ;;
    api_tests)
      timeout 80 python3 -m pytest tests/test_api.py -m gpu -q -rs -p no:cacheprovider > "$OUT/pytest_api.log" 2>&1
      echo "pytest exit $?" >> "$OUT/pytest_api.log"; tail -15 "$OUT/pytest_api.log" ;;
  esac
done
