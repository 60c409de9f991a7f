"""Bridge: the direct epilogue's stores of D (``ptxgen.derive.store.output`` and the rendered fragment expressions) against
the independent model of where each element belongs (``model.layouts.outmodel``).

The writer side is the plan: the C expressions the template places (the fragment's row and column, the element offset
``offset_expr``, the step ``next_col_expr`` to the next column, whether the pair is one vector), evaluated here as
Python, and the template's guards (row < M; the pair's columns < N). The reader side is independent: which element
each accumulator register holds (``fragmodel``) and where D's layout puts it (``outmodel.address``).
"""

from __future__ import annotations

import functools

from ..layouts import outmodel
from ...derive.store.output import DirectStore


@functools.lru_cache(maxsize=None)
def _code(expr: str):
    return compile(expr.replace("static_cast<size_t>", "").replace("/", "//"), "<plan expression>", "eval")


def c_eval(expr: str, **env: int) -> int:
    """Evaluate one of the plan's C integer expressions (``/`` is C's integer division; size_t casts dropped)."""
    return int(eval(_code(expr), {"__builtins__": {}}, env))


def simulate(plan: DirectStore, bm: int, bn: int, m: int, n: int, ldd: int, row_expr: str | None = None,
             col_expr: str | None = None) -> list:
    """What the direct epilogue stores for an M x N problem: (element offset, (row, col) of the register's element) per
    store. ``row_expr``/``col_expr``: the template's fragment coordinates (C, in ``i``, ``wg_tid``, ``lane``; None: the
    fragment model's)."""
    stores = []
    for m0 in range(0, m, bm):
        for n0 in range(0, n, bn):
            held = {}
            for slab, warp, lane, i, element in outmodel.fragment_elements(bm, bn, m0, n0):
                held[(slab, warp, lane, i)] = element
            for (slab, warp, lane, i), element in held.items():
                if i % 2:
                    continue  # the template's loop takes the pairs (i, i + 1)
                env = dict(i=i, wg_tid=32 * warp + lane, lane=lane)
                row = m0 + outmodel.SLAB_ROWS * slab + (c_eval(row_expr, **env) if row_expr else element[0] - m0 - outmodel.SLAB_ROWS * slab)
                col = n0 + (c_eval(col_expr, **env) if col_expr else element[1] - n0)
                second = held[(slab, warp, lane, i + 1)]
                if row >= m:
                    continue
                p = c_eval(plan.offset_expr, row=row, col=col, ldd=ldd)
                if plan.vector_pair:
                    if col + 1 < n:
                        stores += [(p, element), (p + 1, second)]  # one vector: the pair at p, p + 1
                    elif col < n:
                        stores.append((p, element))
                else:
                    if col < n:
                        stores.append((p, element))
                    if col + 1 < n:
                        stores.append((p + c_eval(plan.next_col_expr, row=row, col=col, ldd=ldd), second))
    return stores


def check_direct_store(plan: DirectStore, bm: int, bn: int, m: int, n: int, ldd: int, row_expr: str | None = None,
                       col_expr: str | None = None) -> list[str]:
    """Problems (empty: none) with the direct epilogue's stores of an M x N D: every element once, at the address D's
    layout (``plan.d_major``, by the model's meaning) gives it, nothing outside D."""
    return outmodel.check_stores(plan.d_major.value, m, n, ldd, simulate(plan, bm, bn, m, n, ldd, row_expr, col_expr))
