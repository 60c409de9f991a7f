"""GPU: ptxgen.ops.actgrad's one pass (a Linear layer's activation backward with its bias gradient) against torch's
two operators (the activation's backward, then the sum over dz), per form of the kernel: rows whose loads a thread
issues before using any (``--rows-in-flight``) x CTAs an SM (``--ctas-per-sm``). One call alone between events (the
two launches back to back, as a backward runs them), alternating rounds, medians; every form's dz and dbias checked
against torch's first. Host time per call of both (issue only, the GPU idle at the start of each batch).

Usage: python tools/bench_actgrad.py [--shapes 8192x14336,8192x4096] [--act gelu_tanh] [--rows-in-flight 2,4,8]
           [--ctas-per-sm 8,12,16] [--rounds 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TORCH_APPROX = {"gelu_tanh": "tanh", "gelu_erf": "none"}


def torch_two(torch, dy, z, act: str):
    """torch's two operators: the activation's backward (gelu's, silu's or relu's) and the sum over dz in bf16/f16."""
    aten = torch.ops.aten
    if act == "relu":
        dz = aten.threshold_backward(dy, z, 0)
    elif act == "silu":
        dz = aten.silu_backward(dy, z)
    else:
        dz = aten.gelu_backward(dy, z, approximate=TORCH_APPROX[act])
    return dz, dz.sum(0, dtype=dy.dtype)


def bench_shape(torch, actgrad, m: int, n: int, args) -> dict:
    from ptxgen.api.bench.bench_ops import host_us, single_ms

    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    z = torch.randn_like(dy) * 2
    ref = lambda: torch_two(torch, dy, z, args.act)  # noqa: E731
    d0, b0 = ref()
    row = {"shape": f"{m}x{n}", "act": args.act, "device": torch.cuda.get_device_name(), "forms": {}}
    for rif in args.rows_in_flight:
        actgrad.ROWS_IN_FLIGHT = rif
        actgrad._BUILT.clear()
        for cps in args.ctas_per_sm:
            actgrad.CTAS_PER_SM = cps
            ours = lambda: actgrad.activation_grad(torch, dy, z, args.act, torch.bfloat16)  # noqa: E731
            d1, b1 = ours()
            torch.cuda.synchronize()
            ok = bool(((d1.float() - d0.float()).abs().max() <= 2 ** -7 * d0.float().abs().max()).item()
                      and ((b1.float() - b0.float()).abs().max() <= 2e-2 * b0.float().abs().max()).item())
            t_ref, t_ours = [], []
            for _ in range(args.rounds):
                t_ref.append(single_ms(torch, ref) * 1e3)
                t_ours.append(single_ms(torch, ours) * 1e3)
            tr, to = statistics.median(t_ref), statistics.median(t_ours)
            row["forms"][f"rif{rif}-cps{cps}"] = {"torch_us": tr, "ours_us": to, "ratio": tr / to, "checked_ok": ok,
                                                  "tb_s": 3 * dy.numel() * 2 / to / 1e6}
    row["host_us"] = host_us(torch, {"torch": ref, "ours": ours})
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="8192x14336,8192x4096")
    ap.add_argument("--act", default="gelu_tanh", choices=("relu", "gelu_tanh", "gelu_erf", "silu"))
    ap.add_argument("--rows-in-flight", default="2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--ctas-per-sm", default="8,12,16", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_actgrad: needs torch (pip install '.[bench]')", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("no usable GPU: torch sees no CUDA device", file=sys.stderr)
        return 3
    from ptxgen.ops import actgrad

    rows, bad = [], 0
    for shape in args.shapes.split(","):
        m, n = (int(x) for x in shape.split("x"))
        row = bench_shape(torch, actgrad, m, n, args)
        rows.append(row)
        for name, f in row["forms"].items():
            bad += not f["checked_ok"]
            print(f"{row['shape']} {name}: ptxgen {f['ours_us']:.1f} us ({f['tb_s']:.2f} TB/s over dy, z, dz), torch "
                  f"{f['torch_us']:.1f} us, ratio {f['ratio']:.3f}{'' if f['checked_ok'] else ' WRONG'}", flush=True)
        print(f"{row['shape']} host us/call: ptxgen {row['host_us']['ours']:.1f}, torch {row['host_us']['torch']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
