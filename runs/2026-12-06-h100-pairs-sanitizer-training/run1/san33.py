import sys, torch
sys.path.insert(0, ".")
from ptxgen.attention.launch import attention
torch.manual_seed(0)
# the carried S (D 128 default form: O staged; D 64 overlap BM 192: direct store), causal and not, 300 rows (192 or
# 128 tiles over 132 SMs at BM 128 and 192: CTAs with one tile and with two), GQA 4
for d, tile, sched, os_ in ((128, (128, 128, 2), "pingpong", True), (64, (192, 128, 2), "overlap", False)):
    for causal in (False, True):
        q = torch.randn(4, 16, 300, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(4, 4, 300, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        o = attention(q, k, v, causal=causal, schedule=sched, tile=tile, persistent=True, q_buffers=2, o_staging=os_,
                      carry=True)
        torch.cuda.synchronize()
        print(d, tile, sched, causal, float(o.float().abs().sum()))
