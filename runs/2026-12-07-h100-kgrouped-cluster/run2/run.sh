#!/bin/bash
# After scaled_grouped_gemm takes the 2x1 cluster (tma-n256-c2) for 16-bit outputs: the K-grouped and grouped gpu tests
# (the FP8 sanitizer flagship among them), the three sanitizer tools on tma-n256-c2, the door's default against torch.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc76
mkdir -p $OUT; L=$OUT/x; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
left() { echo $(( ${DEADLINE:-400} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
step tests 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider -n 8 tests/test_kgrouped_fp8_door.py tests/test_kgrouped_store.py tests/test_kgrouped_door.py tests/test_kgrouped_cluster.py tests/test_grouped.py tests/test_grouped_hotpath.py tests/test_grouped_packed.py tests/test_training_gpu.py
tail -2 $L/tests.log
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  step san_$tool 60 $SAN --tool $tool --report-api-errors no --error-exitcode 99 python3 -c "
import torch, numpy as np
from ptxgen.kgrouped import scaled_grouped_gemm_k_variant
m, n, k = 200, 136, 528
offs_l = np.cumsum([0, 1, 0, 128, 131, 7, 250]).tolist(); g = len(offs_l)
a = torch.randn(m, k, device='cuda').to(torch.float8_e4m3fn); b = torch.randn(n, k, device='cuda').to(torch.float8_e4m3fn)
sa = torch.rand(g * m, device='cuda') + .5; sb = torch.rand(g * n, device='cuda') + .5
offs = torch.tensor(offs_l, dtype=torch.int32, device='cuda')
out = torch.empty(g, m, n, device='cuda', dtype=torch.bfloat16)
scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, out, variant='tma-n256-c2'); torch.cuda.synchronize(); print('done')"
  tail -1 $L/san_$tool.log
done
step kfp8 120 python3 tools/bench_grouped.py --cases fk-8x4096x14336/8192,fk-128x2048x1536/32768,fk-8x7168x2048/65536,fk-32x2048x7168/16384,fk-64x2048x1536/8192 --rounds 8 --json $L/kfp8.jsonl
step kfp8_oddm 100 python3 tools/bench_grouped.py --cases fk-8x128x14336/8192,fk-8x384x14336/8192,fk-8x640x7168/16384,fk-8x1152x4096/8192 --variants tma-n256,tma-n256-c2 --rounds 6 --json $L/kfp8_oddm.jsonl
grep -hE "ratio" $L/kfp8_oddm.log | cut -c1-60,200-330 | tail -12
step f32_c2 60 python3 .exp/f32_c2.py
cat $L/f32_c2.log | tail -3
grep -hE "ratio" $L/kfp8.log | cut -c1-60,200-330 | tail -8
tar czf $OUT/x.tgz -C $OUT x
