"""Benchmark (issue 33): dense row-wise FP8, ``ptxgen.scaled_gemm`` (the chosen dense e4m3 kernel with the chain's
rowscale step, the bias fused) against ``torch._scaled_mm``'s row-wise recipe (scale_a M x 1, scale_b 1 x N,
cuBLASLt) in both of torch's accumulation modes: ``use_fast_accum=True`` (no promotion, as ptxgen's kernel: the like
for like comparison) and torch's default (promoted: more accurate). The same tensors, one process, alternating rounds
(25 ms batches, medians), with and without a bf16 bias. Shapes are M x N x K. Each row checks ptxgen's output against
torch's and against float64 on a block of rows (exit 1 if a check fails).

    python tools/bench_rowwise.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 [--rounds 20] [--json OUT.jsonl]
    python tools/bench_blockfp8.py --rowwise ...   (the same)
"""

from __future__ import annotations

import json

from ptxgen.runtime.check.bench import alternate_medians

BATCH_MS = 25.0
CHECK_ROWS = 256  # rows compared with float64 (the whole output with torch's)


def inputs(torch, m, n, k):
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda", generator=gen) + 0.5
    sb = torch.rand(1, n, device="cuda", generator=gen) + 0.5
    bias = torch.randn(n, device="cuda", generator=gen).bfloat16()
    return a, b, sa, sb, bias


def rel(torch, got, ref) -> float:
    return float(torch.linalg.norm(got.double() - ref.double()) / max(float(torch.linalg.norm(ref.double())), 1e-30))


def row(torch, shape: str, with_bias: bool, rounds: int) -> dict:
    import ptxgen
    import ptxgen.api

    m, n, k = map(int, shape.split("x"))
    a, b, sa, sb, bias = inputs(torch, m, n, k)
    bias = bias if with_bias else None
    fns = {"ptxgen": lambda: ptxgen.scaled_gemm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias),
           "torch-fast": lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, bias=bias, out_dtype=torch.bfloat16,
                                                  use_fast_accum=True),
           "torch": lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, bias=bias, out_dtype=torch.bfloat16)}
    outs = {nm: f() for nm, f in fns.items()}
    torch.cuda.synchronize()
    ms = alternate_medians(torch, fns, rounds, BATCH_MS)
    r = slice(0, min(m, CHECK_ROWS))
    exact = (a[r].double() @ b.double().T) * sa[r].double() * sb.double() + (0 if bias is None else bias.double())
    flops = 2.0 * m * n * k
    out = {"shape": shape, "bias": with_bias, "device": torch.cuda.get_device_name(), "rounds": rounds}
    for mode, ours, theirs in (("fast", "ptxgen", "torch-fast"), ("default", "ptxgen", "torch")):
        out[mode] = {"ptxgen_ms": ms[ours], "torch_ms": ms[theirs], "speedup": ms[theirs] / ms[ours],
                     "ptxgen_tflops": flops / ms[ours] / 1e9, "torch_tflops": flops / ms[theirs] / 1e9,
                     "rel_vs_torch": rel(torch, outs[ours], outs[theirs]), "rel_vs_f64": rel(torch, outs[ours][r], exact),
                     "torch_rel_vs_f64": rel(torch, outs[theirs][r], exact),
                     "kernel": ptxgen.api.plan("scaled_gemm", a, b, sa, sb, bias=bias).kernel}
    return out


def main(shapes, rounds: int, json_path: str | None) -> int:
    import sys

    import torch

    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

    try:
        require_gpu()
    except NoGPU as e:
        print(f"bench_rowwise: no usable GPU: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("bench_rowwise: torch sees no CUDA device", file=sys.stderr)
        return 3

    ok = True
    for shape in shapes:
        for with_bias in (False, True):
            r = row(torch, shape, with_bias, rounds)
            for mode in ("fast", "default"):
                x = r[mode]
                good = x["rel_vs_torch"] < 1e-2 and x["rel_vs_f64"] < 1e-2  # against torch's fast mode: 1e-5 measured
                ok &= good
                print(f"{shape:>18} bias={str(with_bias):5} {mode:7} ptxgen {x['ptxgen_ms']:.3f} ms ({x['ptxgen_tflops']:.0f} "
                      f"TFLOP/s)  torch {x['torch_ms']:.3f} ms ({x['torch_tflops']:.0f})  x{x['speedup']:.3f}  rel vs torch "
                      f"{x['rel_vs_torch']:.1e}, vs f64 {x['rel_vs_f64']:.1e} (torch {x['torch_rel_vs_f64']:.1e})"
                      f"{'' if good else '  CHECK FAILED'}  {x['kernel']}", flush=True)
            if json_path:
                with open(json_path, "a") as f:
                    f.write(json.dumps(r) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    import argparse
    import sys

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*", default=["4096x7168x16384", "8192x8192x8192", "2048x7168x4096"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sys.exit(main(args.shapes, args.rounds, args.json))
