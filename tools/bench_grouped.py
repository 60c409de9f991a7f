"""Grouped GEMM (issue 18) against torch._grouped_mm on the same inputs, in one process, alternating rounds.

Cases (bf16 in, f32 accumulate, bf16 out; N = 4096, K = 7168; b is G x N x K contiguous, torch gets the
same memory as b.transpose(-2, -1)):
  8x2048    8 groups of 2048 rows
  64x0-512  64 groups of 0..512 rows, seeded (numpy default_rng(seed).integers(0, 513, 64))
  8x1-256   8 groups of 1..256 rows, seeded (the weight-bandwidth-bound regime)
  GxR       G groups of R rows; GxLO-HI: G groups of LO..HI rows, seeded (numpy default_rng(seed).integers(LO, HI + 1, G))
  --b-major mn: b is an N-major view instead (G x K x N memory seen as G x N x K; torch gets the memory as G x K x N)
  fp8-8x2048  e4m3 with row-wise scales: ptxgen.scaled_grouped_gemm against torch._scaled_grouped_mm (bf16 out)
  k-GxMxN/T  K-grouped (the weight gradient of G experts): ptxgen.grouped_gemm_k(dy.t(), x.t(), offs) against
             torch._grouped_mm(dy.t(), x, offs=offs), out G x M x N bf16; dy T x M and x T x N row-major (both operands
             MN-major views), T routed tokens split over the experts seeded (numpy default_rng(seed).multinomial(T, [1/G] * G));
             --kgrouped runs the two cases k-8x4096x14336/8192 and k-128x2048x1536/32768
  fk-GxMxN/T K-grouped row-wise FP8: ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs) against
             torch._scaled_grouped_mm(a, b.t(), sa, sb, offs=offs, out_dtype=torch.bfloat16) with a M x T and b N x T
             e4m3 (K-major: the tokens contiguous, as FP8 operands must be), scale_a of G M and scale_b of G N f32, the
             tokens split as for k-; --kgrouped-fp8 runs fk-8x4096x14336/8192 and fk-128x2048x1536/32768
  bk-GxMxN/T K-grouped with 1 x 128 scales on both operands (DeepGEMM's k-grouped 1D1D): ptxgen.blockscaled_grouped_gemm_k
             (a, b, sa, sb, offs, out), f32 out, against a loop over the groups of torch._scaled_mm with BlockWise1x128
             scales on both operands (the group sizes read on the host; a dequantize + torch.mm per group where this
             torch build refuses the recipe), a M x T and b N x T e4m3 K-major, scale_a M x T/128 outer-dim-major,
             scale_b T/128 x N; whole 128-token blocks per expert (the recipe's group boundaries); --kgrouped-1d1d runs
             bk-8x4096x14336/8192 and bk-4x4096x7168/32768 (DeepGEMM's first SM90 case's shape)

Per case and kernel: medians of alternating rounds (ptxgen.runtime.check.bench.alternate: ours, torch, torch, ours, ...),
each round's output checked against torch's (relative Frobenius error over the grouped rows), TFLOP/s of the
useful work (2 x rows x N x K), weight bandwidth (G x N x K x 2 bytes / time) and host time per call (the Python
call without synchronizing, averaged over many calls, the GPU kept busy by them). ptxgen writes into one
preallocated out; torch._grouped_mm allocates its output each call (from its caching allocator). The geometric mean of the
ratios (torch time / ours) of the default kernel is printed last.
--variants NAME,... (k- cases): each named K-grouped kernel (ptxgen.kgrouped.KGROUPED_VARIANTS; "all"; "default" is what
grouped_gemm_k runs, always timed first) in its own alternating rounds against torch._grouped_mm, out refilled with NaN
before each, so a kernel that writes nothing is WRONG; per kernel the geometric mean of its ratios over the cases.
fk- cases take the names of ptxgen.kgrouped.KGROUPED_FP8_VARIANTS the same way (against torch._scaled_grouped_mm); a
name of only one table is timed on that table's cases.
Usage: python tools/bench_grouped.py [--json out.jsonl] [--rounds 20] [--candidates] [--cases 8x2048,64x0-512] [--kgrouped]
       [--kgrouped-fp8] [--kgrouped-1d1d] [--variants tma,tma-n256]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

import ptxgen
from ptxgen.derive.tile.spec import make_spec
from ptxgen.grouped import compile_grouped, grouped_spec, small_groups
from ptxgen.runtime.check.bench import alternate

torch = None  # imported by main (tools/grouped_warm.py reads CANDIDATES without torch)

N, K = 4096, 7168
# other grouped tiles measured with --candidates (the default is what ptxgen.grouped_gemm picks: 128 x 256 x 64, or the
# 64 x 256 ping-pong tile below when the mean rows per group is under ptxgen.grouped.SMALL_GROUP_ROWS)
CANDIDATES = [
    dict(bm=128, bn=256, bk=64, stages=4, epilogue="tma"),
    dict(bm=128, bn=192, bk=64, stages=4, raster_group=16, epilogue="tma"),
    dict(bm=64, bn=256, bk=64, stages=4, consumers="pingpong", raster_group=16, epilogue="tma"),
    dict(bm=128, bn=128, bk=64, stages=5, consumers="pingpong", raster_group=16, epilogue="tma"),
]


def sizes_of(case: str, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    try:
        g, rows = case.split("x")
        g = int(g)
        if "-" in rows:
            lo, hi = map(int, rows.split("-"))
            return [int(x) for x in rng.integers(lo, hi + 1, g)]
        return [int(rows)] * g
    except ValueError:
        raise SystemExit(f"unknown case {case!r} (GxR or GxLO-HI)") from None


def host_us(fn, calls: int = 200) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def run_fp8_case(case: str, rounds: int, seed: int, log) -> list[dict]:
    """e4m3 inputs, f32 row-wise scales (scale_a per row, scale_b per group and column), bf16 out."""
    sizes = sizes_of(case.removeprefix("fp8-"), seed)
    g, m = len(sizes), sum(sizes)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.randn(m, K, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(g, N, K, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    sa = torch.rand(m, device="cuda", generator=gen) + 0.5
    sb = torch.rand(g, N, device="cuda", generator=gen) + 0.5
    offs = torch.tensor(np.cumsum(sizes), device="cuda", dtype=torch.int32)
    bt = b.transpose(-2, -1)
    out = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)
    label = f"scaled {grouped_spec('e4m3', rowwise=True).kernel_name}"

    def base():
        return torch._scaled_grouped_mm(a, bt, sa, sb, offs=offs, out_dtype=torch.bfloat16)

    def ours():
        return ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs, out)

    try:
        ref = base().float()
        ref_norm = float(torch.linalg.norm(ref))
        ours()
        torch.cuda.synchronize()
        check = lambda: float(torch.linalg.norm(out.float() - ref)) / max(ref_norm, 1e-30)  # noqa: E731
        ours_ms, base_ms, err = alternate(torch, ours, base, check, rounds, 3)
        ours_host, base_host = host_us(ours), host_us(base)
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"{case} {label}: FAILED {type(e).__name__}: {e}", file=log, flush=True)
        return [{"case": case, "kernel": label, "error": f"{type(e).__name__}: {e}"}]
    flops, weight_bytes = 2.0 * m * N * K, 1.0 * g * N * K
    r = {"case": case, "kernel": label, "groups": g, "rows": m, "n": N, "k": K, "seed": seed, "ours_ms": ours_ms,
         "torch_ms": base_ms, "ratio": base_ms / ours_ms, "ours_tflops": flops / ours_ms / 1e9, "torch_tflops": flops / base_ms / 1e9,
         "ours_weight_tbs": weight_bytes / ours_ms / 1e9, "torch_weight_tbs": weight_bytes / base_ms / 1e9,
         "ours_host_us": ours_host, "torch_host_us": base_host, "rel_error": err, "ok": err < 1e-2, "rounds": rounds}
    print(f"{case} ({g} groups, {m} rows) {label}: ptxgen {ours_ms:.3f} ms {r['ours_tflops']:.1f} TFLOP/s "
          f"{r['ours_weight_tbs']:.2f} TB/s weights, host {ours_host:.1f} us | torch._scaled_grouped_mm {base_ms:.3f} ms "
          f"{r['torch_tflops']:.1f} TFLOP/s, host {base_host:.1f} us | ratio {r['ratio']:.3f} rel err {err:.1e} "
          f"{'ok' if r['ok'] else 'WRONG'}", file=log, flush=True)
    return [r]


KGROUPED_CASES = "k-8x4096x14336/8192,k-128x2048x1536/32768"
KGROUPED_FP8_CASES = "fk-8x4096x14336/8192,fk-128x2048x1536/32768"
KGROUPED_1D1D_CASES = "bk-8x4096x14336/8192,bk-4x4096x7168/32768"


def run_k_case(case: str, rounds: int, seed: int, log, variants: tuple[str, ...] = ()) -> list[dict]:
    """K-grouped: out[g] = dy[tokens g].T @ x[tokens g], G x M x N bf16, both operands MN-major views; fk-: row-wise
    FP8, a = dy.T and b = x.T K-major e4m3 with scale_a G M and scale_b G N. ``variants`` (k- cases): names of
    ptxgen.kgrouped.KGROUPED_VARIANTS timed after the default kernel, each against torch in its own alternating rounds."""
    fp8 = case.startswith("fk-")
    try:
        shape, tokens = case.removeprefix("fk-" if fp8 else "k-").split("/")
        g, m, n = map(int, shape.split("x"))
        t = int(tokens)
    except ValueError:
        raise SystemExit(f"unknown case {case!r} (k-GxMxN/T or fk-GxMxN/T)") from None
    # FP8: whole 16-token blocks per expert (torch._scaled_grouped_mm asserts each group's K is a multiple of 16 bytes)
    block = 16 if fp8 else 1
    sizes = np.random.default_rng(seed).multinomial(t // block, [1.0 / g] * g) * block
    gen = torch.Generator(device="cuda").manual_seed(seed)
    offs = torch.tensor(np.cumsum(sizes), device="cuda", dtype=torch.int32)
    out = torch.empty(g, m, n, device="cuda", dtype=torch.bfloat16)
    from ptxgen.kgrouped import KGROUPED_VARIANTS, grouped_gemm_k_variant, kgrouped_spec

    if fp8:
        a = torch.randn(m, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        sa = torch.rand(g * m, device="cuda", generator=gen) + 0.5
        sb = torch.rand(g * n, device="cuda", generator=gen) + 0.5
        from ptxgen.kgrouped import fp8_variant

        picked = fp8_variant("bf16", m)
        label = f"kgrouped fp8 default ({picked}) {kgrouped_spec('e4m3', None, 'sm_90a', 'k', 'k', rowwise=True, variant=picked).kernel_name}"

        def base():
            return torch._scaled_grouped_mm(a, b.t(), sa, sb, offs=offs, out_dtype=torch.bfloat16)

        from ptxgen.kgrouped import KGROUPED_FP8_VARIANTS, scaled_grouped_gemm_k_variant

        def fp8_spec(v):
            return kgrouped_spec("e4m3", None, "sm_90a", "k", "k", rowwise=True, variant=v)

        kernels = [(label, lambda: ptxgen.scaled_grouped_gemm(a, b, sa, sb, offs, out))]
        kernels += [(f"kgrouped fp8 {v} {fp8_spec(v).kernel_name}",
                     lambda v=v: scaled_grouped_gemm_k_variant(a, b, sa, sb, offs, out, variant=v))
                    for v in variants if v in KGROUPED_FP8_VARIANTS and v != picked]
    else:
        dy = torch.randn(t, m, device="cuda", generator=gen).to(torch.bfloat16)
        x = torch.randn(t, n, device="cuda", generator=gen).to(torch.bfloat16)

        def base():
            return torch._grouped_mm(dy.t(), x, offs=offs)

        kernels = [(f"kgrouped default {kgrouped_spec().kernel_name}", lambda: ptxgen.grouped_gemm_k(dy.t(), x.t(), offs, out))]
        kernels += [(f"kgrouped {v} {kgrouped_spec(variant=v).kernel_name}",
                     lambda v=v: grouped_gemm_k_variant(dy.t(), x.t(), offs, out, variant=v))
                    for v in variants if v in KGROUPED_VARIANTS and kgrouped_spec(variant=v) != kgrouped_spec()]  # not twice
    ref = base().float()
    ref_norm = float(torch.linalg.norm(ref))
    results = []
    for label, ours in kernels:
        out.fill_(float("nan"))  # a kernel that writes nothing fails the check, whatever ran before it
        timed = time_against(ours, base, lambda: float(torch.linalg.norm(out.float() - ref)) / max(ref_norm, 1e-30), rounds,
                             case, label, log, results)
        if timed is None:
            continue
        results.append(_k_record(case, label, (g, m, n, t, seed), timed, rounds,
                                 "torch._scaled_grouped_mm" if fp8 else "torch._grouped_mm", log))
    return results


def _k_record(case: str, label: str, problem: tuple, timed: tuple, rounds: int, baseline: str, log) -> dict:
    """One K-grouped case's JSON row (and its printed line) from time_against's result."""
    g, m, n, t, seed = problem
    ours_ms, base_ms, err, ours_host, base_host = timed
    flops = 2.0 * t * m * n
    r = {"case": case, "kernel": label, "baseline": baseline, "groups": g, "m": m, "n": n, "tokens": t, "seed": seed,
         "ours_ms": ours_ms, "torch_ms": base_ms, "ratio": base_ms / ours_ms, "ours_tflops": flops / ours_ms / 1e9,
         "torch_tflops": flops / base_ms / 1e9, "ours_host_us": ours_host, "torch_host_us": base_host, "rel_error": err,
         "ok": err < 1e-2, "rounds": rounds}
    print(f"{case} ({g} experts, {m} x {n}, {t} tokens) {label}: ptxgen {ours_ms:.3f} ms {r['ours_tflops']:.1f} TFLOP/s, "
          f"host {ours_host:.1f} us | {baseline} {base_ms:.3f} ms {r['torch_tflops']:.1f} TFLOP/s, host {base_host:.1f} us"
          f" | ratio {r['ratio']:.3f} rel err {err:.1e} {'ok' if r['ok'] else 'WRONG'}", file=log, flush=True)
    return r


def run_blocks_k_case(case: str, rounds: int, seed: int, log) -> list[dict]:
    """bk-GxMxN/T: the K-grouped 1D1D door against a per-group loop of torch's blockwise recipe (see the module)."""
    try:
        shape, tokens = case.removeprefix("bk-").split("/")
        g, m, n = map(int, shape.split("x"))
        t = int(tokens)
    except ValueError:
        raise SystemExit(f"unknown case {case!r} (bk-GxMxN/T)") from None
    sizes = np.random.default_rng(seed).multinomial(t // 128, [1.0 / g] * g) * 128
    ends = np.cumsum(sizes).tolist()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, t, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    sa = (torch.rand(t // 128, m, device="cuda", generator=gen) + 0.5).t()  # M x T/128, outer-dim-major
    sb = torch.rand(t // 128, n, device="cuda", generator=gen) + 0.5
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    out = torch.empty(g, m, n, device="cuda", dtype=torch.float32)
    ranges = list(zip([0] + ends[:-1], ends))

    def one(lo, hi):
        return torch._scaled_mm(a[:, lo:hi], b[:, lo:hi].t(), scale_a=sa[:, lo // 128:hi // 128],
                                scale_b=sb[lo // 128:hi // 128], out_dtype=torch.float32)

    def dequant(lo, hi):
        ea = sa[:, lo // 128:hi // 128].repeat_interleave(128, 1)
        eb = sb[lo // 128:hi // 128].t().repeat_interleave(128, 1)
        return torch.mm((a[:, lo:hi].float() * ea).bfloat16(), (b[:, lo:hi].float() * eb).bfloat16().t(),
                        out_dtype=torch.float32)

    per_group, name = one, "torch._scaled_mm BlockWise1x128 x BlockWise1x128, one call a group"
    try:
        lo, hi = next((r for r in ranges if r[1] > r[0]), (0, 128))
        one(lo, hi)
    except Exception as e:  # noqa: BLE001 - this torch build refuses the recipe
        print(f"{case}: torch._scaled_mm with 1x128 scales on both failed ({type(e).__name__}: {e}); baseline: dequantize "
              "+ torch.mm per group", file=log, flush=True)
        per_group, name = dequant, "dequantize + torch.mm per group (bf16 operands, f32 out)"

    def base():
        res = torch.empty(g, m, n, device="cuda", dtype=torch.float32)
        for gi, (lo, hi) in enumerate(ranges):
            if hi > lo:
                res[gi] = per_group(lo, hi)
            else:
                res[gi].zero_()
        return res

    ref = base()
    ref_norm = float(torch.linalg.norm(ref))
    from ptxgen.kgrouped import kgrouped_spec

    label = f"kgrouped 1d1d {kgrouped_spec('e4m3', None, 'sm_90a', 'k', 'k', blocks=True).kernel_name}"
    results: list = []
    out.fill_(float("nan"))
    timed = time_against(lambda: ptxgen.blockscaled_grouped_gemm_k(a, b, sa, sb, offs, out), base,
                         lambda: float(torch.linalg.norm(out - ref)) / max(ref_norm, 1e-30), rounds, case, label, log, results)
    if timed is not None:
        results.append(_k_record(case, label, (g, m, n, t, seed), timed, rounds, name, log))
    return results


def k_variant_names(text: str) -> tuple[str, ...]:
    """--variants: comma-separated names of ptxgen.kgrouped.KGROUPED_VARIANTS or KGROUPED_FP8_VARIANTS, "default" (what
    grouped_gemm_k and scaled_grouped_gemm run) or "all" (both tables); SystemExit (usage, exit 2) naming the legal ones
    for another name."""
    from ptxgen.kgrouped import KGROUPED_FP8_VARIANTS, KGROUPED_VARIANTS

    legal = tuple(KGROUPED_VARIANTS) + tuple(v for v in KGROUPED_FP8_VARIANTS if v not in KGROUPED_VARIANTS)
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return legal
    bad = [v for v in names if v != "default" and v not in legal]
    if bad:
        print(f"bench_grouped.py: error: unknown --variants {', '.join(bad)}; legal: default, all, "
              f"{', '.join(legal)}", file=sys.stderr)
        raise SystemExit(2)
    return tuple(names)


def time_against(ours, base, check, rounds: int, case: str, label: str, log, results: list):
    """(ours ms, torch ms, check's error, ours host us, torch host us) of one kernel against torch's, alternating rounds;
    None after reporting (and recording in ``results``) a kernel that failed."""
    try:
        ours()
        torch.cuda.synchronize()
        ours_ms, base_ms, err = alternate(torch, ours, base, check, rounds, 3)
        return ours_ms, base_ms, err, host_us(ours), host_us(base)
    except Exception as e:  # noqa: BLE001 - report and go on with the next kernel
        print(f"{case} {label}: FAILED {type(e).__name__}: {e}", file=log, flush=True)
        results.append({"case": case, "kernel": label, "error": f"{type(e).__name__}: {e}"})
        return None


def run_case(case: str, kernels: list[tuple[str, object]], rounds: int, seed: int, log, b_major: str = "k") -> list[dict]:
    sizes = sizes_of(case, seed)
    g, m = len(sizes), sum(sizes)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    if b_major == "mn":  # b an N-major view (G x N x K, stride 1 along N) of G x K x N memory; torch gets that memory as is
        b = torch.randn(g, K, N, device="cuda", dtype=torch.bfloat16, generator=gen).transpose(-2, -1)
    else:
        b = torch.randn(g, N, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    offs = torch.tensor(np.cumsum(sizes), device="cuda", dtype=torch.int32)
    bt = b.transpose(-2, -1)
    out = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)

    def base():
        return torch._grouped_mm(a, bt, offs=offs)

    ref = base().float()
    torch.cuda.synchronize()
    ref_norm = float(torch.linalg.norm(ref))
    flops = 2.0 * m * N * K
    weight_bytes = 2.0 * g * N * K
    results = []
    picked = grouped_spec("bf16", small=small_groups(m, g), **({"b_major": "mn"} if b_major == "mn" else {})).kernel_name
    for label, kern in kernels:
        label = f"default {picked}" if label.startswith("default") else label

        def ours(kern=kern):
            return kern(a, b, offs, out)

        timed = time_against(ours, base, lambda: float(torch.linalg.norm(out.float() - ref)) / max(ref_norm, 1e-30), rounds,
                             case, label, log, results)
        if timed is None:
            continue
        ours_ms, base_ms, err, ours_host, base_host = timed
        r = {
            "case": case, "kernel": label, "b_major": b_major, "groups": g, "rows": m, "n": N, "k": K, "seed": seed,
            "ours_ms": ours_ms, "torch_ms": base_ms, "ratio": base_ms / ours_ms,
            "ours_tflops": flops / ours_ms / 1e9, "torch_tflops": flops / base_ms / 1e9,
            "ours_weight_tbs": weight_bytes / ours_ms / 1e9, "torch_weight_tbs": weight_bytes / base_ms / 1e9,
            "ours_host_us": ours_host, "torch_host_us": base_host, "rel_error": err, "ok": err < 1e-2, "rounds": rounds,
        }
        results.append(r)
        print(f"{case} ({g} groups, {m} rows) {label}: ptxgen {r['ours_ms']:.3f} ms {r['ours_tflops']:.1f} TFLOP/s "
              f"{r['ours_weight_tbs']:.2f} TB/s weights, host {ours_host:.1f} us | torch._grouped_mm {base_ms:.3f} ms "
              f"{r['torch_tflops']:.1f} TFLOP/s {r['torch_weight_tbs']:.2f} TB/s, host {base_host:.1f} us | ratio {r['ratio']:.3f} "
              f"rel err {err:.1e} {'ok' if r['ok'] else 'WRONG'}", file=log, flush=True)
    return results  # its tensors die with this frame (the closures above hold them); main empties the cache


def main() -> int:
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="append one JSON line per case and kernel")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="8x2048,64x0-512,8x1-256,fp8-8x2048")
    ap.add_argument("--candidates", action="store_true", help="also measure the CANDIDATES tiles")
    ap.add_argument("--b-major", choices=("k", "mn"), default="k",
                    help="mn: b is an N-major view (G x K x N memory); bf16 cases only")
    ap.add_argument("--kgrouped", action="store_true", help=f"the K-grouped cases only ({KGROUPED_CASES})")
    ap.add_argument("--kgrouped-fp8", action="store_true", help=f"the K-grouped row-wise FP8 cases only ({KGROUPED_FP8_CASES})")
    ap.add_argument("--kgrouped-1d1d", action="store_true",
                    help=f"the K-grouped cases with 1 x 128 scales on both operands only ({KGROUPED_1D1D_CASES})")
    ap.add_argument("--variants", default="",
                    help="k- and fk- cases: also time these ptxgen.kgrouped.KGROUPED_VARIANTS / KGROUPED_FP8_VARIANTS "
                         "(comma-separated, or all)")
    args = ap.parse_args()
    variants = k_variant_names(args.variants)
    if args.kgrouped or args.kgrouped_fp8 or args.kgrouped_1d1d:
        args.cases = ",".join(c for flag, c in ((args.kgrouped, KGROUPED_CASES), (args.kgrouped_fp8, KGROUPED_FP8_CASES),
                                                (args.kgrouped_1d1d, KGROUPED_1D1D_CASES)) if flag)
    import torch

    dev = torch.cuda.get_device_name()
    print(f"device {dev}, torch {torch.__version__}, ptxgen {ptxgen.__version__}", flush=True)
    default = grouped_spec("bf16")
    kernels = [("default (grouped_gemm's pick)", lambda a, b, offs, out: ptxgen.grouped_gemm(a, b, offs, out))]
    if args.candidates:
        for c in CANDIDATES:
            spec = make_spec(**{**default.to_json(), **c})
            kernels.append((spec.kernel_name, compile_grouped(spec)))
    all_results = []
    for case in args.cases.split(","):
        if case.startswith("fp8-"):
            all_results += run_fp8_case(case, args.rounds, args.seed, sys.stdout)
        elif case.startswith(("k-", "fk-")):
            all_results += run_k_case(case, args.rounds, args.seed, sys.stdout, variants)
            torch.cuda.empty_cache()
        elif case.startswith("bk-"):
            all_results += run_blocks_k_case(case, args.rounds, args.seed, sys.stdout)
            torch.cuda.empty_cache()
        else:
            all_results += run_case(case, kernels, args.rounds, args.seed, sys.stdout, args.b_major)
            torch.cuda.empty_cache()  # the case's inputs and outputs, freed when run_case returned
    if args.json:
        with open(args.json, "a") as f:
            for r in all_results:
                f.write(json.dumps(r) + "\n")
    ratios = [r["ratio"] for r in all_results if r.get("kernel", "").startswith("default") and "ratio" in r]
    if ratios:
        print(f"default bf16 kernel: geometric mean ratio (torch time / ptxgen time) {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} "
              f"over {len(ratios)} case(s)", flush=True)
    by_kernel: dict = {}
    for r in all_results:
        if r.get("kernel", "").startswith("kgrouped ") and "ratio" in r:
            by_kernel.setdefault(r["kernel"].split()[1], []).append(r["ratio"])
    for name, rs in by_kernel.items():
        if len(rs) > 1:
            print(f"kgrouped {name}: geometric mean ratio (torch time / ptxgen time) "
                  f"{math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)} case(s)", flush=True)
    bad = [r for r in all_results if not r.get("ok")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
