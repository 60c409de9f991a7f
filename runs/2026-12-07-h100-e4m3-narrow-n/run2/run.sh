#!/bin/bash
# e4m3 classes the held-out 30's e4m3 form showed below cuBLAS, on other shapes of the same classes (never the held-out
# ones): N <= 128 against many rows, and few waves at N 640-1024. The chooser's pick, every candidate (ptxgen tune), and
# the small-n wide kernel (128 x 128 / 128 x 64, 2x1 cluster) forced.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc63
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
NARROW=20000x64x4096,16384x112x4096,9008x128x8192,30000x32x8192,12000x128x16384,6000x96x12288
MID=6000x768x4096,4000x896x6144,7000x640x3072,5000x1024x4096
W="--dtype e4m3 --a kmajor-sw128 --b kmajor-sw128 --a-order k --b-order k --bk 128 --acc f32 --out-dtype bf16 --schedule persistent --cluster 2x1 --epilogue direct --iters 20 --json"
step auto 80 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $NARROW,$MID > $L/auto.json"
step wide128 60 sh -c "python3 -m ptxgen bench $W --bm 128 --bn 128 --stages 6 --shapes 16384x112x4096,9008x128x8192,12000x128x16384,6000x96x12288 > $L/wide128.json"
step wide64 60 sh -c "python3 -m ptxgen bench $W --bm 128 --bn 64 --stages 8 --shapes 20000x64x4096,30000x32x8192 > $L/wide64.json"
step tune 300 python3 -m ptxgen tune --dtype e4m3 --shapes $NARROW,$MID --iters 10 --json $L/tune.json
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
python3 - <<PY
import json
for f in ("auto", "wide128", "wide64"):
    try: d = json.load(open("$L/%s.json" % f))
    except Exception as e: print(f, "unreadable", e); continue
    for s in d["shapes"]: print(f, s["m"], s["n"], s["k"], round(s.get("ratio") or 0, 3), s.get("chosen_by", ""), s["kernel"][13:75])
PY
grep -E "^tuning|->" $L/tune.log
