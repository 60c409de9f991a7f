#!/bin/bash
# K-grouped GEMM with 2x1 clusters (B multicast): the variants' gpu tests against float64, memcheck on one, then the
# variants against torch (bench_grouped), then ncu bytes through L2 of tma-n256 and tma-n256-c2 at the long FP8 case.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc75
mkdir -p $OUT; L=$OUT/x; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
left() { echo $(( ${DEADLINE:-540} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
step tests 170 python3 -m pytest -m gpu -q -p no:cacheprovider -n 4 tests/test_kgrouped_fp8_door.py tests/test_kgrouped_store.py -k "c2 or sanitizer or against_float64"
tail -3 $L/tests.log
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck 60 $SAN --tool memcheck python3 -c "
import torch, numpy as np
from ptxgen.kgrouped import scaled_grouped_gemm_k_variant
m, n, k = 200, 136, 528
offs_l = np.cumsum([0, 1, 0, 128, 131, 7, 250]).tolist(); g = len(offs_l)
a = torch.randn(m, k, device='cuda').to(torch.float8_e4m3fn); b = torch.randn(n, k, device='cuda').to(torch.float8_e4m3fn)
sa = torch.rand(g * m, device='cuda') + .5; sb = torch.rand(g * n, device='cuda') + .5
offs = torch.tensor(offs_l, dtype=torch.int32, device='cuda')
out = torch.empty(g, m, n, device='cuda', dtype=torch.bfloat16)
scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, out, variant='tma-n256-c2'); torch.cuda.synchronize(); print('done')"
tail -2 $L/memcheck.log
step kfp8_long 120 python3 tools/bench_grouped.py --cases fk-8x7168x2048/65536 --variants tma-n256,tma-n256-c2,tma-n256-s3,tma-n256-s3-c2,tma,tma-c2,pp-tma-c2 --rounds 6 --json $L/kfp8_long.jsonl
step kfp8 110 python3 tools/bench_grouped.py --cases fk-8x4096x14336/8192,fk-128x2048x1536/32768,fk-16x4096x4096/16384 --variants tma-n256,tma-n256-c2 --rounds 6 --json $L/kfp8.jsonl
step kbf16 110 python3 tools/bench_grouped.py --cases k-8x4096x14336/8192,k-128x2048x1536/32768,k-8x28672x4096/16384 --variants tma-n256,tma-n256-c2,pp-tma-s5-c2 --rounds 6 --json $L/kbf16.jsonl
if command -v ncu > /dev/null; then
  for v in tma-n256 tma-n256-c2; do
    step ncu_$v 60 ncu --metrics lts__t_bytes.sum,dram__bytes_read.sum,gpu__time_duration.sum -k regex:ptxgen --launch-skip 3 --launch-count 1 python3 .exp/kg_ncu.py $v fp8 8,7168,2048,65536
    grep -E "lts__t_bytes|dram__bytes_read|gpu__time" $L/ncu_$v.log
  done
fi
grep -hE "ratio|fk-|k-" $L/kfp8_long.log $L/kfp8.log $L/kbf16.log | cut -c1-220 | tail -40
tar czf $OUT/x.tgz -C $OUT x
