"""C for the grouped walk (ptxgen.derive.roles.grouped): the cursor every role keeps, and the tile a work item is.

Rendered from a :class:`~ptxgen.derive.roles.grouped.GroupedPlan`; the templates paste these lines and do no
arithmetic of their own. tests/test_grouped_schedule.py compiles exactly these lines as host C (gcc) and
checks the walk they produce against the plan and against the independent model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.roles.grouped import GroupedPlan
from .fragment import WgmmaFragmentView, wgmma_fragment_view

CURSOR = "gc"


def cursor_struct_c() -> str:
    return """// The grouped walk (ptxgen.derive.roles.grouped): a cursor over the groups, moved forward as a CTA's work items grow.
struct GroupCursor {
  int group;    // the group holding the current work item (-1 before the first seek)
  int first;    // the group's first work item
  int items;    // its work items: tiles_m x tiles_n
  int tiles_m;  // its tile rows: ceil(rows / BM), 0 for an empty group
  int row0;     // its first row of A and D
  int row_end;  // one past its last row: min(max(offs[group], row0), M)
};"""


def seek_fn_c(plan: GroupedPlan) -> str:
    """``group_seek``: move the cursor to the group holding work item ``tile``; false once past the last group."""
    return f"""// Move the cursor to the group holding work item `tile` (a CTA's items only grow); false past the last group.
// One offs load per group passed; an empty group has no items and is passed at once.
__device__ __forceinline__ bool group_seek(GroupCursor& c, int tile, const int* __restrict__ offs, int G, int M, int tiles_n) {{
  while (tile >= c.first + c.items) {{
    if (c.group + 1 >= G) return false;
    c.first += c.items;
    c.row0 = c.row_end;
    c.group += 1;
    c.row_end = min(max(offs[c.group], c.row0), M);  // untrusted offs: clamp into [row0, M]
    c.tiles_m = (c.row_end - c.row0 + {plan.bm - 1}) / {plan.bm};
    c.items = c.tiles_m * tiles_n;
  }}
  return true;
}}"""


def cursor_init_c() -> str:
    return f"GroupCursor {CURSOR} = {{-1, 0, 0, 0, 0, 0}};"


def loop_condition_c(tile: str = "tile") -> str:
    """The persistent loop's condition: the cursor reaches the item's group (no item count on the host)."""
    return f"group_seek({CURSOR}, {tile}, offs, G, M, tiles_n)"


def tile_coords_c(plan: GroupedPlan, tile: str = "tile") -> tuple[str, ...]:
    """C statements defining m0, n0 (the tile's first row of A and D, first column of D), row_end (rows at or
    past it belong to the next group: loaded, never stored) and nb0 (the tile's first row of B's (G x N) x K
    view) for work item ``tile``, once the cursor holds its group: SchedulePlan's grouped raster on the
    group's tiles_m x tiles_n grid (GroupedPlan.walk)."""
    g, c = plan.raster_group, CURSOR
    return (
        f"const int local = {tile} - {c}.first;  // the item inside its group",
        f"const int group_tiles = {g} * tiles_n;  // {g} tile rows per raster group, visited column by column",
        "const int first_m = local / group_tiles * " + str(g) + ";",
        f"const int group_rows = min({c}.tiles_m - first_m, {g});",
        "const int within = local % group_tiles;",
        f"const int m0 = {c}.row0 + (first_m + within % group_rows) * {plan.bm};",
        f"const int n0 = within / group_rows * {plan.bn};",
        f"const int row_end = {c}.row_end;  // D rows >= row_end are the next group's: loaded, multiplied, not stored",
        f"const int nb0 = {c}.group * N + n0;  // B rows of this group's weight in the (G x N) x K view",
        "(void)row_end;",
        "(void)nb0;",
    )


@dataclass(frozen=True)
class GroupedView:
    """What the templates receive for a grouped kernel: the cursor's C, the loop's condition, the walk's doc."""

    helpers: str  # the GroupCursor struct and group_seek
    init: str  # the cursor's declaration, before each role's tile loop
    condition: str  # the tile loop's condition
    row_limit: str  # rows of D at or past it are not stored (the group's end)
    b_row0: str  # the first row of B's (G x N) x K view a tile loads (a K-major B's 2-D map)
    doc: str
    group: str = f"{CURSOR}.group"  # the tile's group: an N-major B's 3-D map's third coordinate


def grouped_view(plan: GroupedPlan) -> GroupedView:
    return GroupedView(
        helpers=cursor_struct_c() + "\n" + seek_fn_c(plan),
        init=cursor_init_c(),
        condition=loop_condition_c(),
        row_limit="row_end",
        b_row0="nb0",
        doc=(f"grouped GEMM (torch._grouped_mm layout): work items group by group, ceil(rows_g / {plan.bm}) x ceil(N / {plan.bn}) "
             f"each; a cursor per role reads offs[g] as it passes group g; A rows past the group's end and B rows past N are "
             "loaded but never stored"),
    )


@dataclass(frozen=True)
class RowScalesView:
    """Row-wise FP8 scales on the f32 accumulator (torch._scaled_grouped_mm), after a work item's K loop: the element
    of ``scale_a`` and of ``scale_b`` that accumulator element (row, col) of this tile's group reads, and the limits
    past which it is multiplied by 0 (nothing stores it there). The M-grouped kernel's (here) and the K-grouped one's
    (emit.views.kgrouped_view.row_scales_view)."""

    doc: str
    a_index: str  # C: scale_a's element for row `row`
    b_index: str  # C: scale_b's element for column `col`
    row_limit: str
    col_limit: str = "N"
    # the wgmma D fragment: a thread's two rows read two scale_a elements, loaded once; each register group is one column
    # pair on both rows, whose two scale_b elements are loaded once, ``batch`` groups of loads in flight between compiler
    # fences (2026-12-07, H100: one load per element, re-issued under register pressure, stalled the epilogue's multiplies)
    frag: WgmmaFragmentView = wgmma_fragment_view()
    batch: int = 8


def row_scales_view(plan: GroupedPlan) -> RowScalesView | None:
    """--grouped offs_rowwise: scale_a[row] (the stacked rows), scale_b[group N + col]."""
    if not plan.rowwise:
        return None
    return RowScalesView(
        doc="Row-wise FP8 scales (torch._scaled_grouped_mm): acc x scale_a[row] x scale_b[group, column]; 0 outside the "
            "group or N.",
        a_index="row", b_index=f"static_cast<size_t>({CURSOR}.group) * N + col", row_limit="row_end")


def store_condition_c(plan: GroupedPlan) -> str:
    """The extra condition for a TMA store of D: a TMA store clips at M, not at the group's end, so only a tile
    whose BM rows all lie in the group may take it (the others take the direct, masked stores)."""
    return f"m0 + {plan.bm} <= row_end"
