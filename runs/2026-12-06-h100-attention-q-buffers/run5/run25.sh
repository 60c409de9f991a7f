#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x25; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
timeout 250 python3 tools/bench_attention.py --seqlens 512,1024,2048,4096,8192,16384 --repeats 5 --variants default --json $L/bench_defaults.json > $L/bench_defaults.log 2>&1; echo "bench exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
python3 -c "
import json
for r in json.load(open('$L/bench_defaults.json')):
    t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
    print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in t.items()}, round(t['ptxgen-default']/best,3))"
