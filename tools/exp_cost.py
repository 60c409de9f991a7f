"""The cost model's device runs (issue 16 item 4).

calibrate: every candidate kernel of the cost model (ptxgen.runtime.choose.costmodel.CANDIDATES) on a calibration set of shapes
           that are neither issue 16's named shapes nor the held-out 20 (checked here), against cuBLAS in the same
           process (alternating rounds, outputs checked). Prints one JSON object per (candidate, shape):
           tools/fit_cost.py turns them into ptxgen/tuning/h200_cost.json.
smallm:    variants of the BM = 64 tile at M = 1 against N = 16384 weights (not the named 1 x 16384 x 4096), to see
           whether a tile other than the small-m rule's 64 x 128 x 8-stage one streams the weights faster.
calibrate2: the candidates added after run 1 (BN = 160, 224) on the calibration shapes, and run 1's on a second
           off-sector shape.
compare:   for each shape given (MxNxK,...), the kernel the chooser picks now, the one it picked before the cost
           model (``COST_MODEL = False``) and the cost model's pick among run 1's candidates, where they differ, all
           against cuBLAS in the same process, twice each.
precompile SPECS.json: compile the specs in a file (a JSON list of spec objects) on every core, so that the timed
           process finds them in the cache.

Hypotheses written before the run (bf16, H200):
 H1 within a kernel, time = rounds x (per-tile cost + K-tiles x per-K-tile cost) fits the calibration points within 5%,
    rounds = ceil(tiles / 132) (a persistent CTA per SM, or one tile-schedule CTA per SM where shared memory allows one).
 H2 the off-sector factor (rows not on a 32-byte sector, 128-byte promotion) is >= 1.15 for 1x1 kernels and lower
    with the 2x1 multicast cluster.
 H3 2500 x 10000 x 4000 (9 rounds of 128 x 192 for 8.03 rounds of work) gains >= 8% from a tile with fewer wasted
    rounds (256 x 128 or 128 x 128 ping-pong: 6 / 12 full rounds).
"""

from __future__ import annotations

import json
import sys

# (M, N, K): rows on a line (K a multiple of 64) unless the comment says otherwise
CAL_ALIGNED = [(3072, 6144, 2048), (6144, 4096, 6144), (1536, 10240, 4096), (7168, 3584, 1024), (2304, 7168, 3072),
               (1024, 8192, 8192)]
CAL_OFF = [(3584, 6144, 3000), (6144, 2560, 4504)]  # rows 6000 B, 9008 B: 16 B past a 32-byte sector
# run 1 had (6144, 2560, 4500) here: 9000-byte rows are not 16-byte aligned, which TMA refuses (every kernel skipped it)
FIRST = ("p128x256", "p128x192", "p256x128", "pp128x128", "pp64x256", "t128x256", "t128x192", "p128x256c2", "p128x192c2",
         "p256x128c2", "n64x128", "n128x64", "n64x64")  # the candidates run 1 calibrated
CAL_SMALL = [(16384, 192, 4096), (256, 12288, 2048), (512, 8192, 3072)]  # the narrow tiles' own ground
SMALLM = [(1, 16384, 6144), (1, 12288, 4096), (16, 16384, 3072)]


def generalization_shapes(seed: int = 1601, count: int = 16) -> list[tuple[int, int, int]]:
    """A second held-out set, for the cost model itself: issue 16's held-out 20 are mostly launch-bound shapes that the
    model leaves to the older rules, so this one is drawn where the model decides (M, N log-uniform in 512..12288, K
    log-uniform in 1024..8192 and a multiple of 8; odd positions have rows off a 32-byte sector). Seeded; drawn and
    committed before run 5 measured it; none is a calibration, named or held-out shape."""
    import math
    import random

    rng = random.Random(seed)

    def lu(lo, hi):
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))

    out = []
    while len(out) < count:
        m, n, k = lu(512, 12288), lu(512, 12288), lu(1024, 8192) // 8 * 8
        k = k // 64 * 64 if len(out) % 2 == 0 else (k // 16 * 16 + 8)  # rows on a line / 16 B past a sector
        out.append((m, n, k))
    return out


