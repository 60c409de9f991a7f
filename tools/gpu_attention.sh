#!/usr/bin/env bash
# The attention forward on a Hopper GPU, one lease: environment, a smoke call, the GPU tests, a short benchmark.
# Usage (repository root): OUT=dir tools/gpu_attention.sh
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 60 python3 - > "$OUT/smoke.log" 2>&1 <<'PY'
import torch
from ptxgen.attention.launch import attention
q, k, v = (torch.randn(1, 2, 300, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
r = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
for s in ("serial", "overlap", "pingpong"):
    o = attention(q, k, v, schedule=s)
    torch.cuda.synchronize()
    print("smoke", s, "max abs err", (o.float() - r).abs().max().item(), flush=True)
PY
echo "smoke rc=$?" >> "$OUT/smoke.log"; cat "$OUT/smoke.log"
timeout ${TEST_S:-150} python3 -m pytest tests/test_attention_gpu.py -q -p no:cacheprovider -rs > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/gpu_tests.log"; tail -25 "$OUT/gpu_tests.log"
timeout ${BENCH_S:-100} python3 tools/bench_attention.py --seqlens ${SEQLENS:-512,2048,8192,16384} --repeats 5 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/bench.log"; cat "$OUT/bench.log"
if command -v compute-sanitizer >/dev/null 2>&1; then
  for s in serial pingpong; do
    timeout ${SAN_S:-25} compute-sanitizer --tool memcheck python3 -c "
import torch
from ptxgen.attention.launch import attention
q, k, v = (torch.randn(1, 2, 300, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))
attention(q, k, v, causal=True, schedule='$s'); attention(q, k[:, :1], v[:, :1], schedule='$s'); torch.cuda.synchronize(); print('done')
" > "$OUT/sanitizer_$s.log" 2>&1
    echo "sanitizer $s rc=$?" >> "$OUT/sanitizer_$s.log"; tail -3 "$OUT/sanitizer_$s.log"
  done
else
  echo "compute-sanitizer not on PATH" > "$OUT/sanitizer.log"
fi
