"""Render context of --epilogue-order alternate (ptxgen.derive.epiorder): each step of the order as one C statement."""

from __future__ import annotations

from dataclasses import dataclass

from ..derive.epiorder import EpilogueOrderPlan, OrderStep

COUNTER = "order_tiles"  # C: epilogues this warpgroup has run (the template declares and counts it)


@dataclass(frozen=True)
class OrderView:
    before: tuple[str, ...]  # C statements before a warpgroup's epilogue of a tile
    after: tuple[str, ...]  # ... after it (then ++counter)
    tail: tuple[str, ...]  # once, after the CTA's tiles
    counter: str
    doc: str


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
    return (f"if ({cond}) named_barrier_arrive({bar}, {plan.threads_per_generation});  // E_{st.barrier}: warpgroup {st.wg}'s "
            f"epilogue is done, warpgroup {nxt} may start " + ("its own" if nxt else "its next"))


def order_view(plan: EpilogueOrderPlan | None) -> OrderView | None:
    if plan is None:
        return None
    by = {w: tuple(_step_c(plan, s) for s in plan.steps if s.where == w) for w in ("before", "after", "tail")}
    return OrderView(by["before"], by["after"], by["tail"], COUNTER,
                     f"--epilogue-order alternate: the {plan.consumers} consumer warpgroups' epilogues in turn (named barriers "
                     f"{plan.first_barrier_id}..{plan.first_barrier_id + plan.consumers - 1}; ptxgen.derive.epiorder)")
