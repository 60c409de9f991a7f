"""The six GEMM forms of the MLP training step (8192 tokens, 4096 -> 14336), with the layouts autograd gives
ptxgen.gemm, against torch.mm on the same views: alternating rounds, medians, outputs checked."""
import sys, json, statistics
sys.path.insert(0, ".")
import torch, ptxgen
from ptxgen.api import plan as _plan
T, D, F = 8192, 4096, 14336
dev, dt = "cuda", torch.bfloat16
g = torch.Generator(device=dev).manual_seed(0)
def r(*s): return torch.randn(*s, device=dev, dtype=dt, generator=g) * 0.1
x, w1, w2, h, dy2, dz1 = r(T, D), r(F, D), r(D, F), r(T, F), r(T, D), r(T, F)
forms = {
 "fwd1 x@w1.T": (x, w1.t()), "fwd2 h@w2.T": (h, w2.t()),
 "dX2 dy2@w2": (dy2, w2), "dX1 dz1@w1": (dz1, w1),
 "dW2 dy2.T@h": (dy2.t(), h), "dW1 dz1.T@x": (dz1.t(), x)}
def t_us(fn, n=10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n): fn()
    b.record(); b.synchronize(); return a.elapsed_time(b) * 1e3 / n
tot_p = tot_t = 0
for name, (A, B) in forms.items():
    out = torch.empty(A.shape[0], B.shape[1], device=dev, dtype=dt)
    fp = lambda: ptxgen.gemm(A, B.t(), out)  # out = A @ (B.t()).T
    ft = lambda: torch.mm(A, B)
    ref = torch.mm(A.float(), B.float()); fp(); torch.cuda.synchronize()
    err = (out.float() - ref).abs().max().item() / ref.abs().max().item()
    ft(); tp, tt = [], []
    for _ in range(7):
        tp.append(t_us(fp)); tt.append(t_us(ft))
    p, t = statistics.median(tp), statistics.median(tt); tot_p += p; tot_t += t
    try:
        pl = _plan("gemm", A, B.t(), out); kern = f"{pl.path} {pl.kernel} swapped={pl.swapped} packed={pl.packed}"
    except Exception as e:
        kern = f"plan: {e}"
    print(json.dumps({"form": name, "m": A.shape[0], "n": B.shape[1], "k": A.shape[1],
                      "a_stride": list(A.stride()), "b_stride": list(B.stride()), "ptxgen_us": round(p, 1),
                      "torch_us": round(t, 1), "ratio": round(t / p, 3), "rel_err": err, "kernel": kern}), flush=True)
print(json.dumps({"total_ptxgen_us": round(tot_p, 1), "total_torch_us": round(tot_t, 1), "ratio": round(tot_t / tot_p, 3)}))
