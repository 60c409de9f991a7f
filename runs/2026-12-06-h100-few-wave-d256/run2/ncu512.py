import sys
sys.path.insert(0, ".")
import torch
from ptxgen.attention.launch import attention
s, d = int(sys.argv[1]), int(sys.argv[2]); causal = sys.argv[3] == "causal"
b, h = 16384 // s, 2048 // d
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
attention(q, k, v, causal=causal); torch.cuda.synchronize()
attention(q, k, v, causal=causal); torch.cuda.synchronize()
