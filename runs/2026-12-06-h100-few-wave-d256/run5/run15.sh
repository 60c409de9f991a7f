#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc15
L=/tmp/x15; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 150 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py > $L/pytest_attention.log 2>&1; echo "pytest exit $?" >> $L/summary.txt
timeout 150 python3 tools/bench_attention.py --seqlens 512,1024,2048,4096 --causal 1 --repeats 5 --variants default,pingpong:128:128:2:persistent,overlap:192:128:2:persistent,overlap:128:128:2:persistent --json $L/bench_causal_walk.json > $L/bench_causal_walk.log 2>&1; echo "bench exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_attention.log
python3 -c "
import json
for r in json.load(open('$L/bench_causal_walk.json')):
    print(r['head_dim'], r['seqlen'], r['causal'], {k: round(v) for k,v in r['tflops'].items()})"
