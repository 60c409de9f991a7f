"""Split-K: the K-range of each split, the workspace (tile counters, then f32 partial tiles), and the in-kernel,
fixed-order reduction by the last split to arrive.

A split-K kernel (``--split-k S``, S > 1) launches S CTAs per output tile (grid z = the split), in ONE launch. Split z
takes a run of whole K-tiles of the T = ceil(K / BK) the tile needs, the runs balanced to within one K-tile:

    q = T / S, r = T % S;  split z takes K-tiles [z q + min(z, r), z q + min(z, r) + q + (z < r))

so every K-tile belongs to exactly one split for any K, BK and S (tests/test_splitk.py checks it with hypothesis,
and checks the C the emit layer renders from this plan against it). A split whose run is empty (T < S) multiplies
nothing: its partial tile is zeros.

"The last-arriving split reduces", per consumer warpgroup g (its 64-row slab of the tile): every split stores its f32
accumulator into its slot of the workspace (slot of (tile, split z): tile x S + z), then one thread adds 1 to the
counter of (tile, g) with ``atom.acq_rel.gpu`` (after a named barrier of the warpgroup: the release covers every
thread's stores). The warpgroup whose add returns S - 1 arrived last: it resets the counter to 0 (nothing else
touches it in this launch, so the next launch on the stream finds it zero), reads slots 0, 1, ..., S-1 of its tile
IN THAT ORDER (slot 0 assigned, the others added in f32), and runs the kernel's normal epilogue from those registers
(conversion, a fused chain, the store of D), as a kernel without a split would. The others skip the epilogue. The
sum never depends on which split arrived last (its own partial is read back from its slot like the rest), so D is
the same bits on every run; no CTA ever waits for another, so any grid size is safe. ptxgen.model.sim.splitkmodel
replays the protocol for every arrival order (tests/test_splitk.py).

Workspace (``W``, stream-K's conventions, ptxgen.derive.store.streamk: one buffer per stream, its first
FLAG_REGION_BYTES zero-filled once when allocated and kept zero by the resetting warpgroups): int32 counters at
FLAG_REGION_BYTES / 4 = 4096 places, counter of (tile, warpgroup g) at tile x groups + g (a launch may have at most
4096 / groups tiles), then the slots, each BM x BN floats (rounded to 128 B) in the accumulator's register order:
16-byte vector v of thread t of warpgroup g at vector (g x vectors_per_thread + v) x 128 + t.

>>> p = plan_split(4, 64, groups=1, tile_floats=64 * 128)
>>> [p.k_range(z, 1000) for z in range(4)]   # K = 1000: T = 16 K-tiles of 64
[(0, 4), (4, 4), (8, 4), (12, 4)]
>>> [p.k_range(z, 64 * 6) for z in range(4)]  # T = 6: two splits take one more
[(0, 2), (2, 2), (4, 1), (5, 1)]
>>> p.counter_index(tile=5, group=0), p.slot_index(tile=5, split=3), p.workspace_bytes(tiles=16)
(5, 23, 2113536)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tile.derived import Derived
from .streamk import FLAG_REGION_BYTES, GROUP_THREADS, slot_bytes

COUNTER_BYTES = 4  # one int32 counter per (tile, consumer warpgroup)


@dataclass(frozen=True)
class SplitPlan:
    """The split of K, the workspace layout and the last-arrival reduction, for one spec (S = ``splits``, K-tile
    ``bk``, ``groups`` consumer warpgroups of 64 rows each, ``tile_floats`` = BM x BN)."""

    splits: int
    bk: int
    groups: int
    tile_floats: int

    # -- the K-range ----------------------------------------------------------------------------------
    def k_tiles(self, k: int) -> int:
        return -(-k // self.bk)

    def k_range(self, z: int, k: int) -> tuple[int, int]:
        """(first K-tile, K-tiles) of split ``z`` for reduction extent ``k``."""
        t = self.k_tiles(k)
        q, r = divmod(t, self.splits)
        return z * q + min(z, r), q + (1 if z < r else 0)

    # -- the workspace --------------------------------------------------------------------------------
    @property
    def max_tiles(self) -> int:
        """The most tiles one launch may have: one counter per (tile, warpgroup) in the flag region."""
        return FLAG_REGION_BYTES // COUNTER_BYTES // self.groups

    @property
    def slot_bytes(self) -> int:
        return slot_bytes(self.tile_floats)

    def counter_index(self, tile: int, group: int) -> int:
        """int32 index of the counter of (tile, consumer warpgroup ``group``) in the flag region."""
        return tile * self.groups + group

    def slot_index(self, tile: int, split: int) -> int:
        """Slot of (tile, split), counted from the end of the flag region."""
        return tile * self.splits + split

    def vector_index(self, group: int, vector: int, thread: int, vectors_per_thread: int) -> int:
        """16-byte vector of a slot holding vector ``vector`` of thread ``thread`` of warpgroup ``group``."""
        return (group * vectors_per_thread + vector) * GROUP_THREADS + thread

    def workspace_bytes(self, tiles: int) -> int:
        return FLAG_REGION_BYTES + tiles * self.splits * self.slot_bytes

    def derivation(self) -> tuple[Derived, ...]:
        s, bk = self.splits, self.bk
        return (
            Derived("split_k", s, f"grid z = {s}: {s} CTAs per output tile, one launch",
                    "few tiles (small M, or a last wave that leaves SMs idle) cannot fill the GPU; splitting K gives each tile "
                    f"{s} CTAs that stream disjoint parts of A and B",
                    "CUTLASS serial split-K (a semaphore per tile; here the sum order is fixed); cuBLAS runs split-K at small M"),
            Derived("k_range", f"T = ceil(K / {bk}); q = T / {s}, r = T % {s}",
                    "split z takes K-tiles [z q + min(z, r), ... + q + (z < r)); k0 = (first + kt) x BK",
                    "whole K-tiles, balanced to within one: every K-tile in exactly one split (the loads past K read zeros as "
                    "without a split; T < S leaves splits with zero K-tiles, whose partial is zeros)",
                    "tests/test_splitk.py (hypothesis, any K, BK, S)"),
            Derived("split_k_workspace", f"{FLAG_REGION_BYTES} B of int32 counters (tile x {self.groups} + warpgroup), "
                    f"then tiles x {s} slots of {self.slot_bytes} B (slot tile x {s} + z)",
                    "zero-filled once when allocated (stream-K's workspace, one per stream); the last arrival resets "
                    "its counter",
                    "slots in the accumulator's register order: each warp's 16-byte stores and loads are contiguous; at most "
                    f"{self.max_tiles} tiles a launch", "ptxgen.derive.store.splitk, ptxgen.derive.store.streamk"),
            Derived("split_k_reduction", f"the last of the {s} arrivals sums slots 0, 1, ..., {s - 1} in that order",
                    "each split: acc -> its slot, warpgroup barrier, atom.acq_rel.gpu.add counter 1; the add that returns "
                    f"{s - 1}: counter = 0, acc = slot 0 + slot 1 + ... + slot {s - 1}, then the normal epilogue into D",
                    "a fixed order of f32 additions whichever split arrives last: D is the same on every run; nothing waits, "
                    "so no grid can deadlock; one launch instead of an MMA kernel and a reduction kernel",
                    "CUTLASS split-K serial reduction (semaphore), made order-fixed; ptxgen.model.sim.splitkmodel"),
        )


def plan_split(splits: int, bk: int, groups: int, tile_floats: int) -> SplitPlan | None:
    """The plan of a split-K spec; None without a split."""
    return SplitPlan(splits, bk, groups, tile_floats) if splits > 1 else None
