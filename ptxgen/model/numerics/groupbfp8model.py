"""An independent model of which block scales a grouped block-FP8 GEMM must apply to each output element.

It imports nothing from ptxgen outside this package (the wgmma fragment map of ``fragmodel``, the group rows of
``groupmodel``). The recipe, per group (DeepSeek-V3's MoE layers; DeepGEMM's m-grouped contiguous layout, with the
groups given by ``torch._grouped_mm``'s cumulative ``offs``):

    D[r, c] = sum over K blocks kb of  scale_a[r, kb] x scale_b[g][kb, c // 128] x (A[r, kb-block] . B[g][c, kb-block])

for every row r of group g. ``scale_a`` is one array over the stacked rows (M_total x Kb), ``scale_b`` one Kb x Nb array
per group. The model builds both as strided views of flat memory exactly as a user's tensors are (numpy's
``as_strided`` with the tensors' element strides), so an element's value comes from the layout's definition, not from
an address formula; the checked code must read, for each stored output element and K block, the two values whose
product the recipe gives.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..layouts import fragmodel
from .bfp8model import applied_scales
from ..layouts.groupmodel import groups_of_rows

BLOCK = 128


def scale_tensors(m_total: int, groups: int, kbs: int, nbs: int, lds_a: int, lds_b: int, lds_b_group: int, rng):
    """Flat memories holding distinct values and the two logical tensors viewed on them: scale_a (M_total x Kb,
    strides (1, lds_a)) and scale_b (G x Kb x Nb, strides (lds_b_group, 1, lds_b)). The scale_b values are scaled by
    1e6 so that a product identifies both factors."""
    size_a = (kbs - 1) * lds_a + m_total
    size_b = (groups - 1) * lds_b_group + (nbs - 1) * lds_b + kbs + 8
    flat_a = rng.permutation(np.arange(1, size_a + 1)).astype(np.float64)
    flat_b = rng.permutation(np.arange(1, size_b + 1)).astype(np.float64) * 1e6
    e = flat_a.itemsize
    sa = as_strided(flat_a, (m_total, kbs), (e, lds_a * e), writeable=False)
    sb = as_strided(flat_b, (groups, kbs, nbs), (lds_b_group * e, e, lds_b * e), writeable=False)
    return flat_a, flat_b, sa, sb


def check_grouped_scales(items: Iterable[Mapping[str, int]], reads: Callable, offs: Sequence[int], m_total: int, n: int,
                         k: int, bm: int, bn: int, lds_a: int, lds_b: int, lds_b_group: int, rng,
                         kbs_checked: Sequence[int] | None = None) -> list[str]:
    """``items``: the walk under test (each with ``group``, ``a_row0`` (its first row of the stacked A and D) and ``n0``);
    ``reads(item, warp, lane, kb)``: the (operand, element offset into the flat scale array, fragment registers) a thread
    of warp ``warp`` (BM / 16 warps; warp w of slab w // 4) reads for K block ``kb``. Everything wrong: a stored element
    (row of its item's group, column < N) whose registers are scaled by anything but scale_a[r, kb] x scale_b[g][kb,
    c // 128], a read outside the arrays, an element of a group stored by no item or by two."""
    kbs, nbs = -(-k // BLOCK), -(-n // BLOCK)
    rows = groups_of_rows(offs, m_total)
    flat_a, flat_b, sa, sb = scale_tensors(m_total, len(rows), kbs, nbs, lds_a, lds_b, lds_b_group, rng)
    flats = {"sfa": flat_a, "sfb": flat_b}
    problems: list[str] = []
    seen: dict[tuple[int, int, int], int] = {}
    for kb in (range(kbs) if kbs_checked is None else kbs_checked):
        for t in items:
            g, r0, n0 = t["group"], t["a_row0"], t["n0"]
            grows = rows[g]
            for warp in range(bm // 16):
                for lane in range(32):
                    got: dict[int, list[tuple[str, float]]] = {}
                    for operand, addr, regs in reads(t, warp, lane, kb):
                        flat = flats[operand]
                        if not 0 <= addr < flat.size:
                            problems.append(f"item {t['item']} warp {warp} lane {lane} K block {kb}: {operand} element {addr} "
                                            f"outside its {flat.size}")
                            return problems
                        for reg in regs:
                            got.setdefault(reg, []).append((operand, flat[addr]))
                    for reg in range(bn // 2):
                        dr, dc = fragmodel.wgmma_d_coords(warp % 4, lane, reg)
                        r, c = r0 + 64 * (warp // 4) + dr, n0 + dc
                        if r not in grows or c >= n:
                            continue  # loaded and multiplied, never stored
                        key = (r, c, kb)
                        seen[key] = seen.get(key, 0) + 1
                        want = sa[r, kb] * sb[g, kb, c // BLOCK]
                        ops, prod = applied_scales(got.get(reg, []))
                        if ops != ["sfa", "sfb"] or prod != want:
                            problems.append(f"item {t['item']} (group {g}) row {r} column {c} K block {kb}: scaled by {ops} = "
                                            f"{prod}, the recipe says scale_a[{r}, {kb}] x scale_b[{g}][{kb}, {c // BLOCK}] = {want}")
                            if len(problems) > 10:
                                return problems
        for g, grows in enumerate(rows):
            for r in grows:
                for c in range(n):
                    count = seen.get((r, c, kb), 0)
                    if count != 1:
                        problems.append(f"group {g} row {r} column {c} K block {kb}: promoted by {count} items")
                        if len(problems) > 10:
                            return problems
    return problems
