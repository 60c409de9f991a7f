#!/usr/bin/env bash
# Issue 16 on the H200: the e4m3 stragglers (stream-K, 64-row tiles, swap-AB) and bf16 swap-AB for 17 <= M <= 64.
# Usage: tools/gpu_s5-fp8m.sh [measure | confirm]; logs under $OUT (at most 8 files).
# measure (call 1): tools/exp_s5fp8m.py precompile all; run fp8big, fp8small, swap (candidates against the chooser's pick
#   and cuBLAS / torch._scaled_mm in one process per shape, alternating rounds).
# confirm (calls 2, 3): ptxgen bench with no tile flags on the FP8 classes (e4m3) and the small-M set with M 17..64 (bf16),
#   and the gpu tests the change touches (TESTK: their -k; "none": none); EXP=wide first runs that part of the experiment.
# Launch: see HELPERS.md (copy the worktree to /work/main/.gpu/s5-fp8m, carry it), then
#   cd .gpu/s5-fp8m && export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 && OUT=$OUT bash tools/gpu_s5-fp8m.sh measure
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-s5fp8m PYTHONUNBUFFERED=1
PY=python3
LOG="$OUT/run.log"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  $PY -c "import torch; print('torch', torch.__version__)"; echo "commit $(cat .commit 2>/dev/null)"; } > "$LOG" 2>&1
step() { echo "== $(date -u +%T) $*" >> "$LOG"; }
FP8=5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024,16x4096x4096,64x7168x16384,128x16384x4096,336x8192x8192,12000x1008x6000,2512x10000x4000,8192x8192x8192,4096x4096x4096
FP8SMALL=16x7168x16384,16x16384x4096,64x4096x4096,64x16384x4096,128x4096x4096,128x7168x16384
SMALL=$(for m in 1 16 17 24 32 48 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do printf '%sx%s,' $m $nk; done; done | sed 's/,$//')${SMALL_EXTRA:+,$SMALL_EXTRA}
if [ "${1:-measure}" = measure ]; then
  step precompile
  timeout 40 $PY tools/exp_s5fp8m.py precompile all >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
  for part in fp8big fp8small swap; do
    step "run $part"
    timeout 45 $PY tools/exp_s5fp8m.py run $part > "$OUT/$part.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
  done
  step done
  $PY tools/exp_s5fp8m.py summary "$OUT"/fp8big.jsonl "$OUT"/fp8small.jsonl "$OUT"/swap.jsonl > "$OUT/summary.log" 2>&1
  grep -E "exit|==|FAIL" "$LOG" | tail -12; exit 0
fi
step precompile
timeout 20 $PY -c "
import sys, json; sys.path.insert(0, 'tools')
from multiprocessing import Pool
from ptxgen.runtime.choose import choose
import exp_s5fp8m as e
specs = [choose(dt, 'sm_90a', *map(int, s.split('x'))).spec.to_json() for dt, arg in (('e4m3', sys.argv[1]), ('bf16', sys.argv[2])) for s in arg.split(',')]
uniq = list({json.dumps(s, sort_keys=True): s for s in specs}.values())
with Pool(min(15, len(uniq))) as p:
    print('\n'.join(p.map(e._compile, uniq)))
" "$FP8,$FP8SMALL" "$SMALL" >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
if [ -n "${EXP:-}" ]; then  # run 3: an experiment part before the benches (EXP=wide)
  step "precompile + run $EXP"
  timeout 20 $PY tools/exp_s5fp8m.py precompile "$EXP" >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
  timeout 30 $PY tools/exp_s5fp8m.py run "$EXP" > "$OUT/$EXP.jsonl" 2>> "$LOG"; echo "exit $?" >> "$LOG"
  $PY tools/exp_s5fp8m.py summary "$OUT/$EXP.jsonl" > "$OUT/${EXP}_summary.log" 2>&1
fi
step bench e4m3
echo "ptxgen bench --dtype e4m3 --iters 20 --json --shapes $FP8,$FP8SMALL" >> "$LOG"
timeout 30 $PY -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes "$FP8,$FP8SMALL" > "$OUT/bench_e4m3.json" 2>> "$LOG"; echo "exit $?" >> "$LOG"
step bench smallm
echo "ptxgen bench --dtype bf16 --iters 30 --json --shapes $SMALL" >> "$LOG"
timeout 25 $PY -m ptxgen bench --dtype bf16 --iters 30 --json --shapes "$SMALL" > "$OUT/bench_smallm.json" 2>> "$LOG"; echo "exit $?" >> "$LOG"
step gpu tests
[ "${TESTK:-}" = none ] || timeout 30 $PY -m pytest -q -m gpu tests/test_streamk.py tests/test_dmajor.py -k "${TESTK:-e4m3 or swaps_up_to_m_64 or takes_the_swap}" \
  -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
echo "exit $?" >> "$LOG"
step done
$PY - "$OUT" <<'PY' > "$OUT/summary.log" 2>&1
import json, math, sys, os
for name in ("bench_e4m3.json", "bench_smallm.json"):
    try:
        rs = json.load(open(os.path.join(sys.argv[1], name)))["shapes"]
    except Exception as e:  # noqa: BLE001
        print(name, "no result:", e); continue
    for r in rs:
        w = r["n"] * r["k"] * (1 if "e4m3" in r["kernel"] else 2) / r["ours_ms"] / 1e9  # TB/s of the weights (B) alone
        print(f'{r["m"]}x{r["n"]}x{r["k"]:<6} ratio {r["ratio"]:.3f} ours {r["ours_ms"]*1e3:7.1f} us base {r["cublas_ms"]*1e3:7.1f} us '
              f'{r["ours_tflops"]:7.1f} TF {r["ours_tbps"]:.2f} TB/s A+B+D (base {r["cublas_tbps"]:.2f}) {w:.2f} TB/s weights '
              f'{r["chosen_by"]:26} ok={r["checked_ok"]} {r["kernel"][22:]}')
    g = math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs))
    print(f'{name}: geomean {g:.3f}, min {min(r["ratio"] for r in rs):.3f} over {len(rs)}')
    issue = [r for r in rs if r["m"] in (1, 16, 64, 128) and r["m"] < 256]
    if name == "bench_smallm.json" and issue:
        g = math.exp(sum(math.log(r["ratio"]) for r in issue) / len(issue))
        print(f'  issue 16 small-M set (M 1, 16, 64, 128): geomean {g:.3f}, min {min(r["ratio"] for r in issue):.3f} over {len(issue)}')
PY
tail -n 3 "$OUT/pytest_gpu.log"; grep -E "exit|==|FAIL" "$LOG" | tail -12; cat "$OUT/summary.log"