def _named() -> set:
    sys.path.insert(0, "tools")
    from heldout_shapes import heldout_shapes

    named = {(5000, 5000, 5000), (3000, 7000, 5000), (1500, 9000, 3000), (4096, 4096, 5000), (333, 8192, 8192),
             (12000, 1000, 6000), (2500, 10000, 4000), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096),
             (2048, 2048, 8192), (8192, 8192, 1024), (4096, 4096, 16384)}
    named |= {(m, n, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))}
    return named | set(heldout_shapes())


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _bench(spec, m, n, k, iters, swap_ab=False, **extra):
    from ptxgen.runtime.check.bench import bench_spec

    try:
        r = bench_spec(spec, m, n, k, warmup=3, iters=iters, swap_ab=swap_ab)
    except Exception as e:  # noqa: BLE001 - a candidate that cannot run is reported, not fatal
        _emit({**extra, "m": m, "n": n, "k": k, "kernel": spec.kernel_name, "error": f"{type(e).__name__}: {e}"[:300]})
        return None
    _emit({**extra, "m": m, "n": n, "k": k, "kernel": spec.kernel_name, "ours_us": round(r.ours_ms * 1e3, 2),
           "cublas_us": round(r.cublas_ms * 1e3, 2), "ratio": round(r.ratio, 4), "ok": r.checked_ok,
           "ours_tbps": round(r.ours_tbps, 3)})
    return r


def calibrate() -> int:
    from ptxgen.runtime.choose.costmodel import CANDIDATES

    shapes = CAL_ALIGNED + CAL_OFF + CAL_SMALL
    assert not set(shapes) & _named(), "a calibration shape is a named or held-out one"
    for c in CANDIDATES:
        spec = c.spec()
        own = CAL_ALIGNED[::5] + CAL_OFF + CAL_SMALL if c.narrow else shapes
        for m, n, k in own:
            _bench(spec, m, n, k, 10, cand=c.name)
    return 0


def calibrate2() -> int:
    """Run 3: the candidates added after run 1 on every calibration shape; run 1's big candidates on the second
    off-sector shape (run 1's was not 16-byte aligned)."""
    from ptxgen.runtime.choose.costmodel import CANDIDATES

    shapes = CAL_ALIGNED + CAL_OFF + CAL_SMALL
    assert not set(shapes) & _named(), "a calibration shape is a named or held-out one"
    for c in CANDIDATES:
        if c.name not in FIRST:
            for m, n, k in shapes:
                _bench(c.spec(), m, n, k, 10, cand=c.name)
    for c in CANDIDATES:
        if c.name in FIRST and not c.narrow:
            m, n, k = CAL_OFF[1]
            _bench(c.spec(), m, n, k, 10, cand=c.name)
    return 0


def smallm_variants():
    from ptxgen.derive.tile.spec import make_spec

    base = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16", bk=64,
                schedule="tile")
    out = []
    for bm, bn, stages, s in ((64, 128, 8, 1), (64, 128, 4, 1), (64, 128, 6, 1), (64, 64, 8, 1), (64, 64, 4, 1),
                              (64, 256, 4, 2), (64, 256, 5, 2), (64, 128, 4, 2)):
        out.append(make_spec(bm=bm, bn=bn, stages=stages, split_k=s, **base))
    return out


def smallm() -> int:
    assert not set(SMALLM) & _named()
    for m, n, k in SMALLM:
        for spec in smallm_variants():
            _bench(spec, m, n, k, 15, cand="smallm")
    return 0


def _first_candidates_choice(ch, m, n, k):
    """The cost model's pick among run 1's candidates only (the model that run 2 validated)."""
    model = ch.costmodel.CostModel
    saved = model.costs
    model.costs = lambda self, dtype, arch: {name: c for name, c in saved(self, dtype, arch).items() if name in FIRST}
    try:
        return ch.choose("bf16", "sm_90a", m, n, k)
    finally:
        model.costs = saved


def compare(shapes_arg: str) -> int:
    from ptxgen.runtime import choose as ch

    if shapes_arg == "generalization":
        shapes = generalization_shapes()
        assert not set(shapes) & (_named() | set(CAL_ALIGNED + CAL_OFF + CAL_SMALL))
        tag = "generalization"
    else:
        shapes = [tuple(int(x) for x in item.split("x")) for item in shapes_arg.split(",")]
        tag = "issue16"
    for m, n, k in shapes:
        new = ch.choose("bf16", "sm_90a", m, n, k)
        ch.rules.COST_MODEL, ch.rules.SWAP_FIT_RULE = False, False  # old: the rules before the cost model (and its swap-ab for M > 128)
        try:
            old = ch.choose("bf16", "sm_90a", m, n, k)
        finally:
            ch.rules.COST_MODEL, ch.rules.SWAP_FIT_RULE = True, True
        ch.rules.SWAP_FIT_RULE = False
        try:
            noswap = ch.choose("bf16", "sm_90a", m, n, k)  # the chooser before the swap rule
            first = _first_candidates_choice(ch, m, n, k)
        finally:
            ch.rules.SWAP_FIT_RULE = True
        sides = [("new", new), ("old", old)] + ([("first", first)] if first.spec not in (new.spec, old.spec) else [])
        if noswap.spec not in [c.spec for _, c in sides]:
            sides.append(("noswap", noswap))
        if len({c.spec for _, c in sides}) == 1:
            continue
        for side, c in sides + sides:
            _bench(c.spec, m, n, k, 10 if tag == "generalization" else 15, swap_ab=c.swap_ab, side=side, chosen_by=c.chosen_by,
                   set=tag)
    return 0


