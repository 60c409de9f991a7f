"""What a caller of ``ptxgen.api.fp8blocks.gemm`` sees (issue 17), against torch's blockwise ``_scaled_mm`` in the same
process, as ``ptxgen bench --api`` measures ``ptxgen.gemm`` (ptxgen.api.bench.bench_api's timing helpers):

* host us per call of ``fp8blocks.gemm(a, b, scale_a, scale_b, out)`` (the kernel it picks, ``out`` given) and of
  ``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=bf16)``: loops of calls without synchronisation, the two
  sides interleaved round by round, medians;
* ``single_call_ratio``: one call alone between events after a synchronise (host launch time included), torch's time /
  ours, alternating rounds;
* ``back_to_back_ratio``: calls back to back between events (runtime.check.bench.alternate), the same ratio.

The output is checked against torch's (relative error below 1e-2). One JSON line per shape to --json. ``--columns``:
the 1x128 x 1x128 recipe instead (scale_b K/128 x N, 1 x 128 blocks of B's rows; f32 out), what ``fp8blocks.gemm``
picks for it (``columns_chosen``) against ``torch._scaled_mm`` with the same scales.

    python tools/bench_blockfp8_api.py 4096x7168x16384 128x7168x2048 --json out.jsonl
    python tools/bench_blockfp8_api.py 128x7168x16384 4096x7168x16384 --columns
"""

from __future__ import annotations

import argparse
import json
import sys

from bench_blockfp8 import column_scales, inputs  # this script's folder (tools/) is on sys.path
from ptxgen.api import fp8blocks
from ptxgen.api.bench.bench_api import _host_us, _single_ratio
from ptxgen.runtime.launch.arrays import read_array
from ptxgen.runtime.check.bench import alternate
from ptxgen.runtime.launch.gpu import NoGPU, require_gpu


def shape_row(torch, m: int, n: int, k: int, rounds: int, columns: bool = False, sm_count: int = 132) -> dict:
    a, b, sa, sb, _ = inputs(torch, m, n, k)
    if columns:
        sb = column_scales(torch, n, k)
    dt = torch.float32 if columns else torch.bfloat16
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    bt = b.t()
    calls = {"gemm": lambda: fp8blocks.gemm(a, b, sa, sb, out),
             "torch": lambda: torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=dt)}
    calls["gemm"]()
    ref = calls["torch"]().float()
    norm = torch.linalg.norm(ref)
    check = lambda: float(torch.linalg.norm(out.float() - ref) / norm)  # noqa: E731
    err = check()
    host = {nm: round(us, 2) for nm, us in _host_us(torch, calls).items()}
    single = _single_ratio(torch, calls["gemm"], calls["torch"])
    ours_ms, base_ms, worst = alternate(torch, calls["gemm"], calls["torch"], check, rounds, 5)
    spec = (fp8blocks.columns_chosen("f32", False, m, n, k, sm_count) if columns else
            fp8blocks.chosen_spec("bf16", read_array(sa, "scale_a"), m, m, n, sm_count, k=k))  # what gemm picked (lds_a = M)
    return {"m": m, "n": n, "k": k, "kernel": spec.kernel_name, "host_us": host, "single_call_ratio": round(single, 4),
            "back_to_back_ratio": round(base_ms / ours_ms, 4), "ms": [ours_ms, base_ms], "rel_error": max(err, worst)}


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = map(int, text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MxNxK") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: M, N and K are at least 1")
    return m, n, k


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="+", type=_shape, help="MxNxK ...")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--columns", action="store_true", help="the 1x128 x 1x128 recipe (f32 out) instead of 1x128 x 128x128")
    args = ap.parse_args()
    try:
        dev = require_gpu()
    except NoGPU as e:
        print(f"bench_blockfp8_api: {e}", file=sys.stderr)
        return 3
    import torch
    ok = True
    for m, n, k in args.shapes:
        shape = f"{m}x{n}x{k}"
        row = {**shape_row(torch, m, n, k, args.rounds, args.columns, dev.sm_count), "device": dev.name,
               "recipe": "1x128x1x128" if args.columns else "1x128x128"}
        h = row["host_us"]
        print(f"{shape} {row['kernel'][14:]}: host us/call fp8blocks.gemm {h['gemm']:.2f}, torch._scaled_mm {h['torch']:.2f}; "
              f"single call ratio {row['single_call_ratio']:.3f}, back-to-back ratio {row['back_to_back_ratio']:.3f} "
              f"(torch time / ours); rel error {row['rel_error']:.1e}", flush=True)
        ok &= row["rel_error"] < 1e-2
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
