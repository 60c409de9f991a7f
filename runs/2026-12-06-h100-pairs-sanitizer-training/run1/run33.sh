#!/bin/bash
# one device call (next session): the swapped pairs' gpu tests and 10-shape comparison, training (eager + compile), issue 35's sets, attention sweep
export PYTHONUNBUFFERED=1
L=/tmp/x33; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc33
step pytest_swap_training 80 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_swap_streamk.py tests/test_training_gpu.py tests/test_kgrouped_door.py
step swapclu2 80 python3 .exp/swapclu2.py $L/swapclu2.json
held=$(python3 tools/heldout_shapes.py --set 30)
UNALIGNED=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000,400x10000x6000
step bench_unaligned 50 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $UNALIGNED > $L/bench_unaligned.json"
step bench_heldout30_bf16 60 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $held > $L/bench_heldout30_bf16.json"
step bench_attention 100 python3 tools/bench_attention.py --repeats 5 --variants default --json $L/bench_attention.json
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
step memcheck_carry 60 "$SAN" --tool memcheck python3 .exp/san33.py
step racecheck_carry 80 "$SAN" --tool racecheck python3 .exp/san33.py
step training 180 python3 tools/bench_training.py --model moe,mlp --tokens 8192 --rounds 5 --json $L/training.jsonl
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; head -2 $L/env.txt
tail -n 2 $L/pytest_swap_training.log; tail -n 3 $L/memcheck_carry.log $L/racecheck_carry.log
grep -E 'c1x2/c1x1|FAILED|WRONG' $L/swapclu2.log
grep -E 'vs |step ms' $L/training.log
python3 - <<PY
import json, math
for f in ("bench_unaligned", "bench_heldout30_bf16"):
    try:
        d = json.load(open("$L/" + f + ".json")); rs = sorted(d["shapes"], key=lambda r: r["ratio"])
        print(f, "geomean", round(d["geomean_ratio"], 3), "n", len(rs), [(r["m"], r["n"], r["k"], round(r["ratio"], 3), r.get("chosen_by")) for r in rs[:6]])
    except Exception as e:
        print(f, "unreadable", e)
try:
    rs = json.load(open("$L/bench_attention.json")); g = []
    for r in rs:
        t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0)); x = t['ptxgen-default']/best; g.append(x)
        print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'ours/best', round(x,3))
    print("attention geomean", round(math.exp(sum(map(math.log,g))/len(g)),3), "n", len(g), ">=1:", sum(x>=1 for x in g))
except Exception as e:
    print("bench_attention unreadable", e)
PY
