"""--epilogue-order alternate: the consumer warpgroups of a persistent cooperative wgmma CTA take turns at the epilogue.

In the cooperative schedule every consumer warpgroup finishes a tile's main loop at about the same time and all of
them then run their epilogue (conversion, fused chain, stores) while the tensor cores idle. With the order, warpgroup
w starts its epilogue of tile t only after warpgroup w - 1 finished its epilogue of t, and warpgroup 0 starts its
epilogue of t + 1 only after the last warpgroup finished t's. Warpgroup 1 then runs about one epilogue behind
warpgroup 0, and while one warpgroup converts and stores, the other's wgmma chain keeps the tensor pipe busy.

The protocol: C named barriers E_0 .. E_{C-1} (ids from ptxgen.derive.roles.barriers), each generation 256 threads: the 128
of the warpgroup that arrives and the 128 of the one that waits.

* before its epilogue of a tile, warpgroup w >= 1 waits E_w (bar.sync); warpgroup 0 waits E_0 before every epilogue
  but its first;
* after its epilogue, warpgroup w arrives on E_{(w + 1) mod C} (bar.arrive): the last warpgroup on E_0;
* after its last tile, warpgroup 0 waits E_0 once more if it had a tile (the tail): it takes the last warpgroup's final
  arrival, so no generation is open when the CTA exits. (The other form, the last warpgroup arriving only when its CTA
  has a next tile, needs the tile walk's next tile in the template; the tail needs nothing of the walk.)

``alternate-uniform`` is the same order with no branch on the warpgroup inside the tile loop: the last warpgroup arrives
on E_0 once before its first tile (the prologue), so warpgroup 0 waits E_0 before every epilogue, its first included;
every warpgroup w then waits E_w before and arrives on E_{(w + 1) mod C} after each epilogue (one statement each, the id
computed from wg), and warpgroup 0's tail sync is unconditional (with no tile it takes the prologue's arrival). ptxas
keeps the main loop's address arithmetic on the uniform datapath then (tools/sass_epiorder.py).

Generations: a warp's second arrival on E_w (w >= 1) follows its epilogue of t + 1, which follows E_0's generation
of t (or, for w - 1 >= 1, E_{w-1}'s of t + 1), whose completion needs every warp of the last warpgroup past its
epilogue of t, hence every E_v generation of t complete (v >= 1): by induction around the ring, no warp arrives on a
barrier twice before its partner took the previous generation, whatever the intra-warpgroup synchronization. The stage
ring: every consumer releases a tile's stages before its epilogue (the release-lag tail of the consumer loop), so a
warpgroup waiting on E_w holds no stage, and the producer can fill the next tile's stages for the warpgroups ahead.
ptxgen.model.sim.ordermodel checks both under random interleavings of every warp and the producer, with controls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.ptxref import cite
from ...isa.types import Arch, Batch, Cluster, Consumers, EpilogueOrder, Grouping, Schedule, SpecError
from ...isa.epiops import Fp8Blocks
from .barriers import MAX_CONSUMER_WARPGROUPS, order_first_barrier_id
from ..tile.derived import Derived

WARPGROUP_THREADS = 128
WHERE = ("prologue", "before", "after", "tail")  # prologue: once before the tiles; before / after a warpgroup's
# epilogue of a tile; tail: once after its tiles


@dataclass(frozen=True)
class OrderStep:
    """One named-barrier operation of the order: warpgroup ``wg`` at ``where`` does ``op`` (sync: wait for the open
    generation; arrive: count in and go on) on E_``barrier``; ``not_first``: skipped before the CTA's first tile
    (before) or when the CTA had no tile (tail)."""

    wg: int
    where: str
    op: str
    barrier: int
    not_first: bool = False

    def as_tuple(self) -> tuple:
        return (self.wg, self.where, self.op, self.barrier, self.not_first)


def order_steps(consumers: int, uniform: bool = False) -> tuple[OrderStep, ...]:
    """The round-robin order of ``consumers`` warpgroups (module docstring); ``uniform``: the alternate-uniform form."""
    S = OrderStep
    if uniform:
        return ((S(consumers - 1, "prologue", "arrive", 0),)
                + tuple(S(w, "before", "sync", w) for w in range(consumers))
                + tuple(S(w, "after", "arrive", (w + 1) % consumers) for w in range(consumers))
                + (S(0, "tail", "sync", 0),))
    return ((S(0, "before", "sync", 0, not_first=True),)
            + tuple(S(w, "before", "sync", w) for w in range(1, consumers))
            + tuple(S(w, "after", "arrive", (w + 1) % consumers) for w in range(consumers))
            + (S(0, "tail", "sync", 0, not_first=True),))


@dataclass(frozen=True)
class EpilogueOrderPlan:
    consumers: int
    first_barrier_id: int
    steps: tuple[OrderStep, ...]
    threads_per_generation: int  # bar.sync / bar.arrive thread count: two warpgroups
    uniform: bool = False  # alternate-uniform: the prologue arrival, no step skipped (no branch on wg in the tile loop)

    def barrier_id(self, barrier: int) -> int:
        return self.first_barrier_id + barrier

    @property
    def derivation(self) -> tuple[Derived, ...]:
        c, first = self.consumers, self.first_barrier_id
        ids = ", ".join(f"E_{b} = {self.barrier_id(b)}" for b in range(c))
        wait = "; ".join(f"wg {s.wg} {s.op} E_{s.barrier} {s.where}" + (" (not the first)" if s.not_first else "")
                         for s in self.steps)
        return (
            Derived("epilogue_order", "alternate-uniform" if self.uniform else "alternate",
                    f"warpgroup w >= 1 starts its epilogue of tile t after w - 1 finished its own; warpgroup 0 starts t + 1 "
                    f"after warpgroup {c - 1} finished t",
                    "the cooperative warpgroups finish a tile's main loop together; taking turns keeps one warpgroup's "
                    "wgmma chain on the tensor cores while another converts and stores",
                    "ptxgen.derive.roles.epiorder; checked at L1 by ptxgen.model.sim.ordermodel"),
            Derived("order_barriers", ids,
                    f"{c} named barriers after the store epilogue's (and block FP8 stagger's) ids: first = {first}",
                    f"each generation is {self.threads_per_generation} threads: the {WARPGROUP_THREADS} of the warpgroup "
                    "that arrives and the 128 of the one that waits (ids from ptxgen.derive.roles.barriers)",
                    cite("bar_sync")),
            Derived("order_steps", f"{len(self.steps)} steps", wait,
                    "bar.arrive after an epilogue, bar.sync before the next warpgroup's; warpgroup 0's tail sync takes the "
                    "last warpgroup's final arrival, so no generation is open at exit"
                    + ("; the last warpgroup's prologue arrival lets warpgroup 0 wait before every epilogue, so no step "
                       "depends on the tile or (rendered with the id computed from wg) branches on the warpgroup"
                       if self.uniform else ""),
                    cite("bar_sync")),
        )


def check_epilogue_order(t) -> None:
    """Refuse an --epilogue-order alternate that this kernel family does not build (SpecError, exit 2)."""
    if t.epilogue_order is EpilogueOrder.NONE:
        return
    v = t.epilogue_order.value

    def no(rule: str, legal: str) -> None:
        raise SpecError("--epilogue-order", v, rule, legal + ", or --epilogue-order none")

    if t.arch is not Arch.SM90A:
        no("orders the consumer warpgroups of the wgmma kernel (tcgen05's epilogue warps already run beside the MMA warp)",
           "--arch sm_90a")
    if t.consumers is not Consumers.COOPERATIVE:
        no("orders cooperative consumer warpgroups; ping-pong warpgroups already alternate whole tiles", "--consumers cooperative")
    if not 2 <= t.consumer_warpgroups <= MAX_CONSUMER_WARPGROUPS:
        no("needs at least two consumer warpgroups to alternate (one per 64 rows of the tile)", "--bm 128, 192 or 256")
    if t.schedule is not Schedule.PERSISTENT:
        no("orders the epilogues of a persistent CTA's successive tiles (one tile per CTA has nothing to overlap)",
           "--schedule persistent")
    if t.cluster is not Cluster.C1X1 or t.stream_k > 1 or t.grouped is not Grouping.NONE or t.batch is not Batch.NONE:
        no("is derived for the plain persistent tile walk (not checked with clusters, stream-K's split units, grouped or "
           "batched walks)", "--cluster 1x1 --stream-k 1 --grouped none --batch none")
    if t.fp8_blocks is not Fp8Blocks.NONE:
        no("is not derived with block-scaled FP8's consumer loops (and --fp8-stagger orders the same warpgroups)",
           "--fp8-blocks none")


def plan_epilogue_order(t) -> EpilogueOrderPlan | None:
    if t.epilogue_order is EpilogueOrder.NONE:
        return None
    c = t.consumer_warpgroups
    uniform = t.epilogue_order is EpilogueOrder.ALTERNATE_UNIFORM
    return EpilogueOrderPlan(c, order_first_barrier_id(c, t.fp8_stagger.value != "none"), order_steps(c, uniform),
                             2 * WARPGROUP_THREADS, uniform)
