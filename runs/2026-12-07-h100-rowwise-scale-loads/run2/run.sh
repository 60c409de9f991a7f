#!/bin/bash
# row-wise FP8 scales loaded once per row / column pair: gpu tests (K- and M-grouped FP8, sanitizer case), the K-grouped
# FP8 cases and the M-grouped FP8 case against torch
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc61
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
step pytest 200 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_kgrouped_fp8_door.py tests/test_kgrouped_store.py tests/test_grouped.py tests/test_grouped_ngrouped.py tests/test_grouped_nmajor.py tests/test_grouped_packed.py tests/test_scaled_rowwise_gpu.py
step kfp8 150 python3 tools/bench_grouped.py --kgrouped-fp8 --variants tma,tma-n256,pp-tma --rounds 6 --json $L/kfp8.jsonl
step mfp8 60 python3 tools/bench_grouped.py --cases fp8-8x2048 --rounds 8 --json $L/mfp8.jsonl
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
tail -n 4 $L/pytest.log; grep -E "ratio" $L/kfp8.log $L/mfp8.log | sed -E 's/ptxgen_sm90a\S+//' | cut -c1-230
