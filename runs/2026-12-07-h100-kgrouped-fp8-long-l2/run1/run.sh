#!/bin/bash
# Short: the authoring tutorial's gpu test; H200: bench-gemm; H100: the K-grouped FP8 long-group case over every variant.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc73
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
git rev-parse HEAD > $OUT/tree.txt; git status --short >> $OUT/tree.txt
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_authoring_doc.py > $OUT/tutorial.log 2>&1; echo "exit $?" >> $OUT/tutorial.log
tail -3 $OUT/tutorial.log
if grep -q H200 $OUT/smi.txt; then
  BUDGET=$(( ${BUDGET:-240} - SECONDS )) bash tools/gpu_run.sh bench-gemm > /dev/null 2>&1
  grep -E "^==" -A3 $OUT/summary.txt | cut -c1-200
else
  timeout $(( ${BUDGET:-240} - SECONDS - 10 )) python3 tools/bench_grouped.py --cases fk-8x7168x2048/65536 --variants all --rounds 5 \
    --json $OUT/kfp8_long.jsonl > $OUT/kfp8_long.log 2>&1; echo "exit $?" >> $OUT/kfp8_long.log
  tail -16 $OUT/kfp8_long.log | cut -c1-200
fi
