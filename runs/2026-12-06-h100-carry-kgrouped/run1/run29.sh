#!/bin/bash
# one device call: (1) the carried attention form (branch tree in .exp/carry): gpu test + bench; (2) issue 35's sets with the tiny split-K rule
export PYTHONUNBUFFERED=1
L=/tmp/x29; mkdir -p $L; T0=$(date +%s); ROOT=$PWD
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
cp ptxgen/runtime/launch/_launcher.abi3.so .exp/carry/ptxgen/runtime/launch/
cd .exp/carry
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc29c
step pytest_carry 100 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py -k "carried"
step bench_cs 110 python3 tools/bench_attention.py --seqlens 512,1024,2048 --repeats 5 --variants default,default:cs --json $L/bench_cs.json
cd $ROOT
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc29
held=$(python3 tools/heldout_shapes.py --set 30)
UNALIGNED=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000,400x10000x6000
step bench_heldout30_bf16 100 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $held > $L/bench_heldout30_bf16.json"
step bench_unaligned 90 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $UNALIGNED > $L/bench_unaligned.json"
step bench_heldout30_e4m3 90 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $held > $L/bench_heldout30_e4m3.json"
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_carry.log
python3 - <<PY
import json
try:
    for r in json.load(open("$L/bench_cs.json")):
        t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
        print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'cs/plain', round(t['ptxgen-default:cs']/t['ptxgen-default'],3), 'cs/best', round(t['ptxgen-default:cs']/best,3), 'plain/best', round(t['ptxgen-default']/best,3))
except Exception as e:
    print("bench_cs unreadable", e)
for f in ("bench_heldout30_bf16", "bench_unaligned", "bench_heldout30_e4m3"):
    try:
        d = json.load(open("$L/" + f + ".json"))
    except Exception as e:
        print(f, "unreadable", e); continue
    rs = sorted(d["shapes"], key=lambda r: r["ratio"])
    print(f, "geomean", round(d["geomean_ratio"], 3), "n", len(rs), "lowest:", [(r["m"], r["n"], r["k"], round(r["ratio"], 3), r.get("chosen_by")) for r in rs[:6]])
PY
