# Shared by the device scripts (source it after setting OUT, LOGS and BUDGET): the budget-bounded runner `t`, the
# environment header `env_header FILE`, the common start `gpu_begin NAME`, and `bench_summary FILE NAME` (one line per shape of a `ptxgen bench --json`).
# t SECONDS CMD...: run CMD with the smaller of SECONDS and what is left of $BUDGET (less 12 s for packing the logs)
left() { echo $(( BUDGET - SECONDS )); }
t() {
  local want=$1; shift
  local have=$(( $(left) - 12 ))
  if [ "$have" -lt 10 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
# gpu_begin NAME: $OUT made; the environment every device script runs in (PYTHONPATH the checkout, unbuffered output, the
# kernel cache in $KCACHE or /tmp/ptxgen-cache-NAME); the environment header in $OUT/env.txt; XDIST: "-n 4" where
# pytest-xdist is installed
gpu_begin() {
  mkdir -p "$OUT"
  export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=${KCACHE:-/tmp/ptxgen-cache-$1}
  env_header "$OUT/env.txt"
  XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4" || echo "")
}
env_header() {
  {
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
    python3 -c "from ptxgen.runtime.compile.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
    echo "commit $(git log -1 --format=%H 2>/dev/null || echo "unknown (no git history on this machine: the run's README names it)")"
  } > "$1" 2>&1
  cat "$1"
}
bench_summary() {
  python3 - "$1" "$2" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"{sys.argv[2]}: no json: {e}")
rows = d["shapes"] if "shapes" in d else [d]
for r in rows:
    tb = r.get("ours_tbps")
    print(f"{sys.argv[2]} {r['m']}x{r['n']}x{r['k']} {r['ratio']:.3f} {r['ours_ms']*1e3:.1f}us cublas {r['cublas_ms']*1e3:.1f}us"
          f"{'' if tb is None else f' {tb:.2f}TB/s'} {r.get('chosen_by')} {r['kernel'][14:]}")
print(sys.argv[2], "geomean", round(d.get("geomean_ratio", rows[0]["ratio"]), 4), "min", round(min(r["ratio"] for r in rows), 4))
PY
}
# gpu_pytest LOG SECONDS ARGS...: `pytest -m gpu ARGS` into $OUT/LOG within SECONDS (0: skipped), its exit code appended
gpu_pytest() {
  local log=$1 secs=$2; shift 2
  [ "$secs" = 0 ] && return 0
  timeout "$secs" python3 -m pytest -m gpu -q -rs -p no:cacheprovider "$@" > "$OUT/$log" 2>&1
  echo "pytest exit $?" >> "$OUT/$log"
  tail -5 "$OUT/$log"
}
# bfp8_bench NAME: tools/bench_blockfp8.py over $SHAPES with $VARIANTS and $ROUNDS rounds within $T_BENCH seconds, into
# $OUT/bench_blockfp8_NAME.log and .jsonl
bfp8_bench() {
  timeout "$T_BENCH" python3 tools/bench_blockfp8.py $SHAPES --rounds "$ROUNDS" --variants "$VARIANTS" \
    --json "$OUT/bench_blockfp8_$1.jsonl" > "$OUT/bench_blockfp8_$1.log" 2>&1
  echo "bench exit $?" >> "$OUT/bench_blockfp8_$1.log"
  cat "$OUT/bench_blockfp8_$1.log"
}
# gate_then_bench LOG NAME: bfp8_bench NAME (within what is left of $BUDGET, at most $T_BENCH) only if the gpu tests in
# $OUT/LOG passed: a kernel that fails the recipe is not benched
gate_then_bench() {
  if grep -q "pytest exit 0" "$OUT/$1"; then
    T_BENCH=$(( $(left) - 20 < T_BENCH ? $(left) - 20 : T_BENCH ))
    [ "$T_BENCH" -gt 30 ] && bfp8_bench "$2"
  else
    echo "gpu tests failed: no bench (see $OUT/$1)"
  fi
}
# ncu_summaries PREFIX: each /tmp/PREFIX*.ncu-rep (ncu ... -o /tmp/PREFIX_x) into $OUT/ncu_details.log (details page) and
# $OUT/ncu_sass_summary.log (tools/ncu_blockfp8.py --summarize of its per-instruction stall samples); the CSVs in
# $OUT/ncu_sass_csv.tgz. NCU: the ncu binary.
ncu_summaries() {
  local r
  for r in /tmp/"$1"*.ncu-rep; do
    echo "=== $r" >> "$OUT/ncu_details.log"
    timeout 60 "$NCU" --import "$r" --page details >> "$OUT/ncu_details.log" 2>&1
    timeout 60 "$NCU" --import "$r" --page source --csv --print-source sass > "/tmp/$(basename "$r" .ncu-rep).csv" 2>&1
    echo "=== $r" >> "$OUT/ncu_sass_summary.log"
    python3 tools/ncu_blockfp8.py --summarize "/tmp/$(basename "$r" .ncu-rep).csv" >> "$OUT/ncu_sass_summary.log" 2>&1
  done
  tar czf "$OUT/ncu_sass_csv.tgz" -C /tmp $(cd /tmp && ls "$1"*.csv) 2>/dev/null
}
