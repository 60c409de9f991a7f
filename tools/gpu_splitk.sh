#!/usr/bin/env bash
# Split-K (issue 16) on the H200: one fat command per device call, logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-splitk PYTHONUNBUFFERED=1
PY=python3
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; $PY -c "import torch; print(torch.__version__)"; } > "$OUT/env.log" 2>&1
timeout 70 $PY tools/exp_splitk.py validate > "$OUT/validate.log" 2>&1; echo "exit $?" >> "$OUT/validate.log"
timeout 40 $PY tools/exp_splitk.py api >> "$OUT/validate.log" 2>&1; echo "exit $?" >> "$OUT/validate.log"
timeout 60 $PY -m pytest -q -x -m gpu tests/test_splitk.py >> "$OUT/validate.log" 2>&1; echo "exit $?" >> "$OUT/validate.log"
SMALL=""
for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do SMALL="$SMALL${SMALL:+,}${m}x$nk"; done; done
bench() {  # class shapes rounds
  echo "== $1: ptxgen bench --dtype bf16 --iters $3 --json --shapes $2" >> "$OUT/bench.log"
  printf '{"class": "%s", "result": ' "$1" >> "$OUT/bench.jsonl"
  timeout 75 $PY -m ptxgen bench --dtype bf16 --iters "$3" --json --shapes "$2" > /tmp/b.json 2>> "$OUT/bench.log"
  echo "exit $?" >> "$OUT/bench.log"
  if [ -s /tmp/b.json ]; then tr -d '\n' < /tmp/b.json >> "$OUT/bench.jsonl"; else printf 'null' >> "$OUT/bench.jsonl"; fi
  echo '}' >> "$OUT/bench.jsonl"
}
bench small_m "$SMALL" 30
bench few_waves 333x8192x8192,12000x1000x6000,2500x10000x4000 30
bench tuned6 4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384 30
if [ "${1:-}" = sweep ]; then timeout 100 $PY tools/exp_splitk.py sweep > "$OUT/sweep.log" 2>&1; echo "exit $?" >> "$OUT/sweep.log"; fi
$PY - "$OUT/bench.jsonl" <<'PY' > "$OUT/summary.log" 2>&1
import json, math, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    rs = (d["result"] or {}).get("shapes", [])
    for r in rs:
        print(f'{d["class"]:10} {r["m"]}x{r["n"]}x{r["k"]:<6} {r["ratio"]:.3f} ours {r["ours_tbps"]:.2f} TB/s cublas {r["cublas_tbps"]:.2f} TB/s {r["chosen_by"]:22} ok={r["checked_ok"]} {r["kernel"]}')
    if rs:
        print(f'{d["class"]}: geomean {math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs)):.3f}, min {min(r["ratio"] for r in rs):.3f}')
PY
tail -n 3 "$OUT"/validate.log "$OUT"/summary.log "$OUT"/sweep.log 2>/dev/null
