"""One K-grouped GEMM with 1 x 128 scales on both operands against the float64 model in a process of its own, for
compute-sanitizer (tests/test_kgrouped_1d1d.py::test_compute_sanitizer_clean_on_the_1d1d_kgrouped_flagship):

    compute-sanitizer --tool memcheck python tests/kgrouped_1d1d_sanitizer_case.py

The flagship: M = 200, N = 136 (partial tiles), groups of 128, 0, 256, 100 and 77 K rows with K_total = 561 (an empty
group, a group off the 128-blocks: NaN, a last group ending at K_total mid-block), f32 out. Prints one JSON line and
exits 0 when every computed element is within the GPU test's bound and exactly the group off the blocks is NaN."""

import json
import sys

import numpy as np
import torch

import ptxgen
from ptxgen.model.numerics import kgroupbfp8model as model


def main() -> int:
    sizes = [128, 0, 256, 100, 77]
    ends = np.cumsum(sizes).tolist()
    m, n, k = 200, 136, ends[-1]
    kb = -(-k // 128)
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = (torch.randn(m, k, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
    sa = (torch.rand(kb, m, device="cuda", generator=gen) + 0.5).t()
    sb = torch.rand(kb, n, device="cuda", generator=gen) + 0.5
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    out = ptxgen.blockscaled_grouped_gemm_k(a, b, sa, sb, offs)
    torch.cuda.synchronize()
    an, bn, san, sbn = a.float().cpu().numpy(), b.float().cpu().numpy(), sa.t().cpu().numpy(), sb.cpu().numpy()
    want = model.reference(an, bn, san, sbn, ends)
    magnitude = model.reference(np.abs(an), np.abs(bn), san, sbn, ends)
    got = out.cpu().numpy()
    nan_ok = bool((np.isnan(got) == np.isnan(want)).all())
    ok = ~np.isnan(want)
    worst = float((np.abs(got[ok] - want[ok]) / (1e-6 * np.abs(want[ok]) + 2.0 ** -9 * magnitude[ok] + 1e-30)).max())
    passed = nan_ok and worst <= 1.0
    print(json.dumps({"kernel": "offs_k 1x128x1x128", "groups": len(ends), "worst": worst, "nan_groups_ok": nan_ok,
                      "passed": passed}), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
