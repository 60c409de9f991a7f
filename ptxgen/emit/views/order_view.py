"""Render context of --epilogue-order alternate (ptxgen.derive.roles.epiorder): each step of the order as one C statement."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.roles.epiorder import EpilogueOrderPlan, OrderStep, order_steps

COUNTER = "order_tiles"  # C: epilogues this warpgroup has run (the template declares and counts it)


@dataclass(frozen=True)
class OrderView:
    before: tuple[str, ...]  # C statements before a warpgroup's epilogue of a tile
    after: tuple[str, ...]  # ... after it (then ++counter)
    tail: tuple[str, ...]  # once, after the CTA's tiles
    counter: str  # "": no step depends on the tile (alternate-uniform)
    doc: str
    prologue: tuple[str, ...] = ()  # once, before the CTA's tiles


def _step_c(plan: EpilogueOrderPlan, st: OrderStep) -> str:
    c = plan.consumers
    cond = f"wg == {st.wg}" + (f" && {COUNTER} > 0" if st.not_first else "")
    bar = plan.barrier_id(st.barrier)
    if st.op == "sync":
        prev = (st.wg - 1) % c
        what = (f"warpgroup {prev} finished its epilogue of " + ("this tile" if st.wg else "the previous tile")
                if st.where == "before" else f"warpgroup {prev}'s final arrival (no generation open at exit)")
        return f"if ({cond}) named_barrier_sync({bar}, {plan.threads_per_generation});  // E_{st.barrier}: wait until {what}"
    nxt = st.barrier
    if st.where == "prologue":
        return (f"if ({cond}) named_barrier_arrive({bar}, {plan.threads_per_generation});  // E_{st.barrier}: warpgroup 0 "
                "may start its first epilogue (its sync before every epilogue takes this arrival first)")
    return (f"if ({cond}) named_barrier_arrive({bar}, {plan.threads_per_generation});  // E_{st.barrier}: warpgroup {st.wg}'s "
            f"epilogue is done, warpgroup {nxt} may start " + ("its own" if nxt else "its next"))


def _uniform_c(plan: EpilogueOrderPlan) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """alternate-uniform: every warpgroup's before step is a sync on E_wg and its after step an arrive on
    E_{(wg + 1) mod C} (checked against the plan), so each is one statement with the id computed from wg: no branch."""
    c, first, n = plan.consumers, plan.first_barrier_id, plan.threads_per_generation
    assert plan.steps == order_steps(c, uniform=True), plan.steps
    before = (f"named_barrier_sync({first} + wg, {n});  // E_wg: wait until warpgroup wg - 1 finished its epilogue of this "
              f"tile (warpgroup 0: warpgroup {c - 1}, of the previous tile, or its prologue arrival)",)
    after = (f"named_barrier_arrive({first} + (wg + 1) % {c}, {n});  // E_(wg + 1) mod {c}: this warpgroup's epilogue is "
             "done, the next may start",)
    return before, after


def order_view(plan: EpilogueOrderPlan | None) -> OrderView | None:
    if plan is None:
        return None
    by = {w: tuple(_step_c(plan, s) for s in plan.steps if s.where == w) for w in ("prologue", "before", "after", "tail")}
    if plan.uniform:
        by["before"], by["after"] = _uniform_c(plan)
    value = "alternate-uniform" if plan.uniform else "alternate"
    return OrderView(by["before"], by["after"], by["tail"], "" if plan.uniform else COUNTER,
                     f"--epilogue-order {value}: the {plan.consumers} consumer warpgroups' epilogues in turn (named barriers "
                     f"{plan.first_barrier_id}..{plan.first_barrier_id + plan.consumers - 1}; ptxgen.derive.roles.epiorder)",
                     by["prologue"])
