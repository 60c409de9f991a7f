import sys, torch
sys.path.insert(0, ".")
from ptxgen.attention.launch import attention, choose_spec
torch.manual_seed(0)
for s in (300, 1000):  # the D 64 non-causal default up to 1024 keys: ping-pong 128 x 128, walk, O staged, S carried
    q = torch.randn(4, 16, s, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(4, 4, s, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = attention(q, k, v)
    torch.cuda.synchronize()
    print(s, float(o.float().abs().sum()))
