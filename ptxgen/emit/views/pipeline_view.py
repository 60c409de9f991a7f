"""Render context of the pipeline pieces (the ring's and the accumulators' mbarriers in the templates): wait
parities and every barrier beside the ring's full/empty pairs."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...derive.roles.pipeline import Parity
from ...derive.operands.smem import MBARRIER_BYTES


def parity_c_expr(p: Parity, it: str = "it") -> str:
    """The wait parity of K-tile ``it``: ((it / S) & 1) ^ flip."""
    e = f"static_cast<unsigned>(({it} / {p.stages}) & 1)"
    return f"({e} ^ 1u)" if p.flip else e


@dataclass(frozen=True)
class BarrierView:
    offset: int
    count: int
    doc: str


# Arrival counts and meaning of every barrier besides the ring's full/empty pairs. Every barrier the shared-
# memory plan places must be listed here, so that none is left uninitialised (seen on an H200: an
# uninitialised ping-pong order barrier made the launch fail).
def other_barrier_views(plan: KernelPlan) -> tuple[BarrierView, ...]:
    pipe = plan.pipeline
    counts = {
        "acc_full": (1, "acc_full: committed after a tile's last MMAs"),
        "acc_empty": (pipe.acc_empty_arrivals, "acc_empty: every epilogue warp has read the tile out"),
        "order": (1, "order[wg]: the other consumer warpgroup has issued its mainloop"),
        "c_full": (1, "c_full[wg]: C's chunk landed in warpgroup wg's staging buffer (derive.store.cload)"),
    }
    views = []
    for name, offset, n in plan.layout.smem.barrier_arrays:
        if name in ("full", "empty"):
            continue
        if name not in counts or counts[name][0] < 1:
            raise AssertionError(f"barrier {name!r} has no arrival count: it would be left uninitialised")
        views += [BarrierView(offset + i * MBARRIER_BYTES, counts[name][0], f"{counts[name][1]} [{i}]") for i in range(n)]
    return tuple(views)