def band(shapes_arg: str) -> int:
    """A timing experiment, not a shipped kernel: the rows of M past the last whole 128-row tile band, M1 = M - M % 128,
    run as a small-M problem (the chooser's kernel for (M - M1) x N x K, split-K where its rule says) after the chooser's
    kernel for M1 x N x K, the two launched back to back, against cuBLAS on the whole M x N x K. Each part's output is
    checked against its own reference; the two parts use separate inputs (only the time is compared)."""
    import torch

    from ptxgen.runtime.check.bench import _Case, alternate
    from ptxgen.runtime.choose import choose
    from ptxgen.runtime.launch.gpu import require_gpu

    dev = require_gpu()
    for item in shapes_arg.split(","):
        m, n, k = (int(x) for x in item.split("x"))
        m1 = m - m % 128
        if m1 in (0, m) or m - m1 > 128:
            continue
        c1, c2, cw = choose("bf16", "sm_90a", m1, n, k), choose("bf16", "sm_90a", m - m1, n, k), choose("bf16", "sm_90a", m, n, k)
        p1 = _Case(torch, c1.spec, m1, n, k, 0, dev.sm_count)
        p2 = _Case(torch, c2.spec, m - m1, n, k, 1, dev.sm_count)
        whole = _Case(torch, cw.spec, m, n, k, 2, dev.sm_count)

        def both():
            p1.ours()
            p2.ours()

        ours, base, worst = alternate(torch, both, whole.baseline, lambda: max(p1.error(torch), p2.error(torch)), 15, 3)
        alone, base2, _ = alternate(torch, whole.ours, whole.baseline, lambda: whole.error(torch), 15, 3)
        _emit({"m": m, "n": n, "k": k, "m1": m1, "band_us": round(ours * 1e3, 2), "cublas_us": round(base * 1e3, 2),
               "band_ratio": round(base / ours, 4), "whole_us": round(alone * 1e3, 2), "whole_ratio": round(base2 / alone, 4),
               "worst_err": worst, "parts": [c1.spec.kernel_name, c2.spec.kernel_name], "whole": cw.spec.kernel_name})
        for c in (p1, p2, whole):
            c.kernel.unload()
    return 0


def all_specs() -> list:
    from ptxgen.runtime.choose.costmodel import CANDIDATES

    return [c.spec() for c in CANDIDATES] + smallm_variants()


def _compile(d: dict) -> str:
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import TileSpec
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = TileSpec.from_json(d)
    try:
        compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, spec.arch.value)
        return "ok " + spec.kernel_name
    except Exception as e:  # noqa: BLE001
        return f"FAIL {spec.kernel_name}: {type(e).__name__}: {str(e)[:200]}"


def precompile(specs: list[dict]) -> int:
    from multiprocessing import Pool

    uniq = list({json.dumps(s, sort_keys=True): s for s in specs}.values())
    with Pool(min(14, max(1, len(uniq)))) as pool:
        for line in pool.imap_unordered(_compile, uniq):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    mode = sys.argv[1]
    if mode == "calibrate":
        sys.exit(calibrate())
    if mode == "calibrate2":
        sys.exit(calibrate2())
    if mode == "smallm":
        sys.exit(smallm())
    if mode == "band":
        sys.exit(band(sys.argv[2]))
    if mode == "compare":
        sys.exit(compare(sys.argv[2]))
    if mode == "precompile":
        if len(sys.argv) > 2:
            from ptxgen.runtime import choose as ch

            specs = []
            gen = [f"{m}x{n}x{k}" for m, n, k in generalization_shapes()]
            for item in sys.argv[2].split(",") + gen:
                m, n, k = (int(x) for x in item.split("x"))
                parts = [(m, n, k)] + ([(m - m % 128, n, k), (m % 128, n, k)] if m > 128 and m % 128 else [])
                for mm, nn, kk in parts:
                    specs.append(ch.choose("bf16", "sm_90a", mm, nn, kk).spec.to_json())
                    ch.rules.SWAP_FIT_RULE = False
                    specs.append(ch.choose("bf16", "sm_90a", mm, nn, kk).spec.to_json())
                    ch.rules.COST_MODEL = False
                    specs.append(ch.choose("bf16", "sm_90a", mm, nn, kk).spec.to_json())
                    ch.rules.COST_MODEL = True
                    specs.append(_first_candidates_choice(ch, mm, nn, kk).spec.to_json())
                    ch.rules.SWAP_FIT_RULE = True
        else:
            specs = [s.to_json() for s in all_specs()]
        sys.exit(precompile(specs))
    sys.exit(2)
