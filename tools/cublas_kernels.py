"""Which kernel cuBLAS (through torch) runs for a GEMM shape, and how long it takes: the kernel names of
torch.matmul (bf16) or torch._scaled_mm (e4m3, tensor-wise scales, bf16 out) under torch.profiler, K-major operands as
ptxgen's benchmarks lay them out. cuBLASLt's names carry the tile, cluster and schedule
(e.g. ``sm90_xmma_gemm_..._tilesize128x128x128_cluster1x2x1_...``), the targets a shape's gap points at.

    python tools/cublas_kernels.py bf16:3000x7000x5000 e4m3:5753x800x4224 [--json FILE]

Exit status: 0, 2 for a malformed shape, 3 without a GPU."""

from __future__ import annotations

import argparse
import json
import re
import sys


def parse(item: str) -> tuple[str, int, int, int]:
    m = re.fullmatch(r"(bf16|e4m3):(\d+)x(\d+)x(\d+)", item)
    if not m:
        raise ValueError(f"{item!r}: expected bf16:MxNxK or e4m3:MxNxK")
    return m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))


def kernels_of(torch, dtype: str, m: int, n: int, k: int, iters: int = 20) -> list[dict]:
    """[(name, mean us a call)] of the CUDA kernels one call runs (averaged over ``iters`` calls)."""
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda")
    if dtype == "e4m3":
        a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        call = lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
        call = lambda: torch.matmul(a, b.t())  # noqa: E731
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        torch.cuda.synchronize()
    rows = [{"name": e.key, "us": e.device_time_total / iters, "calls": e.count / iters}
            for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r["us"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="+", help="bf16:MxNxK or e4m3:MxNxK")
    ap.add_argument("--json", help="write the rows as JSON lines here")
    args = ap.parse_args(argv)
    try:
        shapes = [parse(s) for s in args.shapes]
    except ValueError as e:
        print(f"cublas_kernels: {e}", file=sys.stderr)
        return 2
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except Exception as e:  # noqa: BLE001 - no torch or no GPU: exit 3
        print(f"cublas_kernels: no usable GPU ({e})", file=sys.stderr)
        return 3
    out = open(args.json, "w") if args.json else None
    for dtype, m, n, k in shapes:
        for r in kernels_of(torch, dtype, m, n, k):
            row = {"shape": f"{dtype}:{m}x{n}x{k}", **r}
            print(f"{row['shape']}: {r['us']:8.1f} us  {r['name']}")
            if out:
                out.write(json.dumps(row) + "\n")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
