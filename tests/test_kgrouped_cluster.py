"""The K-grouped GEMM with a 2-CTA cluster (``--grouped offs_k(_rowwise) --cluster 2x1|1x2``): the two CTAs of a work
item take neighbouring tiles of one group, load half of the operand they share each and multicast it.

L1: the derived walk (ptxgen.derive.roles.kgrouped.KGroupedPlan.walk) and the rendered C walk, compiled for the host,
through the independent model (ptxgen.model.layouts.kgroupmodel.check_cluster_walk), with controls; the ring of both
CTAs through the pipeline simulator with the K-tile counts of their tiles. L2: the variants compile with the multicast
(tests/test_kgrouped_store.py compiles every variant of ptxgen.kgrouped). GPU: tests/test_kgrouped_store.py and
tests/test_kgrouped_fp8_door.py run every variant, these among them, against float64.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.roles.kgrouped import KGroupedPlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views import kgrouped_view as ckg
from ptxgen.emit.views.schedule_view import batched_tile_coords_c
from ptxgen.isa.types import SpecError
from ptxgen.kgrouped import kgrouped_spec
from ptxgen.model.layouts import kgroupmodel

BASE = dict(bm=128, bn=128, bk=64, stages=4, a="mnmajor-sw128", b="mnmajor-sw128", a_order="k", b_order="k", dtype="bf16",
            acc="f32", out_dtype="bf16", arch="sm_90a", schedule="persistent", epilogue="tma", grouped="offs_k")
FP8 = dict(BASE, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", bk=128, grouped="offs_k_rowwise")


def _ctas(plan: KGroupedPlan, groups: int, m: int, n: int):
    """The walk as the model reads it: (item, group, tile row, tile column, active) per CTA."""
    return [(t.item, t.group, t.m0 // plan.bm, t.n0 // plan.bn, t.active) for t in plan.walk([0] * groups, 1, m, n)]


# ---- L1: the walk -------------------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(groups=st.integers(1, 6), m=st.integers(1, 1200), n=st.integers(1, 1200), raster=st.sampled_from([1, 2, 3, 8, 16]),
       cluster=st.sampled_from([(2, 1), (1, 2)]), bn=st.sampled_from([128, 256]))
def test_the_walk_covers_every_groups_tiles_once_and_pairs_share_group_and_operand(groups, m, n, raster, cluster, bn):
    plan = KGroupedPlan(128, bn, 64, raster, cluster=cluster)
    tm, tn = plan.tiles(m, n)
    assert kgroupmodel.check_cluster_walk(_ctas(plan, groups, m, n), groups, tm, tn, cluster) == []
    assert plan.work_items(groups, m, n) == groups * -(-tm // cluster[0]) * -(-tn // cluster[1])


def test_control_pairing_the_unclustered_walk_splits_groups_and_operands():
    """Two consecutive items of the plain walk as one cluster: with an odd tile count a pair straddles two groups."""
    plain = KGroupedPlan(128, 128, 64, 8)
    walk = plain.walk([0] * 3, 1, 300, 128)  # 3 tiles a group
    ctas = [(i // 2, t.group, t.m0 // 128, t.n0 // 128, True) for i, t in enumerate(walk)]
    problems = kgroupmodel.check_cluster_walk(ctas, 3, 3, 1, (2, 1))
    assert any("groups" in p for p in problems), problems


def test_control_an_inactive_cta_counted_as_storing_stores_a_tile_twice():
    plan = KGroupedPlan(128, 128, 64, 8, cluster=(2, 1))
    ctas = [(i, g, tm, tn, True) for i, g, tm, tn, _ in _ctas(plan, 2, 300, 256)]  # tiles_m = 3: one rank 1 past the end
    assert any("twice" in p for p in kgroupmodel.check_cluster_walk(ctas, 2, 3, 2, (2, 1)))
    # rank 1 of every item on the other tile column: the pair no longer shares B
    wrong = [(i, g, tm, (tn + 1) % 2 if j % 2 else tn, a) for j, (i, g, tm, tn, a) in enumerate(_ctas(plan, 2, 300, 256))]
    assert any("B tile columns" in p for p in kgroupmodel.check_cluster_walk(wrong, 2, 3, 2, (2, 1)))


WALK = r"""
#include <algorithm>
#include <cstdio>
using std::min; using std::max;
int main() {
  int G, M, N, K, CM, CN;
  while (std::scanf("%%d %%d %%d %%d %%d %%d", &G, &M, &N, &K, &CM, &CN) == 6) {
    static int offs[4096];
    for (int g = 0; g < G; ++g) if (std::scanf("%%d", &offs[g]) != 1) return 2;
    const int tiles_m = (M + %(bm1)d) / %(bm)d, tiles_n = (N + %(bn1)d) / %(bn)d;
    const int clusters_m = (tiles_m + CM - 1) / CM, clusters_n = (tiles_n + CN - 1) / CN;
    for (int tile = 0; tile < clusters_m * clusters_n * G; ++tile) {
      for (int cta_rank = 0; cta_rank < CM * CN; ++cta_rank) {
        const int cta_rank_m = CM > 1 ? cta_rank : 0, cta_rank_n = CN > 1 ? cta_rank : 0;
        %(coords)s
        std::printf("%%d %%d %%d %%d %%d %%d %%d %%d\n", tile, bz, m0, n0, tile_active ? 1 : 0, k_start, k_end, num_k_tiles);
      }
    }
    std::printf("end\n");
  }
  return 0;
}
"""


@pytest.mark.parametrize("cluster", ["2x1", "1x2"])
def test_rendered_walk_matches_the_plan_and_the_model(tmp_path, cluster):
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    spec = make_spec(**dict(BASE, cluster=cluster))
    plan = plan_kernel(spec)
    kg = plan.kgrouped
    coords = batched_tile_coords_c(plan.schedule, spec.bm, spec.bn) + ckg.tile_k_c(kg)
    (tmp_path / "walk.cc").write_text(WALK % dict(bm=spec.bm, bm1=spec.bm - 1, bn=spec.bn, bn1=spec.bn - 1,
                                                   coords="\n        ".join(coords)))
    subprocess.run([cxx, "-O1", "-Wall", "-Werror", "-Wno-unused-variable", "-o", str(tmp_path / "walk"),
                    str(tmp_path / "walk.cc")], check=True)
    rng = random.Random(3)
    cases = [(1, 1, 1, [1]), (3, 300, 130, [0, 70, 70]), (2, 128, 600, [5, 900])]
    for _ in range(6):
        g = rng.choice([1, 2, 5])
        sizes = [rng.choice([0, 1, 63, 64, 65, 200]) for _ in range(g)]
        cases.append((g, rng.randint(1, 700), rng.randint(1, 700), np.cumsum(sizes).tolist()))
    cm, cn = spec.cluster.dims
    stdin = "".join(f"{g} {m} {n} {max(o[-1], 1)} {cm} {cn} {' '.join(map(str, o))}\n" for g, m, n, o in cases)
    out = subprocess.run([str(tmp_path / "walk")], input=stdin, capture_output=True, text=True, check=True).stdout
    for (g, m, n, offs), text in zip(cases, out.split("end\n")):
        rows = [tuple(map(int, line.split())) for line in text.splitlines()]
        want = [(t.item, t.group, t.m0, t.n0, int(t.active), t.k_start, t.k_end, kg.k_tiles(t.k_start, t.k_end))
                for t in kg.walk(offs, max(offs[-1], 1), m, n)]
        assert rows == want, (g, m, n, offs)
        tm, tn = kg.tiles(m, n)
        ctas = [(r[0], r[1], r[2] // spec.bm, r[3] // spec.bn, bool(r[4])) for r in rows]
        assert kgroupmodel.check_cluster_walk(ctas, g, tm, tn, (cm, cn)) == []


def _cluster_ring(spec, tile_k: tuple[int, ...]):
    """The pipeline simulator's config for both CTAs of ``spec``'s cluster, each taking tiles of ``tile_k`` K-tiles."""
    from ptxgen.model.bridges.check_pipeline import config_of, multicast_copy_bytes, tma_copy_bytes

    cfg = config_of(plan_kernel(spec).pipeline, 1, tma_copy_bytes(spec), len(tile_k), cluster_ctas=2,
                    mc_copy_bytes=multicast_copy_bytes(spec))
    return dataclasses.replace(cfg, tile_k=tile_k)


@pytest.mark.parametrize("variant", ["tma-n256-c2", "fp8 tma-n256-c2", "fp8 pp-tma-c2"])
def test_both_ctas_rings_keep_their_phases_with_the_groups_k_tile_counts(variant):
    """Both CTAs of a cluster through the pipeline simulator (ptxgen.model.sim.pipesim: each CTA's ring, the shared
    operand multicast into both, releases on both) with the K-tile counts of the tiles they take: empty groups too."""
    from ptxgen.model.sim import pipesim

    fp8 = variant.startswith("fp8 ")
    spec = kgrouped_spec("e4m3" if fp8 else "bf16", None, "sm_90a", "k" if fp8 else "mn", "k" if fp8 else "mn",
                         rowwise=fp8, variant=variant.split()[-1])
    plan = plan_kernel(spec)
    kg = plan.kgrouped
    rng = random.Random(5)
    seen = set()
    for _ in range(10):
        offs = np.cumsum([rng.choice([0, 0, 1, 128, 129, 500]) for _ in range(rng.randint(1, 9))]).tolist()
        m, n = rng.choice([(128, 256), (300, 512), (128, 1000)])
        grid = 2 * rng.choice([1, 3])
        walk = kg.walk(offs, max(offs[-1], 1), m, n)
        per_cta = [tuple(kg.k_tiles(t.k_start, t.k_end) for t in walk[c::grid]) for c in range(2)]
        assert per_cta[0] == per_cta[1]  # a cluster's CTAs take the same K-tiles
        tile_k = per_cta[0]
        if not tile_k or tile_k in seen:
            continue
        seen.add(tile_k)
        r = pipesim.explore(_cluster_ring(spec, tile_k), range(3))
        assert r.ok, (tile_k, r.problems[:3])
    assert any(0 in t for t in seen)


def test_control_with_the_groups_k_tile_counts_a_release_of_only_its_own_cta_fails():
    """The cluster check with per-tile counts can fail: consumers that release only their own CTA's stage (CUTLASS
    arrives on every CTA that multicasts into this one) deadlock the ring or let the peer overwrite a stage in use."""
    from ptxgen.model.sim import pipesim

    cfg = _cluster_ring(kgrouped_spec("e4m3", None, "sm_90a", "k", "k", rowwise=True, variant="tma-n256-c2"), (3, 0, 5, 1, 0, 4))
    assert pipesim.explore(cfg, range(3)).ok
    own_only = pipesim.explore(dataclasses.replace(cfg, release_peers=False), range(3))
    assert not own_only.ok and any("deadlock" in p for p in own_only.problems)
    one_cta_count = pipesim.explore(dataclasses.replace(cfg, release_peers=False, empty_arrivals=cfg.empty_arrivals // 2),
                                    range(6))
    assert any("early overwrite" in p for p in one_cta_count.problems), one_cta_count.problems[:3]


# ---- rules, source, launch ------------------------------------------------------------------------------------------------
def test_k_grouped_kernels_take_clusters_and_m_grouped_ones_still_refuse():
    for fields in (BASE, FP8):
        for c in ("2x1", "1x2"):
            assert make_spec(**dict(fields, cluster=c)).cluster.value == c
    m_grouped = dict(BASE, a="kmajor-sw128", grouped="offs", cluster="2x1")
    with pytest.raises(SpecError, match="neither clusters"):
        make_spec(**m_grouped)
    with pytest.raises(SpecError, match="--cluster"):  # the cluster's own rule: TMA loads only
        make_spec(**dict(BASE, loader="cp.async", epilogue="direct", cluster="2x1"))


def test_source_walks_cluster_items_of_every_group_and_stores_only_active_tiles():
    src = render_kernel(plan_kernel(make_spec(**dict(FP8, bn=256, cluster="2x1"))))
    assert "const int num_cluster_tiles = clusters_m * clusters_n * G;" in src
    assert "const int bz = tile / (clusters_m * clusters_n);" in src
    assert "tma_load_2d_multicast(b_stage" in src and "tma_load_2d_multicast(a_stage" not in src
    body = src.split("// ---- consumer warpgroups")[1]
    assert body.index("if (tile_active)") < body.index("scale_a[") < body.index("tma_store_3d(")
    plain = render_kernel(plan_kernel(make_spec(**dict(FP8, bn=256))))
    assert "num_cluster_tiles" not in plain and "const int bz = tile / (tiles_m * tiles_n);" in plain


@pytest.mark.parametrize("fields", [BASE, FP8, dict(BASE, consumers="pingpong")], ids=["bf16", "fp8", "bf16-pingpong"])
def test_a_1x2_cluster_compiles_with_a_multicast_of_a(fields):
    """L2 for the 1x2 form (no variant takes it; never run on a GPU): the SASS gate counts the multicast."""
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    spec = make_spec(**dict(fields, cluster="1x2"))
    report = check_sass(spec, compile(spec).cubin)
    assert report.ok and "TMA multicast loads" in report.summary() and "local 0 B" in report.summary(), report.problems
    src = render_kernel(plan_kernel(spec))
    assert "tma_load_2d_multicast(a_stage" in src and "tma_load_2d_multicast(b_stage" not in src


class _FakeKernel:
    def __init__(self, clusters: int):
        self.clusters = clusters

    def max_active_clusters(self, size, block):
        return self.clusters


def test_grid_is_whole_clusters_the_driver_can_hold():
    from ptxgen.runtime.launch.grouped import GroupedProblem
    from ptxgen.runtime.launch.kgrouped import kgrouped_geometry

    plan = plan_kernel(make_spec(**dict(FP8, bn=256, cluster="2x1")))
    p = GroupedProblem(7168, 2048, 65536, 8, 65536, 65536, 2048)
    assert kgrouped_geometry(plan, p, 132)[0] == (132, 1, 1)
    assert kgrouped_geometry(plan, p, 132, _FakeKernel(60))[0] == (120, 1, 1)  # 60 clusters fit at once
    small = GroupedProblem(200, 256, 100, 1, 100, 100, 256)  # one cluster item: 2 CTAs, one of them inactive
    assert kgrouped_geometry(plan, small, 132)[0] == (2, 1, 1)
    assert kgrouped_geometry(plan_kernel(make_spec(**dict(FP8, bn=256))), small, 132)[0] == (2, 1, 1)


def test_explain_says_how_the_cluster_walks():
    plan = plan_kernel(make_spec(**dict(BASE, cluster="2x1")))
    fields = {d.name: d for d in plan.kgrouped.derivation()}
    assert "kgrouped_cluster" in fields and "B" in fields["kgrouped_cluster"].reason
    assert "kgrouped_grid" not in fields  # the cluster's field says its grid
    plain = {d.name for d in plan_kernel(make_spec(**BASE)).kgrouped.derivation()}
    assert "kgrouped_cluster" not in plain and "kgrouped_grid" in plain
