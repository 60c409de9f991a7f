"""Render context of the scheduler pieces: which tile a work item is (grouped raster order, clusters, CTA pairs),
and the launch grid's description."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...derive.roles.schedule import SchedulePlan


def tile_coords_c(schedule: SchedulePlan, bm: int, bn: int, tile: str = "tile", pair=None) -> tuple[str, ...]:
    """C statements defining m0, n0 (the tile's first row and column) from work item ``tile``: the grouped
    order of SchedulePlan.tile_of, with the plan's group size. A CTA pair also defines m_cta, n_cta: the first
    row of A (and D) and of B this CTA holds (CtaPairPlan: rank r starts r x BM/2 and r x BN/2 further)."""
    g = schedule.raster_group
    extra = () if pair is None else (
        f"const int m_cta = m0 + static_cast<int>(cta_rank) * {pair.a_rows};  // this CTA's rows of A and D",
        f"const int n_cta = n0 + static_cast<int>(cta_rank) * {pair.b_rows};  // this CTA's rows of B",
        "(void)m_cta;",
        "(void)n_cta;",
    )
    return (
        f"const int group_tiles = {g} * tiles_n;  // {g} tile rows per group, visited column by column",
        f"const int first_m = {tile} / group_tiles * {g};",
        f"const int group_rows = min(tiles_m - first_m, {g});",
        f"const int within = {tile} % group_tiles;",
        f"const int m0 = (first_m + within % group_rows) * {bm};",
        f"const int n0 = within / group_rows * {bn};",
    ) + extra


BATCH = "bz"  # the C name of a batched tile's batch index


def batched_tile_coords_c(schedule: SchedulePlan, bm: int, bn: int, tile: str = "tile") -> tuple[str, ...]:
    """A batched (or K-grouped) kernel's work item ``tile``: its batch ``bz`` (the outer index: batch z's items are
    z x items .. (z + 1) x items - 1), then m0, n0 of the item inside the batch as :func:`tile_coords_c` walks them
    (SchedulePlan.tile_of on each batch's tiles_m x tiles_n grid); with a cluster, the batch's items are its cluster
    tiles and :func:`cluster_tile_coords_c` takes this CTA's tile of one (SchedulePlan.cta_tile)."""
    if schedule.cluster_size == 1:
        per, inner = "tiles_m * tiles_n", tile_coords_c(schedule, bm, bn, "tile_in_batch")
    else:
        per, inner = "clusters_m * clusters_n", cluster_tile_coords_c(schedule, bm, bn, "tile_in_batch")
    return (
        f"const int {BATCH} = {tile} / ({per});  // the batch: every item of batch z before those of z + 1",
        f"const int tile_in_batch = {tile} % ({per});",
        f"(void){BATCH};",
    ) + inner


def batched_d_base_c(out_bytes: int) -> str:
    """The C address of batch ``bz``'s D (a byte pointer): ldd_batch elements of ``out_bytes`` per batch."""
    return f"(D + static_cast<size_t>({BATCH}) * ldd_batch * {out_bytes}u)"


def cluster_tile_coords_c(schedule: SchedulePlan, bm: int, bn: int, tile: str = "tile") -> tuple[str, ...]:
    """C statements defining m0, n0 and tile_active for this CTA of a 2-CTA cluster at work item ``tile``:
    SchedulePlan.cta_tile (the grouped order on the grid of cluster tiles, then the CTA's rank inside it)."""
    g, (cm, cn) = schedule.pair_group, schedule.cluster
    return (
        f"const int group_tiles = {g} * clusters_n;  // {g} cluster row(s) of {cm} x {cn} tiles per group, visited column by column",
        f"const int first_m = {tile} / group_tiles * {g};",
        f"const int group_rows = min(clusters_m - first_m, {g});",
        f"const int within = {tile} % group_tiles;",
        f"const int tile_m = (first_m + within % group_rows) * {cm} + cta_rank_m;",
        f"const int tile_n = within / group_rows * {cn} + cta_rank_n;",
        "const bool tile_active = tile_m < tiles_m && tile_n < tiles_n;  // else: repeat the last tile's loads and MMAs, store nothing",
        f"const int m0 = min(tile_m, tiles_m - 1) * {bm};",
        f"const int n0 = min(tile_n, tiles_n - 1) * {bn};",
    )


@dataclass(frozen=True)
class PairView:
    """The CTA pair's rendered facts (ptxgen.derive.roles.ctapair)."""

    cluster: str
    leader_rank: int
    commit_mask: str
    commit_mask_doc: str
    a_rows: int
    b_rows: int


@dataclass(frozen=True)
class ClusterView:
    size: int
    cm: int
    cn: int
    rank_m_expr: str  # C: this CTA's tile offset inside the cluster tile, along M / N
    rank_n_expr: str
    doc: str


def grid_doc(plan: KernelPlan) -> str:
    """The launch grid in words: x, then y and z (z: the splits of a split-K kernel)."""
    return _grid_x_doc(plan) + (f", 1, {plan.spec.split_k}" if plan.split is not None else ", 1, 1")


def _grid_x_doc(plan: KernelPlan) -> str:
    s, sch = plan.spec, plan.schedule
    if plan.grouped is not None:
        return f"min(SMs, (ceil(M / {s.bm}) + G - 1) x ceil(N / {s.bn})), an upper bound of the groups' tiles"
    if plan.kgrouped is not None:
        return f"min(SMs, G x ceil(M / {s.bm}) x ceil(N / {s.bn})), every group's tiles of out[g]"
    tiles = f" with tiles = ceil(M / {s.bm}) x ceil(N / {s.bn})" + (" x batch" if s.batch.value != "none" else "")
    if s.pair:
        return ("2 x min(tiles, SMs / 2)" if sch.persistent else "2 x tiles") + tiles + "; clusters of 2 CTAs (__cluster_dims__), one CTA pair per tile"
    if sch.cluster_size == 1:
        return ("min(tiles, SMs)" if sch.persistent else "tiles") + tiles
    cm, cn = sch.cluster
    items = f"ceil(ceil(M / {s.bm}) / {cm}) x ceil(ceil(N / {s.bn}) / {cn}) cluster tiles"
    return f"{sch.cluster_size} x " + (f"min(cluster tiles, SMs / {sch.cluster_size})" if sch.persistent else "cluster tiles") + f" with {items}"


def cluster_view(plan: KernelPlan) -> ClusterView | None:
    sch = plan.schedule
    if sch.cluster_size == 1:
        return None
    cm, cn = sch.cluster
    rank = "static_cast<int>(cta_rank)"
    shared = plan.spec.cluster.shared_operand.upper()
    return ClusterView(sch.cluster_size, cm, cn, rank if cm > 1 else "0", rank if cn > 1 else "0",
                       f"{cm}x{cn} cluster: two CTAs on neighbouring tiles along {'M' if cm > 1 else 'N'} share {shared} (TMA multicast)")
