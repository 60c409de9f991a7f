#!/bin/bash
# one device call: the MoE step's two dW shapes through every K-grouped variant vs torch; the MoE step with ptxgen's dW on/off; carried attention again
export PYTHONUNBUFFERED=1
L=/tmp/x30; mkdir -p $L; T0=$(date +%s); ROOT=$PWD
left() { echo $(( ${DEADLINE:-540} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc30
step kg_step_shapes 150 python3 tools/bench_grouped.py --cases k-8x28672x4096/16384,k-8x4096x14336/16384,k-8x4096x14336/8192 --variants all --rounds 4 --json $L/kg_step_shapes.jsonl
for kk in True False; do
step training_moe_k$kk 80 python3 -c "
import runpy, sys
import ptxgen.ops.torch_ops as t
t.K_GROUPED_KERNEL = $kk
sys.argv = ['bench_training.py', '--model', 'moe', '--tokens', '8192', '--rounds', '5', '--no-compile', '--json', '$L/training_moe_k$kk.jsonl']
runpy.run_path('tools/bench_training.py', run_name='__main__')"
done
step profile_moe_kTrue 90 python3 -c "
import runpy, sys
import ptxgen.ops.torch_ops as t
t.K_GROUPED_KERNEL = True
sys.argv = ['profile_training.py', '--out', '$L/prof_kTrue', '--model', 'moe', '--tokens', '8192', '--steps', '3', '--reps', '2']
runpy.run_path('tools/profile_training.py', run_name='__main__')"
cp ptxgen/runtime/launch/_launcher.abi3.so .exp/carry/ptxgen/runtime/launch/
cd .exp/carry; export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc30c
step bench_cs2 80 python3 tools/bench_attention.py --seqlens 512,1024 --head-dims 128 --repeats 9 --variants default,default:cs --json $L/bench_cs2.json
cd $ROOT
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
grep -h 'ratio' $L/kg_step_shapes.log | sed 's/ptxgen_sm90a[^:]*//' | cut -c1-200
tail -4 $L/training_moe_kTrue.log $L/training_moe_kFalse.log
head -30 $L/prof_kTrue/profile_training.txt 2>/dev/null
python3 - <<PY
import json
try:
    for r in json.load(open("$L/bench_cs2.json")):
        t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
        print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'cs/plain', round(t['ptxgen-default:cs']/t['ptxgen-default'],3), 'cs/best', round(t['ptxgen-default:cs']/best,3), 'plain/best', round(t['ptxgen-default']/best,3))
except Exception as e:
    print("bench_cs2 unreadable", e)
PY
