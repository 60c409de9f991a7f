"""An independent model of DeepSeek-style block-scaled FP8 GEMM (imports only the independent fragment model).

* the recipe: output (m, n) takes, for each 128-block kb of K, its partial dot product times sfa[m, kb] times
  sfb[kb, n // 128] (A: one scale per row per 128 of K; B: one per 128 x 128 block);
* a float64 reference of it, and a model of the tensor core's limited-precision FP8 accumulation (the partial sum
  rounded to ``acc_bits`` significant bits after every K = 32 wgmma, as DeepSeek-V3 reports about 14 bits; a model,
  not a measurement) with f32 promotion every ``promote_every`` of K;
* the check of a plan's per-thread scale loads: every register's partial sum must be multiplied by exactly the
  two scales the recipe gives its (row, column) at that K block.
"""

from __future__ import annotations

import numpy as np

from . import fragmodel

BLOCK = 128


def reference(a: np.ndarray, sfa: np.ndarray, b: np.ndarray, sfb: np.ndarray) -> np.ndarray:
    """float64 D (M x N) of the recipe; a: M x K values, b: N x K values, sfa: M x Kb, sfb: Kb x Nb."""
    m, k = a.shape
    n = b.shape[0]
    d = np.zeros((m, n))
    for kb in range(0, k, BLOCK):
        part = a[:, kb:kb + BLOCK].astype(np.float64) @ b[:, kb:kb + BLOCK].astype(np.float64).T
        d += part * sfa[:, kb // BLOCK][:, None] * np.repeat(sfb[kb // BLOCK], BLOCK)[None, :n]
    return d


def round_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """Round to ``bits`` significant bits (nearest)."""
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def limited_accumulate(a, sfa, b, sfb, promote_every: int | None, acc_bits: int = 14, k_step: int = 32) -> np.ndarray:
    """The recipe computed as the model tensor core does: unscaled partial sums accumulated in ``acc_bits`` bits
    (rounded after each ``k_step``), promoted (scaled by the scales of the interval's first K block, added in f32)
    every ``promote_every`` of K (None: once, at the end). Promoting less often than every 128 is the recipe only
    when the scales do not vary along K; the controls use such scales."""
    m, k = a.shape
    n = b.shape[0]
    acc = np.zeros((m, n), dtype=np.float32)
    part = np.zeros((m, n))
    every = promote_every or k
    for k0 in range(0, k, k_step):
        part = round_bits(part + a[:, k0:k0 + k_step] @ b[:, k0:k0 + k_step].T, acc_bits)
        end = k0 + k_step
        if end % every == 0 or end >= k:
            kb = k0 // BLOCK
            scale = sfa[:, kb][:, None] * np.repeat(sfb[kb], BLOCK)[None, :n]
            acc = (acc + (part * scale).astype(np.float32)).astype(np.float32)
            part = np.zeros((m, n))
    return acc.astype(np.float64)


def check_loads(loads, bn: int, kb: int, m0: int, n0: int, rows: int, kbs: int, rng) -> list[str]:
    """``loads(warp, lane)``: the plan's scale loads (operand, (i, j), registers) of one thread for K block ``kb``.
    Performs them on random distinct scale arrays and compares each register's product with the recipe's."""
    nb, ma, ka = n0 // BLOCK + 8, m0 + rows + 16, kbs + 2  # room for a wrong plan's indices
    sfa = rng.permutation(np.arange(1, ma * ka + 1)).reshape(ma, ka).astype(np.float64)
    sfb = rng.permutation(np.arange(1, ka * nb + 1)).reshape(ka, nb).astype(np.float64) * 1e6  # products stay distinct
    problems = []
    for warp in range(rows // 16):
        for lane in range(32):
            got = {}
            for operand, (i, j), regs in loads(warp, lane):
                v = sfa[i, j] if operand == "sfa" else sfb[i, j]
                for r in regs:
                    got.setdefault(r, []).append((operand, v))
            for reg in range(bn // 2):
                r, c = fragmodel.wgmma_d_coords(warp % 4, lane, reg)
                r += 64 * (warp // 4)
                want = sfa[m0 + r, kb] * sfb[kb, (n0 + c) // BLOCK]
                vals = got.get(reg, [])
                ops = sorted(o for o, _ in vals)
                prod = float(np.prod([v for _, v in vals])) if vals else None
                if ops != ["sfa", "sfb"] or prod != want:
                    problems.append(f"warp {warp} lane {lane} register {reg} (row {m0 + r}, column {n0 + c}, K block {kb}): "
                                    f"scaled by {ops} = {prod}, the recipe says {want}")
                    if len(problems) > 10:
                        return problems
    return problems
