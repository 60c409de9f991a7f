#!/usr/bin/env bash
# The closing device run of the 2026-12-02 tenth session, in ONE call (device time was short: no plain-GEMM benches,
# whose code did not change this session):
#   OUT=dir [BUDGET=570] [T_GPU=240] bash tools/gpu_s10final.sh
# 1. the whole gpu tier (tests/, -m gpu) beside `ptxgen selftest` and the chooser's kernels (tests/test_gpu.py chosen_jobs);
# 2. block FP8 on the issue's shapes (tools/bench_blockfp8.py: gemm's 192 x 128 pick, the 128 x 192 default, the
#    per-tensor twin); fp8blocks.gemm as a caller sees it, small M included (derive.bfp8tiles' picks); the tile forms at
#    held-out shapes (M 32 / 256 / 1024 / 2048, Llama-70B-like N x K); the fused epilogue (tools/bench_epilogue.py);
#    the block structure's energy without the promotion (tools/power_probe.py's -nopromo diagnostic).
# Every step is bounded by what is left of $BUDGET. Logs: one archive, $OUT/gpu_tier.tgz (the run tool returns a limited
# number of files: s10's call lost the gpu tier's log to that limit).
set -u
FINAL_OUT=${OUT:-out}
OUT=/tmp/s10final-logs
BUDGET=${BUDGET:-570}
mkdir -p "$FINAL_OUT" "$OUT"
pack() { tar czf "$FINAL_OUT/gpu_tier.tgz" -C "$OUT" . ; }
trap pack EXIT
. tools/gpu_common.sh
gpu_begin s10final
export OUT PTXGEN_ARTIFACTS=$OUT
t 60 python3 setup.py -q build_ext --inplace > "$OUT/build.log" 2>&1; echo "build_ext exit $?" | tee -a "$OUT/build.log"
( t 200 python3 -m ptxgen selftest > "$OUT/selftest.log" 2>&1; echo "selftest exit $?" >> "$OUT/selftest.log" ) &
self=$!
( t 200 python3 - > "$OUT/chosen.log" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, "tests")
from pathlib import Path
from test_gpu import chosen_jobs
from ptxgen.runtime.batch import run_batch
results = run_batch(chosen_jobs("sm_90a"), Path(os.environ["OUT"]) / "chosen.jsonl", timeout_s=90)
bad = [r for r in results if not r["passed"]]
print(f"chosen kernels: {len(results) - len(bad)} of {len(results)} pass")
sys.exit(1 if bad else 0)
PY
  echo "chosen exit $?" >> "$OUT/chosen.log" ) &
chosen=$!
VARIANTS=m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-sk8,s5-tma-tmasf,s5-tma-tmasf-sk8,m64-n128-s6-tma-tmasf,m64-n128-s6-tma-tmasf-sk8,n192-s4-tma,plain-n192-s4-tma
( t 60 python3 tools/bench_blockfp8.py --compile-only --jobs 4 --variants "$VARIANTS" > "$OUT/compile.log" 2>&1 ) &
t ${T_GPU:-240} python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider tests/ > "$OUT/pytest_gpu.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest_gpu.log"
tail -6 "$OUT/pytest_gpu.log"
wait $self $chosen
tail -3 "$OUT/selftest.log"; tail -2 "$OUT/chosen.log"
echo "== after correctness: $SECONDS s"
t 80 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 8 \
  --variants m192-n128-s4-tma-tmasf,n192-s4-tma,plain-n192-s4-tma --json "$OUT/bench_blockfp8.jsonl" > "$OUT/bench_blockfp8.log" 2>&1
echo "exit $?" >> "$OUT/bench_blockfp8.log"; grep "ratio" "$OUT/bench_blockfp8.log" | cut -c1-150
t 50 python3 tools/bench_blockfp8_api.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 64x7168x16384 128x4096x7168 32x4096x7168 \
  --rounds 10 --json "$OUT/bench_blockfp8_api.jsonl" > "$OUT/bench_blockfp8_api.log" 2>&1
echo "exit $?" >> "$OUT/bench_blockfp8_api.log"; cut -c1-220 "$OUT/bench_blockfp8_api.log"
SHAPES=$(for m in 32 256 1024 2048; do for nk in 8192x8192 28672x8192 8192x28672 10240x8192 2112x7168; do printf "%sx%s " "$m" "$nk"; done; done)
t 70 python3 tools/bench_blockfp8.py $SHAPES --rounds 5 --variants "${VARIANTS%,n192-s4-tma,plain-n192-s4-tma}" \
  --json "$OUT/bench_blockfp8_heldout.jsonl" > "$OUT/bench_blockfp8_heldout.log" 2>&1
echo "exit $?" >> "$OUT/bench_blockfp8_heldout.log"; tail -1 "$OUT/bench_blockfp8_heldout.log"
t 45 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 --json "$OUT/bench_epilogue.jsonl" \
  > "$OUT/bench_epilogue.log" 2>&1; echo "exit $?" >> "$OUT/bench_epilogue.log"; grep -E "control|exit" "$OUT/bench_epilogue.log" | cut -c1-400
t 100 python3 tools/power_probe.py 4096x7168x16384 --variants m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-nopromo,plain-m192-n128-s4-tma \
  --seconds 3 --json "$OUT/power_probe.jsonl" --smi-log "$OUT/smi.csv" > "$OUT/power_probe.log" 2>&1
echo "exit $?" >> "$OUT/power_probe.log"; grep "pass" "$OUT/power_probe.log" | cut -c1-200; gzip -f "$OUT/smi.csv"
echo "== s10final done: $SECONDS s"
