#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/pc_new
L=/tmp/x14; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/env.txt 2>&1
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
timeout 90 "$SAN" --tool memcheck --error-exitcode 99 python3 -c "
import torch, ptxgen
from ptxgen.attention.launch import attention
q, k, v = (torch.randn(1, 4, 300, 256, device='cuda', dtype=torch.bfloat16) for _ in range(3))
attention(q, k, v, causal=True); attention(q, k[:, :1], v[:, :1])
q, k, v = (torch.randn(2, 4, 700, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))
attention(q, k, v, schedule='pingpong', tile=(128, 128, 2), persistent=True)
a = torch.randn(400, 10000, device='cuda', dtype=torch.bfloat16)[:, :6000]
b = torch.randn(10000, 6000, device='cuda', dtype=torch.bfloat16)
print(ptxgen.api.plan('gemm', a.contiguous(), b).kernel)
out = ptxgen.gemm(a.contiguous(), b); torch.cuda.synchronize(); print('done', out.shape)" > $L/memcheck.log 2>&1; echo "memcheck exit $?" >> $L/summary.txt
timeout 240 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 6 --json $L/bench_training.jsonl > $L/bench_training.log 2>&1; echo "training exit $?" >> $L/summary.txt
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; tail -25 $L/bench_training.log; grep -E "ERROR SUMMARY|done|ptxgen_" $L/memcheck.log | tail -5
