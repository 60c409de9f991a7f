"""The grouped (mixture-of-experts) GEMM: one persistent launch over the (group, tile) pairs of G GEMMs.

The ``torch._grouped_mm`` convention: ``a`` is 2-D, the groups' rows stacked along M (M_total x K);
``offs`` (int32, G values, on the GPU) holds the cumulative row ends, so group g owns rows
``offs[g - 1] .. offs[g] - 1`` (``offs[-1]`` is 0); ``b`` is G x N x K, K-major; ``out`` rows of group g are
``a[rows of g] @ b[g]^T``. Nothing on the host reads ``offs``: the kernel walks the groups itself.

**The walk.** Work items are numbered group by group: group g has ``tiles_m(g) x tiles_n`` of them, with
``tiles_m(g) = ceil(rows(g) / BM)`` (0 for an empty group) and ``tiles_n = ceil(N / BN)``. Inside a group the
items follow the grouped raster of :class:`~ptxgen.derive.roles.schedule.SchedulePlan` (``raster_group`` tile rows,
column by column) on that group's tiles_m(g) x tiles_n grid. A persistent CTA takes items c, c + grid, ...;
since its items only grow, each role keeps a cursor (the group, its first item and its rows) and moves it
forward, reading one ``offs`` value per group it passes; an empty group costs one load and no tile. The walk
ends when the cursor passes the last group, so the host needs neither the groups' sizes nor the item count;
the grid is ``min(SMs, ceil(M_total / BM) + G - 1) x tiles_n)`` (an upper bound of the items).

**Untrusted offs.** A group's end is clamped into [its start, M_total] (``row_end = min(max(offs[g], row_start),
M_total)``): decreasing or too-large values make empty or shortened groups, never a read or write outside A or D.

**No per-group tensor map.** A is read through one 2-D map over M_total x K, B through one 2-D map over its
(G x N) x K rows (``b`` viewed as one matrix; B's rows of group g are ``g N .. g N + N - 1``). A tile of group
g loads A rows ``m0 .. m0 + BM - 1`` and B rows ``g N + n0 .. g N + n0 + BN - 1``. Past the group's last row
(A) or past N (B), those rows belong to the next group; they are multiplied only into accumulator rows
(columns) that the epilogue does not store: it stores row r only if ``r < row_end`` and column c only if
``c < N``. Past the end of the whole tensor, TMA reads zeros. K is shared by all groups, so the K tail is
zero-filled as in a dense GEMM. ``ptxgen.model.layouts.groupmodel`` checks this element by element.

>>> p = GroupedPlan(bm=128, bn=256, raster_group=8)
>>> p.group_rows([100, 100, 400], 400)   # group 1 is empty
((0, 100), (100, 100), (100, 400))
>>> [(t.group, t.tile_m, t.tile_n, t.a_row0, t.b_row0) for t in p.walk([100, 100, 400], 400, 300)]
[(0, 0, 0, 0, 0), (0, 0, 1, 0, 256), (2, 0, 0, 100, 600), (2, 1, 0, 228, 600), (2, 2, 0, 356, 600), (2, 0, 1, 100, 856), (2, 1, 1, 228, 856), (2, 2, 1, 356, 856)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..tile.derived import Derived
from .schedule import SchedulePlan

TORCH_REF = "torch._grouped_mm (2-D a stacked along M, int32 offs of cumulative row ends, 3-D b)"
CUTLASS_REF = ("CUTLASS GroupProblemVisitor / PersistentTileSchedulerSm90Group "
               "(include/cutlass/gemm/kernel/sm90_tile_scheduler_group.hpp)")


@dataclass(frozen=True)
class GroupTile:
    """One work item of the grouped walk: which group and tile, which rows of A and B it reads, what it stores."""

    item: int  # the work item (a CTA takes items c, c + grid, ...)
    group: int
    tile_m: int  # the tile row inside the group
    tile_n: int
    a_row0: int  # first row of A (and D) the tile loads: the group's start + tile_m x BM
    b_row0: int  # first row of B's (G x N) x K view it loads: group x N + tile_n x BN
    n0: int  # first column of D
    row_end: int  # the group's end: rows >= row_end are loaded and multiplied but never stored


@dataclass(frozen=True)
class GroupedPlan:
    bm: int
    bn: int
    raster_group: int
    rowwise: bool = False  # torch._scaled_grouped_mm's scales: acc x scale_a[row] x scale_b[group, column]
    b_n_major: bool = False  # B N-major (stored G x K x N): one 3-D map over (N, K, G) instead of the (G N) x K view

    @staticmethod
    def group_rows(offs: Sequence[int], m_total: int) -> tuple[tuple[int, int], ...]:
        """(start, end) rows of every group, with the kernel's clamp: end = min(max(offs[g], start), M_total)."""
        rows, start = [], 0
        for o in offs:
            end = min(max(int(o), start), m_total)
            rows.append((start, end))
            start = end
        return tuple(rows)

    def tiles_m(self, rows: int) -> int:
        return -(-rows // self.bm)

    def tiles_n(self, n: int) -> int:
        return -(-n // self.bn)

    def walk(self, offs: Sequence[int], m_total: int, n: int) -> tuple[GroupTile, ...]:
        """Every work item in order (what the kernel's cursor visits)."""
        tn = self.tiles_n(n)
        raster = SchedulePlan(True, self.raster_group)
        out, item = [], 0
        for g, (start, end) in enumerate(self.group_rows(offs, m_total)):
            tm = self.tiles_m(end - start)
            for local in range(tm * tn):
                i, j = raster.tile_of(local, tm, tn)
                out.append(GroupTile(item, g, i, j, start + i * self.bm, g * n + j * self.bn, j * self.bn, end))
                item += 1
        return tuple(out)

    def max_work_items(self, m_total: int, groups: int, n: int) -> int:
        """An upper bound of the work items for any offs: sum_g ceil(rows_g / BM) < M_total / BM + G, so it is at
        most ceil(M_total / BM) + G - 1 tile rows, times tiles_n (what the host sizes the grid and int range by)."""
        if groups <= 0:
            return 0
        return (-(-m_total // self.bm) + groups - 1) * self.tiles_n(n)

    def ctas(self, m_total: int, groups: int, n: int, sm_count: int) -> int:
        """The persistent grid: one CTA per SM, never more than the bound on the work items (at least 1)."""
        return max(1, min(sm_count, self.max_work_items(m_total, groups, n)))

    def walk_picture(self, offs: Sequence[int] | None = None, m_total: int | None = None, n: int | None = None,
                     grid: int = 3) -> list[str]:
        """The walk for an example (default: groups of 0, 1, BM + 1 and 0 rows, N = BN + 1) on a small grid: what each
        CTA's items are, which rows of A and B they load and which rows of D they store."""
        if offs is None:
            offs = [0, 1, self.bm + 2, self.bm + 2]
        m_total = m_total if m_total is not None else int(offs[-1])
        n = n if n is not None else self.bn + 1
        rows = self.group_rows(offs, m_total)
        lines = [f"  example: offs = {list(map(int, offs))} (groups of {', '.join(str(e - s) for s, e in rows)} rows), "
                 f"M = {m_total}, N = {n}, a grid of {grid} CTAs (CTA c takes items c, c + {grid}, ...):"]
        for t in self.walk(offs, m_total, n):
            stored_hi = min(t.a_row0 + self.bm, t.row_end) - 1
            cols_hi = min(t.n0 + self.bn, n) - 1
            lines.append(f"  item {t.item:<3} CTA {t.item % grid}: group {t.group} tile ({t.tile_m}, {t.tile_n}): loads A rows "
                         f"{t.a_row0}..{t.a_row0 + self.bm - 1}, B rows {t.b_row0}..{t.b_row0 + self.bn - 1} of (G N) x K; "
                         f"stores D rows {t.a_row0}..{stored_hi}, columns {t.n0}..{cols_hi}")
        empty = [g for g, (s, e) in enumerate(rows) if e == s]
        if empty:
            lines.append(f"  groups {empty} are empty: no items (each costs the cursor one offs load)")
        return lines

    def derivation(self) -> tuple[Derived, ...]:
        return self._walk_derivation() + ((
            Derived("grouped_scales", "acc x scale_a[row] x scale_b[g N + column]",
                    "after the main loop, before the epilogue, each accumulator element of a stored row and column is "
                    "multiplied by its row's scale of A and its group's column scale of B (f32); others by 0",
                    "torch._scaled_grouped_mm's row-wise FP8 scales: scale_a of M values, scale_b of G x N",
                    "torch._scaled_grouped_mm (2-D a, 3-D b, offs; scale_a (M,), scale_b (G, N))"),) if self.rowwise else ())

    def _b_map_derivation(self) -> tuple[Derived, ...]:
        if self.b_n_major:
            return (Derived(
                "grouped_b_map", "one 3-D map over (N, K, G)",
                "tile (g, tile_m, tile_n) loads B at coordinates (tile_n BN + [0, BN), k0 + [0, BK), g): N contiguous, then K "
                "(row stride ldb), then the group (stride ldb_group, any gap)",
                "every group's weight has the same N x K, so the group is just the map's outermost dimension: TMA checks each "
                "coordinate against its own extent, so a K tail reads zeros, not the next group's first K rows (which a "
                "(G K) x N 2-D view would put there). No per-group map exists, so none is written on the device "
                "(tensormap.replace, with its fences) or by the host",
                "PTX ISA 'Tensor' (each coordinate bounds-checked, out-of-bounds elements zero-filled); ptxgen.derive.operands.tma; "
                "ptxgen.model.layouts.tmamodel.write_3d"),)
        return (Derived("grouped_b_map", "one 2-D map over (G x N) x K",
                    "tile (g, tile_m, tile_n) loads A rows row_start(g) + tile_m BM + [0, BM) and B rows g N + tile_n BN + [0, BN)",
                    "rows past the group's end (A) or past N (B) belong to the next group and feed only accumulator rows or "
                    "columns the epilogue does not store (row >= row_end(g), column >= N); past the tensors TMA reads zeros. "
                    "No per-group tensor map, so none is written on the device (tensormap.replace) or by the host",
                    "PTX ISA 'Tensor' (out-of-bounds elements are zero-filled); ptxgen.model.layouts.groupmodel"),)

    def _walk_derivation(self) -> tuple[Derived, ...]:
        return (
            Derived("grouped_walk", "groups x tiles",
                    f"work items numbered group by group; group g has ceil(rows_g / {self.bm}) x ceil(N / {self.bn}) items, "
                    f"in the grouped raster ({self.raster_group} tile rows, column by column) of its own tile grid; each role "
                    "keeps a cursor (group, first item, start row, end row) and moves it forward, one offs load per group passed",
                    "the group sizes live only on the GPU (offs), so the kernel finds its tiles itself: no host read of offs, "
                    "a call can be captured in a CUDA graph, an empty group costs one load and no tile",
                    f"{TORCH_REF}; {CUTLASS_REF}"),
            Derived("group_rows", "row_start(g) .. row_end(g) - 1",
                    "row_start(0) = 0, row_start(g) = row_end(g - 1), row_end(g) = min(max(offs[g], row_start(g)), M)",
                    "the clamp keeps any offs (decreasing, past M) inside A and D: such groups are empty or shortened",
                    TORCH_REF),
            Derived("grouped_grid", "min(SMs, (ceil(M / BM) + G - 1) x tiles_n)",
                    f"sum_g ceil(rows_g / {self.bm}) < M / {self.bm} + G, so at most ceil(M / {self.bm}) + G - 1 tile rows",
                    "the host sizes the persistent grid from M, N and G alone; CTAs past the last item leave at once",
                    "ptxgen.derive.roles.grouped.GroupedPlan.max_work_items"),
*self._b_map_derivation(),
            Derived("grouped_store", "row < row_end(g) and column < N",
                    "the direct epilogue masks rows with the group's end instead of M; the TMA-store epilogue is used only for "
                    f"tiles whose {self.bm} rows all lie in the group (m0 + {self.bm} <= row_end(g)), because a TMA store "
                    "clips at M, not at the group's end",
                    "the next group's rows of D belong to the next group's tiles",
                    "ptxgen.model.layouts.groupmodel (check_walk); PTX ISA 'cp.async.bulk.tensor' (a store clips at the tensor's bounds)"),
        )
