#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc21
L=/tmp/x24; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > $L/build_ext.log 2>&1
timeout 150 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_attention_gpu.py -k "staged or off_16" > $L/pytest_staged.log 2>&1; echo "pytest exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -3 $L/pytest_staged.log
