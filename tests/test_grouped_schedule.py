"""L1: the grouped (mixture-of-experts) walk is a bijection onto every (group, tile row, tile column) for any
offs, each tile reads the right rows of A and the right group's rows of B, and stores exactly its group's part
of D; checked by the independent model (ptxgen.model.layouts.groupmodel), with controls that must fail. The C the
kernel runs (ptxgen.emit.views.grouped_view) is compiled as host C++ and must walk the same items."""

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.roles.grouped import GroupedPlan, GroupTile
from ptxgen.emit.views import grouped_view as cgrouped
from ptxgen.model.layouts import groupmodel
from ptxgen.model.bridges.verify_grouped import as_items, check_plan


@st.composite
def group_sizes(draw, bm: int, max_groups: int = 12):
    """Group sizes with empty groups, tiny groups and the sizes around a tile's edge."""
    g = draw(st.integers(1, max_groups))
    special = st.sampled_from([0, 0, 1, 2, bm - 1, bm, bm + 1, 2 * bm + 3])
    return draw(st.lists(st.one_of(special, st.integers(0, 3 * bm)), min_size=g, max_size=g))


def cumulative(sizes):
    return list(np.cumsum(sizes, dtype=np.int64)) if sizes else []


@settings(max_examples=300, deadline=None)
@given(data=st.data(), bm=st.sampled_from([64, 128]), bn=st.sampled_from([64, 128, 192, 256]),
       n=st.integers(1, 700), raster=st.integers(1, 16), spare=st.sampled_from([0, 0, 1, 77]))
def test_walk_is_a_bijection_with_the_right_operands(data, bm, bn, n, raster, spare):
    offs = cumulative(data.draw(group_sizes(bm)))
    m_total = int(offs[-1]) + spare  # rows past the last group are never stored
    assert check_plan(GroupedPlan(bm, bn, raster), offs, max(m_total, 1), n) == []


@settings(max_examples=200, deadline=None)
@given(offs=st.lists(st.integers(-5, 400), min_size=1, max_size=10), m_total=st.integers(1, 300),
       n=st.integers(1, 300), raster=st.integers(1, 8))
def test_untrusted_offs_stay_inside_a_and_d(offs, m_total, n, raster):
    """Decreasing offsets, offsets past M: the walk still covers exactly the (clamped) groups, stores inside D."""
    plan = GroupedPlan(64, 128, raster)
    assert check_plan(plan, offs, m_total, n) == []
    for t in plan.walk(offs, m_total, n):
        assert 0 <= t.a_row0 < m_total and t.row_end <= m_total


@settings(max_examples=150, deadline=None)
@given(data=st.data(), bm=st.sampled_from([2, 4, 8]), bn=st.sampled_from([2, 4, 8]), n=st.integers(1, 13),
       k=st.integers(1, 9), raster=st.integers(1, 4))
def test_simulated_kernel_equals_per_group_products(data, bm, bn, n, k, raster):
    """Tiles loaded through the 2-D views (the next group's rows and zeros past the end included), stores
    masked by the group's end and N: D equals the per-group products."""
    offs = cumulative(data.draw(group_sizes(bm, max_groups=6)))
    m_total = max(int(offs[-1]), 1)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = rng.integers(-3, 4, size=(m_total, k))
    b = rng.integers(-3, 4, size=(len(offs), n, k))
    walk = as_items(GroupedPlan(bm, bn, raster).walk(offs, m_total, n))
    np.testing.assert_array_equal(groupmodel.simulate(walk, a, b, bm, bn), groupmodel.reference(a, b, offs))


def test_by_hand():
    """Groups of 100, 0 and 300 rows, BM 128, N 300, BN 256: 1 + 0 + 3 tile rows, 2 tile columns."""
    p = GroupedPlan(128, 256, 8)
    walk = p.walk([100, 100, 400], 400, 300)
    assert [(t.group, t.a_row0, t.row_end, t.n0, t.b_row0) for t in walk] == [
        (0, 0, 100, 0, 0), (0, 0, 100, 256, 256),
        (2, 100, 400, 0, 600), (2, 228, 400, 0, 600), (2, 356, 400, 0, 600),
        (2, 100, 400, 256, 856), (2, 228, 400, 256, 856), (2, 356, 400, 256, 856),
    ]
    assert p.max_work_items(400, 3, 300) == (4 + 3 - 1) * 2 >= len(walk)


