#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x22; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
git log -1 --format=%H >> $L/env.txt 2>/dev/null
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 170 python3 tools/exp_tiny_split.py --out $L/tiny-split --budget-s 110 > $L/tiny_split.log 2>&1; echo "tiny exit $?" >> $L/summary.txt
timeout 130 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_tiny_split.py tests/test_splitk.py tests/test_training_gpu.py > $L/pytest_split_training.log 2>&1; echo "pytest exit $?" >> $L/summary.txt
timeout 100 python3 tools/profile_training.py --model mlp,moe --tokens 8192 --out $L/profile_training > $L/profile_training.log 2>&1; echo "profile exit $?" >> $L/summary.txt
timeout 130 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 6 --json $L/bench_training.jsonl > $L/bench_training.log 2>&1; echo "bench_training exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_split_training.log; cat $L/tiny-split/summary.txt 2>/dev/null | head -30; cat $L/profile_training/profile_training.txt 2>/dev/null | head -60; tail -12 $L/bench_training.log
