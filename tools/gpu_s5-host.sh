#!/usr/bin/env bash
# Issue 15's host path, the metadata reader (runtime/torchmeta.py, _torchmeta.cpp), in ONE device call:
#   cd .gpu/s5-host && OUT=$OUT BUDGET=140 bash tools/gpu_s5-host.sh
# 1. build the compiled launcher in place (setup.py build_ext --inplace, as `pip install .` does); then, side by side,
#    the metadata reader (timed: its one-off build cost) and the bench's kernels (NVRTC);
# 2. alone on the GPU: `ptxgen bench --api --json`, tools/host_breakdown.py (the hot calls with the reader and without
#    it, in the same process), tools/launch_floor.py (cuLaunchKernel from C: the floor);
# 3. the GPU tests of the API (launcher, dispatch, graphs, torch.compile) and the launcher's CPU tests with torch;
# 4. `ptxgen bench --api --json` again.
# Every step has a timeout and the whole script keeps to $BUDGET seconds; at most 8 logs in $OUT.
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-140}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s5host-cache}
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
  echo "commit: $(cat .commit 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  grep -m1 "model name" /proc/cpuinfo; nproc; c++ --version 2>&1 | head -1
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
{ t 40 python3 setup.py -q build_ext --inplace 2>&1 | grep -v Warning; echo "build_ext exit ${PIPESTATUS[0]}"; } > "$OUT/build.log" 2>&1
echo "== built: $SECONDS s"; tail -1 "$OUT/build.log"

t 60 python3 - > "$OUT/reader.log" 2>&1 <<'PY' &
import time, torch
from ptxgen.runtime import torchmeta
from ptxgen.runtime.fastlaunch import compiled_module
t0 = time.perf_counter()
status = torchmeta.start(torch, compiled_module(), wait=True)
print(f"metadata reader: {status}; build {torchmeta.build_seconds()} s; start() returned after {time.perf_counter() - t0:.1f} s")
t0 = time.perf_counter()
torchmeta._STATE.update(status="not started", thread=None)
print(f"again (cached): {torchmeta.start(torch, compiled_module(), wait=True)} after {time.perf_counter() - t0:.3f} s")
PY
reader=$!
t 60 python3 - > "$OUT/precompile.log" 2>&1 <<PY &
import torch
from concurrent.futures import ProcessPoolExecutor
from ptxgen.api.select import gemm_spec
import ptxgen
specs = []
for s in "$SHAPES,1024x1024x1024,512x512x512".split(","):
    m, n, k = (int(x) for x in s.split("x"))
    a, b, o = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    specs.append(gemm_spec(a, b, o, arch="sm_90a")[0].to_json())
def comp(spec):
    return ptxgen.compile(spec).name
with ProcessPoolExecutor(6) as pool:
    for name in pool.map(comp, specs):
        print("compiled", name)
PY
pre=$!
wait $reader; wait $pre
cat "$OUT/reader.log"; tail -2 "$OUT/precompile.log"
cat "$OUT/reader.log" "$OUT/precompile.log" >> "$OUT/build.log"; rm -f "$OUT/precompile.log" "$OUT/reader.log"
echo "== reader and kernels: $SECONDS s"

t 45 python3 -m ptxgen bench --api --shapes $SHAPES --json > "$OUT/bench_api_1.json" 2> "$OUT/bench_api.log"
echo "bench 1 exit $?" >> "$OUT/bench_api.log"
cat "$OUT/bench_api.log"
{ t 25 python3 tools/host_breakdown.py 1024x1024x1024; t 25 python3 tools/host_breakdown.py 1024x8192x8192; } > "$OUT/host_breakdown.log" 2>&1
cat "$OUT/host_breakdown.log"
t 25 python3 tools/launch_floor.py 1024x1024x1024 > "$OUT/launch_floor.log" 2>&1
cat "$OUT/launch_floor.log"
echo "== measured: $SECONDS s"

{ t 60 python3 -m pytest -m gpu -n 4 -q -rs -p no:cacheprovider tests/test_api_torch.py tests/test_api.py tests/test_batched.py
  echo "pytest gpu exit $?"
  t 30 python3 -m pytest -q -rs -p no:cacheprovider tests/test_launcher.py tests/test_launcher_meta.py
  echo "pytest launcher exit $?"; } > "$OUT/pytest.log" 2>&1
tail -5 "$OUT/pytest.log"
echo "== tests: $SECONDS s"
t 45 python3 -m ptxgen bench --api --shapes $SHAPES --json > "$OUT/bench_api_2.json" 2>> "$OUT/bench_api.log"
echo "bench 2 exit $?" >> "$OUT/bench_api.log"
tail -6 "$OUT/bench_api.log"
echo "== done: $SECONDS s"
