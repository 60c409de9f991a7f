"""Pure math: the tile scheduler is a bijection onto the output tiles, and the kernel's C computes the
same order as the Python plan."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.roles.schedule import SchedulePlan
from ptxgen.emit.views.schedule_view import tile_coords_c


def _tiles(plan: SchedulePlan, tiles_m: int, tiles_n: int) -> list[tuple[int, int]]:
    return [plan.tile_of(i, tiles_m, tiles_n) for i in range(tiles_m * tiles_n)]


@settings(max_examples=300, deadline=None)
@given(tiles_m=st.integers(1, 40), tiles_n=st.integers(1, 40), group=st.integers(1, 16))
def test_tile_of_is_a_bijection(tiles_m, tiles_n, group):
    got = _tiles(SchedulePlan(True, group), tiles_m, tiles_n)
    assert sorted(got) == [(m, n) for m in range(tiles_m) for n in range(tiles_n)]


def test_grouped_order_by_hand():
    # 3 x 2 tiles, groups of 2 tile rows: the first group visits column 0 then column 1 of rows 0-1
    assert _tiles(SchedulePlan(False, 2), 3, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
    # group 1 is plain row-major order
    assert _tiles(SchedulePlan(False, 1), 2, 3) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def _run_c(lines: tuple[str, ...], tile: int, tiles_m: int, tiles_n: int) -> tuple[int, int]:
    """Evaluate the rendered C statements with C's integer semantics (operands here are non-negative)."""
    env = {"tile": tile, "tiles_m": tiles_m, "tiles_n": tiles_n, "min": min}
    for line in lines:
        stmt = line.split("//")[0].strip().rstrip(";").replace("const int ", "")
        name, expr = (x.strip() for x in stmt.split("=", 1))
        env[name] = eval(re.sub(r"(?<![/])/(?![/])", "//", expr), {}, env)
    return env["m0"], env["n0"]


@pytest.mark.parametrize("group", [1, 3, 8])
def test_rendered_c_matches_the_plan(group):
    plan = SchedulePlan(True, group)
    lines = tile_coords_c(plan, 128, 256)
    for tiles_m, tiles_n in ((1, 1), (5, 7), (17, 3), (8, 8)):
        for i in range(tiles_m * tiles_n):
            tm, tn = plan.tile_of(i, tiles_m, tiles_n)
            assert _run_c(lines, i, tiles_m, tiles_n) == (tm * 128, tn * 256)


def test_control_a_wrong_formula_is_not_a_bijection():
    """The check can fail: forgetting the partial last group (rows = G instead of min(rows left, G))."""

    class Wrong(SchedulePlan):
        def tile_of(self, i, tiles_m, tiles_n):
            g = self.raster_group
            within = i % (g * tiles_n)
            return i // (g * tiles_n) * g + within % g, within // g

    got = _tiles(Wrong(True, 4), 5, 3)
    assert sorted(got) != [(m, n) for m in range(5) for n in range(3)]
