"""The tile scheduler: which output tile the i-th work item is, and how many CTAs run.

Tiles are visited in groups of ``G`` tile rows (Triton's "grouped ordering"): inside a group, column by
column, so that consecutive CTAs share B tiles and a group's A tiles stay in L2. ``tile_of`` is a
bijection of 0..tiles_m * tiles_n - 1 onto the tiles for any tile counts (partial tiles included);
tests/test_schedule.py checks it, and checks the C the emit layer renders from the same plan against it.

>>> p = SchedulePlan(persistent=False, raster_group=2)
>>> [p.tile_of(i, 3, 2) for i in range(6)]
[(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.types import Schedule
from ..tile.derived import Derived
from ..tile.spec import TileSpec


@dataclass(frozen=True)
class SchedulePlan:
    persistent: bool
    raster_group: int
    cluster: tuple[int, int] = (1, 1)  # CTAs of a cluster along M, along N

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1]

    @property
    def pair_group(self) -> int:
        """The raster group in cluster rows: ``raster_group`` tile rows, at least one cluster row."""
        return max(1, self.raster_group // self.cluster[0])

    def work_items(self, tiles_m: int, tiles_n: int) -> tuple[int, int]:
        """(cluster rows, cluster columns): the grid of cluster tiles (cm x cn output tiles each), partial ones included."""
        cm, cn = self.cluster
        return -(-tiles_m // cm), -(-tiles_n // cn)

    def cta_tile(self, i: int, rank: int, tiles_m: int, tiles_n: int) -> tuple[int, int, bool]:
        """(tile row, tile column, active) of CTA ``rank`` of the cluster at work item ``i``. A CTA whose tile
        lies past the last tile row/column is inactive: it repeats its neighbour's (the last) tile so that its
        share of the multicast loads is still issued, and stores nothing."""
        cm, cn = self.cluster
        pm_n, pn_n = self.work_items(tiles_m, tiles_n)
        pm, pn = SchedulePlan(False, self.pair_group).tile_of(i, pm_n, pn_n)
        tm, tn = pm * cm + rank % cm, pn * cn + rank // cm
        active = tm < tiles_m and tn < tiles_n
        return min(tm, tiles_m - 1), min(tn, tiles_n - 1), active

    def tile_of(self, i: int, tiles_m: int, tiles_n: int) -> tuple[int, int]:
        """(tile row, tile column) of work item ``i``."""
        group_tiles = self.raster_group * tiles_n
        first_m = i // group_tiles * self.raster_group
        rows = min(tiles_m - first_m, self.raster_group)
        within = i % group_tiles
        return first_m + within % rows, within // rows

    def derivation(self) -> tuple[Derived, ...]:
        return self._base_derivation() + self._cluster_derivation()

    def _cluster_derivation(self) -> tuple[Derived, ...]:
        if self.cluster_size == 1:
            return ()
        cm, cn = self.cluster
        along, shared = ("M", "B") if cm == 2 else ("N", "A")
        return (
            Derived("cluster_schedule", f"{cm}x{cn}",
                    f"work item i -> cluster tile (pm, pn) by the grouped order on ceil(tiles_m / {cm}) x ceil(tiles_n / {cn}) with "
                    f"group {self.pair_group} cluster row(s); CTA rank r takes tile ({cm} pm + {'r' if cm == 2 else '0'}, {cn} pn + {'r' if cn == 2 else '0'}); "
                    f"grid = {self.cluster_size} x " + ("min(work items, SMs / 2, the clusters cuOccupancyMaxActiveClusters says fit)" if self.persistent else "work items")
                    + "; a CTA past the last tile repeats the last tile's loads and MMAs and stores nothing",
                    f"the two CTAs of a cluster take neighbouring tiles along {along} on every iteration, so they read the same {shared} "
                    "tile; both walk the same work items, so both issue their share of every multicast (a CTA without a tile must "
                    "still load its half, or its neighbour would wait forever)",
                    "CUTLASS PersistentTileSchedulerSm90 (cluster-major tile order; include/cutlass/gemm/kernel/sm90_tile_scheduler.hpp)"),
        )

    def _base_derivation(self) -> tuple[Derived, ...]:
        return (
            Derived("schedule", "persistent" if self.persistent else "tile",
                    "grid = min(tiles, SMs); CTA c takes tiles c, c + grid, ..." if self.persistent else "grid = tiles, one CTA each",
                    "a persistent CTA keeps its pipeline running across tiles: the producer loads the next tile while "
                    "the consumers store this one" if self.persistent else "the simplest schedule",
                    "CUTLASS PersistentTileSchedulerSm90 (include/cutlass/gemm/kernel/sm90_tile_scheduler.hpp)"),
            Derived("raster_group", self.raster_group,
                    f"tile i -> group i / ({self.raster_group} x tiles_n); row first_m + (i mod group) mod rows, "
                    "column (i mod group) / rows",
                    "consecutive tiles share B columns and a group's A rows, which stay in L2", "Triton matmul tutorial, 'L2 cache optimizations'"),
        )


def plan_schedule(spec: TileSpec) -> SchedulePlan:
    return SchedulePlan(persistent=spec.schedule is Schedule.PERSISTENT, raster_group=spec.raster_group, cluster=spec.cluster.dims)
