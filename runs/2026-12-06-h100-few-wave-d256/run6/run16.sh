#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc15
L=/tmp/x16; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 150 python3 tools/bench_attention.py --seqlens 512,2048,8192,16384 --repeats 5 --variants default --json $L/bench_attention.json > $L/bench_attention.log 2>&1; echo "bench exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
python3 -c "
import json
for r in json.load(open('$L/bench_attention.json')):
    t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
    print(r['head_dim'], r['seqlen'], r['causal'], round(t['ptxgen-default']), round(t.get('cudnn',0)), round(t.get('flash',0)), round(t['ptxgen-default']/best,3))"
