"""Stream-K in C: the launch's split (prologue), each work entry's (tile, split, K-range), the partial store and the
owner's fixed-order sum, rendered from the frozen StreamKPlan (ptxgen.derive.store.streamk). tests/test_streamk.py runs
the integer statements against the plan."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...derive.store.streamk import ACC_VECTOR, FLAG_REGION_BYTES, GROUP_THREADS, MIN_K_TILES_PER_SPLIT, StreamKPlan
from .epilogue_view import STORE_FIRST_BARRIER_ID
from .mma_view import slab_views

LOOP = "work"  # the C name of the work entry a persistent CTA runs


@dataclass(frozen=True)
class StreamKView:
    layout: tuple[str, ...]  # prologue statements: sk_splits, sk_dp, sk_work (after num_tiles / num_cluster_tiles)
    unit: tuple[str, ...]  # per work entry: tile, sk_split, sk_parts, kt_first, num_k_tiles
    store_partial: tuple[str, ...]  # split > 0: the accumulator into its slot
    wait_owner: str  # the owner's flag wait and reset (one thread of the warpgroup)
    signal: str  # split > 0: count the slot on the flag (one thread of the warpgroup)
    add_partial: tuple[str, ...]  # the owner: acc += slot j (inside a loop over j = 1 .. sk_parts - 1)
    barrier: str  # the warpgroup's named barrier
    doc: str


def layout_c(sk: StreamKPlan, items: str) -> tuple[str, ...]:
    """C statements of StreamKPlan.layout for ``items`` work items on gridDim.x / cluster clusters (no ternaries, so
    that the test can run them as Python)."""
    cs = sk.cluster_size
    clusters = "static_cast<int>(gridDim.x)" + (f" / {cs}" if cs > 1 else "")
    return (
        f"const int sk_clusters = {clusters};",
        f"const int sk_last = {items} % sk_clusters;  // items of the last, partial round",
        f"const int sk_cap = min(min({sk.max_splits}, sk_clusters / max(sk_last, 1)), k_tiles_total / {MIN_K_TILES_PER_SPLIT});",
        "const int sk_on = (sk_cap >= 2) * (sk_last > 0);  // 1: the last round is split",
        "const int sk_splits = 1 + sk_on * (sk_cap - 1);",
        f"const int sk_dp = {items} - sk_on * sk_last;  // items run whole",
        "const int sk_work = sk_dp + sk_on * sk_last * sk_splits;  // work entries: the whole items, then the split units",
    )


def unit_c() -> tuple[str, ...]:
    """C statements of StreamKPlan.unit for work entry ``work``."""
    return (
        f"const int sk_in_last = ({LOOP} >= sk_dp);  // 1: a split unit of the last round",
        f"const int sk_unit = ({LOOP} - sk_dp) * sk_in_last;",
        "const int sk_parts = 1 + sk_in_last * (sk_splits - 1);",
        f"const int tile = {LOOP} - sk_unit + sk_unit / sk_parts;",
        "const int sk_split = sk_unit % sk_parts;  // 0: the owner, which stores D",
        "const int kt_first = sk_split * (k_tiles_total / sk_parts) + min(sk_split, k_tiles_total % sk_parts);",
        "const int num_k_tiles = k_tiles_total / sk_parts + (sk_split < k_tiles_total % sk_parts);",
    )


def partial_io_c(pointer: str, vectors: int, op: str, acc: str = "acc0") -> list[str]:
    """The accumulator ``acc`` (``vectors`` float4 a thread) and a partial-tile slot in register order (the thread's
    vector v at ``pointer`` + v x 128, L2 only): ``op`` "store" writes it, "add" adds the slot into it, "load" assigns it.
    Stream-K's and split-K's partial tiles (ptxgen.derive.store.streamk, ptxgen.derive.store.splitk)."""
    out = []
    for v in range(vectors):
        a = [f"{acc}[{ACC_VECTOR * v + e}]" for e in range(ACC_VECTOR)]
        if op == "store":
            out.append(f"__stcg({pointer} + {v * GROUP_THREADS}, make_float4({', '.join(a)}));")
        else:
            eq = "+=" if op == "add" else "="
            out.append(f"{{ const float4 x = __ldcg({pointer} + {v * GROUP_THREADS}); "
                       f"{a[0]} {eq} x.x; {a[1]} {eq} x.y; {a[2]} {eq} x.z; {a[3]} {eq} x.w; }}")
    return out


def _slot_c(sk: StreamKPlan, split: str) -> str:
    rank = " + static_cast<int>(cta_rank)" if sk.cluster_size > 1 else ""
    mul = f" * {sk.cluster_size}" if sk.cluster_size > 1 else ""
    return f"((tile - sk_dp) * (sk_splits - 1) + {split} - 1){mul}{rank}"


def _flag_c(sk: StreamKPlan) -> str:
    rank = " + static_cast<int>(cta_rank)" if sk.cluster_size > 1 else ""
    mul = f" * {sk.cluster_size}" if sk.cluster_size > 1 else ""
    return f"reinterpret_cast<int*>(W) + ((tile - sk_dp){mul}{rank}) * {sk.groups} + wg"


def streamk_view(plan: KernelPlan, items: str) -> StreamKView | None:
    sk = plan.stream_k
    if sk is None:
        return None
    acc_regs = plan.spec.accumulator_registers
    slabs = slab_views(plan)  # cooperative: one 64-row slab per consumer warpgroup, accumulator acc0
    assert len(slabs) == 1 and slabs[0].index == 0 and acc_regs % ACC_VECTOR == 0, (slabs, acc_regs)
    vectors = acc_regs // ACC_VECTOR
    slot_vectors = sk.slot_bytes // 16
    base = f"reinterpret_cast<float4*>(W + {FLAG_REGION_BYTES}u)"
    thread = f"static_cast<int>(wg) * {vectors * GROUP_THREADS} + wg_tid"
    store = [f"float4* const sk_dst = {base} + static_cast<size_t>({_slot_c(sk, 'sk_split')}) * {slot_vectors} + {thread};",
             *partial_io_c("sk_dst", vectors, "store")]
    add = [f"const float4* const sk_src = {base} + static_cast<size_t>({_slot_c(sk, 'j')}) * {slot_vectors} + {thread};",
           *partial_io_c("sk_src", vectors, "add")]
    bar = f"named_barrier_sync({STORE_FIRST_BARRIER_ID} + wg, 128);"
    return StreamKView(
        layout=layout_c(sk, items),
        unit=unit_c(),
        store_partial=tuple(store),
        wait_owner=(f"{{ int* const sk_flag = {_flag_c(sk)}; while (flag_acquire_load(sk_flag) != sk_parts - 1) {{ }} "
                    "flag_relaxed_store(sk_flag, 0); }"),
        signal=f"flag_release_add({_flag_c(sk)}, 1);",
        add_partial=tuple(add),
        barrier=bar,
        doc=(f"stream-K: split z > 0 of a last-round tile stores its f32 accumulator ({vectors} vectors a thread) into its "
             f"slot and counts it on the tile's flag; split 0 waits for sk_parts - 1 counts and adds slots 1..sk_parts-1 "
             "in that order (deterministic)"),
    )
