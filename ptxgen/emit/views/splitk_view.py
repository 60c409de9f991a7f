"""Split-K in C: the K-range statements of the MMA kernel's prologue, and the last-arrival reduction before the epilogue
(each split's partial store, the tile counter, the fixed-order sum), rendered from the frozen SplitPlan
(ptxgen.derive.store.splitk); tests/test_splitk.py runs the statements and index expressions against the plan."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...derive.store.splitk import SplitPlan
from ...derive.store.streamk import ACC_VECTOR, FLAG_REGION_BYTES, GROUP_THREADS
from .epilogue_view import STORE_FIRST_BARRIER_ID
from .mma_view import slab_views
from .streamk_view import partial_io_c


@dataclass(frozen=True)
class SplitView:
    """The reduction by the last split to arrive (templates/mma_wgmma.cuh.j2 splitk_open / splitk_close)."""

    splits: int
    counter_expr: str  # int32 index of this warpgroup's counter (SplitPlan.counter_index of tile, wg)
    slot_expr: str  # the slot of (tile, split k_split) (SplitPlan.slot_index); with "z" for k_split: any split's
    thread_expr: str  # this thread's first vector in a slot (SplitPlan.vector_index of wg, 0, wg_tid)
    store_partial: tuple[str, ...]  # acc0 into this split's slot
    arrive: str  # one thread: count this split on the counter; sk_last = 1 on the last arrival, which resets it
    barrier: str  # the warpgroup's named barrier
    vote: str  # the warpgroup's barrier that hands sk_last to every thread
    load_first: tuple[str, ...]  # acc0 = slot 0
    add_partial: tuple[str, ...]  # acc0 += slot z (inside a loop over z = 1 .. S-1)
    doc: str


def k_range_c(split: SplitPlan | None, bk: int) -> tuple[str, ...]:
    """C statements defining num_k_tiles, the K-tiles this CTA multiplies; with split-K also kt_first (its first K-tile:
    SplitPlan.k_range for split k_split = blockIdx.z)."""
    total = f"(K + {bk - 1}) / {bk}"
    if split is None:
        return (f"const int num_k_tiles = {total};",)
    s = split.splits
    return (
        f"const int k_tiles_total = {total};",
        f"const int kt_first = k_split * (k_tiles_total / {s}) + min(k_split, k_tiles_total % {s});  // split k_split of {s}: whole K-tiles, balanced",
        f"const int num_k_tiles = k_tiles_total / {s} + (k_split < k_tiles_total % {s});",
    )


def k_range_prologue_c(split: SplitPlan | None, bk: int) -> tuple[str, ...]:
    """The prologue's K-range statements: k_range_c, and with split-K the split index before them."""
    if split is None:
        return k_range_c(None, bk)
    return ("const int k_split = static_cast<int>(blockIdx.z);  // grid z: this CTA's split of K",) + k_range_c(split, bk)


def k0_c(split: SplitPlan | None, bk: int) -> str:
    """The first K element of the kt-th K-tile this CTA loads."""
    return f"kt * {bk}" if split is None else f"(kt_first + kt) * {bk}"


def split_view(plan: KernelPlan) -> SplitView | None:
    sp = plan.split
    if sp is None:
        return None
    acc_regs = plan.spec.accumulator_registers
    slabs = slab_views(plan)  # the tile schedule, cooperative: one 64-row slab per consumer warpgroup, accumulator acc0
    assert len(slabs) == 1 and slabs[0].index == 0 and acc_regs % ACC_VECTOR == 0, (slabs, acc_regs)
    vectors = acc_regs // ACC_VECTOR
    s, slot_vectors = sp.splits, sp.slot_bytes // 16
    counter = f"tile * {sp.groups} + wg"
    thread = f"wg * {vectors * GROUP_THREADS} + wg_tid"
    slot = f"tile * {s} + k_split"
    base = f"reinterpret_cast<float4*>(W + {FLAG_REGION_BYTES}u)"

    def at(split: str) -> str:
        return f"{base} + static_cast<size_t>({slot.replace('k_split', split)}) * {slot_vectors} + ({thread})"

    bar = f"{STORE_FIRST_BARRIER_ID} + wg, 128"
    return SplitView(
        splits=s,
        counter_expr=counter,
        slot_expr=slot,
        thread_expr=thread,
        store_partial=(f"float4* const sk_dst = {at('k_split')};", *partial_io_c("sk_dst", vectors, "store")),
        arrive=(f"{{ int* const sk_counter = reinterpret_cast<int*>(W) + ({counter}); "
                f"sk_last = counter_acq_rel_add(sk_counter, 1) == {s - 1}; if (sk_last) flag_relaxed_store(sk_counter, 0); }}"),
        barrier=f"named_barrier_sync({bar});",
        vote=f"sk_last = named_barrier_or({bar}, sk_last);",
        load_first=(f"const float4* const sk_src0 = {at('0')};", *partial_io_c("sk_src0", vectors, "load")),
        add_partial=(f"const float4* const sk_src = {at('z')};", *partial_io_c("sk_src", vectors, "add")),
        doc=(f"split-K: every split stores its f32 accumulator ({vectors} vectors a thread) into its slot and counts it on "
             f"the tile's counter; the last of the {s} arrivals resets the counter, sums slots 0..{s - 1} in that order "
             "(deterministic) and runs the epilogue; the others skip it"),
    )
