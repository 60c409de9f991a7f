"""K-grouped row-wise FP8 at fk-8x4096x14336/8192 (bench_grouped's inputs): warm both, then one call each (for ncu).
argv: variant|torch|both [bf16]"""
import sys
import numpy as np
import torch
import ptxgen
from ptxgen.kgrouped import scaled_grouped_gemm_k_variant, grouped_gemm_k_variant
which = sys.argv[1]
bf16 = len(sys.argv) > 2 and sys.argv[2] == "bf16"
g, m, n, t, seed = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "8,4096,14336,8192").split(",")] + [0]
sizes = np.random.default_rng(seed).multinomial(t // 16, [1.0 / g] * g) * 16
offs = torch.tensor(np.cumsum(sizes), device="cuda", dtype=torch.int32)
gen = torch.Generator(device="cuda").manual_seed(seed)
out = torch.empty(g, m, n, device="cuda", dtype=torch.bfloat16)
if bf16:
    dy = torch.randn(t, m, device="cuda", generator=gen).to(torch.bfloat16)
    x = torch.randn(t, n, device="cuda", generator=gen).to(torch.bfloat16)
    ours = lambda v: grouped_gemm_k_variant(dy.t(), x.t(), offs, out, variant=v)
    base = lambda: torch._grouped_mm(dy.t(), x, offs=offs)
else:
    a = torch.randn(m, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    sa = torch.rand(g * m, device="cuda", generator=gen) + 0.5
    sb = torch.rand(g * n, device="cuda", generator=gen) + 0.5
    ours = lambda v: scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, out, variant=v)
    base = lambda: torch._scaled_grouped_mm(a, b.t(), sa, sb, offs=offs, out_dtype=torch.bfloat16)
if which == "torch":
    f = base
else:
    f = lambda: ours(which)
for _ in range(3):
    f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("ok", which, "bf16" if bf16 else "fp8")
