#!/usr/bin/env bash
# The closing device run of a session that merged several issues: the GPU tier of the merged main, the selftest,
# compute-sanitizer on the new flagships, then the benchmarks the issues name, in two back-to-back calls.
#   OUT=dir tools/gpu_final.sh check    # <= 9 min: build the launcher, the gpu tests, selftest and sanitizers beside them
#   OUT=dir tools/gpu_final.sh bench    # ~7 min: tuned shapes, fused epilogue, block FP8, grouped, --api
# Logs go to $LOGS and come back as one archive, $OUT/final-<step>.tgz (the device tool returns at most 8 files).
set -u
STEP=${1:?check or bench}
OUT=${OUT:-out}
LOGS=${LOGS:-/tmp/final-$STEP}
mkdir -p "$OUT" "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$LOGS PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-final-cache}
pack() { tar czf "$OUT/final-$STEP.tgz" -C "$LOGS" . ; }
trap pack EXIT
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
  echo "commit $(cat .commit 2>/dev/null || git log -1 --format=%H)"
} > "$LOGS/env.txt" 2>&1
cat "$LOGS/env.txt"
# the compiled launcher, built with this machine's python3 (the ctypes path runs if this fails)
timeout 120 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" | tee -a "$LOGS/build.log"

step_check() {
  timeout 120 python3 tools/grouped_warm.py 12 > "$LOGS/warm.log" 2>&1; echo "warm exit $?" >> "$LOGS/warm.log"
  # correctness only, so these three share the GPU: the sanitizers and the selftest run beside the gpu tests
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  ( for tool in memcheck racecheck synccheck; do
      timeout 120 "$SAN" --tool $tool --error-exitcode 99 python3 tools/fused_flagship.py > "$LOGS/sanitizer_fused_$tool.log" 2>&1
      echo "fused flagship $tool rc=$?" >> "$LOGS/sanitizer.log"
    done ) &
  san=$!
  ( timeout 300 python3 -m ptxgen selftest > "$LOGS/selftest.log" 2>&1; echo "selftest exit $?" >> "$LOGS/selftest.log" ) &
  self=$!
  timeout 330 python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider \
      tests/test_api.py tests/test_api_torch.py tests/test_launcher.py tests/test_splitk.py tests/test_epilogue_ops.py \
      tests/test_grouped.py tests/test_gpu_tma.py $(ls tests/test_blockfp8*.py tests/test_selftest*.py 2>/dev/null) \
      > "$LOGS/pytest_gpu.log" 2>&1
  echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"
  tail -25 "$LOGS/pytest_gpu.log"
  wait $self $san
  tail -30 "$LOGS/selftest.log"
  cat "$LOGS/sanitizer.log"
}

step_bench() {
  # memcheck on the fused flagship without host API-error reports: the check step's memcheck counted 34 errors, every one
  # a CUDA_ERROR_INVALID_VALUE of cuGetProcAddress_v2 inside cuda-bindings' driver symbol lookup (host side, no kernel)
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  timeout 90 "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 python3 tools/fused_flagship.py \
      > "$LOGS/sanitizer_fused_memcheck_noapi.log" 2>&1; echo "fused flagship memcheck (no API-error reports) rc=$?" | tee -a "$LOGS/sanitizer.log"
  tail -2 "$LOGS/sanitizer_fused_memcheck_noapi.log"
  timeout 130 python3 -m ptxgen bench --dtype bf16 --iters 30 \
      --shapes 4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384 \
      > "$LOGS/bench_tuned.log" 2>&1; echo "exit $?" >> "$LOGS/bench_tuned.log"
  timeout 50 python3 -m ptxgen bench --dtype e4m3 --m 8192 --n 8192 --k 8192 --iters 30 >> "$LOGS/bench_tuned.log" 2>&1
  grep -a -v Warn "$LOGS/bench_tuned.log" | cut -c1-200
  timeout 110 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 --json "$LOGS/bench_epilogue.jsonl" > "$LOGS/bench_epilogue.log" 2>&1
  tail -15 "$LOGS/bench_epilogue.log"
  timeout 100 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 15 --json "$LOGS/bench_blockfp8.jsonl" > "$LOGS/bench_blockfp8.log" 2>&1
  tail -10 "$LOGS/bench_blockfp8.log"
  timeout 110 python3 tools/bench_grouped.py --json "$LOGS/bench_grouped.jsonl" > "$LOGS/bench_grouped.log" 2>&1
  tail -15 "$LOGS/bench_grouped.log"
  timeout 50 python3 -m ptxgen bench --api --shapes 4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192 --json \
      > "$LOGS/bench_api.json" 2> "$LOGS/bench_api.err"
  tail -c 1500 "$LOGS/bench_api.json"
}

step_extra() {
  # the block-FP8 promotion test with its measured bound, and FP8 e4m3 on issue 16's shape classes vs torch._scaled_mm
  [ -n "${SKIP_TESTS:-}" ] || timeout 150 python3 -m pytest -m gpu -n 4 -q -rs -p no:cacheprovider tests/test_epilogue_ops.py > "$LOGS/pytest_epilogue_ops.log" 2>&1
  echo "pytest exit $?" >> "$LOGS/pytest_epilogue_ops.log"; tail -4 "$LOGS/pytest_epilogue_ops.log"
  timeout 240 python3 -m ptxgen bench --dtype e4m3 --iters 20 --json \
      --shapes ${FP8_SHAPES:-5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024,16x4096x4096,64x4096x4096,128x4096x4096,16x7168x16384,64x7168x16384,128x7168x16384,16x16384x4096,64x16384x4096,128x16384x4096,336x8192x8192,12000x1008x6000,2512x10000x4000} \
      > "$LOGS/bench_fp8_classes.jsonl" 2> "$LOGS/bench_fp8_classes.err"; echo "bench exit $?" >> "$LOGS/bench_fp8_classes.err"
  python3 - "$LOGS/bench_fp8_classes.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    for x in (r if isinstance(r, list) else r.get("shapes", [r])):
        print({k: x.get(k) for k in ("m", "n", "k", "ratio", "chosen_by")})
PY
  tail -5 "$LOGS/bench_fp8_classes.err"
}

case $STEP in
  check) step_check ;;
  extra) step_extra ;;
  bench) step_bench ;;
  *) echo "unknown step $STEP"; exit 2 ;;
esac
