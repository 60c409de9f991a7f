"""Stream-K for the last wave of a persistent wgmma kernel ("data-parallel + split last wave").

A persistent kernel runs its W work items (tiles, or 2-CTA cluster tiles) on C = grid / cluster-size clusters (a stream-K
kernel's grid is every SM however few its items, ``KernelABI.fills_sms``, so a launch of one partial round splits too),
cluster c taking items c, c + C, c + 2C, ...: W / C full rounds and a last round of L = W mod C items that leaves
C - L clusters idle for a whole tile time (2500 x 10000 x 4000 with 128 x 192 tiles: 1060 tiles = 8 rounds of 132
+ 4, the 9th round runs 4 CTAs). With ``--stream-k Smax`` (Smax > 1) the L last-round items are split along K into

    S = min(Smax, C / L, T / MIN_K_TILES_PER_SPLIT)      (T = ceil(K / BK); S < 2: no split, as without stream-K)

parts each, and the work list becomes: items 0 .. D-1 whole (D = W - L, the data-parallel rounds), then L x S
*units*: unit u = (item D + u / S, split u mod S) with split z taking the K-tiles of
``SplitPlan.k_range(z)`` (whole K-tiles, balanced to within one). W' = D + L S work entries still go to cluster
w mod C: since L S <= C, every unit falls in the last round and a cluster runs at most one unit, as its last entry.

The reduction is fixed-order and in the kernel: split z > 0 stores its f32 accumulator into a workspace slot and
adds 1 to the tile's flag (``red.release.gpu``); split 0 (the owner) keeps its accumulator in registers, waits
(``ld.acquire.gpu``) until the flag reads S - 1, resets it to 0, and adds slot 1, 2, ..., S-1 in that order before
its normal epilogue. The order of the f32 additions never depends on timing, so D is the same on every run
(the flag's count is an atomic add, but it only counts: no data goes through it). Waiting cannot deadlock: the
grid never exceeds the CTAs that are resident at once (persistent: grid <= SMs, one CTA per SM; a cluster kernel:
at most the clusters the driver says fit), so every unit an owner waits for runs on a CTA that is already resident
or will be once an earlier kernel's CTAs leave, and a split z > 0 never waits for anything.

Workspace (``W``, one buffer, zero-filled once when allocated; every owner resets its flags, so it stays zero
between launches on one stream): FLAG_REGION_BYTES of int32 flags (flag of last-round item i, CTA rank r of the
cluster, consumer warpgroup g at int ((i - D) x cluster + r) x groups + g), then the f32 slots, slot of (item i,
split z > 0, rank r) at ((i - D) x (S - 1) + z - 1) x cluster + r, each BM x BN floats in the accumulator's
register order (16-byte vector v of thread t of consumer warpgroup g at vector (g x vectors_per_thread + v) x 128
+ t: a warp's stores and loads are contiguous).

>>> p = StreamKPlan(max_splits=8, bk=64, cluster_size=1, groups=2, tile_floats=128 * 192)
>>> lay = p.layout(items=1060, clusters=132, k=4000)   # 2500 x 10000 x 4000, 128 x 192 tiles
>>> lay.splits, lay.dp_items, lay.last_items, lay.work_entries
(8, 1056, 4, 1088)
>>> p.unit(1056 + 9, lay)   # unit 9: item 1057, split 1, K-tiles 8..15 of 63
(1057, 1, 8, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tile.derived import Derived

MIN_K_TILES_PER_SPLIT = 4  # a split keeps at least this many K-tiles: its pipeline fills once per unit
FLAG_REGION_BYTES = 16384  # int32 flags for up to MAX_GRID_CTAS CTAs x 4 consumer warpgroups, then the slots
MAX_GRID_CTAS = 1024
SLOT_ALIGN_BYTES = 128
ACC_VECTOR = 4  # f32 per 16-byte vector of the slot layout
GROUP_THREADS = 128  # threads of a consumer warpgroup


def slot_bytes(tile_floats: int) -> int:
    """Bytes of one partial-tile slot: BM x BN floats rounded up to SLOT_ALIGN_BYTES (stream-K's and split-K's slots)."""
    return -(-tile_floats * 4 // SLOT_ALIGN_BYTES) * SLOT_ALIGN_BYTES


@dataclass(frozen=True)
class StreamKLayout:
    """The split of one launch: W items on C clusters (see the module docstring)."""

    items: int
    clusters: int
    k_tiles: int
    splits: int  # S (1: no split)
    dp_items: int  # D: items run whole
    last_items: int  # L: items split (0 when S = 1)

    @property
    def work_entries(self) -> int:
        return self.dp_items + self.last_items * self.splits

    @property
    def data_slots(self) -> int:
        """Slots per cluster rank: one per unit with split z > 0."""
        return self.last_items * (self.splits - 1)


@dataclass(frozen=True)
class StreamKPlan:
    max_splits: int
    bk: int
    cluster_size: int  # CTAs per cluster (1 or 2); both CTAs of a cluster run the same unit on their own tiles
    groups: int  # consumer warpgroups, each with its own flag and part of the slot
    tile_floats: int  # BM x BN

    # -- the split --------------------------------------------------------------------------------------
    def k_tiles(self, k: int) -> int:
        return -(-k // self.bk)

    def layout(self, items: int, clusters: int, k: int) -> StreamKLayout:
        t = self.k_tiles(k)
        last = items % clusters if clusters > 0 else 0
        s = min(self.max_splits, clusters // last, t // MIN_K_TILES_PER_SPLIT) if last else 1
        if s < 2:
            return StreamKLayout(items, clusters, t, 1, items, 0)
        return StreamKLayout(items, clusters, t, s, items - last, last)

    @staticmethod
    def k_range(split: int, parts: int, k_tiles: int) -> tuple[int, int]:
        """(first K-tile, K-tiles) of ``split`` of ``parts`` (SplitPlan's balanced runs)."""
        q, r = divmod(k_tiles, parts)
        return split * q + min(split, r), q + (1 if split < r else 0)

    def unit(self, w: int, lay: StreamKLayout) -> tuple[int, int, int, int]:
        """(item, split, first K-tile, K-tiles) of work entry ``w``."""
        if w < lay.dp_items:
            return (w, 0, 0, lay.k_tiles)
        u = w - lay.dp_items
        z = u % lay.splits
        return (lay.dp_items + u // lay.splits, z) + self.k_range(z, lay.splits, lay.k_tiles)

    def assignment(self, lay: StreamKLayout) -> list[list[tuple[int, int, int, int]]]:
        """Per cluster c: the (item, split, first K-tile, K-tiles) it runs, in order (entries c, c + C, ...)."""
        return [[self.unit(w, lay) for w in range(c, lay.work_entries, lay.clusters)] for c in range(lay.clusters)]

    # -- the workspace ----------------------------------------------------------------------------------
    @property
    def slot_bytes(self) -> int:
        return slot_bytes(self.tile_floats)

    def flag_index(self, item: int, rank: int, group: int, lay: StreamKLayout) -> int:
        return ((item - lay.dp_items) * self.cluster_size + rank) * self.groups + group

    def slot_index(self, item: int, split: int, rank: int, lay: StreamKLayout) -> int:
        return ((item - lay.dp_items) * (lay.splits - 1) + split - 1) * self.cluster_size + rank

    def workspace_bytes(self, lay: StreamKLayout) -> int:
        return FLAG_REGION_BYTES + lay.data_slots * self.cluster_size * self.slot_bytes

    def workspace_bound(self, items: int, max_clusters: int, k: int) -> int:
        """Bytes enough for any grid of 1..``max_clusters`` clusters (the driver may fit fewer clusters than SMs / 2)."""
        return max(self.workspace_bytes(self.layout(items, c, k)) for c in range(1, max_clusters + 1))

    def derivation(self) -> tuple[Derived, ...]:
        s = self.max_splits
        return (
            Derived("stream_k", f"at most {s} splits of each last-round tile",
                    f"grid = every SM (clusters = SMs / cluster size, however few the items); L = items mod clusters; "
                    f"S = min({s}, clusters / L, ceil(K / {self.bk}) / {MIN_K_TILES_PER_SPLIT}); "
                    "items 0..W-L-1 whole, then L x S units (item W - L + u / S, split u mod S)",
                    "the last round of a persistent kernel runs L tiles on L of the clusters; split along K they run on "
                    "L x S of them, each doing 1/S of the K loop",
                    "CUTLASS stream-K (DataParallel + StreamK hybrid, include/cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp)"),
            Derived("stream_k_reduction", "owner = split 0; slots 1..S-1 added in that order",
                    "split z > 0: f32 accumulator -> slot, red.release.gpu.add flag 1; owner: ld.acquire.gpu until flag = S-1, "
                    "flag = 0, acc += slot 1, ..., slot S-1, then the normal epilogue",
                    "a fixed order of f32 additions: D is the same on every run; every CTA of a persistent grid is resident, "
                    "and only owners wait, so no wait can deadlock",
                    "ptxgen.derive.store.streamk"),
            Derived("stream_k_workspace", f"{FLAG_REGION_BYTES} B of flags + L x (S-1) x {self.cluster_size} slots of "
                    f"{self.slot_bytes} B", "zero-filled once; owners reset their flags",
                    "the slots hold the accumulator in register order: contiguous 16-byte vectors per warp",
                    "ptxgen.derive.store.streamk"),
        )


def plan_stream_k(max_splits: int, bk: int, cluster_size: int, groups: int, tile_floats: int) -> StreamKPlan | None:
    return StreamKPlan(max_splits, bk, cluster_size, groups, tile_floats) if max_splits > 1 else None
