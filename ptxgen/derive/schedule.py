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

from ..isa.types import Schedule
from .derived import Derived
from .spec import TileSpec


@dataclass(frozen=True)
class SchedulePlan:
    persistent: bool
    raster_group: int

    def tile_of(self, i: int, tiles_m: int, tiles_n: int) -> tuple[int, int]:
        """(tile row, tile column) of work item ``i``."""
        group_tiles = self.raster_group * tiles_n
        first_m = i // group_tiles * self.raster_group
        rows = min(tiles_m - first_m, self.raster_group)
        within = i % group_tiles
        return first_m + within % rows, within // rows

    def ctas(self, num_tiles: int, sm_count: int) -> int:
        """Grid size: every tile its own CTA, or one CTA per SM (never more CTAs than tiles)."""
        return min(num_tiles, sm_count) if self.persistent else num_tiles

    def derivation(self) -> tuple[Derived, ...]:
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
    return SchedulePlan(persistent=spec.schedule is Schedule.PERSISTENT, raster_group=spec.raster_group)
