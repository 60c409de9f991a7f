#!/bin/bash
# a warm follow-up call: the MLP step with the one-pass activation backward off and on, attention at short lengths,
# and on an H200 the fused chain's cost
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc47
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 5: a @ a
torch.cuda.synchronize()"
H200=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c H200)
if [ "$H200" = 1 ]; then
  timeout 120 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 2048x11008x4096 --rounds 12 --json $OUT/epilogue.jsonl > $OUT/epilogue.log 2>&1; echo "epilogue $?"
fi
for on in off on; do
  timeout 140 python3 tools/bench_training.py --model mlp --tokens 8192 --rounds 8 --no-compile --act-grad-kernel $on --json $OUT/train_$on.jsonl > $OUT/train_$on.log 2>&1; echo "train $on $?"
done
timeout ${T_ATT:-150} python3 tools/bench_attention.py --seqlens 512,1024,2048 --repeats 5 --json $OUT/attn.json > $OUT/attn.log 2>&1; echo "attn $?"
tail -n 12 $OUT/train_off.log $OUT/train_on.log; tail -n 30 $OUT/attn.log; [ -f $OUT/epilogue.log ] && tail -n 20 $OUT/epilogue.log
