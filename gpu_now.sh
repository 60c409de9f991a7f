#!/bin/bash
# one-off device command of 2026-12-06 (not committed): the gpu tests of the new forms, then their benchmarks
export PTXGEN_CACHE_DIR=/tmp/pc PYTHONPATH=$PWD
T0=$SECONDS
left() { echo $(( 570 - (SECONDS - T0) )); }
python3 setup.py build_ext --inplace > $OUT/build_ext.log 2>&1
b() { local name=$1 secs=$2; shift 2; local l=$(left); [ "$l" -lt 15 ] && { echo "skip $name" >> $OUT/summary.txt; return; }
  [ "$secs" -gt "$l" ] && secs=$l; timeout "$secs" "$@" > $OUT/$name.log 2>&1; echo "$name exit $? at $((SECONDS-T0)) s" >> $OUT/summary.txt; }
TESTS=$(ls tests/test_f32_out.py tests/test_dmajor.py tests/test_mstore.py tests/test_streamk_api.py tests/test_kgrouped_door.py \
  tests/test_kgrouped_fp8_door.py tests/test_blockfp8_1d1d.py tests/test_precision_gpu.py tests/test_workspace_launch.py \
  tests/test_attention_gpu.py tests/test_training_gpu.py tests/test_fusion_aux.py tests/test_torch_referee.py \
  tests/test_grouped_ngrouped.py tests/test_api_torch.py 2>/dev/null)
b pytest_gpu 230 env PTXGEN_REFEREE_JSON=$OUT/referee.json python3 -m pytest -m gpu -n 8 -q -rA -p no:cacheprovider $TESTS
b kgrouped 50 python3 tools/bench_grouped.py --kgrouped --rounds 6 --json $OUT/kgrouped.jsonl
b kgrouped_fp8 40 python3 tools/bench_grouped.py --kgrouped-fp8 --rounds 6 --json $OUT/kgrouped_fp8.jsonl
b training 130 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 4 --json $OUT/training.jsonl
b bfp8_1d1d 80 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --variants s4-tma-1d1d,s4-tma-1d1d-acc --rounds 5 --json $OUT/bench_1d1d.jsonl
C="--bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --out-dtype bf16 --iters 20 --json --schedule persistent"
b smalln_64 25 python3 -m ptxgen bench $C --shapes 20000x64x4096 --bm 128 --bn 64 --stages 8 --cluster 2x1
b smalln_64b 25 python3 -m ptxgen bench $C --shapes 20000x64x4096 --bm 128 --bn 64 --stages 8
b smalln_128 25 python3 -m ptxgen bench $C --shapes 9000x128x8192 --bm 128 --bn 128 --stages 6
