"""Host time per call (µs, issue only, median of 5 batches of 400 calls, GPU idle at the start of each batch) for the
paths changed after 0.4.1, beside ptxgen.gemm and torch's equivalents in the same process."""
import time, torch, ptxgen
from ptxgen.ops import torch_ops  # noqa: F401  (registers the operators)
ptxgen.register_torch_ops()
def host_us(f, n=400, batches=5):
    f(); torch.cuda.synchronize(); v = []
    for _ in range(batches):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n): f()
        v.append((time.perf_counter() - t0) / n * 1e6); torch.cuda.synchronize()
    return sorted(v)[len(v) // 2]
bf = dict(device="cuda", dtype=torch.bfloat16)
a, b = torch.randn(128, 256, **bf), torch.randn(256, 256, **bf)
print(f"gemm 128x256x256: ptxgen {host_us(lambda: ptxgen.gemm(a, b)):.2f} us, torch.mm {host_us(lambda: a @ b.T):.2f} us", flush=True)
q = torch.randn(1, 2, 256, 64, **bf); k = torch.randn_like(q); v = torch.randn_like(q)
sd = torch.nn.functional.scaled_dot_product_attention
print(f"attention D64 256 keys (the carried walk default): ptxgen {host_us(lambda: ptxgen.attention(q, k, v)):.2f} us, "
      f"torch.ops.ptxgen.attention {host_us(lambda: torch.ops.ptxgen.attention(q, k, v)):.2f} us, sdpa {host_us(lambda: sd(q, k, v)):.2f} us", flush=True)
G, K, N = 4, 256, 256
x = torch.randn(512, K, **bf); w = torch.randn(G, N, K, **bf)
offs = torch.tensor([100, 200, 300, 400], device="cuda", dtype=torch.int32)
dy = torch.randn(512, N, **bf); wt = w.transpose(1, 2)
f_tail = lambda: torch.ops.ptxgen.grouped_gemm(dy, wt, offs, None, True)
f_plain = lambda: torch.ops.ptxgen.grouped_gemm(dy, wt, offs, None, False)
f_torch = lambda: torch._grouped_mm(dy, wt, offs)
print(f"grouped dx (4 groups, 400 of 512 rows): zero_tail {host_us(f_tail):.2f} us, without {host_us(f_plain):.2f} us, "
      f"torch._grouped_mm {host_us(f_torch):.2f} us", flush=True)
out = f_tail(); torch.cuda.synchronize()
print("tail rows zero:", bool((out[400:] == 0).all()), flush=True)
