#!/bin/bash
# e4m3 small-n rule: the chooser's kernels against float64 (chosen jobs, e4m3 small-n included), the narrow class again
# under the rule, and the held-out 30's e4m3 form (measurement only)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc64
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
NARROW=20000x64x4096,16384x112x4096,9008x128x8192,30000x32x8192,12000x128x16384,6000x96x12288
step chosen 200 env OUT=$L/gr BUDGET=190 bash tools/gpu_run.sh chosen
step pytest 120 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_choose.py tests/test_tiny_split.py
step narrow 80 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $NARROW > $L/narrow.json"
step held 100 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $(python3 tools/heldout_shapes.py --set 30 --e4m3) > $L/heldout30_e4m3.json"
step held2 100 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $(python3 tools/heldout_shapes.py --set 30 --e4m3) > $L/heldout30_e4m3_b.json"
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
cat $L/gr/summary.txt 2>/dev/null | tail -4; tail -n 3 $L/pytest.log
python3 - <<PY
import json
for f in ("narrow", "heldout30_e4m3", "heldout30_e4m3_b"):
    try: d = json.load(open("$L/%s.json" % f))
    except Exception as e: print(f, "unreadable", e); continue
    rs = [s["ratio"] for s in d["shapes"] if s.get("ratio")]
    print(f, "n", len(rs), "geomean", round(d["geomean_ratio"], 3), "min", round(min(rs), 3), "bad", [s for s in d["shapes"] if not s.get("checked_ok", True)][:2])
    for s in d["shapes"]:
        if f == "narrow" or (s.get("ratio") or 1) < 0.97: print("  ", s["m"], s["n"], s["k"], round(s.get("ratio") or 0, 3), s.get("chosen_by", ""), s["kernel"][13:80])
PY
