"""The MLP backward's activation step at tools/bench_training.py's widths (8192 tokens): torch's gelu_backward + sum
over dz against torch.ops.ptxgen.activation_grad (one pass over dy and z, two launches), one call alone between events
and back to back, alternating rounds, medians; outputs checked; host µs per call of both."""
import time, torch, ptxgen
ptxgen.register_torch_ops()
from ptxgen.ops import actgrad, torch_ops
torch_ops.ACT_GRAD_KERNEL = True
torch.manual_seed(0)
def alone(f, reps=25):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True); v = []
    for _ in range(reps):
        torch.cuda.synchronize(); s.record(); f(); e.record(); e.synchronize(); v.append(s.elapsed_time(e) * 1e3)
    return sorted(v)[len(v) // 2]
def host_us(f, n=300):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): f()
    t = (time.perf_counter() - t0) / n * 1e6; torch.cuda.synchronize(); return t
for n in (14336, 4096):
    dy = torch.randn(8192, n, device="cuda", dtype=torch.bfloat16); z = torch.randn_like(dy) * 2
    ref = lambda: (lambda d: (d, d.sum(0, dtype=torch.bfloat16)))(torch.ops.aten.gelu_backward(dy, z, approximate="tanh"))
    ours = lambda: torch.ops.ptxgen.activation_grad(dy, z, "gelu_tanh", "bf16")
    d0, b0 = ref(); d1, b1 = ours(); torch.cuda.synchronize()
    dz_err = ((d1.float() - d0.float()).abs().max() / d0.float().abs().max()).item()
    b_err = ((b1.float() - b0.float()).abs().max() / b0.float().abs().max()).item()
    r, o = [], []
    for _ in range(7):
        r.append(alone(ref)); o.append(alone(ours))
    r, o = sorted(r)[3], sorted(o)[3]
    mb = 3 * dy.numel() * 2 / 1e6
    print(f"8192x{n}: torch gelu_backward+sum {r:.1f} us, ptxgen activation_grad {o:.1f} us, ratio {r / o:.3f} "
          f"(ours {mb / o * 1e-3:.2f} TB/s over dy, z, dz); max rel err dz {dz_err:.2e} dbias {b_err:.2e}; "
          f"host us/call torch {host_us(ref):.1f} ptxgen {host_us(ours):.1f}", flush=True)
