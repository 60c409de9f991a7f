#!/bin/bash
# 1D1D at few rows: 64- and 64-column tiles against 128 x 128 (cp.async scale warp)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc57
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
V=s4-tma-1d1d-cpasync,n64-s4-tma-1d1d-cpasync,m64-s6-tma-1d1d-cpasync,m64-n64-s6-tma-1d1d-cpasync
python3 tools/bench_blockfp8.py --compile-only --jobs 8 --variants $V > $OUT/precompile.log 2>&1
timeout 100 python3 tools/bench_blockfp8.py 64x7168x16384 128x7168x16384 64x4096x7168 128x2048x7168 256x7168x4096 512x4096x7168 --rounds 4 --variants $V --json $OUT/bfp8.jsonl > $OUT/bfp8.log 2>&1
echo "exit $?" >> $OUT/bfp8.log
grep -E "ratio" $OUT/bfp8.log | sed -E 's/ \[.*//; s/torch._scaled_mm BlockWise1x128 x BlockWise1x128/torch/' | cut -c1-150
