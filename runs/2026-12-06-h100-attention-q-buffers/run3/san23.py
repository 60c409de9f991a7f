import sys, torch
sys.path.insert(0, ".")
from ptxgen.attention.launch import attention
torch.manual_seed(0)
for d, tile, sched in ((128, (128, 128, 2), "pingpong"), (64, (192, 128, 2), "overlap"), (64, (128, 128, 3), "pingpong")):
    for causal in (False, True):
        q = torch.randn(2, 4, 300, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(2, 2, 300, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        o = attention(q, k, v, causal=causal, schedule=sched, tile=tile, persistent=True, q_buffers=2, o_staging=True)
        torch.cuda.synchronize()
        print(d, tile, sched, causal, float(o.float().abs().sum()))
