#!/bin/bash
# 1D1D default (192 x 128, cp.async scale warp): its door's gpu tests, PyTorch's block-wise cases, sanitizers; the
# 1D1D tiles at small M and more shapes; then ptxgen bench with no tile flags (tools/gpu_run.sh bench-gemm)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc54
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
V=s4-tma-1d1d,s4-tma-1d1d-cpasync,m192-s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync
python3 tools/bench_blockfp8.py --compile-only --jobs 8 --variants $V > $L/precompile.log 2>&1 &
step pytest 150 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_blockfp8_1d1d.py tests/test_blockfp8_cpasync.py tests/test_torch_referee.py -k "not test_torch_case or block_wise"
step sanitizer 90 python3 -m pytest -m gpu -n 9 -q -rfE -p no:cacheprovider tests/test_epilogue_ops.py -k "compute_sanitizer_clean and 1d1d"
wait
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 5: a @ a
torch.cuda.synchronize()"
step bfp8 120 python3 tools/bench_blockfp8.py 64x7168x16384 128x7168x16384 256x7168x4096 512x4096x7168 1024x7168x4096 3008x7008x5008 4096x4096x4096 16384x4096x4096 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 4 --variants $V --json $L/bfp8.jsonl
l=$(left); [ $l -gt 60 ] && OUT=$OUT/gr BUDGET=$((l-10)) bash tools/gpu_run.sh bench-gemm > $L/gpu_run.log 2>&1
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
tail -n 4 $L/pytest.log; tail -n 3 $L/sanitizer.log; grep -E "ratio" $L/bfp8.log | sed -E 's/ \[.*//; s/torch._scaled_mm BlockWise1x128 x BlockWise1x128/torch/' | cut -c1-150; cat $OUT/gr/summary.txt 2>/dev/null | grep -E "==|geomean|geometric" | cut -c1-200
