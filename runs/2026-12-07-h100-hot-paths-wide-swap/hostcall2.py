"""Host time per call (µs, issue only, median of 5 batches of 400 calls) of the author layer's launches (the hot path:
a repeated dispatch key reads only pointers and scalars) beside ptxgen.gemm and torch's equivalents, same process."""
import time, torch, ptxgen
from ptxgen.ops import torch_ops  # noqa: F401
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
G, K, N = 4, 256, 256
w = torch.randn(G, N, K, **bf); offs = torch.tensor([100, 200, 300, 400], device="cuda", dtype=torch.int32)
dy = torch.randn(512, N, **bf); wt = w.transpose(1, 2)
f_tail = lambda: torch.ops.ptxgen.grouped_gemm(dy, wt, offs, None, True)
f_plain = lambda: torch.ops.ptxgen.grouped_gemm(dy, wt, offs, None, False)
print(f"grouped dx (4 groups, 400 of 512 rows): zero_tail {host_us(f_tail):.2f} us, without {host_us(f_plain):.2f} us, "
      f"torch._grouped_mm {host_us(lambda: torch._grouped_mm(dy, wt, offs)):.2f} us", flush=True)
out = f_tail(); torch.cuda.synchronize(); print("tail rows zero:", bool((out[400:] == 0).all()), flush=True)
from ptxgen.ops import actgrad
dy2 = torch.randn(256, 512, **bf); z2 = torch.randn_like(dy2)
grad, total = actgrad.built(("grad", "gelu_tanh", "bf16")), actgrad.built(("sum", "bf16"))
cc, blocks, rows = actgrad.grid_plan(256, 512, torch.cuda.get_device_properties(0).multi_processor_count)
dz = torch.empty_like(dy2); part = torch.empty(blocks, 512, device="cuda"); db = torch.empty(512, **bf)
one = lambda: total(part, db, 512, blocks, grid=(-(-512 // actgrad.SUM_COLS), 1, 1))
print(f"one author launch (column sum, 4 args): {host_us(one):.2f} us; "
      f"activation_grad op (2 launches + 3 allocations): {host_us(lambda: torch.ops.ptxgen.activation_grad(dy2, z2, 'gelu_tanh', 'bf16')):.2f} us; "
      f"torch gelu_backward+sum {host_us(lambda: torch.ops.aten.gelu_backward(dy2, z2, approximate='tanh').sum(0)):.2f} us", flush=True)
q = torch.randn(1, 2, 256, 64, **bf); k = torch.randn_like(q); v = torch.randn_like(q)
sd = torch.nn.functional.scaled_dot_product_attention
print(f"attention D64 256 keys: ptxgen {host_us(lambda: ptxgen.attention(q, k, v)):.2f} us, "
      f"torch.ops.ptxgen.attention {host_us(lambda: torch.ops.ptxgen.attention(q, k, v)):.2f} us, sdpa {host_us(lambda: sd(q, k, v)):.2f} us", flush=True)
