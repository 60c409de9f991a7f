"""FP8 (e4m3) stragglers and swap-AB for 17 <= M <= 64 (issue 16; tools/gpu_s5-fp8m.sh runs it on the H200).

precompile [part]: every candidate spec below into $PTXGEN_CACHE_DIR, on every core (runtime.bench loads them cached).
run PART:   per shape, one set of inputs per candidate (the same seed: the same values), then alternating rounds in a
            rotating order over [baseline, candidate 1, candidate 2, ...] (CUDA events around back-to-back launches of
            about 2 ms, medians over the rounds; every candidate's output checked against an f32 reference before and
            after). One JSON line per (shape, candidate): us, ratio to the baseline (torch.matmul for bf16,
            torch._scaled_mm with per-tensor scales of 1 for e4m3), TFLOP/s, TB/s of the weights (B, N x K) and of A+B+D.
PART: swap (bf16 swap-AB for M in 1..128) | fp8small (e4m3 at M = 16 and 64) | fp8big (e4m3 stream-K and tiles on
            the few-wave / untuned shapes) | all.

Hypotheses written before the run (H200):
 S1 bf16, M in 17..64 against 7168 x 16384 and 16384 x 4096: a swap-AB tile 128 x BN' (BN' = M rounded up to 8 or
    16, one CTA per 128 weight rows: 56 or 128 CTAs) streams the weights at >= 3.6 TB/s like the M <= 16 kernel, and
    beats the small-m / split-k picks (0.97-0.98 of cuBLAS at M = 64) where it launches >= 100 CTAs (N = 16384); at
    N = 7168 (56 CTAs) the 64 x BN' tile (112 CTAs) is needed. At 4096 x 4096 (32-64 CTAs) split-K keeps winning.
 F1 e4m3 2512 x 10000 x 4000: the 128 x 256 persistent kernel takes 7 rounds for 6.06 rounds of tiles; its stream-K
    form (the last round's 8 tiles split 8 ways along K) gains >= 8% (0.94 -> >= 1.0 of _scaled_mm). Also 5120^3.
 F2 e4m3 64 x 7168 x 16384: the split-K pick (64 x 128, K split 2, 112 CTAs + a reduction kernel) loses to a one-pass
    kernel with the same 112 CTAs (64 x 64 tiles, or swap-AB 64 x 64 over N x M) by the reduction's 2-3 us.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys

from ptxgen.derive.spec import TileSpec
from ptxgen.isa.types import DMajor

ARCH = "sm_90a"
SMEM_STAGE_BUDGET = 200 * 1024  # bytes of stages the swap tiles take (the 16-row kernel: 10 x 18 KB)
SWAP_M = (1, 16, 17, 24, 32, 48, 64, 128)
NK = ((4096, 4096), (7168, 16384), (16384, 4096))


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _choose(dtype, m, n, k, **flags):
    from ptxgen.runtime import choose as ch

    saved = {f: getattr(ch.rules, f) for f in flags}
    try:
        for f, v in flags.items():
            setattr(ch.rules, f, v)
        return ch.choose(dtype, ARCH, m, n, k)
    finally:
        for f, v in saved.items():
            setattr(ch.rules, f, v)


def _stages(bm: int, bn: int, bk_bytes: int, cap: int) -> int:
    return max(2, min(cap, SMEM_STAGE_BUDGET // ((bm + bn) * bk_bytes)))


def swap_spec(like: TileSpec, bm: int, bn: int, stages: int | None = None) -> TileSpec:
    """The swap-AB kernel family (runtime.choose.choice.narrow_spec with an M-major D) with a bm x bn tile over N x M."""
    from ptxgen.runtime.choose.choice import narrow_spec

    st = stages or _stages(bm, bn, like.bk * like.dtype.bytes, 12 if bm == 64 else 10)
    return dataclasses.replace(narrow_spec(like, bm, bn, st), d_major=DMajor.M, split_k=1, stream_k=1)


def narrow(like: TileSpec, bm: int, bn: int, stages: int, splits: int) -> TileSpec:
    from ptxgen.runtime.choose.choice import narrow_spec
    from ptxgen.runtime.choose.narrow import split_spec

    s = narrow_spec(like, bm, bn, stages)
    return split_spec(s, splits) if splits > 1 else dataclasses.replace(s, split_k=1, d_major=DMajor.N)


def _round_up(x: int, q: int) -> int:
    return -(-x // q) * q


def groups(part: str):
    """[(dtype, m, n, k, [(label, spec, swap)])]"""
    from ptxgen.runtime.choose.costmodel import BY_NAME

    out = []
    if part in ("swap", "all"):
        like = _choose("bf16", 16, 16384, 4096).spec  # the swap-ab rule's 128 x 16 kernel
        for m in SWAP_M:
            for n, k in NK:
                pick = _choose("bf16", m, n, k)
                cands = [(f"pick:{pick.chosen_by}", pick.spec, pick.swap_ab)]
                bns = sorted({min(256, _round_up(m, 8)), min(256, _round_up(m, 16))})
                for bm in (128, 64):
                    for bn in bns:
                        cands.append((f"swap{bm}x{bn}", swap_spec(like, bm, bn), True))
                out.append(("bf16", m, n, k, cands))
    if part in ("fp8small", "all"):
        for m, n, k in ((16, 7168, 16384), (16, 16384, 4096), (64, 7168, 16384), (64, 16384, 4096), (16, 4096, 4096)):
            pick = _choose("e4m3", m, n, k)
            like = pick.spec
            cands = [(f"pick:{pick.chosen_by}", like, False)]
            for bm in (128, 64):
                cands.append((f"swap{bm}x{max(16, m)}", swap_spec(like, bm, max(16, m)), True))
            if m == 64:
                cands += [("n64x64s8", narrow(like, 64, 64, 8, 1), False), ("n64x64s6sk2", narrow(like, 64, 64, 6, 2), False),
                          ("n64x128s4sk4", narrow(like, 64, 128, 4, 4), False), ("n64x128s9sk2", narrow(like, 64, 128, 9, 2), False),
                          ("n64x256s5sk4", narrow(like, 64, 256, 5, 4), False)]
            out.append(("e4m3", m, n, k, cands))
    if part in ("fp8big", "all"):
        def cm(name, sk=1):
            return dataclasses.replace(BY_NAME[name].spec("e4m3", ARCH), stream_k=sk)

        extra = {(2512, 10000, 4000): [("p128x256sk8", cm("p128x256", 8)), ("p128x256sk4", cm("p128x256", 4)),
                                       ("p128x192sk8", cm("p128x192", 8)), ("p128x192c2sk8", cm("p128x192c2", 8)),
                                       ("p256x128", cm("p256x128")), ("pp128x128", cm("pp128x128"))],
                 (5120, 5120, 5120): [("p128x256sk8", cm("p128x256", 8)), ("p128x192c2sk8", cm("p128x192c2", 8))],
                 (5120, 5120, 5008): [("p128x192c2sk8", cm("p128x192c2", 8)), ("p128x256c2sk8", cm("p128x256c2", 8))],
                 (1504, 9008, 3024): [], (3008, 7008, 5008): [], (336, 8192, 8192): [("p128x256sk8", cm("p128x256", 8))]}
        for (m, n, k), more in extra.items():
            pick = _choose("e4m3", m, n, k)
            cands = [(f"pick:{pick.chosen_by}", pick.spec, False)]
            skp = _choose("e4m3", m, n, k, STREAM_K_FAMILIES=("16bit", "e4m3"))
            if skp.spec != pick.spec:
                cands.append((f"skrule:{skp.chosen_by}", skp.spec, False))
            cands += [(lab, s, False) for lab, s in more if s not in [c[1] for c in cands]]
            out.append(("e4m3", m, n, k, cands))
    if part in ("wide", "all"):  # run 3: what run 2 left (M = 128 against 16384 rows; e4m3 ties; a held-out swap)
        def cm(dtype, name, sk=1):
            return dataclasses.replace(BY_NAME[name].spec(dtype, ARCH), stream_k=sk)

        old_flags = dict(SMALL_M_WIDE=False, STREAM_K_WHOLE_FIRST=(), SWAP_AB_RULE=False)
        for dtype, m, n, k, more in [
                ("e4m3", 128, 16384, 4096, "wide"), ("bf16", 128, 16384, 4096, "wide"), ("e4m3", 96, 12288, 4096, ""),
                ("bf16", 96, 12288, 4096, ""), ("bf16", 2, 12716, 5128, ""), ("e4m3", 3008, 7008, 5008, "sk"),
                ("e4m3", 5120, 5120, 5008, "sk")]:
            new, old = _choose(dtype, m, n, k), _choose(dtype, m, n, k, **old_flags)
            cands = [(f"new:{new.chosen_by}", new.spec, new.swap_ab)]
            if old.spec != new.spec:
                cands.append((f"old:{old.chosen_by}", old.spec, old.swap_ab))
            if more == "wide":
                cands += [("pp128x128", cm(dtype, "pp128x128"), False), ("swap128x128", swap_spec(new.spec, 128, 128, 6), True),
                          ("n64x128s4", narrow(new.spec, 64, 128, 4, 1), False), ("n128x128s4", narrow(new.spec, 128, 128, 4, 1), False)]
            if more == "sk":
                cands += [(f"{nm}sk{s}", cm(dtype, nm, s), False) for nm, s in (("p128x192c2", 8), ("p128x256c2", 5), ("p128x192c2", 1))]
            seen, uniq = set(), []
            for c in cands:
                if c[1] not in seen:
                    seen.add(c[1])
                    uniq.append(c)
            out.append((dtype, m, n, k, uniq))
    return out


def _compile(d: dict) -> str:
    from ptxgen.derive.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.cache import compile_cached

    spec = TileSpec.from_json(d)
    try:
        r = compile_cached(render_kernel(plan_kernel(spec)), spec.kernel_name, spec.arch.value)
        return ("hit " if r.hit else "ok ") + spec.kernel_name
    except Exception as e:  # noqa: BLE001 - reported; the timed run then fails on it alone
        return f"FAIL {spec.kernel_name}: {type(e).__name__}: {str(e)[:300]}"


def precompile(part: str) -> int:
    from multiprocessing import Pool

    specs = [s.to_json() for g in groups(part) for _, s, _ in g[4]]
    uniq = list({json.dumps(s, sort_keys=True): s for s in specs}.values())
    print(f"{len(uniq)} kernels", flush=True)
    with Pool(min(os.cpu_count() or 4, len(uniq))) as pool:
        for line in pool.imap_unordered(_compile, uniq):
            print(line, flush=True)
    return 0


def run(part: str, rounds: int = 9) -> int:
    import torch

    from ptxgen.runtime.bench import BATCH_MS, _batch, _Case
    from ptxgen.runtime.gpu import require_gpu

    sms = require_gpu().sm_count
    for dtype, m, n, k, cands in groups(part):
        cases, labels = [], []
        for label, spec, swap in cands:
            try:
                cases.append(_Case(torch, spec, m, n, k, 0, sms, swap))
                labels.append((label, spec, swap))
            except Exception as e:  # noqa: BLE001 - reported, the others still run
                _emit({"dtype": dtype, "m": m, "n": n, "k": k, "label": label, "kernel": spec.kernel_name,
                       "error": f"{type(e).__name__}: {e}"[:300]})
        if not cases:
            continue
        try:
            fns = [cases[0].baseline] + [c.ours for c in cases]
            for f in fns:
                f()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - e.g. _scaled_mm refusing a shape
            _emit({"dtype": dtype, "m": m, "n": n, "k": k, "error": f"{type(e).__name__}: {e}"[:300]})
            continue
        errs = [c.error(torch) for c in cases]
        for _ in range(3):
            for f in fns:
                f()
        torch.cuda.synchronize()
        reps = [max(1, int(BATCH_MS / max(1e-3, _batch(torch, f, 3)))) for f in fns]
        times = [[] for _ in fns]
        order = list(range(len(fns)))
        for r in range(rounds):
            rot = order[r % len(order):] + order[:r % len(order)]
            for i in (rot if r % 2 == 0 else rot[::-1]):
                times[i].append(_batch(torch, fns[i], reps[i]))
        errs = [max(e, c.error(torch)) for e, c in zip(errs, cases)]
        base_us = statistics.median(times[0]) * 1e3
        eb = 1 if dtype == "e4m3" else 2
        wbytes, allbytes = n * k * eb, n * k * eb + m * k * eb + m * n * 2
        for (label, spec, swap), c, t, err in zip(labels, cases, times[1:], errs):
            us = statistics.median(t) * 1e3
            _emit({"dtype": dtype, "m": m, "n": n, "k": k, "label": label, "us": round(us, 2), "base_us": round(base_us, 2),
                   "ratio": round(base_us / us, 4), "tflops": round(2 * m * n * k / us / 1e6, 1),
                   "w_tbps": round(wbytes / us / 1e6, 3), "tbps": round(allbytes / us / 1e6, 3),
                   "base_w_tbps": round(wbytes / base_us / 1e6, 3), "err": float(f"{err:.2e}"), "ok": err <= c.tol,
                   "swap": swap, "kernel": spec.kernel_name, "spread": round((max(t) - min(t)) / statistics.median(t), 3)})
        del cases, fns
        torch.cuda.empty_cache()
    return 0


def summary(*paths: str) -> int:
    rows = [json.loads(line) for p in paths for line in open(p) if line.startswith("{")]
    by = {}
    for r in rows:
        if "label" in r and "us" in r:
            by.setdefault((r["dtype"], r["m"], r["n"], r["k"]), []).append(r)
    for (dt, m, n, k), rs in by.items():
        best = min(rs, key=lambda r: r["us"])
        print(f"{dt} {m}x{n}x{k}: base {rs[0]['base_us']:.1f} us ({rs[0]['base_w_tbps']:.2f} TB/s weights)")
        for r in sorted(rs, key=lambda r: r["us"]):
            print(f"   {r['label']:28} {r['us']:8.1f} us ratio {r['ratio']:.3f} {r['w_tbps']:.2f} TB/s w {r['tflops']:7.1f} TF "
                  f"ok={r['ok']} spread {r['spread']:.2f}{'  <- best' if r is best else ''}")
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "precompile":
        sys.exit(precompile(sys.argv[2] if len(sys.argv) > 2 else "all"))
    if mode == "run":
        sys.exit(run(sys.argv[2]))
    if mode == "summary":
        sys.exit(summary(*sys.argv[2:]))
    if mode == "list":
        for dt, m, n, k, cands in groups(sys.argv[2] if len(sys.argv) > 2 else "all"):
            print(dt, m, n, k, [(lab, s.kernel_name[22:]) for lab, s, _ in cands])
        sys.exit(0)
    sys.exit(2)
