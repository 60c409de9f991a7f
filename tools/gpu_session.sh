#!/usr/bin/env bash
# Everything that needs the GPU, in one go (one device lease): GPU tests (validation sweep, layout
# probe, compute-sanitizer) and the benchmark. Logs and reports go to $OUT (default ./out).
# Usage: tools/gpu_session.sh [pytest -k expression]
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
  python3 -c "import sys, numpy, cuda.bindings; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
  which compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
K=${1:-}
python3 -m pytest tests/test_gpu.py -m gpu -q -rs -p no:cacheprovider ${K:+-k "$K"} 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
if { [ -z "$K" ] && [ "${NO_BENCH:-0}" != 1 ]; } || [ "${BENCH:-0}" = 1 ]; then
  : > "$OUT/bench.jsonl"
  while read -r flags; do
    [ -z "$flags" ] && continue
    python3 -m ptxgen bench $flags --m 8192 --n 8192 --k 8192 --json >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err" || echo "bench failed: $flags" >> "$OUT/bench.err"
  done < tools/bench_configs.txt
  python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r['kernel']}: ptxgen {r['ours_tflops']:.1f} TFLOP/s, cuBLAS {r['cublas_tflops']:.1f}, ratio {r['ratio']:.3f}, rel err {r['rel_error']:.1e}")
PY
fi
