#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x21; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 170 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py > $L/pytest_attention.log 2>&1; echo "pytest exit $?" >> $L/summary.txt
timeout 290 python3 tools/bench_attention.py --seqlens 512,1024,2048,4096 --repeats 5 --variants default,default:q1,pingpong:128:128:3:persistent,overlap:192:128:3:persistent,pingpong:128:192:2:persistent --json $L/bench_qbuf.json > $L/bench_qbuf.log 2>&1; echo "bench exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_attention.log
python3 -c "
import json
for r in json.load(open('$L/bench_qbuf.json')):
    t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
    print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, 'q2/q1', round(t['ptxgen-default']/t['ptxgen-default:q1'],3), 'q2/best', round(t['ptxgen-default']/best,3))"
