#!/bin/bash
# H200: ptxgen bench with no tile flags (every class), a fresh calibration and the held-out 30 (bf16, e4m3 form) under
# it, the chooser's kernels against float64. H100 (measured today already): the whole gpu tier instead.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
git rev-parse HEAD > $OUT/tree.txt; git status --short >> $OUT/tree.txt
if grep -q H200 $OUT/smi.txt; then
  CAL_S=90 BUDGET=${BUDGET:-330} bash tools/gpu_run.sh bench-gemm calibrate chosen > /dev/null 2>&1
else
  T_GPU=$(( ${BUDGET:-330} - 20 )) BUDGET=${BUDGET:-330} bash tools/gpu_run.sh tests > /dev/null 2>&1
fi
grep -E "^==" $OUT/summary.txt | cut -c1-200; grep -E "passed|failed" $OUT/summary.txt | tail -3
