#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x26; mkdir -p $L
timeout 200 python3 tools/bench_attention.py --head-dims 64 --seqlens 512,1024,2048 --repeats 5 --variants default,overlap:192:128:3:persistent,pingpong:128:128:3:persistent,pingpong:128:128:3:persistent:os,overlap:192:128:2:persistent:os,pingpong:128:192:2:persistent:os,overlap:128:128:3:persistent --json $L/bench_d64.json > $L/bench_d64.log 2>&1; echo "d64 exit $?" >> $L/summary.txt
timeout 100 python3 tools/bench_attention.py --head-dims 128 --seqlens 512,1024 --repeats 5 --variants default,overlap:128:128:2:persistent:os,pingpong:128:64:2:persistent:os,pingpong:128:64:3:persistent:os --json $L/bench_d128.json > $L/bench_d128.log 2>&1; echo "d128 exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt
python3 -c "
import json
for f in ('$L/bench_d64.json','$L/bench_d128.json'):
  for r in json.load(open(f)):
    t=r['tflops']; best=max(t.get('cudnn',0),t.get('flash',0))
    print(r['head_dim'], r['seqlen'], r['causal'], {k.replace('ptxgen-',''): round(v) for k,v in t.items()}, 'best torch', round(best))"
