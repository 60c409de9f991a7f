export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc; mkdir -p $OUT
python3 setup.py -q build_ext --inplace > /tmp/b.log 2>&1
timeout 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider tests/test_grouped.py tests/test_grouped_hotpath.py tests/test_grouped_packed.py tests/test_grouped_blockfp8.py tests/test_blockfp8_prepared.py tests/test_blockfp8_torch_scales.py tests/test_fused_hotpath.py tests/test_fused_any.py tests/test_api_plan.py tests/test_multidevice.py > $OUT/tests.log 2>&1; tail -2 $OUT/tests.log
for op in grouped:8192x4096x4096,4096x7168x2048,2048x2048x1024 scaled_grouped:8192x4096x4096,4096x7168x2048,2048x2048x1024 bfp8:2048x7168x4096,128x4096x7168,4096x4096x4096 fused:3000x5000x7000,2048x11008x4096,1024x4096x4096; do
 timeout 90 python3 -m ptxgen bench --api --op ${op%%:*} --shapes ${op#*:} --iters 10 --json > $OUT/doors_${op%%:*}.json 2>> $OUT/doors.log; done
grep "host us" $OUT/doors.log | cut -c1-200
