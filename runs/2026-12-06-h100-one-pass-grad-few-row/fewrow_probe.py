"""Few-row class: cuBLAS's kernel names and a SpeedOfLight profile of ptxgen's pick and cuBLAS (run under ncu with
--mode ncu), plus the unaligned three."""
import sys, torch, ptxgen
SHAPES = [(260, 8192, 6000), (300, 12288, 6000), (384, 12288, 6000), (2500, 10000, 4000), (1500, 9000, 3000),
          (3000, 7000, 5000)]
mode = sys.argv[1] if len(sys.argv) > 1 else "names"
torch.manual_seed(0)
for m, n, k in (SHAPES if mode == "names" else SHAPES[:3]):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    out = ptxgen.gemm(a, b); ref = a @ b.T; torch.cuda.synchronize()
    err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    if mode == "names":
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                a @ b.T; ptxgen.gemm(a, b)
            torch.cuda.synchronize()
        names = sorted({e.name for e in p.events() if e.device_type.name == "CUDA"})
        # one call alone between events, each
        def t(f):
            f(); torch.cuda.synchronize(); s, e = torch.cuda.Event(True), torch.cuda.Event(True); best = []
            for _ in range(20):
                s.record(); f(); e.record(); e.synchronize(); best.append(s.elapsed_time(e) * 1e3)
            return sorted(best)[len(best) // 2]
        print(f"NAMES {m}x{n}x{k} err {err:.2e} cublas_us {t(lambda: a @ b.T):.1f} ptxgen_us {t(lambda: ptxgen.gemm(a, b)):.1f} {names}", flush=True)
    else:
        ptxgen.gemm(a, b); a @ b.T
        torch.cuda.synchronize()
        print(f"NCU {m}x{n}x{k} done", flush=True)
