"""Fit a calibration's constants from measured points (``ptxgen tune --calibrate``, tools/fit_cost.py): least squares.

A point is a dict: ``cand`` (a name of ``candidates.CANDIDATES``), ``m``, ``n``, ``k``, ``ours_us`` (the kernel's time),
``ours_tbps`` (A + B + D bytes over that time), ``ok`` (the output checked) and ``dtype`` (bf16 when absent). Per kernel,
over its points with rows on a 32-byte sector, least squares of the relative error of

    t = launch + rounds x tile + rounds x k_tiles x ktile        (all >= 0; ``costmodel``'s formula)

on ``sm_count`` SMs; the off-sector factor is the median over its off-sector points of (t - launch - rounds x tile) /
(rounds x k_tiles x ktile); the bandwidth floor is the highest A + B + D rate any point reached (TB/s). The swapped
family (``fit_swap``): points with ``swap_bn`` (BN'), t = launch + rounds x tile + rounds x k_tiles x ktile x BN' /
SWAP_FAMILY_BN over ceil(N / 128) x ceil(M / BN') CTAs.
"""

from __future__ import annotations

import statistics

import numpy as np

from .candidates import BY_NAME, COST_FAMILY, k_tiles
from .costmodel import SWAP_BM, SWAP_FAMILY_BN, rounds, tile_grid

SECTOR_BYTES = 32
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "e4m3": 1}
MIN_POINTS = 3  # on-sector points a kernel needs to be fitted (three constants)


def off_sector(k: int, element_bytes: int = 2) -> bool:
    return (k * element_bytes) % SECTOR_BYTES != 0


def _dtype(p: dict) -> str:
    return p.get("dtype", "bf16")


def _lstsq(rows: list[list[float]], t: list[float]) -> list[float]:
    """Non-negative constants minimising the relative error (each row divided by its time: points weigh alike)."""
    y = np.array(t, dtype=float)
    x, *_ = np.linalg.lstsq(np.array(rows, dtype=float) / y[:, None], np.ones_like(y), rcond=None)
    return [max(0.0, float(v)) for v in x]


def fit_family(points: list[dict], sm_count: int, arch: str = "sm_90a", source: str = "") -> dict:
    """A calibration family (its JSON object) from the points of one input family; ValueError for points of two."""
    pts = [p for p in points if p.get("ok") and "ours_us" in p and p.get("cand") in BY_NAME and "swap_bn" not in p]
    types = {_dtype(p) for p in pts}
    if len({COST_FAMILY[t] for t in types}) != 1:
        raise ValueError(f"points of {sorted(types)}: one input family per fit")
    eb = ELEMENT_BYTES[next(iter(types))]
    bw = max(p["ours_tbps"] for p in pts)
    kernels = {}
    for name, c in BY_NAME.items():
        mine = [p for p in pts if p["cand"] == name]
        on = [p for p in mine if not off_sector(p["k"], eb)]
        if len(on) < MIN_POINTS:
            continue
        rnd = {id(p): rounds(tile_grid(p["m"], p["n"], c.bm, c.bn, c.cluster_m), sm_count) for p in mine}
        launch, tile, ktile = _lstsq([[1.0, rnd[id(p)], rnd[id(p)] * k_tiles(p["k"], eb)] for p in on],
                                     [p["ours_us"] for p in on])
        offs = [(p["ours_us"] - launch - rnd[id(p)] * tile) / (rnd[id(p)] * k_tiles(p["k"], eb) * ktile)
                for p in mine if off_sector(p["k"], eb) and ktile > 0]
        kernels[name] = {"launch_us": round(launch, 2), "tile_us": round(tile, 3), "ktile_us": round(ktile, 4),
                         "off_sector": round(statistics.median(offs), 3) if offs else 1.0,
                         "bandwidth_tbps": round(bw, 2), "slots_per_sm": 1, "points": len(mine)}
    return {"dtype": COST_FAMILY[next(iter(types))], "arch": arch, "sm_count": sm_count, "source": source,
            "kernels": kernels}


def swap_rounds(m: int, n: int, bn: int, sm_count: int) -> int:
    return rounds(-(-n // SWAP_BM) * -(-m // bn), sm_count)


def fit_swap(points: list[dict], sm_count: int, source: str = "") -> dict | None:
    """The swapped family's ``swap`` entry from points with ``swap_bn`` and rows on a sector; None with too few."""
    pts = [p for p in points if p.get("ok") and "ours_us" in p and p.get("swap_bn") and not off_sector(p["k"])]
    if len(pts) < MIN_POINTS:
        return None

    def row(p: dict) -> list[float]:
        r = swap_rounds(p["m"], p["n"], p["swap_bn"], sm_count)
        return [1.0, r, r * k_tiles(p["k"]) * p["swap_bn"] / SWAP_FAMILY_BN]

    launch, tile, ktile = _lstsq([row(p) for p in pts], [p["ours_us"] for p in pts])
    return {"family": f"s{SWAP_BM}xN (swap-AB, tile schedule, M-major stores)", "per_bn": SWAP_FAMILY_BN,
            "launch_us": round(launch, 2), "tile_us": round(tile, 3), "ktile_us": round(ktile, 4), "points": len(pts),
            "source": source}
