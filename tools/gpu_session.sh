#!/usr/bin/env bash
# Everything that needs the GPU, in one device lease. Logs and reports go to $OUT (default ./out).
# Usage: tools/gpu_session.sh [probe] [validate] [api] [sanitizer] [tune] [tune_more] [shapes] [odd_shapes] [bench]
#        (default: probe validate sanitizer bench)
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT
STEPS=${*:-probe validate sanitizer bench}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm --format=csv,noheader
  python3 -c "import sys, numpy, cuda.bindings; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for step in $STEPS; do
  case $step in
    probe)
      timeout 300 python3 -m ptxgen probe ${PROBE_ARGS:---category tma} --json "$OUT/probe.json" > "$OUT/probe.log" 2>&1; echo "probe exit $?" >> "$OUT/probe.log"
      tail -30 "$OUT/probe.log" ;;
    validate)
      timeout 420 python3 tools/gpu_validate.py "$OUT/validate.jsonl" --timeout 60 > "$OUT/validate.log" 2>&1; echo "validate exit $?" >> "$OUT/validate.log"
      grep -v "^PASS" "$OUT/validate.log" | tail -40 ;;
    api)
      timeout 240 python3 -m pytest tests/test_api.py -q -rs -p no:cacheprovider > "$OUT/api_pytest.log" 2>&1
      tail -5 "$OUT/api_pytest.log" ;;
    sanitizer)
      timeout 540 python3 -m pytest tests/test_gpu.py -m gpu -q -rs -p no:cacheprovider -k "sanitizer and ${SANITIZER_K:-not nothing}" > "$OUT/sanitizer_pytest.log" 2>&1
      tail -15 "$OUT/sanitizer_pytest.log" ;;
    tune)
      # the issue's shapes (bf16) and FP8 at 8192^3; the table goes to $OUT/h200.json and is used by the bench step
      timeout 420 python3 -m ptxgen tune --dtype bf16 --shapes ${TUNE_SHAPES:-4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384} --json "$OUT/h200.json" > "$OUT/tune.log" 2>&1
      timeout 120 python3 -m ptxgen tune --dtype e4m3 --shapes 8192x8192x8192 --json "$OUT/h200.json" --merge >> "$OUT/tune.log" 2>&1
      grep -a -- "->" "$OUT/tune.log" ;;
    tune_more)
      # more shapes, merged into the shipped table (copied to $OUT/h200.json first)
      cp ptxgen/tuning/h200.json "$OUT/h200.json"
      timeout 300 python3 -m ptxgen tune --dtype bf16 --shapes ${MORE_SHAPES:-3000x5000x2000,6144x6144x6144,1024x4096x8192} --json "$OUT/h200.json" --merge > "$OUT/tune.log" 2>&1
      grep -a -- "->" "$OUT/tune.log" ;;
    shapes)
      # the table the tune step just wrote, else the shipped one
      if [ -f "$OUT/h200.json" ]; then export PTXGEN_TUNING=$OUT/h200.json; else unset PTXGEN_TUNING; fi
      timeout 300 python3 -m ptxgen bench --dtype bf16 --shapes ${BENCH_SHAPES:-4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384,3000x5000x2000,6144x6144x6144,1024x4096x8192,8191x8193x1000} --iters 60 > "$OUT/bench_shapes.log" 2>&1
      timeout 60 python3 -m ptxgen bench --dtype e4m3 --m 8192 --n 8192 --k 8192 --iters 60 >> "$OUT/bench_shapes.log" 2>&1
      cat "$OUT/bench_shapes.log" ;;
    odd_shapes)
      unset PTXGEN_TUNING
      # shapes that are not multiples of any tile, with the shipped table's nearest tuned kernel (no tuning for them)
      timeout 240 python3 -m ptxgen bench --dtype bf16 --shapes ${ODD_SHAPES:-1000x1000x1000,2500x3000x1504,5000x3000x4000,7777x4444x3336,4000x12000x800,12000x1000x6000,333x8192x8192} --iters 40 > "$OUT/bench_odd.log" 2>&1
      timeout 60 python3 -m ptxgen bench --dtype e4m3 --shapes 4096x4096x4096,6144x6144x6144 --iters 40 >> "$OUT/bench_odd.log" 2>&1
      grep -a -v Warn "$OUT/bench_odd.log" | cut -c1-220 ;;
    bench)
      : > "$OUT/bench.jsonl"
      while read -r flags; do
        [ -z "$flags" ] && continue
        timeout 120 python3 -m ptxgen bench $flags --json >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err" || echo "bench failed: $flags" >> "$OUT/bench.err"
      done < tools/bench_configs.txt
      python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r['kernel']} {r['m']}x{r['n']}x{r['k']}: ptxgen {r['ours_tflops']:.1f} TFLOP/s, cuBLAS {r['cublas_tflops']:.1f}, ratio {r['ratio']:.3f}, rel err {r['rel_error']:.1e}")
PY
      tail -5 "$OUT/bench.err" 2>/dev/null ;;
  esac
done
