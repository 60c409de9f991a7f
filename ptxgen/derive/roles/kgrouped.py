"""The K-grouped GEMM (``torch._grouped_mm``'s 2-D x 2-D form, the weight gradient of an expert bank): G products
that share M and N and split K.

The convention: ``a`` is M x K_total, ``b`` is N x K_total, ``offs`` (int32, G values, on the GPU) holds the
cumulative K ends, so group g owns K indices ``offs[g - 1] .. offs[g] - 1`` (``offs[-1]`` is 0), and
``out[g] = a[:, K range g] @ b[:, K range g]^T`` is G x M x N. With ``a = dy.t()`` and ``b = x.t()`` (tokens the K
dimension) both operands are MN-major views; K-major copies work too.

**The walk.** The host knows G, M and N, so the work items are simply G x tiles_m x tiles_n, group by group (item i:
group i / (tiles_m tiles_n), then the grouped raster of :class:`~ptxgen.derive.roles.schedule.SchedulePlan` on the tiles_m
x tiles_n grid) -- the batched kernel's walk with the group as the batch. Each role reads ``k_start = offs[g - 1]``
and ``k_end = offs[g]`` for the item's group on the device and takes ``ceil((k_end - k_start) / BK)`` K-tiles from
``k_start``; producer and consumers compute the same trip count from the same two loads. A group with no K rows has
no K-tile: its accumulator stays zero and the epilogue writes zeros (torch writes zeros for an empty group).

**The K tail (and head).** A and B are read through one 2-D map each over M x K_total and N x K_total. TMA clips
only at K_total, so the last K-tile of group g may hold the first K rows of group g + 1. After that K-tile lands, the
consumers write zeros over every element whose K index is ``>= k_end`` in both stages (the cells the loader's
swizzled cell map puts them in), fence the generic-proxy writes against the async proxy
(``fence.proxy.async.shared::cta``) and meet at a named barrier before the wgmma reads. A K-major operand has K as
the map's inner dimension, where ptxgen starts a box only on a 16-byte boundary (tile-ai/tilelang#2681 reports an
illegal instruction on Hopper for a TMA store at an unaligned inner coordinate and guards loads alike; not tried
here), so with a K-major operand the group's K-tiles
start at ``k_base = k_start`` rounded down to ``k_align`` (16 bytes of elements) and the first K-tile's rows below
``k_start`` (the previous group's) are zeroed the same way; with both operands MN-major K is the outer coordinate,
any row may start a box, and ``k_align`` is 1. The other way -- per-group tensor maps rewritten on the device
(``tensormap.replace`` + ``fence.proxy.tensormap::generic``, as DeepGEMM's k-grouped kernels do) -- needs a map per
CTA in global memory and acquire fences on every switch; zeroing costs a few shared stores on one or two K-tiles a
group and leaves the maps as the host encoded them.

>>> p = KGroupedPlan(bm=128, bn=128, bk=64, raster_group=8)
>>> p.group_k([100, 100, 300], 300)        # group 1 is empty
((0, 100), (100, 100), (100, 300))
>>> [p.k_tiles(s, e) for s, e in p.group_k([100, 100, 300], 300)]
[2, 0, 4]
>>> p.k_blocks(0, 100)                     # (box start k0, first and end offsets in the box that are the group's)
((0, 0, 64), (64, 0, 36))
>>> KGroupedPlan(128, 128, 64, 8, k_align=8).k_blocks(100, 300)   # a K-major operand: boxes from 96
((96, 4, 64), (160, 0, 64), (224, 0, 64), (288, 0, 12))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...isa.types import Major
from ..tile.derived import Derived
from .schedule import SchedulePlan

TORCH_REF = "torch._grouped_mm (2-D a M x K_total, 2-D b K_total x N, int32 offs of cumulative K ends; out G x M x N)"
TORCH_SCALED_REF = ("torch._scaled_grouped_mm 2-D x 2-D (a M x K_total, b.t() with b N x K_total, int32 offs of cumulative "
                    "K ends; scale_a (G M,), scale_b (G N,) f32; out G x M x N)")
DEEPGEMM_REF = "DeepGEMM k_grouped_wgrad_gemm (per-group tensor maps written with tensormap.replace on the device)"
PTX_FENCE_REF = "PTX ISA 'fence.proxy.async' (generic-proxy writes seen by the async proxy: wgmma, TMA)"


TMA_INNER_ALIGN_BYTES = 16  # a box's start along the map's inner dimension
# The TMA-store epilogue (--epilogue tma): out is G x M x N, out[g] at D + g M ldd. D's map is rank 3, the group its
# outermost dimension with this stride (elements), so a box at (n0 + 64 c, m0 + slab, g) clips at row M of out[g].
STORE_GROUP_DIM = "G"
STORE_GROUP_STRIDE = "ldd_group"  # M x ldd: elements from out[g] to out[g + 1]


def store_map_derivation(box: tuple[int, ...]) -> Derived:
    """Why the K-grouped kernel's D map is (N, M, G) and not (N, G M): what each chunk's store may write."""
    return Derived(
        "kgrouped_store", f"3-D map (N, M, G), strides (ldd, M ldd), box [{box[0]}, {box[1]}, 1] at (n0 + {box[0]} c, "
        "m0 + slab, g)",
        "out[g] is M x N at D + g M ldd: dimension 0 N (contiguous), 1 M (rows ldd apart), 2 the group (M ldd apart); "
        "the staging layout that gives the 2-D box gives this one, one group deep",
        "TMA checks each coordinate against its own dimension, so rows m0 + slab .. past M are dropped inside out[g]; a "
        "2-D map over the stacked G M rows would clip only at G M and write the tail rows of a partial M tile into "
        "out[g + 1]'s first rows (ptxgen.model.layouts.kgroupmodel.store_writes shows both)",
        "PTX ISA 'Tensor' (tile mode, bounding box); CUDA driver cuTensorMapEncodeTiled")


def k_align_of(spec) -> int:
    """k_align for a spec: 16 bytes of elements when A or B is K-major (K the inner coordinate of its map), else 1."""
    k_major = spec.a.major is Major.K or spec.b.major is Major.K
    return TMA_INNER_ALIGN_BYTES // spec.dtype.bytes if k_major else 1


@dataclass(frozen=True)
class KGroupTile:
    """One work item of the K-grouped walk."""

    item: int
    group: int
    m0: int
    n0: int
    k_start: int
    k_end: int  # K indices >= k_end are zeroed in the last K-tile's stages before the MMA reads them
    rank: int = 0  # the CTA of the item's cluster (0 without a cluster)
    active: bool = True  # False: a cluster's CTA past the last tile row or column repeats its neighbour's tile, stores nothing


@dataclass(frozen=True)
class KGroupedPlan:
    bm: int
    bn: int
    bk: int
    raster_group: int
    k_align: int = 1  # a group's K-tiles start at k_start rounded down to this (16 bytes of elements with a K-major operand)
    rowwise: bool = False  # --grouped offs_k_rowwise: acc x scale_a[g M + row] x scale_b[g N + column] (torch._scaled_grouped_mm)
    cluster: tuple[int, int] = (1, 1)  # CTAs of a cluster along M, along N: they take neighbouring tiles of one group
    # --fp8-blocks 1x128x1x128: the scale block along K (128). Every group boundary must sit on a block boundary (a group
    # may end at K_total anywhere): then each K-tile is one whole block of one group and its scales are block k0 / 128 of
    # the stacked K axis; a group whose range breaks that rule is not computed and its out[g] is NaN (block_check)
    k_block: int = 0

    @staticmethod
    def group_k(offs: Sequence[int], k_total: int) -> tuple[tuple[int, int], ...]:
        """(k_start, k_end) of every group, with the kernel's clamp (two loads, no walk over earlier groups):
        k_start = min(max(offs[g - 1], 0), K_total) (0 for g = 0), k_end = min(max(offs[g], k_start), K_total).
        Increasing offs give torch's ranges; others give empty or overlapping ranges, never one outside A or B."""
        out = []
        for g, o in enumerate(offs):
            start = 0 if g == 0 else min(max(int(offs[g - 1]), 0), k_total)
            out.append((start, min(max(int(o), start), k_total)))
        return tuple(out)

    def k_base(self, k_start: int) -> int:
        """The first K-tile's box start: k_start rounded down to k_align."""
        return k_start - k_start % self.k_align

    def k_tiles(self, k_start: int, k_end: int) -> int:
        """The trip count both roles take: ceil((k_end - k_base) / BK), 0 for an empty group."""
        return -(-(k_end - self.k_base(k_start)) // self.bk) if k_end > k_start else 0

    def k_blocks(self, k_start: int, k_end: int) -> tuple[tuple[int, int, int], ...]:
        """Each K-tile's (box start k0, lo, hi): the TMA box reads k0 .. k0 + BK - 1 (zeros past K_total); offsets
        lo .. hi - 1 of the box are the group's, the others (the previous group's below lo in the first K-tile, the
        next group's from hi in the last) are zeroed before the MMA."""
        base = self.k_base(k_start)
        return tuple((base + t * self.bk, k_start - base if t == 0 else 0, min(self.bk, k_end - base - t * self.bk))
                     for t in range(self.k_tiles(k_start, k_end)))

    def blocks_aligned(self, k_start: int, k_end: int, k_total: int) -> bool:
        """--fp8-blocks 1x128x1x128: the group's K range starts on a scale block and ends on one or at K_total (an empty
        group always passes); True without k_block."""
        if not self.k_block or k_end <= k_start:
            return True
        return k_start % self.k_block == 0 and (k_end % self.k_block == 0 or k_end == k_total)

    def scale_blocks(self, k_start: int, k_end: int, k_total: int) -> tuple[int, ...]:
        """--fp8-blocks 1x128x1x128: the scale block (row of scale_a and scale_b, K_total / 128 of them) of each of the
        group's K-tiles: k0 / k_block of its box start; () where the group is empty or not aligned (not computed)."""
        assert self.k_block == self.bk, (self.k_block, self.bk)
        if not self.blocks_aligned(k_start, k_end, k_total):
            return ()
        return tuple(k0 // self.k_block for k0, _, _ in self.k_blocks(k_start, k_end))

    @staticmethod
    def scale_index(group: int, row: int, col: int, m: int, n: int) -> tuple[int, int]:
        """(scale_a element, scale_b element) that out[group][row, col] is multiplied by (offs_k_rowwise): torch's 2-D x
        2-D scales hold G M and G N values, group g's rows at g M .. g M + M - 1 and its columns at g N .. g N + N - 1."""
        return group * m + row, group * n + col

    def tiles(self, m: int, n: int) -> tuple[int, int]:
        return -(-m // self.bm), -(-n // self.bn)

    @property
    def schedule(self) -> SchedulePlan:
        """Each group's walk: the grouped raster, on the grid of cluster tiles where there is a cluster."""
        return SchedulePlan(True, self.raster_group, self.cluster)

    def group_items(self, m: int, n: int) -> int:
        """Work items of one group: its tiles, or with a cluster its cluster tiles (partial ones included)."""
        tm, tn = self.tiles(m, n)
        pm, pn = self.schedule.work_items(tm, tn)
        return pm * pn

    def work_items(self, groups: int, m: int, n: int) -> int:
        return groups * self.group_items(m, n)

    def ctas(self, groups: int, m: int, n: int, sm_count: int) -> int:
        """The persistent grid: one CTA per SM, never more than the work items (at least 1); with a cluster, whole
        clusters: its size x min(work items, SMs / size)."""
        size = self.schedule.cluster_size
        return size * max(1, min(sm_count // size, self.work_items(groups, m, n)))

    def walk(self, offs: Sequence[int], k_total: int, m: int, n: int) -> tuple[KGroupTile, ...]:
        """Every work item's CTAs in order: group by group, each group's tiles in the grouped raster (with a cluster:
        its cluster tiles, each CTA of the cluster its own tile of them, SchedulePlan.cta_tile)."""
        tm, tn = self.tiles(m, n)
        sched, per = self.schedule, self.group_items(m, n)
        out = []
        for g, (ks, ke) in enumerate(self.group_k(offs, k_total)):
            for local in range(per):
                for r in range(sched.cluster_size):
                    i, j, active = sched.cta_tile(local, r, tm, tn)  # without a cluster: tile_of's tile, active
                    out.append(KGroupTile(g * per + local, g, i * self.bm, j * self.bn, ks, ke, r, active))
        return tuple(out)

    def derivation(self) -> tuple[Derived, ...]:
        bk = self.bk
        return (
            Derived("kgrouped_walk", "G x tiles_m x tiles_n",
                    f"item i: group i / (tiles_m tiles_n), then the grouped raster ({self.raster_group} tile rows, column by "
                    f"column) on the ceil(M / {self.bm}) x ceil(N / {self.bn}) grid; out[g] at D + g M ldd",
                    "every group has the same M x N output, so the host knows the item count without reading offs; the "
                    "persistent CTA takes items c, c + grid, ... as a batched kernel does",
                    TORCH_REF),
            Derived("group_k", "k_start(g) .. k_end(g) - 1",
                    "k_start(0) = 0, k_start(g) = min(max(offs[g - 1], 0), K_total), k_end(g) = min(max(offs[g], k_start(g)), K_total)",
                    "two loads a work item, by producer and consumers alike; the clamp keeps any offs inside A and B "
                    "(decreasing offs give empty or overlapping ranges)",
                    TORCH_REF),
            Derived("k_base", "k_start" if self.k_align == 1 else f"k_start rounded down to {self.k_align}",
                    "k_base = k_start - k_start % k_align",
                    "both operands MN-major: K is the maps' outer coordinate, any row starts a box" if self.k_align == 1 else
                    f"a K-major operand has K as its map's inner coordinate: a box starts on 16 bytes ({self.k_align} "
                    "elements; an unaligned inner coordinate is not taken), so the first K-tile starts below k_start",
                    "PTX ISA 'Tensor' (tile mode); tile-ai/tilelang#2681"),
            Derived("k_trips", f"ceil((k_end - k_base) / {bk}), 0 if k_end == k_start",
                    f"K-tile t loads K indices k_base + {bk} t .. + {bk - 1}; both roles derive the count from the same offs "
                    "values, so the full/empty barrier phases stay paired",
                    "a group with no K rows has no K-tile: the accumulator stays 0 and the epilogue stores zeros (as torch)",
                    "ptxgen.model.layouts.kgroupmodel"),
        ) + (() if self.k_block else (
            Derived("k_tail", "zero K >= k_end in the last K-tile's A and B stages"
                    + ("" if self.k_align == 1 else ", and K < k_start in the first"),
                    "after full[s] of that K-tile: each consumer thread zeroes its share of the cells (K-major: the "
                    "elements of a 16-byte cell outside [k_start, k_end); MN-major: whole cells of those K rows) at their "
                    "swizzled offsets, fence.proxy.async.shared::cta, then a named barrier of the consumer warpgroups",
                    "TMA clips at K_total only, so the box holds the next group's first K rows; zeroed, they add nothing. "
                    "Chosen over per-group tensor maps (tensormap.replace + fence.proxy.tensormap::generic): no map in global "
                    "memory per CTA, no acquire fence per group switch, and the host's maps stay as encoded",
                    f"{PTX_FENCE_REF}; {DEEPGEMM_REF}"),
        )) + (self._cluster_derivation() or (
            Derived("kgrouped_grid", "min(SMs, G x tiles_m x tiles_n)", "one CTA per SM, at most one per work item",
                    "the persistent walk", "ptxgen.derive.roles.kgrouped.KGroupedPlan.ctas"),
        )) + ((
            Derived("kgrouped_scales", "acc x scale_a[g M + row] x scale_b[g N + column]",
                    "after the item's K loop, before the stores, each accumulator element of a row < M and column < N is "
                    "multiplied by its group's row scale of A and column scale of B (f32); others by 0",
                    "torch._scaled_grouped_mm's 2-D x 2-D row-wise FP8 scales: scale_a of G M values (group g's rows at g M), "
                    "scale_b of G N (group g's columns at g N). An empty group's accumulator is 0, so out[g] is 0 x scales",
                    TORCH_SCALED_REF),
        ) if self.rowwise else ()) + ((
            Derived("kgrouped_blocks", f"group boundaries on multiples of {self.k_block}; K-tile kt of a group reads "
                    f"scale block k_start / {self.k_block} + kt",
                    f"each role checks k_start % {self.k_block} == 0 and (k_end % {self.k_block} == 0 or k_end == K_total); "
                    "a group that fails takes no K-tile and its out[g] is stored as NaN; otherwise every K-tile is one whole "
                    "scale block of one group (no K tail to zero: past K_total TMA reads zeros) and the scale warp starts at "
                    f"block k_start / {self.k_block}",
                    "the 1D1D recipe's scales are one per row per 128 of K (scale_a (K_total / 128) x M, scale_b (K_total / 128) "
                    "x N, MN-major): with groups on block boundaries every block belongs to one group, DeepGEMM's k-grouped "
                    "contract (it asserts it on the host, which reads the group sizes; offs here stay on the GPU, so a "
                    "broken boundary shows as NaN rather than as another group's K rows scaled by the wrong block)",
                    "DeepGEMM k_grouped_fp8_gemm_tn_contiguous (1D1D, per-group K a multiple of 128)"),
        ) if self.k_block else ())

    def _cluster_derivation(self) -> tuple[Derived, ...]:
        cm, cn = self.cluster
        if cm * cn == 1:
            return ()
        shared, along = ("B", "M") if cm > 1 else ("A", "N")
        return (
            Derived("kgrouped_cluster", f"{cm}x{cn}: G x ceil(tiles_m / {cm}) x ceil(tiles_n / {cn}) items",
                    f"item i: group i / (clusters_m clusters_n), then the cluster schedule on that group's cluster tiles; "
                    f"grid = {cm * cn} x min(work items, SMs / {cm * cn}, the clusters that fit at once)",
                    f"both CTAs of an item take neighbouring tiles along {along} of one group: the same K range, trip count and "
                    f"K tail, so they read the same {shared} K-tiles, which each loads half of and multicasts (a CTA past the "
                    "last tile repeats its neighbour's and stores nothing)",
                    "ptxgen.derive.roles.schedule.SchedulePlan.cta_tile; CUTLASS PersistentTileSchedulerSm90"),
        )

    def walk_picture(self, offs: Sequence[int] | None = None, k_total: int | None = None) -> list[str]:
        """The K blocks of an example (groups of 0, 1, BK + 1 and BK K rows): what each group's K-tiles load and zero
        (with k_block: whole blocks, a group off them, a short last group; which scale block each K-tile reads)."""
        if self.k_block:
            return self._blocks_picture(offs, k_total)
        if offs is None:
            offs = [0, 1, self.bk + 2, 2 * self.bk + 2]
        k_total = k_total if k_total is not None else int(offs[-1])
        lines = [f"  example: offs = {list(map(int, offs))}, K_total = {k_total}; each group's K-tiles (every tile of its out[g]):"]
        for g, (ks, ke) in enumerate(self.group_k(offs, k_total)):
            blocks = self.k_blocks(ks, ke)
            if not blocks:
                lines.append(f"  group {g}: K {ks}..{ke - 1} is empty: no K-tile, out[{g}] stored as zeros")
                continue
            parts = []
            for k0, lo, hi in blocks:
                zero = (f", zero K {k0}..{k0 + lo - 1}" if lo else "") + (f", zero K {k0 + hi}..{k0 + self.bk - 1}" if hi < self.bk else "")
                parts.append(f"K {k0}..{k0 + self.bk - 1}{zero}")
            lines.append(f"  group {g}: {len(blocks)} K-tile(s): " + "; ".join(parts))
        if self.rowwise:  # torch's test_scaled_grouped_gemm_2d_2d shape: M = 16, N = 32
            ia, ib = self.scale_index(2, 5, 7, 16, 32)
            lines.append(f"  scales (M = 16, N = 32): out[g][row, col] x scale_a[g M + row] x scale_b[g N + col]; out[2][5, 7] "
                         f"reads scale_a[{ia}] and scale_b[{ib}]; rows >= M and columns >= N are multiplied by 0, not stored")
        return lines

    def _blocks_picture(self, offs: Sequence[int] | None, k_total: int | None) -> list[str]:
        kb = self.k_block
        offs = list(offs) if offs is not None else [0, kb, kb + 72, 3 * kb, 3 * kb + 50]
        k_total = k_total if k_total is not None else int(offs[-1])
        lines = [f"  example: offs = {list(map(int, offs))}, K_total = {k_total}; each group's K-tiles and the scale "
                 "block (row of scale_a and scale_b) each reads:"]
        for g, (ks, ke) in enumerate(self.group_k(offs, k_total)):
            if ke <= ks:
                lines.append(f"  group {g}: K {ks}..{ke - 1} is empty: no K-tile, out[{g}] stored as zeros")
            elif not self.blocks_aligned(ks, ke, k_total):
                lines.append(f"  group {g}: K {ks}..{ke - 1} is off the {kb}-blocks: no K-tile, out[{g}] stored as NaN")
            else:
                parts = [f"K {k0}..{k0 + self.bk - 1}" + (f" (zeros from {k_total}, past K_total)" if k0 + self.bk > k_total else "")
                         + f": block {blk}" for (k0, _, _), blk in zip(self.k_blocks(ks, ke), self.scale_blocks(ks, ke, k_total))]
                lines.append(f"  group {g}: {len(parts)} K-tile(s): " + "; ".join(parts))
        return lines
