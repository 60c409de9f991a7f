"""The chooser's shared pieces (a leaf of ``runtime.choose`` and ``runtime.swaprules``): what a rule returns and the
one-CTA-per-tile kernel family the narrow rules derive from the table's kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..derive.spec import TileSpec
from ..isa.types import Cluster, Consumers, Epilogue, Schedule

SM_COUNT = 132  # the H200's multiprocessors: the shipped table is the H200's
SMALL_M_MAX = 128


@dataclass(frozen=True)
class Choice:
    spec: TileSpec
    why: str
    chosen_by: str  # the rule: tuned | swap-ab | small-m | small-n | split-k | cost-model | cost-model+swap-ab | nearest-fit | default (+off-sector, +stream-k)
    # swap-ab: run the spec (D M-major) on the swapped problem: its A is the caller's b (N x K), its B the caller's a
    # (M x K), its M x N result the caller's D transposed (problem N x M x K, ldd = D's row pitch)
    swap_ab: bool = False


def narrow_spec(like: TileSpec, bm: int, bn: int, stages: int) -> TileSpec:
    """The table's kernel family (types, operand layouts, arch) with a ``bm`` x ``bn`` tile, one CTA per tile,
    direct stores (run 25 measured these for small M; the TMA-store variant was no better)."""
    return dataclasses.replace(like, bm=bm, bn=bn, stages=stages, schedule=Schedule.TILE, raster_group=8,
                               consumers=Consumers.COOPERATIVE, epilogue=Epilogue.DIRECT, cluster=Cluster.C1X1)
