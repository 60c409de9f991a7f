#!/usr/bin/env bash
# Issue 15's host path, before and after, in ONE device call (the 2026-12-01 fourth session had ~120 s for it):
#   cd <main's copy> && OUT=dir NEW=.gpu/s4-host bash .gpu/s4-host/tools/gpu_s4host.sh
# "before" is the tree this runs in (main's copy), "after" the tree in $NEW (this branch). Both build the compiled
# launcher in place (setup.py build_ext --inplace, as `pip install .` does) and share one kernel cache.
# 1. build both; the API/launcher GPU tests of $NEW run while the bench's kernels compile (NVRTC only);
# 2. alone on the GPU: `ptxgen bench --api` of $NEW, tools/host_breakdown.py of $NEW and of main (interleaved pieces,
#    torch.mm in the same process), then `ptxgen bench --api` of main while the budget lasts.
# Every step has a timeout and the whole script keeps to $BUDGET seconds; logs in $OUT.
# As it ran (runs/2026-12-01-host-path/, commit 3b8788c) $NEW's host_breakdown.py also tried cuLaunchKernel's `extra`
# buffer mode first, which ended in an illegal instruction and stopped that breakdown; the mode is gone since.
set -u
OUT=${OUT:-out}
NEW=${NEW:-.gpu/s4-host}
BUDGET=${BUDGET:-120}
ROOT=$PWD
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s4host-cache}
SHAPES=4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192
left() { echo $(( BUDGET - SECONDS )); }
t() {  # t SECONDS CMD...: CMD with the smaller of SECONDS and what is left of the budget
  local want=$1; shift
  local have=$(( $(left) - 3 ))
  if [ "$have" -lt 5 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  echo "before (main): $(git -C "$ROOT" log -1 --format=%H 2>/dev/null || echo '?')"
  echo "after ($NEW): $(cat "$NEW/.commit" 2>/dev/null || echo '?')"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
( cd "$ROOT" && t 40 python3 setup.py -q build_ext --inplace > "$OUT/build_main.log" 2>&1; echo "main build_ext exit $?" >> "$OUT/build_main.log" ) &
( cd "$NEW" && t 40 python3 setup.py -q build_ext --inplace > "$OUT/build_new.log" 2>&1; echo "new build_ext exit $?" >> "$OUT/build_new.log" ) &
wait
tail -n 1 "$OUT/build_main.log" "$OUT/build_new.log"
echo "== built: $SECONDS s"

# ---- 1. tests of $NEW on the GPU, the bench's kernels compiling beside them ---------------------------------------
( cd "$NEW" && PYTHONPATH=$PWD t 45 python3 - > "$OUT/precompile.log" 2>&1 <<PY
import torch
from concurrent.futures import ProcessPoolExecutor
from ptxgen.api.select import gemm_spec
import ptxgen
specs = []
for s in "$SHAPES,1024x1024x1024".split(","):
    m, n, k = (int(x) for x in s.split("x"))
    a, b, o = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    specs.append(gemm_spec(a, b, o, arch="sm_90a")[0].to_json())
def comp(spec):
    return ptxgen.compile(spec).name
with ProcessPoolExecutor(5) as pool:
    for name in pool.map(comp, specs):
        print("compiled", name)
PY
) &
pre=$!
( cd "$NEW" && PYTHONPATH=$PWD t 70 python3 -m pytest -m gpu -n 4 -q -rs -p no:cacheprovider tests/test_api_torch.py tests/test_api.py \
    tests/test_batched.py > "$OUT/pytest_gpu.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest_gpu.log" )
wait $pre
tail -4 "$OUT/pytest_gpu.log"; tail -2 "$OUT/precompile.log"
echo "== tests: $SECONDS s"

# ---- 2. host time, alone on the GPU ---------------------------------------------------------------------------------
( cd "$NEW" && PYTHONPATH=$PWD t 40 python3 -m ptxgen bench --api --shapes $SHAPES --json > "$OUT/bench_api_new.json" \
    2> "$OUT/bench_api_new.log"; echo "exit $?" >> "$OUT/bench_api_new.log" )
cat "$OUT/bench_api_new.log"
( cd "$NEW" && PYTHONPATH=$PWD t 20 python3 tools/host_breakdown.py 1024x1024x1024 > "$OUT/host_breakdown_new.log" 2>&1 )
( cd "$ROOT" && PYTHONPATH=$PWD t 15 python3 tools/host_breakdown.py 1024x1024x1024 > "$OUT/host_breakdown_main.log" 2>&1 )
cat "$OUT/host_breakdown_new.log" "$OUT/host_breakdown_main.log"
echo "== breakdowns: $SECONDS s"
( cd "$ROOT" && PYTHONPATH=$PWD t 40 python3 -m ptxgen bench --api --shapes $SHAPES --json > "$OUT/bench_api_main.json" \
    2> "$OUT/bench_api_main.log"; echo "exit $?" >> "$OUT/bench_api_main.log" )
cat "$OUT/bench_api_main.log"
echo "== done: $SECONDS s"
