"""Is swap-AB worth building for decode shapes? (issue 16, small M). Device experiment, kernel time only.

For D = A B^T with M <= 16, swap-AB computes D^T = B A^T: the weights' N rows take the MMA's M (BM = 64 or 128 tiles,
N / BM CTAs) and the few activation rows take a narrow BN = 8 or 16. This script times, on the same inputs with
alternating rounds (CUDA events around `--iters` back-to-back calls, medians of the rounds):
  cuBLAS      torch.matmul(a, b.t())
  chooser     ptxgen.gemm(a, b, out) (today's pick: small-m / split-k rules)
  swapped     a CompiledKernel of each variant called as k(b, a, scratch): scratch is N x BN' (BN' = max(M, 8): the
              direct epilogue stores 16-byte vectors, so a one-column D^T cannot be written in place yet); the
              transpose back is NOT timed. It checks scratch[:, :M] against D^T.
Hypothesis written before the run: at M = 1 against 16384 x 4096 (where small-m runs 0.87-0.90 of cuBLAS with 128
CTAs) a 64 x 8 tile with 16 stages (256 CTAs, two per SM) streams the weights >= 5% faster than cuBLAS; at 4096 x 4096
(64 CTAs of 64 rows, or 32 of 128) it needs split-K to fill the SMs.

    python3 tools/exp_swapab.py [--iters 20 --rounds 7]
"""

import argparse
import statistics
import sys

import torch

import ptxgen
from ptxgen import make_spec

SHAPES = [(m, n, k) for m in (1, 16, 64) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))]
VARIANTS = [(128, 8, 12, 1), (64, 8, 16, 1), (128, 8, 12, 2), (64, 8, 16, 2), (64, 8, 16, 4), (128, 16, 10, 1),
            (64, 16, 12, 2), (128, 16, 10, 2), (64, 16, 12, 1), (128, 32, 8, 1), (128, 64, 6, 1)]


def spec(bm, bn, stages, s):
    return make_spec(bm=bm, bn=bn, bk=64, stages=stages, split_k=s, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16",
                     acc="f32", arch="sm_90a", out_dtype="bf16")


def time_ms(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    kernels = {}
    for v in VARIANTS:
        try:
            kernels[v] = ptxgen.compile(spec(*v))
        except Exception as e:  # noqa: BLE001 - a variant that cannot build is reported
            print(f"variant {v}: {type(e).__name__}: {e}", flush=True)
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ref = (a.double() @ b.double().t())
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        width = max(8, m)
        scratch = torch.empty(n, width, device="cuda", dtype=torch.bfloat16)
        fns = {"cublas": lambda: torch.matmul(a, b.t(), out=out), "chooser": lambda: ptxgen.gemm(a, b, out)}
        for v, kern in kernels.items():
            if v[1] < m:
                continue
            fns[f"swap {v[0]}x{v[1]} s{v[2]} S{v[3]}"] = (lambda kern=kern: kern(b, a, scratch[:, :m]))
        errs = {}
        for name, fn in fns.items():
            try:
                fn()
                torch.cuda.synchronize()
                got = out.double() if not name.startswith("swap") else scratch[:, :m].double().t()
                errs[name] = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
            except Exception as e:  # noqa: BLE001
                print(f"{m}x{n}x{k} {name}: {type(e).__name__}: {e}", flush=True)
        live = [nm for nm in fns if nm in errs]
        times = {nm: [] for nm in live}
        for _ in range(args.rounds):
            for nm in live:
                times[nm].append(time_ms(fns[nm], args.iters))
        base = statistics.median(times["cublas"])
        gbytes = (n * k + m * k + m * n) * 2 / 1e9
        for nm in live:
            t = statistics.median(times[nm])
            print(f"{m}x{n}x{k} {nm:28s} {t * 1e3:8.1f} us  ratio {base / t:6.3f}  {gbytes / t:6.2f} TB/s  "
                  f"rel_err {errs[nm]:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
