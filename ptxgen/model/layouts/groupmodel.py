"""An independent model of the grouped GEMM's work: which tiles must exist, what each tile reads and stores.

Imports nothing from ptxgen. It is given a walk, a list of work items in order, each a mapping with the keys
``group``, ``a_row0`` (the first row of A the tile loads), ``b_row0`` (the first row of B's (G x N) x K view it
loads), ``n0`` (its first column of D) and ``row_end`` (rows of D at or past it are not stored), and it checks,
for the ``torch._grouped_mm`` convention (group g owns rows offs[g - 1] .. offs[g] - 1 of A and D, b[g] is its
N x K weight):

* coverage: every element (r, c) of D with r in some group and c < N is stored by exactly one work item, and
  no other element of D is stored;
* operands: the item that stores (r, c) multiplies A's row r and B's row g N + c of the flat view, g being r's
  group, i.e. the right rows of the right group's weight;
* the tile grid: the items are exactly the (group, tile row, tile column) triples of every non-empty group,
  each once (a bijection), with a_row0 = the group's start + tile row x BM and n0 = tile column x BN.

:func:`simulate` runs a walk on small integer matrices the way the kernel computes (BM x BN tiles loaded
through 2-D views with zeros past the tensors, stores masked) and returns D, to compare with per-group
products.

Groups here follow torch's definition with one addition that the kernel makes for safety: offsets that
decrease or pass M_total are clamped (a group never starts before the previous one ends, never ends past
M_total).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np


def groups_of_rows(offs: Sequence[int], m_total: int) -> list[range]:
    """The rows of each group: group g is rows [offs[g-1], offs[g]) (offs[-1] = 0), clamped into [prev end, M]."""
    out, lo = [], 0
    for end in offs:
        hi = int(end)
        if hi < lo:
            hi = lo
        if hi > m_total:
            hi = m_total
        out.append(range(lo, hi))
        lo = hi
    return out


def expected_tiles(offs: Sequence[int], m_total: int, n: int, bm: int, bn: int) -> set[tuple[int, int, int]]:
    """Every (group, tile row, tile column) a grouped GEMM must compute."""
    cols = (n + bn - 1) // bn
    want = set()
    for g, rows in enumerate(groups_of_rows(offs, m_total)):
        for t in range((len(rows) + bm - 1) // bm):
            for u in range(cols):
                want.add((g, t, u))
    return want


def check_walk(walk: Iterable[Mapping[str, int]], offs: Sequence[int], m_total: int, n: int, bm: int, bn: int) -> list[str]:
    """Everything wrong with ``walk`` (empty: it computes exactly the grouped product)."""
    walk = list(walk)
    groups = groups_of_rows(offs, m_total)
    group_of_row = np.full(m_total, -1, dtype=np.int64)
    for g, rows in enumerate(groups):
        group_of_row[rows.start:rows.stop] = g
    errs: list[str] = []
    stored = np.zeros((m_total, n), dtype=np.int64)
    seen: dict[tuple[int, int, int], int] = {}
    for i, w in enumerate(walk):
        g, a0, b0, n0, end = (int(w[k]) for k in ("group", "a_row0", "b_row0", "n0", "row_end"))
        if not 0 <= g < len(groups):
            errs.append(f"item {i}: group {g} is not one of the {len(groups)} groups")
            continue
        rows = groups[g]
        if (a0 - rows.start) % bm or n0 % bn or a0 < rows.start:
            errs.append(f"item {i}: tile origin (row {a0}, column {n0}) is not on group {g}'s {bm} x {bn} tile grid "
                        f"(its rows start at {rows.start})")
            continue
        key = (g, (a0 - rows.start) // bm, n0 // bn)
        if key in seen:
            errs.append(f"item {i}: tile {key} was already computed by item {seen[key]}")
        seen[key] = i
        # The elements this item stores, and for each the A row and B row it multiplied.
        r_hi = min(a0 + bm, end, m_total)
        c_hi = min(n0 + bn, n)
        if r_hi <= a0 or c_hi <= n0:
            continue
        r = np.arange(a0, r_hi)
        c = np.arange(n0, c_hi)
        bad_rows = r[group_of_row[r] != g]
        if bad_rows.size:
            errs.append(f"item {i} (group {g}) stores rows {bad_rows.min()}..{bad_rows.max()} of D that belong to "
                        f"{'no group' if (group_of_row[bad_rows] < 0).all() else 'another group'}")
        b_rows = b0 + (c - n0)
        want_b = g * n + c
        if not np.array_equal(b_rows, want_b):
            errs.append(f"item {i} (group {g}) multiplies B rows {b_rows[0]}..{b_rows[-1]} of the (G x N) x K view into "
                        f"columns {n0}..{c_hi - 1}; group {g}'s weight rows are {want_b[0]}..{want_b[-1]}")
        stored[a0:r_hi, n0:c_hi] += 1
    want = expected_tiles(offs, m_total, n, bm, bn)
    missing = sorted(want - set(seen))
    extra = sorted(set(seen) - want)
    if missing:
        errs.append(f"{len(missing)} tile(s) never computed, first {missing[:3]}")
    if extra:
        errs.append(f"{len(extra)} tile(s) outside every group's grid, first {extra[:3]}")
    in_group = group_of_row >= 0
    twice = np.argwhere(stored > 1)
    if twice.size:
        errs.append(f"{len(twice)} element(s) of D stored more than once, first (row, col) {tuple(twice[0])}")
    never = np.argwhere((stored == 0) & in_group[:, None])
    if never.size:
        errs.append(f"{len(never)} element(s) of D in a group never stored, first (row, col) {tuple(never[0])}")
    stray = np.argwhere((stored > 0) & ~in_group[:, None])
    if stray.size:
        errs.append(f"{len(stray)} element(s) of D outside every group stored, first (row, col) {tuple(stray[0])}")
    return errs


def _rows(x: np.ndarray, start: int, count: int) -> np.ndarray:
    """Rows start .. start + count - 1 of x, zeros past its end (TMA's out-of-bounds fill)."""
    out = np.zeros((count, x.shape[1]), dtype=x.dtype)
    hi = min(start + count, x.shape[0])
    if hi > start:
        out[: hi - start] = x[start:hi]
    return out


def simulate(walk: Iterable[Mapping[str, int]], a: np.ndarray, b: np.ndarray, bm: int, bn: int,
             fill: int = -7) -> np.ndarray:
    """D as a kernel running ``walk`` computes it: a is M_total x K, b is G x N x K (read as one (G N) x K
    matrix); each item multiplies the BM rows of A and BN rows of B it loads and stores the rows below its
    ``row_end`` and the columns below N. Elements no item stores keep ``fill``."""
    m_total = a.shape[0]
    g_count, n, k = b.shape
    flat = b.reshape(g_count * n, k)
    d = np.full((m_total, n), fill, dtype=np.int64)
    for w in walk:
        a0, b0, n0, end = (int(w[key]) for key in ("a_row0", "b_row0", "n0", "row_end"))
        acc = _rows(a, a0, bm).astype(np.int64) @ _rows(flat, b0, bn).astype(np.int64).T
        r_hi, c_hi = min(a0 + bm, end, m_total), min(n0 + bn, n)
        if r_hi > a0 and c_hi > n0:
            d[a0:r_hi, n0:c_hi] = acc[: r_hi - a0, : c_hi - n0]
    return d


def reference(a: np.ndarray, b: np.ndarray, offs: Sequence[int], fill: int = -7) -> np.ndarray:
    """Per-group products: D[rows of g] = A[rows of g] @ b[g]^T; rows in no group keep ``fill``."""
    d = np.full((a.shape[0], b.shape[1]), fill, dtype=np.int64)
    for g, rows in enumerate(groups_of_rows(offs, a.shape[0])):
        if len(rows):
            d[rows.start:rows.stop] = a[rows.start:rows.stop].astype(np.int64) @ b[g].astype(np.int64).T
    return d
