"""Bridge: the fused epilogue's thread loads and amax reduction (ptxgen.derive.store.fusion) against the independent
model (ptxgen.model.layouts.epimodel, with the fragment maps of ptxgen.model.layouts.fragmodel).

For every thread of a wgmma consumer warpgroup (one 64-row slab) or of the four tcgen05 epilogue warps (every
32x32b chunk of the tile), the plan's loads of each operand run on random distinct arrays; each accumulator
register must receive exactly the operand element that its output element needs. The chain's step order (the
derivation's ``step_names``) run by the model on every element of a tile must give what the element means
(``epimodel.element_value``: the row-wise FP8 scales first, then alpha, C, the bias, the residual).
"""

from __future__ import annotations

import numpy as np

from ..layouts import epimodel
from ...derive.store.fusion import ChainPlan, step_names

WARPS = 4


def check_chain_plan(plan: ChainPlan, seed: int = 0, chunk: int = 32, loads=None, stores=None, steps=None) -> list[str]:
    """Problems (empty when every register gets its element, every element of a stored matrix (aux) its register's
    value, and every amax its max). ``loads`` / ``stores`` replace ``plan.loads`` / ``plan.stores`` (the controls pass
    a wrong one; ``steps`` replaces the derived step order)."""
    loads = loads or plan.loads
    stores = stores or plan.stores
    rng = np.random.default_rng(seed)
    chain = plan.chain.to_json()
    wg = plan.family == "wgmma"
    rows = 64 if wg else plan.bm
    problems: list[str] = epimodel.check_values(chain, step_names(plan.chain) if steps is None else steps, 16, 16, rng)
    for operand in plan.chain.operands():
        arrays = {operand: epimodel.random_operand(chain, operand, rows, plan.bn, rng)}
        for warp in range(WARPS):
            for lane in range(32):
                if wg:
                    js = [l.to_json() for l in loads(operand, warp, lane)]
                    problems += epimodel.check_thread(chain, "wgmma", operand, warp, lane, plan.bn // 2, js, arrays)
                else:
                    for col0 in range(0, plan.bn, chunk):
                        js = [l.to_json() for l in loads(operand, warp, lane, col0, chunk)]
                        problems += epimodel.check_thread(chain, "tcgen05", operand, warp, lane, chunk, js, arrays, col0, plan.bm)
                if len(problems) > 20:
                    return problems
    for operand in plan.chain.stores():
        def stores_of(warp, lane, col0, operand=operand):
            return [l.to_json() for l in stores(operand, warp, lane, col0, chunk)]
        problems += epimodel.check_stores(plan.family, operand, rows, plan.bn, stores_of, WARPS, plan.bm, chunk)
    if plan.amax is not None:
        a = plan.amax
        problems += epimodel.check_amax(plan.family, a.per_row, a.xor_masks,
                                        lambda w, l: a.written_rows(plan.family, plan.bm, w, l), rows, plan.bn, WARPS,
                                        plan.bm, chunk)
    return problems