def test_every_group_empty_has_no_items():
    p = GroupedPlan(128, 128, 8)
    assert p.walk([0, 0, 0], 64, 100) == ()
    assert check_plan(p, [0, 0, 0], 64, 100) == []


# ------------------------------------------------------------------------------------------------
# controls: each wrong walk must be caught
# ------------------------------------------------------------------------------------------------
OFFS, M_TOTAL, N = [100, 100, 300, 301, 700], 700, 300


def _items(walk):
    return as_items(walk)


def _errs(items, bm=128, bn=128):
    return groupmodel.check_walk(items, OFFS, M_TOTAL, N, bm, bn)


def test_control_right_walk_passes():
    assert _errs(_items(GroupedPlan(128, 128, 8).walk(OFFS, M_TOTAL, N))) == []


def test_control_b_rows_without_the_group_offset_fail():
    bad = [dict(w, b_row0=w["n0"]) for w in _items(GroupedPlan(128, 128, 8).walk(OFFS, M_TOTAL, N))]
    assert any("weight rows" in e for e in _errs(bad))


def test_control_masking_with_m_instead_of_the_group_end_fails():
    bad = [dict(w, row_end=M_TOTAL) for w in _items(GroupedPlan(128, 128, 8).walk(OFFS, M_TOTAL, N))]
    errs = _errs(bad)
    assert any("another group" in e for e in errs) and any("more than once" in e for e in errs)


def test_control_floor_instead_of_ceil_loses_the_partial_tile():
    class Floor(GroupedPlan):
        def tiles_m(self, rows):
            return rows // self.bm

    errs = _errs(_items(Floor(128, 128, 8).walk(OFFS, M_TOTAL, N)))
    assert any("never computed" in e for e in errs) and any("never stored" in e for e in errs)


def test_control_offs_read_as_sizes_fails():
    """Reading offs as group sizes instead of cumulative ends."""

    class Sizes(GroupedPlan):
        @staticmethod
        def group_rows(offs, m_total):
            rows, start = [], 0
            for o in offs:
                rows.append((start, min(start + int(o), m_total)))
                start = rows[-1][1]
            return tuple(rows)

    assert _errs(_items(Sizes(128, 128, 8).walk(OFFS, M_TOTAL, N))) != []


def test_control_skipping_empty_groups_in_the_numbering_fails():
    """Numbering groups by the non-empty ones (the B rows of every later group shift by one weight)."""

    class Renumber(GroupedPlan):
        def walk(self, offs, m_total, n):
            out, seen = [], -1
            prev = None
            for t in super().walk(offs, m_total, n):
                if t.group != prev:
                    seen, prev = seen + 1, t.group
                out.append(GroupTile(t.item, seen, t.tile_m, t.tile_n, t.a_row0, seen * n + t.n0, t.n0, t.row_end))
            return tuple(out)

    assert _errs(_items(Renumber(128, 128, 8).walk(OFFS, M_TOTAL, N))) != []


def test_control_simulation_sees_a_wrong_b_view():
    rng = np.random.default_rng(0)
    offs, bm, bn = [3, 3, 9], 4, 4
    a, b = rng.integers(-3, 4, size=(9, 5)), rng.integers(-3, 4, size=(3, 6, 5))
    bad = [dict(w, b_row0=w["n0"]) for w in as_items(GroupedPlan(bm, bn, 2).walk(offs, 9, 6))]
    assert not np.array_equal(groupmodel.simulate(bad, a, b, bm, bn), groupmodel.reference(a, b, offs))


# ------------------------------------------------------------------------------------------------
# the rendered C, compiled as host C++, walks the same items
# ------------------------------------------------------------------------------------------------
HARNESS = """#include <cstdio>
#define __device__
#define __forceinline__ inline
#define __restrict__
static inline int min(int a, int b) {{ return a < b ? a : b; }}
static inline int max(int a, int b) {{ return a > b ? a : b; }}
{struct}
{seek}
int main() {{
  int M, N, G, grid;
  while (std::scanf("%d %d %d %d", &M, &N, &G, &grid) == 4) {{
    static int offs[4096];
    for (int g = 0; g < G; ++g) std::scanf("%d", &offs[g]);
    const int tiles_n = (N + {bn_minus_1}) / {bn};
    for (int cta = 0; cta < grid; ++cta) {{
      {init}
      for (int tile = cta; {cond}; tile += grid) {{
        {coords}
        std::printf("%d %d %d %d %d %d %d\\n", cta, tile, gc.group, m0, nb0, n0, row_end);
      }}
    }}
    std::printf("end\\n");
    std::fflush(stdout);
  }}
  return 0;
}}
"""


