#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x23; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 150 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py > $L/pytest_attention.log 2>&1; echo "pytest exit $?" >> $L/summary.txt
timeout 200 python3 tools/bench_attention.py --seqlens 512,1024,2048,4096 --repeats 7 --variants default,default:os --json $L/bench_os.json > $L/bench_os.log 2>&1; echo "bench exit $?" >> $L/summary.txt
timeout 100 compute-sanitizer --tool memcheck python3 .exp/san23.py > $L/memcheck.log 2>&1; echo "memcheck exit $?" >> $L/summary.txt
timeout 100 compute-sanitizer --tool racecheck python3 .exp/san23.py > $L/racecheck.log 2>&1; echo "racecheck exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_attention.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error" $L/memcheck.log $L/racecheck.log | head
python3 -c "
import json
for r in json.load(open('$L/bench_os.json')):
    t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
    print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'os/plain', round(t['ptxgen-default:os']/t['ptxgen-default'],3), 'os/best', round(t['ptxgen-default:os']/best,3), 'plain/best', round(t['ptxgen-default']/best,3))"
