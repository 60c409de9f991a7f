#!/usr/bin/env bash
# Swap-AB / M-major D (issue 16, small M) on the H200: one fat command, logs under $OUT.
# Run from .gpu/s4-swapab (this branch); the checkout two levels up is main (the "before").
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-swapab PYTHONUNBUFFERED=1
PY=python3
ROOT=$PWD
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)";
  echo "branch $(cat .commit 2>/dev/null)"; } > "$OUT/env.log" 2>&1
# 1. GPU tests (L3): validate runner, CompiledKernel, ptxgen.gemm against float64 at odd sizes
timeout 80 $PY -m pytest -q -m gpu tests/test_dmajor.py -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1; echo "exit $?" >> "$OUT/gpu_tests.log"
SMALL=""
for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do SMALL="$SMALL${SMALL:+,}${m}x$nk"; done; done
SWAPPED=1x7168x16384,1x16384x4096,16x7168x16384,16x16384x4096
bench() {  # label dir shapes
  echo "== $1 ($2): ptxgen bench --dtype bf16 --json --iters 30 --shapes $3" >> "$OUT/bench.log"
  (cd "$2" && PYTHONPATH=$PWD timeout 55 $PY -m ptxgen bench --dtype bf16 --json --iters 30 --shapes "$3" > "$OUT/bench_$1.json" 2>> "$OUT/bench.log")
  echo "exit $?" >> "$OUT/bench.log"
}
# 2. after (this branch), issue 16's small-M set; 3. before (main) on the shapes the swap-ab rule takes
bench after "$ROOT" "$SMALL"
bench before "$ROOT/../.." "$SWAPPED"
$PY - "$OUT" <<'PY' > "$OUT/summary.log" 2>&1
import json, math, sys, os
for side in ("after", "before"):
    path = os.path.join(sys.argv[1], f"bench_{side}.json")
    try:
        d = json.load(open(path))
    except Exception as e:  # noqa: BLE001
        print(side, "no result:", e); continue
    rs = d.get("shapes", [d])
    for r in rs:
        print(f'{side:6} {r["m"]}x{r["n"]}x{r["k"]:<6} ratio {r["ratio"]:.3f} ours {r["ours_tbps"]:.2f} TB/s cublas {r["cublas_tbps"]:.2f} TB/s '
              f'{r["chosen_by"]:22} ok={r["checked_ok"]} err={r["rel_error"]:.1e} {r["kernel"]}')
    print(f'{side}: geomean {math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs)):.3f}, min {min(r["ratio"] for r in rs):.3f} over {len(rs)}')
PY
tail -n 4 "$OUT/gpu_tests.log"; cat "$OUT/summary.log"
