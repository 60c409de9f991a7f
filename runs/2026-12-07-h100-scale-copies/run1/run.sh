#!/bin/bash
# the cp.async scale warp and wider 1D1D tiles: gpu tests, sanitizer, timings; K-grouped FP8 ping-pong; training steps
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc53
mkdir -p $OUT; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-540} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $OUT/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $OUT/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
git rev-parse HEAD > $OUT/tree.txt; git status --short >> $OUT/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
V=s4-tma-1d1d,s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync,m192-s4-tma-1d1d,m192-s4-tma-1d1d-cpasync,s4-tma-1d1d-acc,m192-s4-tma-1d1d-cpasync-acc,n192-s4-tma,n192-s4-tma-cpasync
python3 tools/bench_blockfp8.py --compile-only --jobs 8 --variants $V > $OUT/precompile.log 2>&1 &
step pytest 150 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_blockfp8_cpasync.py tests/test_kgrouped_fp8_door.py tests/test_kgrouped_store.py tests/test_kgrouped_door.py tests/test_blockfp8_2d1d.py
wait
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 5: a @ a
torch.cuda.synchronize()"
step bfp8 130 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 6 --variants $V --json $OUT/bfp8.jsonl
step sanitizer 110 python3 -m pytest -m gpu -n 9 -q -rfE -p no:cacheprovider tests/test_epilogue_ops.py -k "compute_sanitizer_clean and (cpasync or 1d1d)"
step kgfp8 60 python3 tools/bench_grouped.py --kgrouped-fp8 --variants tma,tma-n256,pp-tma,pp-tma-s5 --rounds 8 --json $OUT/kgfp8.jsonl
step training 70 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 8 --no-compile --json $OUT/training.jsonl
tail -n 8 $OUT/pytest.log; tail -n 4 $OUT/sanitizer.log; grep -E "ratio|geo" $OUT/bfp8.log | cut -c1-200; grep -E "ratio|geo" $OUT/kgfp8.log | cut -c1-200; tail -n 8 $OUT/training.log
