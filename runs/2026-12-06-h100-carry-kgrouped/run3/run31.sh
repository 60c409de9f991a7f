#!/bin/bash
# one device call: the new defaults (K-grouped tma-n256, attention's carried S at D 128 non-causal <= 1k) tested and measured; swapped kernels with a cluster
export PYTHONUNBUFFERED=1
L=/tmp/x31; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-570} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc31
step pytest_kg_training 100 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_kgrouped_store.py tests/test_kgrouped_door.py tests/test_training_gpu.py
step kgrouped 60 python3 tools/bench_grouped.py --kgrouped --variants default,pp-tma-s5 --rounds 6 --json $L/kgrouped.jsonl
step kg_step 40 python3 tools/bench_grouped.py --cases k-8x28672x4096/16384,k-8x4096x14336/16384 --rounds 6 --json $L/kg_step.jsonl
for kk in True False; do
step training_moe_k$kk 60 python3 -c "
import runpy, sys
import ptxgen.ops.torch_ops as t
t.K_GROUPED_KERNEL = $kk
sys.argv = ['bench_training.py', '--model', 'moe', '--tokens', '8192', '--rounds', '6', '--no-compile', '--json', '$L/training_moe_k$kk.jsonl']
runpy.run_path('tools/bench_training.py', run_name='__main__')"
done
step swapclu 90 python3 .exp/swapclu.py $L/swapclu.json
step bench_attention 110 python3 tools/bench_attention.py --repeats 5 --variants default --json $L/bench_attention.json
step pytest_attention 170 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py
held=$(python3 tools/heldout_shapes.py --set 30)
step bench_heldout30_bf16 80 sh -c "python3 -m ptxgen bench --dtype bf16 --iters 20 --json --shapes $held > $L/bench_heldout30_bf16.json"
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
tail -n 2 $L/pytest_kg_training.log $L/pytest_attention.log
grep -h 'geometric' $L/kgrouped.log $L/kg_step.log
for kk in True False; do tail -n 2 $L/training_moe_k$kk.log; done
grep -v illegal $L/swapclu.log | cut -c1-160
python3 - <<PY
import json, math
try:
    rs = json.load(open("$L/bench_attention.json")); g = []
    for r in rs:
        t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0)); x = t['ptxgen-default']/best; g.append(x)
        print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'ours/best', round(x,3))
    print("geomean", round(math.exp(sum(map(math.log,g))/len(g)),3), "n", len(g), ">=1:", sum(x>=1 for x in g))
except Exception as e:
    print("bench_attention unreadable", e)
PY
python3 - <<PY
import json
try:
    d = json.load(open("$L/bench_heldout30_bf16.json"))
    rs = sorted(d["shapes"], key=lambda r: r["ratio"])
    print("heldout30 bf16 geomean", round(d["geomean_ratio"], 3), "n", len(rs), "lowest:", [(r["m"], r["n"], r["k"], round(r["ratio"], 3), r.get("chosen_by")) for r in rs[:6]])
except Exception as e:
    print("heldout unreadable", e)
PY
