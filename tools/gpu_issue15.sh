#!/usr/bin/env bash
# Issue 15 on the H200, one lease: the compiled launcher built there, ptxgen bench --api, the host-time profile,
# the API GPU tests.
# Usage: OUT=dir tools/gpu_issue15.sh [build] [bench] [profile] [tests] [api_tests]   (default: all five, in order)
# build: compiles ptxgen/runtime/_launcher.c in place with the machine's python3 (setup.py build_ext --inplace,
# as `pip install .` does); a _launcher*.so carried along (built elsewhere, stable ABI) is set aside first and
# put back only when the build there fails; without either, ptxgen runs its ctypes path (build.log says which).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT
STEPS=${*:-build bench profile tests api_tests}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
  python3 -c "import sys, torch, cuda.bindings; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for step in $STEPS; do
  case $step in
    build)
      {
        PREBUILT=$(ls ptxgen/runtime/_launcher*.so 2>/dev/null | head -1)
        if [ -n "$PREBUILT" ]; then mv "$PREBUILT" /tmp/prebuilt_launcher.so; echo "set aside: $PREBUILT"; fi
        python3 -c "import sys, sysconfig, os; inc = sysconfig.get_paths()['include']; print('python', sys.version.split()[0], 'headers', inc, os.path.exists(os.path.join(inc, 'Python.h')))"
        python3 -c "import setuptools; print('setuptools', setuptools.__version__)"
        command -v cc gcc || echo "no C compiler on PATH"
        start=$(date +%s.%N)
        timeout 120 python3 setup.py -q build_ext --inplace; rc=$?
        echo "build_ext exit $rc in $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s"
        if ! python3 -c "import ptxgen.runtime._launcher" 2>/dev/null && [ -f /tmp/prebuilt_launcher.so ]; then
          cp /tmp/prebuilt_launcher.so ptxgen/runtime/_launcher.abi3.so; echo "built here: no; using the carried stable-ABI build"
        fi
        python3 -c "from ptxgen.runtime import fastlaunch as f; m = f.compiled_module(); print('compiled launcher:', m.__file__ if m else None)"
      } > "$OUT/build.log" 2>&1
      cat "$OUT/build.log" ;;
    bench)
      timeout 100 python3 -m ptxgen bench --api --shapes ${SHAPES:-4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192} --json \
        > "$OUT/bench_api.json" 2> "$OUT/bench_api.log"; echo "bench --api exit $?" >> "$OUT/bench_api.log"
      cat "$OUT/bench_api.log" "$OUT/bench_api.json" ;;
    profile)
      timeout 40 python3 tools/api_hostprofile.py > "$OUT/hostprofile.log" 2>&1; echo "profile exit $?" >> "$OUT/hostprofile.log"
      cat "$OUT/hostprofile.log" ;;
    tests)
      timeout 110 python3 -m pytest tests/test_api_torch.py tests/test_hotpath.py tests/test_launcher.py -q -rs -p no:cacheprovider > "$OUT/pytest_torch.log" 2>&1
      echo "pytest exit $?" >> "$OUT/pytest_torch.log"; tail -30 "$OUT/pytest_torch.log" ;;
    api_tests)
      timeout 60 python3 -m pytest tests/test_api.py -m gpu -q -rs -p no:cacheprovider > "$OUT/pytest_api.log" 2>&1
      echo "pytest exit $?" >> "$OUT/pytest_api.log"; tail -15 "$OUT/pytest_api.log" ;;
  esac
done
