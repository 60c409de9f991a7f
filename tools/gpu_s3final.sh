#!/usr/bin/env bash
# The closing device run of the 2026-12-01 third session, in ONE call (the session had ~800 s of device time left):
#   OUT=dir bash tools/gpu_s3final.sh
# 1. correctness, sharing the GPU: the gpu tests of every module touched today (batched, grouped N-major, C through TMA,
#    FP8 through the TMA store, the block-scaled runner's 10.x skip, the API/launcher paths), `ptxgen selftest`, and the
#    float64 check of the kernels the chooser picks (tests/test_gpu.py CHOSEN_SHAPES, incl. the cost model's new tiles);
# 2. benchmarks, alone on the GPU: the tuned six, issue 16's unaligned and few-wave shapes with no tile flags, the cost
#    model's seeded generalization set (pick against the pick before it), and `ptxgen bench --api`.
# Every step has a timeout and the whole script keeps to $BUDGET seconds (steps that would not fit are skipped and say
# so); logs come back as one archive, $OUT/gpu_tier.tgz.
set -u
OUT=${OUT:-out}
LOGS=${LOGS:-/tmp/s3final}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT" "$LOGS"
export LOGS PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$LOGS PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-s3final-cache}
pack() { tar czf "$OUT/gpu_tier.tgz" -C "$LOGS" . ; }
trap pack EXIT
left() { echo $(( BUDGET - SECONDS )); }
# t SECONDS CMD...: run CMD with the smaller of SECONDS and what is left of the budget (less 12 s for packing)
t() {
  local want=$1; shift
  local have=$(( $(left) - 12 ))
  if [ "$have" -lt 10 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
  echo "commit $(cat .commit 2>/dev/null || git log -1 --format=%H)"
} > "$LOGS/env.txt" 2>&1
cat "$LOGS/env.txt"
t 60 python3 setup.py -q build_ext --inplace > "$LOGS/build.log" 2>&1; echo "build_ext exit $?" | tee -a "$LOGS/build.log"

# ---- 1. correctness (the three share the GPU; the benchmarks' kernels compile beside them, NVRTC only) ----------
TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
ISSUE16=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
( t 180 python3 tools/exp_cost.py precompile "$TUNED,$ISSUE16" > "$LOGS/precompile.log" 2>&1; echo "precompile exit $?" >> "$LOGS/precompile.log" ) &
pre=$!
( t 200 python3 -m ptxgen selftest > "$LOGS/selftest.log" 2>&1; echo "selftest exit $?" >> "$LOGS/selftest.log" ) &
self=$!
( t 200 python3 - > "$LOGS/chosen.log" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, "tests")
from pathlib import Path
from test_gpu import chosen_jobs
from ptxgen.runtime.batch import run_batch
results = run_batch(chosen_jobs("sm_90a"), Path(os.environ["LOGS"]) / "chosen.jsonl", timeout_s=90)
for r in results:
    print(r["verdict"])
bad = [r for r in results if not r["passed"]]
print(f"chosen kernels: {len(results) - len(bad)} of {len(results)} pass")
sys.exit(1 if bad else 0)
PY
  echo "chosen exit $?" >> "$LOGS/chosen.log" ) &
chosen=$!
t 240 python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider \
    tests/test_epilogue_ops.py tests/test_batched.py tests/test_grouped_nmajor.py tests/test_bsrunner.py \
    tests/test_api.py tests/test_api_torch.py tests/test_launcher.py tests/test_splitk.py tests/test_grouped.py \
    tests/test_gpu_tma.py tests/test_blockfp8.py tests/test_selftest.py \
    > "$LOGS/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$LOGS/pytest_gpu.log"
tail -15 "$LOGS/pytest_gpu.log"
wait $self $chosen $pre
tail -25 "$LOGS/selftest.log"
tail -4 "$LOGS/chosen.log"
echo "== after correctness: $SECONDS s"

# ---- 2. benchmarks (alone on the GPU) ----------------------------------------------------------------------------
t 100 python3 -m ptxgen bench --dtype bf16 --iters 20 --json \
    --shapes $TUNED > "$LOGS/bench_tuned.json" 2> "$LOGS/bench_tuned.err"; echo "exit $?" >> "$LOGS/bench_tuned.err"
t 90 python3 -m ptxgen bench --dtype bf16 --iters 20 --json \
    --shapes $ISSUE16 > "$LOGS/bench_issue16.json" 2> "$LOGS/bench_issue16.err"; echo "exit $?" >> "$LOGS/bench_issue16.err"
t 50 python3 -m ptxgen bench --api --shapes 4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192 --json \
    > "$LOGS/bench_api.json" 2> "$LOGS/bench_api.err"; echo "exit $?" >> "$LOGS/bench_api.err"
echo "== after bench: $SECONDS s"
GEN=$(python3 -c "import sys; sys.path.insert(0, 'tools'); from exp_cost import generalization_shapes as g; print(','.join('%dx%dx%d' % s for s in g()))")
t 150 python3 tools/exp_cost.py compare generalization > "$LOGS/generalize.jsonl" 2> "$LOGS/generalize.err"; echo "exit $?" >> "$LOGS/generalize.err"
echo '{"class": "none", "result": null}' > /tmp/none.jsonl
python3 tools/fit_cost.py summary /tmp/none.jsonl "$LOGS/generalize.jsonl" > "$LOGS/generalize_summary.log" 2>&1
python3 - "$LOGS" <<'PY'
import json, sys
for name in ("bench_tuned.json", "bench_issue16.json"):
    try:
        doc = json.load(open(f"{sys.argv[1]}/{name}"))
    except Exception as e:  # a step that timed out leaves a partial file
        print(name, "unreadable:", e); continue
    rows = doc if isinstance(doc, list) else doc.get("shapes", doc.get("results", [doc]))
    for r in rows:
        print(name, {k: r.get(k) for k in ("m", "n", "k", "ratio", "chosen_by")})
PY
tail -20 "$LOGS/generalize_summary.log"
tail -c 1200 "$LOGS/bench_api.json"
echo "== done: $SECONDS s (GEN=$GEN)"
