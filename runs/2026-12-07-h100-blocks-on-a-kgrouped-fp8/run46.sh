#!/bin/bash
# warm 8 s; the one-pass activation backward against torch's; then gpu_run.sh: bench-gemm (H200 only) and the gpu tier
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
python3 - <<'PY'
import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t = time.time()
while time.time() - t < 8:
    a @ a
torch.cuda.synchronize(); print("warm")
PY
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
timeout ${T_KG:-80} python3 tools/bench_grouped.py --kgrouped-fp8 --variants tma,tma-s6,tma-n256,tma-n256-s3 --rounds 6 --json $OUT/kgfp8.jsonl > $OUT/kgfp8.log 2>&1; grep -E "ratio|geomean|error|Error" $OUT/kgfp8.log | cut -c1-260
timeout ${T_ACT:-50} python3 tools/bench_actgrad.py --act gelu_tanh --rounds 10 --json $OUT/actgrad.jsonl 2>&1 | tee $OUT/actgrad.log | tail -n 25
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) S="bench-gemm tests";; *) S="tests";; esac
OUT=$OUT BUDGET=${BUDGET:-395} T_GPU=${T_GPU:-330} bash tools/gpu_run.sh $S
