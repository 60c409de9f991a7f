"""Few waves and rows off a sector (2026-12-01, issue 16, bf16): which kernels beat the shipped picks, in one process.

Each mode is one device command; give it a timeout.

precompile:  compile every spec the sweep runs (on every core; the timed process then finds them in the cache).
swap:        swap-AB (D^T = B A^T, an M-major D: ``--d-major m``) for 128 < M <= 512 against wide N x K, where M padded
             to 128-row tiles wastes work: BN' a multiple of 8 that covers M in few tiles (333 -> 2 x 168 = 336 rows),
             against the chooser's pick, on 333 x 8192 x 8192 and on shapes that are none of issue 16's named or held-out
             ones (the rule's calibration and its controls: shapes where the swap should lose by the tile arithmetic).
big:         the chooser's pick for the unaligned / few-wave shapes against other stream-K split counts, other tiles,
             a raster group of 16, and (run 1) the 2x1 multicast cluster with ping-pong consumers (64 x 256).
swap run2 / big run2 / precompile run2: the second device run (SWAP_CHECK, BIG_RUN2).
Each (shape, kernel) runs twice, interleaved (all kernels of a shape, then all again), 10 alternating rounds against
cuBLAS in the same process each time, outputs checked against an f32 reference. One JSON object per line.

Hypotheses written before the run (bf16, H200):
 H1 333 x 8192 x 8192: the swapped 128 x 168 tile (128 CTAs, 336 of 333 rows useful) runs >= 8% faster than the tuned
    128 x 192 tile (129 CTAs, 384 rows for 333), since each CTA does 168/192 = 0.875 of the work in the one wave.
 H2 the swapped 128 x 192 tile on 333 x 8192 x 8192 (the same padding as the unswapped one) runs within 3% of the
    unswapped 128 x 192 tile: the M-major direct stores cost little in a K = 8192 loop.
 H3 where the swap leaves fewer CTAs busy for a wider tile (450 x 6144 x 8192: 96 CTAs of 128 x 232 against 128 of
    128 x 192; 250 x 10240 x 8192: 80 of 128 x 256 against 108 of 128 x 192), it loses (the rule must not take it).
"""

from __future__ import annotations

import dataclasses
import json
import sys

SWAP_SHAPES = [(333, 8192, 8192), (300, 8192, 8192), (400, 8192, 6144), (350, 16384, 4096), (250, 10240, 8192),
               (450, 6144, 8192), (200, 8192, 8192)]
# (BN', stages) of swapped 128 x BN' tiles run beside the chooser's pick (which is itself swapped where the rule takes it):
# variants for 333, and the swap where the rule declines it (the controls of H3; 200 x 8192 x 8192 with BN' = 104, which
# SWAP_MIN_BN keeps out, and with one tile of 200)
SWAP_TILES = {(333, 8192, 8192): [(168, 5), (176, 5), (192, 5)], (350, 16384, 4096): [(176, 5)],
              (250, 10240, 8192): [(256, 4)], (450, 6144, 8192): [(232, 4)], (200, 8192, 8192): [(104, 6), (200, 5)]}
BIG_SHAPES = [(5000, 5000, 5000), (3000, 7000, 5000), (2500, 10000, 4000), (1500, 9000, 3000), (5200, 4800, 5000),
              (2800, 7400, 5200), (2600, 9600, 3800)]
# (candidate, stream-K splits: 0 = the cost model's best for that kernel, 1 = none, or a count; extra fields)
BIG_VARIANTS = [("p128x256c2", 4, {}), ("p128x256c2", 16, {}), ("p128x256c2", 0, {"raster_group": 16}),
                ("p128x192c2", 0, {}), ("p128x256", 0, {})]
# run 1 also ran ("pp64x256", 1, {"cluster": "2x1"}): 0.70-0.76 of cuBLAS on 5000^3 and 3000 x 7000 x 5000; left out since


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _named() -> set:
    sys.path.insert(0, "tools")
    from exp_cost import _named as named

    return named()