@pytest.fixture(scope="module")
def walker(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    built = {}

    def build(plan: GroupedPlan):
        src = HARNESS.format(struct=cgrouped.cursor_struct_c(), seek=cgrouped.seek_fn_c(plan), init=cgrouped.cursor_init_c(),
                             cond=cgrouped.loop_condition_c(), coords="\n        ".join(cgrouped.tile_coords_c(plan)),
                             bn=plan.bn, bn_minus_1=plan.bn - 1)
        if src not in built:
            d = tmp_path_factory.mktemp("walk")
            (d / "walk.cc").write_text(src)
            subprocess.run([cxx, "-O1", "-Wall", "-Werror", "-o", str(d / "walk"), str(d / "walk.cc")], check=True)
            built[src] = d / "walk"
        return built[src]

    def run(plan: GroupedPlan, cases):
        stdin = "".join(f"{m} {n} {len(o)} {grid} {' '.join(map(str, o))}\n" for m, n, o, grid in cases)
        out = subprocess.run([str(build(plan))], input=stdin, capture_output=True, text=True, check=True).stdout
        results, cur = [], []
        for line in out.splitlines():
            if line == "end":
                results.append(cur)
                cur = []
            else:
                cur.append(tuple(map(int, line.split())))
        return results

    return run


@pytest.mark.parametrize("bm,bn,raster", [(128, 256, 8), (64, 128, 1), (128, 192, 3)])
def test_rendered_c_walks_the_plan(walker, bm, bn, raster):
    plan = GroupedPlan(bm, bn, raster)
    rng = np.random.default_rng(bm + bn + raster)
    cases = [(400, 300, [100, 100, 400], 1), (400, 300, [100, 100, 400], 3), (64, 100, [0, 0, 0], 2),
             (700, 4096, [0, 5, 5, 600, 601, 601, 700], 7), (50, 77, [60, 20, -3, 49], 4)]
    for _ in range(20):
        g = int(rng.integers(1, 40))
        sizes = rng.choice([0, 1, bm - 1, bm, bm + 1, int(rng.integers(0, 4 * bm))], size=g)
        offs = [int(x) for x in np.cumsum(sizes)]
        cases.append((max(offs[-1] + int(rng.integers(0, 3)), 1), int(rng.integers(1, 1000)), offs, int(rng.integers(1, 140))))
    for (m, n, offs, grid), got in zip(cases, walker(plan, cases)):
        walk = plan.walk(offs, m, n)
        # every CTA c takes items c, c + grid, ... of the plan's walk, in order
        want = sorted(((t.item % grid, t.item, t.group, t.a_row0, t.b_row0, t.n0, t.row_end) for t in walk))
        assert sorted(got) == want, (m, n, offs, grid)
        items = [{"group": g_, "a_row0": a0, "b_row0": b0, "n0": n0, "row_end": e} for _, _, g_, a0, b0, n0, e in got]
        assert groupmodel.check_walk(items, offs, m, n, bm, bn) == [], (m, n, offs, grid)
        assert grid > 0 and max((x[1] for x in got), default=-1) < plan.max_work_items(m, len(offs), n)


def test_control_rendered_c_without_the_clamp_is_caught(walker, monkeypatch):
    """The harness sees a wrong C walk: drop the clamp, and decreasing offs make a group of negative size."""
    plan = GroupedPlan(64, 128, 2)
    good = cgrouped.seek_fn_c(plan)
    monkeypatch.setattr(cgrouped, "seek_fn_c", lambda p: good.replace("min(max(offs[c.group], c.row0), M)", "offs[c.group]"))
    m, n, offs = 200, 100, [150, 20, 200]
    (got,) = walker(plan, [(m, n, offs, 1)])
    items = [{"group": g_, "a_row0": a0, "b_row0": b0, "n0": n0, "row_end": e} for _, _, g_, a0, b0, n0, e in got]
    assert groupmodel.check_walk(items, offs, m, n, 64, 128) != []
