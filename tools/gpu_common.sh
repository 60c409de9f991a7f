# Shared by the device scripts (source it after setting OUT, LOGS and BUDGET): the budget-bounded runner `t`, the
# environment header `env_header FILE`, and `bench_summary FILE NAME` (one line per shape of a `ptxgen bench --json`).
# t SECONDS CMD...: run CMD with the smaller of SECONDS and what is left of $BUDGET (less 12 s for packing the logs)
left() { echo $(( BUDGET - SECONDS )); }
t() {
  local want=$1; shift
  local have=$(( $(left) - 12 ))
  if [ "$have" -lt 10 ]; then echo "SKIPPED (budget): $*"; return 124; fi
  [ "$want" -gt "$have" ] && want=$have
  timeout "$want" "$@"
}
env_header() {
  {
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
    python3 -c "from ptxgen.runtime.toolchain import nvrtc_version; print('nvrtc', nvrtc_version())"
    echo "commit $(cat .commit 2>/dev/null || git log -1 --format=%H)"
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
