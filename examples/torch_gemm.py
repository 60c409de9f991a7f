"""A generated GEMM on torch tensors: compile a spec, call it, compare with torch.matmul.

    python examples/torch_gemm.py          # needs an sm_90a (H100/H200) or sm_100a GPU and torch

out = a @ b.T with a: M x K and b: N x K (b like the weight of torch.nn.functional.linear).
"""

import torch

import ptxgen
from ptxgen.runtime.launch.gpu import require_gpu

arch = require_gpu().arch.value  # sm_90a on Hopper, sm_100a on Blackwell (raises ptxgen.NoGPU otherwise)

# 1. A spec of your own: bf16 in, f32 accumulate, bf16 out, 128 x 128 tiles, 64 of K per stage, 4 stages.
spec = ptxgen.make_spec(128, 128, 64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16",
                        arch=arch, stages=4)
kernel = ptxgen.compile(spec)  # NVRTC; cached on disk (~/.cache/ptxgen), the module is loaded at the first call
print(kernel)
print("parameters:", ", ".join(p.name for p in kernel.params), "| block", kernel.block,
      "| shared bytes", kernel.shared_bytes, "| cache hit", kernel.cache_hit)

m, n, k = 4096, 3000, 2048
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
out = kernel(a, b)  # allocated for you; launched on torch's current stream
ref = torch.matmul(a, b.t())
torch.cuda.synchronize()
err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
print(f"compiled spec: {m}x{n}x{k}, grid {kernel.grid(m, n)}, relative error vs torch.matmul {err:.2e}")

# 2. Into a given output, on a side stream.
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
given = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
kernel(a, b, given, stream=s)
s.synchronize()
print("given out, side stream: equal to the first result:", torch.equal(given, out))

# 3. ptxgen.gemm picks the spec (the tuned table for K-major operands), here for a @ w with w: K x N.
w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
spec, why = ptxgen.api.gemm_spec(a, w.t())
out = ptxgen.gemm(a, w.t())  # w.t() is N x K and N-major: a transposed view, no copy
ref = a @ w
torch.cuda.synchronize()
err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
print(f"ptxgen.gemm chose {spec.kernel_name} ({why}); relative error {err:.2e}")
