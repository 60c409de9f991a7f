"""Row-wise FP8 K-grouped with an f32 output: tma against tma-c2 (ours against ours; alternating rounds, medians),
outputs compared (the cluster changes no accumulation order: expect identical)."""
import numpy as np
import torch
from ptxgen.kgrouped import scaled_grouped_gemm_k_variant

for g, m, n, t in ((8, 7168, 2048, 65536), (8, 4096, 14336, 8192), (16, 4096, 4096, 16384)):
    sizes = np.random.default_rng(0).multinomial(t // 16, [1.0 / g] * g) * 16
    offs = torch.tensor(np.cumsum(sizes), device="cuda", dtype=torch.int32)
    a = torch.randn(m, t, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, t, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(g * m, device="cuda") + 0.5
    sb = torch.rand(g * n, device="cuda") + 0.5
    outs = {v: torch.empty(g, m, n, device="cuda", dtype=torch.float32) for v in ("tma", "tma-c2")}
    times = {v: [] for v in outs}
    for v in outs:
        scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, outs[v], variant=v)
    torch.cuda.synchronize()
    same = torch.equal(outs["tma"], outs["tma-c2"])
    for _ in range(10):
        for v in outs:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(3):
                scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, outs[v], variant=v)
            e.record(); torch.cuda.synchronize()
            times[v].append(s.elapsed_time(e) / 3)
    med = {v: float(np.median(x)) for v, x in times.items()}
    print(f"f32 out {g}x{m}x{n}/{t}: tma {med['tma']:.3f} ms, tma-c2 {med['tma-c2']:.3f} ms, tma/tma-c2 {med['tma'] / med['tma-c2']:.3f}, identical {same}", flush=True)
    del a, b, outs
    torch.cuda.empty_cache()
