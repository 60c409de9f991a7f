"""Diagnostic (docs/performance.md, run 23): is the K = 5000 slowdown the rows' alignment or the partial last K-tile?

The same kernel on A and B whose rows are ``pitch`` elements apart (views of wider tensors), against torch.matmul on
the same views, alternating rounds (ptxgen.runtime.bench.alternate), M = N = 5120.
Usage: python tools/exp_kpitch.py 5000:5000 5000:5056 5120:5120 5120:5128
"""

import sys

import torch

import ptxgen
from ptxgen.runtime.bench import alternate

SPEC = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent", epilogue="tma")


def main() -> None:
    kern = ptxgen.compile(ptxgen.make_spec(**SPEC))
    m = n = 5120
    for arg in sys.argv[1:]:
        k, pitch = map(int, arg.split(":"))
        a = torch.randn(m, pitch, device="cuda", dtype=torch.bfloat16)[:, :k]
        b = torch.randn(n, pitch, device="cuda", dtype=torch.bfloat16)[:, :k]
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ b.float().t()
        check = lambda: float(torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref))  # noqa: E731
        ours_ms, base_ms, err = alternate(torch, lambda: kern(a, b, out), lambda: torch.matmul(a, b.t()), check, 30, 5)
        print(f"K={k} pitch={pitch} ({pitch * 2 % 128} B past a 128-B line): ratio {base_ms / ours_ms:.3f} "
              f"ours {2 * m * n * k / ours_ms / 1e9:.1f} TFLOP/s cuBLAS {2 * m * n * k / base_ms / 1e9:.1f} err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