def swap_spec(bn: int, stages: int):
    from ptxgen.derive.tile.spec import make_spec

    return make_spec(bm=128, bn=bn, bk=64, stages=stages, schedule="tile", epilogue="direct", d_major="m",
                     a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16")


def _variant(name: str, s: int, extra: dict, m: int, n: int, k: int, off: bool):
    from ptxgen.isa.types import Cluster
    from ptxgen.runtime.choose.costmodel import BY_NAME, best_streamk, shipped_costs

    spec = BY_NAME[name].spec()
    if "cluster" in extra:
        spec = dataclasses.replace(spec, cluster=Cluster(extra["cluster"]))
    if "raster_group" in extra:
        spec = dataclasses.replace(spec, raster_group=extra["raster_group"])
    if s == 0:
        sk = best_streamk(BY_NAME[name], shipped_costs("16bit")[1][name], m, n, k, off_sector=off)
        s = sk.splits if sk is not None else 1
    return dataclasses.replace(spec, stream_k=s)


def _off(k: int) -> bool:
    return (k * 2) % 32 != 0


def _sides(m, n, k):
    """[(label, spec, swap_ab)] for one shape."""
    from ptxgen.runtime import choose as ch

    pick = ch.choose("bf16", "sm_90a", m, n, k)
    sides = [("pick " + pick.chosen_by, pick.spec, pick.swap_ab)]
    ch.rules.SWAP_FIT_RULE = False
    try:
        before = ch.choose("bf16", "sm_90a", m, n, k)  # the chooser before the swap rule
    finally:
        ch.rules.SWAP_FIT_RULE = True
    if before.spec != pick.spec:
        sides.append(("before " + before.chosen_by, before.spec, before.swap_ab))
    if (m, n, k) in SWAP_SHAPES + SWAP_CHECK:
        sides += [(f"swap 128x{bn} s{st}", swap_spec(bn, st), True) for bn, st in SWAP_TILES.get((m, n, k), [])]
    else:
        ch.rules.STREAM_K_RULE = False
        try:
            nosk = ch.choose("bf16", "sm_90a", m, n, k)
        finally:
            ch.rules.STREAM_K_RULE = True
        if nosk.spec != pick.spec:  # (run 1 launched a swapped pick here unswapped: an illegal address, fixed)
            sides.append(("pick without stream-K " + nosk.chosen_by, nosk.spec, nosk.swap_ab))
        for name, s, extra in BIG_VARIANTS:
            try:
                spec = _variant(name, s, extra, m, n, k, _off(k))
            except Exception as e:  # noqa: BLE001 - an illegal variant is reported
                _emit({"m": m, "n": n, "k": k, "variant": name, "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            if all(spec != x for _, x, _ in sides):
                sides.append((f"{name} S={spec.stream_k} {extra or ''}".strip(), spec, False))
    return sides


# run 2: the rule's picks on shapes it swaps that run 1 did not measure (none fitted, none named or held out), and the
# big sweep's shapes that run 1 lost to its illegal address
SWAP_CHECK = [(207, 16384, 8192), (455, 8192, 8192), (331, 8200, 8192)]
BIG_RUN2 = [(2500, 10000, 4000), (1500, 9000, 3000), (2800, 7400, 5200), (2600, 9600, 3800)]


def all_specs(shapes=None) -> list:
    out = []
    for m, n, k in shapes or (SWAP_SHAPES + BIG_SHAPES):
        out += [s.to_json() for _, s, _ in _sides(m, n, k)]
    return out


def _bench(label, spec, swap, m, n, k, rnd, iters=10):
    from ptxgen.runtime.check.bench import bench_spec

    try:
        r = bench_spec(spec, m, n, k, warmup=3, iters=iters, swap_ab=swap)
    except Exception as e:  # noqa: BLE001 - a kernel that cannot run is reported, not fatal
        _emit({"m": m, "n": n, "k": k, "side": label, "round": rnd, "kernel": spec.kernel_name,
               "error": f"{type(e).__name__}: {e}"[:300]})
        return
    _emit({"m": m, "n": n, "k": k, "side": label, "round": rnd, "kernel": spec.kernel_name, "swap_ab": swap,
           "ours_us": round(r.ours_ms * 1e3, 2), "cublas_us": round(r.cublas_ms * 1e3, 2), "ratio": round(r.ratio, 4),
           "ok": r.checked_ok, "rel_err": r.rel_error})


def sweep(shapes) -> int:
    named = _named()
    for m, n, k in shapes:
        sides = _sides(m, n, k)
        for rnd in (1, 2):
            for label, spec, swap in sides:
                _bench(label, spec, swap, m, n, k, rnd)
        _emit({"m": m, "n": n, "k": k, "named_or_heldout": (m, n, k) in named, "done": True})
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    mode = sys.argv[1]
    if mode == "precompile":
        sys.path.insert(0, "tools")
        from exp_cost import precompile

        sys.exit(precompile(all_specs(SWAP_CHECK + BIG_RUN2 if sys.argv[2:] == ["run2"] else None)))
    if mode == "swap":
        sys.exit(sweep(SWAP_CHECK if sys.argv[2:] == ["run2"] else SWAP_SHAPES))
    if mode == "big":
        sys.exit(sweep(BIG_RUN2 if sys.argv[2:] == ["run2"] else BIG_SHAPES))
    sys.exit(f"unknown mode {mode}")
