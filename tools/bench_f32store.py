"""Benchmark (2026-12-02): f32 outputs through the direct epilogue against the wgmma TMA-store epilogue (st.shared.v2.f32, 32-column
chunks; ptxgen.derive.store.epilogue), the same kernel otherwise, on the H200. One process, alternating rounds (the order
reversed every other round), medians; method and helpers of tools/bench_blockfp8.py (its inputs, its Launch) and ptxgen.runtime.check.bench.alternate_medians.

    python tools/bench_f32store.py --json $OUT/bench_f32store.jsonl

Kinds (--kinds):
  blockfp8  block-scaled FP8 (DeepSeek recipe) 128 x 192: ``default_spec("f32")`` (direct, 5 stages, today's default)
            against ``default_spec("f32", epilogue="tma", stages=4)`` (--blockfp8-bn 192,160 adds 128 x 160 both ways); baseline torch._scaled_mm blockwise with
            out_dtype=torch.float32 where this torch takes it, else bf16 (the row says which: ``baseline_out``).
  bf16      bf16 inputs, f32 output: the chooser's kernel for the shape retyped to f32 (ptxgen.api.select.select_spec, which
            keeps the direct stores; stream-K off) against the same kernel with the TMA store (runtime.choose.tune.store_variant:
            a stage fewer only where the staging needs the room), and a fixed 128 x 256 x 64, 4-stage persistent cooperative
            kernel both ways where it is not the pick; baseline cuBLAS through ``torch.mm(a, b.t(), out_dtype=torch.float32)`` where this torch
            takes out_dtype, else none (the row says so).
One line per (shape, kind, variant): TFLOP/s, the ratio to the baseline, and on the tma line tma_over_direct (direct ms /
tma ms: > 1 means the TMA store is faster); then the geometric means. Outputs are checked: each of ours against the
baseline's (relative Frobenius error < 1e-2; bf16 without a baseline: against torch's f32 matmul of the upcast inputs), and
whether the direct and the TMA-store outputs are bitwise equal (reported, not required). Exit 1 if a check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys

from bench_blockfp8 import BATCH_MS, Launch, inputs  # tools/ (the script's folder) is on sys.path

import ptxgen.api.fp8blocks
from ptxgen.api.select import select_spec
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.isa.types import Epilogue
from ptxgen.runtime.check.bench import alternate_medians  # alternating rounds of event-timed batches, as ptxgen bench
from ptxgen.runtime.launch.gpu import require_gpu
from ptxgen.runtime.choose.tune import store_variant

BLOCKFP8_SHAPES = ["4096x7168x16384", "8192x8192x8192", "2048x7168x4096"]
BF16_SHAPES = ["4096x4096x4096", "8192x8192x8192", "2048x7168x4096"]
FIXED_BF16 = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="f32", arch="sm_90a",
                  stages=4, schedule="persistent")


def bf16_pairs(m: int, n: int, k: int) -> list[tuple[str, TileSpec, TileSpec]]:
    """(name, direct spec, TMA-store spec) for bf16 inputs -> f32."""
    pick, _ = select_spec("bf16", "sm_90a", m, n, k, out_dtype="f32")  # the TMA store since 2026-12-02 where the rules take it
    direct = make_spec(**{**pick.to_json(), "stream_k": 1, "epilogue": "direct"})
    pairs = []
    tma = store_variant(direct)
    if tma is not None:
        pairs.append(("pick", direct, tma))
    fixed = make_spec(**FIXED_BF16)
    if fixed != direct:  # else the pick's pair already times it
        pairs.append(("128x256-s4", fixed, dataclasses.replace(fixed, epilogue=Epilogue.TMA)))
    return pairs


def blockfp8_pairs(bns: tuple[int, ...] = (192,)) -> list[tuple[str, TileSpec, TileSpec]]:
    """(name, direct, TMA store) per BN: 192 is the f32 default's tile, the direct stores with 5 stages (the default before
    2026-12-02) against the TMA store with 4 (the default since); another BN (e.g. 160: a multiple of 32, not of 64, so only f32
    stages it) the same way."""
    fp8 = ptxgen.api.fp8blocks.default_spec
    return [(f"128x{bn}", fp8(out_dtype="f32", bn=bn, epilogue="direct", stages=5),
             fp8(out_dtype="f32", bn=bn, epilogue="tma", stages=4)) for bn in bns]


def _baseline(torch, kind, a, b, sa, sb):
    """(fn, its output dtype name) or (None, why)."""
    if kind == "blockfp8":
        for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            fn = (lambda dt=dt: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=dt))
            try:
                fn()
                return fn, name
            except Exception as e:  # noqa: BLE001 - this torch build refuses that output type: try the next, say which
                print(f"torch._scaled_mm blockwise out_dtype={name}: {type(e).__name__}: {e}", flush=True)
        return None, "torch._scaled_mm blockwise failed"
    fn = (lambda: torch.mm(a, b.t(), out_dtype=torch.float32))
    try:
        fn()
        return fn, "f32"
    except Exception as e:  # noqa: BLE001 - torch.mm without out_dtype: no cuBLAS f32-output baseline
        return None, f"torch.mm(..., out_dtype=torch.float32): {type(e).__name__}: {e}"


def bench_shape(torch, dev, kind: str, shape: str, rounds: int, json_path: str | None,
                bns: tuple[int, ...] = (192,)) -> tuple[bool, list[dict]]:
    m, n, k = map(int, shape.split("x"))
    if kind == "blockfp8":
        a, b, sa, sb, kb4 = inputs(torch, m, n, k)
        extra = {"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4}
        pairs = blockfp8_pairs(bns)
    else:
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(torch.bfloat16)
        b = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(torch.bfloat16)
        sa = sb = None
        extra = {}
        pairs = bf16_pairs(m, n, k)
    base, base_out = _baseline(torch, kind, a, b, sa, sb)
    if base is not None:
        ref = base().float()
    else:
        print(f"{shape} {kind}: no baseline ({base_out}); outputs checked against torch's f32 matmul", flush=True)
        ref = a.float() @ b.float().t()
    ok, rows = True, []
    flops = 2.0 * m * n * k
    for pname, direct, tma in pairs:
        ds = {v: torch.empty(m, n, device="cuda", dtype=torch.float32) for v in ("direct", "tma")}
        launches = {"direct": Launch(direct, m, n, k, a, b, ds["direct"], extra, dev, torch),
                    "tma": Launch(tma, m, n, k, a, b, ds["tma"], extra, dev, torch)}
        fns = {v: l.run for v, l in launches.items()}
        if base is not None:
            fns["baseline"] = base
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        ms = alternate_medians(torch, fns, rounds, BATCH_MS)
        identical = bool(torch.equal(ds["direct"], ds["tma"]))
        for v in ("direct", "tma"):
            err = float(torch.linalg.norm(ds[v] - ref) / torch.linalg.norm(ref))
            row = {"shape": shape, "kind": kind, "pair": pname, "variant": v, "device": dev.name,
                   "kernel": launches[v].spec.kernel_name, "stages": launches[v].spec.stages, "ms": ms[v],
                   "tflops": flops / ms[v] / 1e9, "baseline": None if base is None else
                   ("torch._scaled_mm blockwise" if kind == "blockfp8" else "torch.mm out_dtype=float32 (cuBLAS)"),
                   "baseline_out": base_out if base is not None else None,
                   "baseline_ms": ms.get("baseline"), "baseline_tflops": flops / ms["baseline"] / 1e9 if base is not None else None,
                   "ratio": ms["baseline"] / ms[v] if base is not None else None,
                   "tma_over_direct": ms["direct"] / ms["tma"] if v == "tma" else None,
                   "direct_tma_bitwise_equal": identical, "rel_error": err, "checked_ok": err < 1e-2, "rounds": rounds}
            ok &= row["checked_ok"]
            rows.append(row)
            ratio = f"ratio {row['ratio']:.3f} vs {row['baseline']} ({base_out})" if base is not None else "no baseline"
            extra_s = f", tma/direct speedup {row['tma_over_direct']:.3f}" if v == "tma" else ""
            print(f"{shape} {kind} {pname} {v}: {row['tflops']:.0f} TFLOP/s ({ms[v] * 1e3:.1f} us), {ratio}{extra_s}, "
                  f"rel error {err:.1e}, direct==tma bitwise {identical} [{row['kernel']}]", flush=True)
            if json_path:
                with open(json_path, "a") as f:
                    f.write(json.dumps(row) + "\n")
        for l in launches.values():
            l.kern.unload()
    return ok, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="blockfp8,bf16", help="comma-separated: blockfp8, bf16")
    ap.add_argument("--blockfp8-shapes", default=",".join(BLOCKFP8_SHAPES))
    ap.add_argument("--bf16-shapes", default=",".join(BF16_SHAPES))
    ap.add_argument("--blockfp8-bn", default="192", help="comma-separated BN of the block-FP8 pairs (e.g. 192,160)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    dev = require_gpu()
    ok, rows = True, []
    for kind in args.kinds.split(","):
        shapes = (args.blockfp8_shapes if kind == "blockfp8" else args.bf16_shapes).split(",")
        for shape in shapes:
            good, r = bench_shape(torch, dev, kind, shape, args.rounds, args.json,
                                  tuple(int(x) for x in args.blockfp8_bn.split(",")))
            ok &= good
            rows += r
    for kind in args.kinds.split(","):
        for pname in sorted({r["pair"] for r in rows if r["kind"] == kind}):
            sp = [r["tma_over_direct"] for r in rows if r["kind"] == kind and r["pair"] == pname and r["variant"] == "tma"]
            line = f"geomean {kind} {pname}: tma/direct speedup {math.exp(statistics.mean(map(math.log, sp))):.3f} over {len(sp)} shapes"
            for v in ("direct", "tma"):
                rs = [r["ratio"] for r in rows if r["kind"] == kind and r["pair"] == pname and r["variant"] == v and r["ratio"]]
                if rs:
                    line += f"; {v} vs baseline {math.exp(statistics.mean(map(math.log, rs))):.3f}"
            print(line, flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"geomean": True, "kind": kind, "pair": pname,
                                        "tma_over_direct": math.exp(statistics.mean(map(math.log, sp)))}) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
