"""One K-grouped row-wise FP8 GEMM against float64 in a process of its own, for compute-sanitizer
(tests/test_kgrouped_fp8_door.py::test_compute_sanitizer_clean_on_the_fp8_kgrouped_flagship):

    compute-sanitizer --tool memcheck python tests/kgrouped_fp8_sanitizer_case.py

The flagship: M = 200, N = 136 (partial tiles), K_total = 528, groups of 0, 1, 0, 128, 131, 7, 250 K rows (empty
groups, a group of 1 K row, tails and heads that are not multiples of 128 or 16, K rows past the last group), e4m3 x
e5m2, bf16 out. Prints one JSON line and exits 0 when every element is within the GPU tests' tolerance."""

import json
import sys

import numpy as np
import torch

import ptxgen


def main() -> int:
    m, n, k_total = 200, 136, 528
    offs_list = np.cumsum([0, 1, 0, 128, 131, 7, 250]).tolist()
    g = len(offs_list)
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k_total, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, k_total, device="cuda", generator=gen).to(torch.float8_e5m2)
    sa = torch.rand(g * m, device="cuda", generator=gen) + 0.5
    sb = torch.rand(g * n, device="cuda", generator=gen) + 0.5
    offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
    out = ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs)
    torch.cuda.synchronize()
    worst, lo = 0.0, 0
    for i, hi in enumerate(offs_list):
        ref = torch.zeros(m, n, dtype=torch.float64, device="cuda")
        if hi > lo:
            ref = a[:, lo:hi].double() @ b[:, lo:hi].double().t()
        ref = ref * sa.double()[i * m:(i + 1) * m, None] * sb.double()[i * n:(i + 1) * n][None, :]
        worst = max(worst, float(((out[i].double() - ref).abs() / (ref.abs() * 2e-2 + 5e-2)).max()))
        lo = max(lo, hi)
    passed = worst <= 1.0
    print(json.dumps({"kernel": "offs_k_rowwise", "groups": g, "worst": worst, "passed": passed}), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
