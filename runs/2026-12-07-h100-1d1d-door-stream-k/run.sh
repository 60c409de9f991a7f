#!/bin/bash
# 1D1D door: gpu tests with 64-row picks and stream-K; the 1D1D tiles with stream-K; the door's calls with 64-row tiles
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc58
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
V=m192-s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync-sk4,s4-tma-1d1d-cpasync-sk8
( python3 tools/bench_blockfp8.py --compile-only --jobs 6 --variants $V > $L/precompile.log 2>&1 ) &
step pytest 200 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_blockfp8_1d1d.py tests/test_blockfp8_cpasync.py tests/test_blockfp8_1d1d_streamk.py
wait
step sk 150 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 6 --variants $V --json $L/bfp8_1d1d.jsonl
step columns 90 python3 tools/bench_blockfp8_api.py --columns 4096x7168x16384 8192x8192x8192 2048x7168x4096 64x7168x16384 128x7168x16384 64x4096x7168 128x2048x7168 1024x7168x4096 --rounds 10 --json $L/columns.jsonl
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
tail -n 4 $L/pytest.log; grep -E "ratio" $L/sk.log | sed -E 's/ \[.*//; s/torch._scaled_mm BlockWise1x128 x BlockWise1x128/torch/' | cut -c1-170; grep -E "ratio" $L/columns.log | cut -c1-250
