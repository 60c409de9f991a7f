"""L1 bridge: the derived grouped walk (ptxgen.derive.roles.grouped) through the independent model (groupmodel)."""

from __future__ import annotations

from typing import Sequence

from ..layouts import groupmodel
from ...derive.roles.grouped import GroupedPlan, GroupTile


def as_items(walk: Sequence[GroupTile]) -> list[dict]:
    return [{"group": t.group, "a_row0": t.a_row0, "b_row0": t.b_row0, "n0": t.n0, "row_end": t.row_end} for t in walk]


def check_plan(plan: GroupedPlan, offs: Sequence[int], m_total: int, n: int) -> list[str]:
    """Everything the model finds wrong with the plan's walk for ``offs`` (empty when it is right)."""
    walk = plan.walk(offs, m_total, n)
    errs = groupmodel.check_walk(as_items(walk), offs, m_total, n, plan.bm, plan.bn)
    bound = plan.max_work_items(m_total, len(offs), n)
    if len(walk) > bound:
        errs.append(f"{len(walk)} work items, more than the bound {bound} the grid and int range are sized by")
    return errs
