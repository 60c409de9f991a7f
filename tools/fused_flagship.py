"""Flagship runs for compute-sanitizer (issue 17): the tuned-style persistent TMA-store kernel with C, a column bias,
gelu and a residual; the FP8-output kernel with per-row scales; and the block-scaled FP8 kernel (DeepSeek recipe), at
shapes off every tile multiple; each checked against its float64 reference. Exit 0 when all match, 1 otherwise.

    compute-sanitizer --tool memcheck python tools/fused_flagship.py
"""

import sys

import numpy as np
import torch

import ptxgen.api.fp8blocks
import ptxgen.api.fused
from ptxgen.derive.tile.spec import make_spec
from ptxgen.model.numerics import bfp8model, chainref

SPEC = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent", epilogue="tma")


def f64(t):
    return t.float().cpu().numpy().astype(np.float64)


def main() -> int:
    torch.manual_seed(3)
    m, n, k = 333, 520, 208  # K x 2 B a multiple of 16 (TMA rows)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    c = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    r = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    y = ptxgen.api.fused.gemm(a, b, c=c, beta=0.5, bias=bias, activation="gelu_tanh", residual=r, spec=make_spec(**SPEC))
    scale = (torch.rand(m, device="cuda") * 0.1 + 0.01).float()
    q, amax = ptxgen.api.fused.gemm(a, b, scale=scale, out_dtype="e4m3", spec=make_spec(**{**SPEC, "epilogue": "direct"}))
    torch.cuda.synchronize()
    acc = f64(a) @ f64(b).T
    _, d, _ = chainref.chain(acc, beta=0.5, c=f64(c), bias=f64(bias), act="gelu_tanh", residual=f64(r), out="bf16")
    _, dq, am = chainref.chain(acc, scale=f64(scale), scale_mode="row", out="e4m3")
    e1 = np.abs(f64(y) - d).max() / np.abs(d).max()
    e2 = np.abs(f64(q) - dq).max() / np.abs(dq).max()
    e3 = np.abs(f64(amax) - am).max() / am.max()
    a8 = (torch.randn(m, 400, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b8 = (torch.randn(n, 400, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    sa = (torch.rand(4, m, device="cuda") + 0.5).t()
    sb = (torch.rand(5, 4, device="cuda") + 0.5).t()
    d8 = ptxgen.api.fp8blocks.gemm(a8, b8, sa, sb)
    torch.cuda.synchronize()
    r8 = bfp8model.reference(f64(a8), f64(sa), f64(b8), f64(sb))
    e4 = np.abs(f64(d8) - r8).max() / np.abs(r8).max()
    print(f"fused bf16 chain: max error {e1:.2e}; FP8 per-row: max error {e2:.2e}, amax {e3:.2e}; block FP8: max error {e4:.2e}")
    return 0 if e1 < 2e-2 and e2 < 0.07 and e3 < 1e-5 and e4 < 1e-2 else 1


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
