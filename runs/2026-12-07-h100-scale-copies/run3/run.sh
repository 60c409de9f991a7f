#!/bin/bash
# the 1D1D door's pick (columns_chosen): gpu tests, PyTorch's block-wise cases, sanitizers, what callers see;
# K-grouped row-wise FP8: ping-pong against the default at more group counts
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc55
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
step pytest 170 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_blockfp8_1d1d.py tests/test_blockfp8_cpasync.py tests/test_torch_referee.py tests/test_training.py -k "not test_torch_case or block_wise"
step sanitizer 90 python3 -m pytest -m gpu -n 12 -q -rfE -p no:cacheprovider tests/test_epilogue_ops.py -k "compute_sanitizer_clean and 1d1d"
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 5: a @ a
torch.cuda.synchronize()"
step api 100 python3 tools/bench_blockfp8_api.py --columns 64x7168x16384 128x7168x16384 512x4096x7168 1024x7168x4096 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 10 --json $L/api_columns.jsonl
step kgfp8 120 python3 tools/bench_grouped.py --cases fk-16x4096x4096/16384,fk-32x2048x7168/16384,fk-64x2048x1536/16384,fk-128x2048x1536/32768,fk-8x7168x2048/65536 --variants tma,pp-tma,pp-tma-s5 --rounds 8 --json $L/kgfp8.jsonl
step training 80 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 8 --json $L/training.jsonl
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
tail -n 4 $L/pytest.log; tail -n 3 $L/sanitizer.log; grep -E "ratio" $L/api.log | cut -c1-230; grep -E "ratio" $L/kgfp8.log | sed -E 's/ptxgen_sm90a\S+//' | cut -c1-200; tail -n 8 $L/training.log
