#!/bin/bash
# H200: attention (issue 34's H200 rows), bench-gemm, a fresh calibration + held-out 30 under it, chosen kernels.
# H100: the whole gpu tier (stream-K picks over every SM; referee included).
cd .exp/wt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
cat TREE_COMMIT > $OUT/tree.txt
if grep -q H200 $OUT/smi.txt; then
  CAL_S=90 BUDGET=${BUDGET:-560} bash tools/gpu_run.sh attention bench-gemm calibrate chosen > /dev/null 2>&1
else
  T_GPU=500 BUDGET=${BUDGET:-560} bash tools/gpu_run.sh tests > /dev/null 2>&1
fi
grep -E "^==" $OUT/summary.txt | cut -c1-200; grep -E "passed|failed" $OUT/summary.txt | tail -3
