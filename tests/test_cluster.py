"""2-CTA thread-block clusters with TMA multicast (sm_90a): spec rules, the split of the shared operand,
the cluster-aware tile walk, barrier counts, the launch grid, and codegen (NVRTC + SASS).

Independent references: CUTLASS include/cutlass/pipeline/sm90_pipeline.hpp (PipelineTmaAsync):
``multicast_consumer_arrival_count = (size<0>(cluster_shape) + size<1>(cluster_shape) - 1) *
num_consumer_warpgroups_per_cluster``; PTX ISA cp.async.bulk.tensor: with ``.multicast::cluster`` the box
is written at the same CTA-relative offset of every CTA in ctaMask (bit r = %cluster_ctarank r).
"""

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.roles.schedule import SchedulePlan
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.schedule_view import cluster_tile_coords_c
from ptxgen.isa.types import Cluster, SpecError

sys.path.insert(0, str(Path(__file__).parent))
from test_gpu import CLUSTER  # noqa: E402

BASE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4,
            out_dtype="bf16", schedule="persistent", epilogue="tma")


# ---- spec ----------------------------------------------------------------------------------------------
def test_default_cluster_changes_no_name_cli_or_json():
    s = make_spec(**BASE)
    assert s.cluster is Cluster.C1X1
    assert "cluster" not in s.cli_args() and "cluster" not in s.to_json() and not s.kernel_name.endswith("_c1x1")


@pytest.mark.parametrize("c", ["2x1", "1x2"])
def test_cluster_names_and_round_trip(c):
    s = make_spec(**BASE, cluster=c)
    assert s.kernel_name.endswith(f"_c{c}") and f"--cluster {c}" in s.cli_args()
    assert TileSpec.from_json(s.to_json()) == s


@pytest.mark.parametrize("override, rule", [
    (dict(arch="sm_100a", epilogue="direct", out_dtype="f32", dtype="f16", stages=2, schedule="tile"), "wgmma kernels with the TMA loader"),
    (dict(loader="cp.async"), "wgmma kernels with the TMA loader"),
    (dict(bn=8, bk=64, epilogue="direct", b="kmajor-sw128"), "two equal runs"),  # B: one 8-row atom row, one atom column
])
def test_illegal_clusters_name_the_rule(override, rule):
    with pytest.raises(SpecError) as e:
        make_spec(**dict(BASE, **override), cluster="2x1")
    assert e.value.field == "--cluster" and rule in str(e.value)


# ---- the shared operand's split ---------------------------------------------------------------------------
def _specs():
    out = []
    for cfg, _ in CLUSTER:
        out.append(make_spec(arch="sm_90a", **cfg))
    for b in ("kmajor-sw128", "mnmajor-sw128", "kmajor-sw64", "mnmajor-sw64", "kmajor-sw32"):
        for c in ("2x1", "1x2"):
            for bn in (64, 128, 256):
                try:
                    out.append(make_spec(bm=128, bn=bn, bk=64, a="kmajor-sw128", b=b, arch="sm_90a", stages=3, cluster=c))
                except SpecError:
                    pass
    return out


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.kernel_name)
def test_the_shares_cover_the_stage_and_the_tile_once(spec):
    t = derive(spec)
    op = t.operand(spec.cluster.shared_operand)
    tma, mc = op.tma, op.tma.multicast
    assert mc is not None and mc.cta_mask == 0b11 and mc.ctas == 2
    inner, outer = tma.box
    smem, elems = [], []
    for r in range(mc.ctas):
        for c in mc.copies:
            off = c.smem_offset_bytes + r * mc.smem_delta_bytes
            smem.append((off, off + tma.box_bytes))
            i0, o0 = c.inner + r * mc.inner_delta, c.outer + r * mc.outer_delta
            elems += [(i0 + i, o0 + o) for i in range(inner) for o in range(outer)]
    # shared memory: [0, stage bytes) exactly once, no overlap
    smem.sort()
    assert smem[0][0] == 0 and smem[-1][1] == op.stage_bytes and all(a[1] == b[0] for a, b in zip(smem, smem[1:]))
    # the tile in global coordinates: every element of the operand's tile exactly once
    rows, cols = (op.mn, op.bk) if tma.global_dims[0] == "K" else (op.bk, op.mn)  # (outer, inner) extents
    assert len(elems) == len(set(elems)) == rows * cols
    assert set(elems) == {(i, o) for i in range(cols) for o in range(rows)}
    # each CTA moves half, and its full barrier still expects the whole stage of both operands
    assert mc.bytes_per_cta * 2 == op.stage_bytes == tma.expect_tx_bytes
    plan = plan_kernel(spec, t)
    assert plan.pipeline.expect_tx_bytes == t.a.stage_bytes + t.b.stage_bytes


def test_control_a_share_without_the_rank_shift_does_not_cover_the_tile():
    """The coverage check can fail: both CTAs loading rank 0's share (no shift) write half the stage twice."""
    op = derive(make_spec(**BASE, cluster="2x1")).b
    mc = op.tma.multicast
    offs = sorted(c.smem_offset_bytes for r in range(2) for c in mc.copies)
    assert len(set(offs)) < len(offs)


def test_unclustered_operands_keep_their_boxes():
    a = derive(make_spec(**BASE))
    b = derive(make_spec(**BASE, cluster="2x1"))
    assert a.a.tma == dataclasses.replace(b.a.tma)  # A is not shared under 2x1: same box and copies
    assert a.b.tma.box == (64, 256) and b.b.tma.box == (64, 128) and a.b.tma.multicast is None


# ---- barriers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [dict(BASE), dict(BASE, bm=64), dict(BASE, bm=128, bn=128, consumers="pingpong")])
@pytest.mark.parametrize("c", ["2x1", "1x2"])
def test_empty_barrier_counts_follow_cutlass(cfg, c):
    spec = make_spec(**cfg, cluster=c)
    cm, cn = spec.cluster.dims
    warpgroups_reading_a_stage = 1 if spec.consumers.value == "pingpong" else spec.bm // 64
    # CUTLASS PipelineTmaAsync: (cluster M + cluster N - 1) x consumer warpgroups
    assert plan_kernel(spec).pipeline.empty_arrivals == (cm + cn - 1) * warpgroups_reading_a_stage
    assert plan_kernel(dataclasses.replace(spec, cluster=Cluster.C1X1)).pipeline.empty_arrivals == warpgroups_reading_a_stage


# ---- the tile walk -----------------------------------------------------------------------------------------
def _walk(plan: SchedulePlan, tiles_m: int, tiles_n: int):
    pm, pn = plan.work_items(tiles_m, tiles_n)
    return [[plan.cta_tile(i, r, tiles_m, tiles_n) for r in range(plan.cluster_size)] for i in range(pm * pn)]


@settings(max_examples=300, deadline=None)
@given(tiles_m=st.integers(1, 19), tiles_n=st.integers(1, 19), group=st.integers(1, 16), c=st.sampled_from([(2, 1), (1, 2)]))
def test_cluster_walk_covers_every_tile_once_and_pairs_share_the_operand(tiles_m, tiles_n, group, c):
    plan = SchedulePlan(True, group, c)
    active = []
    for pair in _walk(plan, tiles_m, tiles_n):
        (m0, n0, a0), (m1, n1, a1) = pair
        # the two CTAs of a cluster read the same B tile (2x1: same column) or the same A tile (1x2: same row)
        assert (n0 == n1) if c == (2, 1) else (m0 == m1)
        assert a0  # rank 0's tile always exists; rank 1's may lie past the last tile row / column
        for m, n, a in pair:
            assert 0 <= m < tiles_m and 0 <= n < tiles_n  # an inactive CTA still loads a real tile
            if a:
                active.append((m, n))
        if not a1:
            assert (tiles_m if c == (2, 1) else tiles_n) % 2 == 1 and (m1, n1) == (m0, n0)
    assert sorted(active) == [(m, n) for m in range(tiles_m) for n in range(tiles_n)]


def test_control_a_walk_that_splits_pairs_fails_the_sharing_check():
    """The pairing check can fail: plain tile order (tile 2i and 2i + 1) puts a 2x1 pair in different columns."""
    plan = SchedulePlan(True, 8)
    tiles = [plan.tile_of(i, 3, 3) for i in range(9)]
    pairs = [(tiles[2 * i], tiles[2 * i + 1]) for i in range(4)]
    assert any(a[1] != b[1] for a, b in pairs)


def _run_c(lines, tile, rank, tiles_m, tiles_n, c):
    env = {"tile": tile, "tiles_m": tiles_m, "tiles_n": tiles_n, "min": min,
           "cta_rank_m": rank if c[0] == 2 else 0, "cta_rank_n": rank if c[1] == 2 else 0,
           "clusters_m": -(-tiles_m // c[0]), "clusters_n": -(-tiles_n // c[1])}
    for line in lines:
        stmt = line.split("//")[0].strip().rstrip(";").replace("const int ", "").replace("const bool ", "")
        name, expr = (x.strip() for x in stmt.split("=", 1))
        expr = re.sub(r"(?<![/])/(?![/])", "//", expr).replace("&&", " and ")
        env[name] = eval(expr, {}, env)
    return env["m0"], env["n0"], env["tile_active"]


@pytest.mark.parametrize("c", [(2, 1), (1, 2)])
@pytest.mark.parametrize("group", [1, 3, 8])
def test_rendered_cluster_c_matches_the_plan(c, group):
    plan = SchedulePlan(True, group, c)
    lines = cluster_tile_coords_c(plan, 128, 256)
    for tiles_m, tiles_n in ((1, 1), (5, 7), (17, 3), (8, 8)):
        pm, pn = plan.work_items(tiles_m, tiles_n)
        for i in range(pm * pn):
            for r in range(2):
                tm, tn, act = plan.cta_tile(i, r, tiles_m, tiles_n)
                assert _run_c(lines, i, r, tiles_m, tiles_n, c) == (tm * 128, tn * 256, act)


# ---- launch grid -----------------------------------------------------------------------------------------
class _FakeKernel:
    def __init__(self, clusters):
        self.clusters = clusters

    def max_active_clusters(self, size, block):
        return self.clusters


def test_grid_is_whole_clusters():
    from ptxgen.runtime.launch.launch import Problem, launch_geometry

    tile = plan_kernel(make_spec(**dict(BASE, schedule="tile"), cluster="2x1"))
    assert tile.abi.cluster == (2, 1, 1)
    assert tile.abi.grid(1100, 1528, 132) == (2 * 5 * 6, 1, 1)  # 9 tile rows -> 5 cluster rows, 6 columns
    pers = plan_kernel(make_spec(**BASE, cluster="1x2"))
    p = Problem.padded(pers.spec, 8192, 8192, 64)
    assert launch_geometry(pers, p, 132)[0] == (132, 1, 1)
    assert launch_geometry(pers, p, 132, _FakeKernel(60))[0] == (120, 1, 1)  # only 60 clusters fit at once
    assert pers.abi.grid(100, 100, 132) == (2, 1, 1)  # one cluster tile: both CTAs, one of them inactive


# ---- codegen ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("c", ["2x1", "1x2"])
def test_cluster_kernel_compiles_and_multicasts(c):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = make_spec(**BASE, cluster=c)
    src = render_kernel(derive(spec))
    assert "__cluster_dims__(2, 1, 1)" in src and ".multicast::cluster" in src and "release_stage(empty_bar" in src
    compiled = compile_cuda(src, spec.kernel_name, "sm_90a")
    report = check_sass(spec, compiled.cubin)
    assert report.ok, report.summary()
    assert "TMA multicast loads" in report.summary()


def test_control_the_sass_check_fails_without_multicast():
    """The SASS check can fail: the 1x1 kernel's cubin checked as the 2x1 spec has no UTMALDG...MULTICAST."""
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    plain = make_spec(**BASE)
    compiled = compile_cuda(render_kernel(derive(plain)), plain.kernel_name, "sm_90a")
    report = check_sass(make_spec(**BASE, cluster="2x1"), compiled.cubin)
    assert not report.ok and "MULTICAST" in " ".join(report.problems)


# ---- the pipeline simulator with two CTAs (L1) ----------------------------------------------------------------
def _cluster_config(spec, k_tiles=6, tiles=1):
    from ptxgen.model.bridges.check_pipeline import config_of, multicast_copy_bytes, tma_copy_bytes

    plan = plan_kernel(spec).pipeline
    return config_of(plan, k_tiles, tma_copy_bytes(spec), tiles, spec.cluster.size, multicast_copy_bytes(spec))


@pytest.mark.parametrize("cfg", [c for c, _ in CLUSTER], ids=lambda c: f"{c['bm']}x{c['bn']}_{c['cluster']}_{c.get('consumers', 'coop')}_s{c['stages']}")
def test_pipesim_runs_both_ctas_of_the_derived_cluster_clean(cfg):
    from ptxgen.model.bridges.check_pipeline import check_spec

    spec = make_spec(arch="sm_90a", **cfg)
    assert check_spec(spec, seeds=range(3)) == []


def test_pipesim_cluster_bytes_add_up():
    """Each CTA's own copies plus both CTAs' multicast shares are exactly what its full barrier expects."""
    spec = make_spec(**BASE, cluster="2x1")
    c = _cluster_config(spec)
    assert sum(c.copy_bytes) + c.cluster_ctas * sum(c.mc_copy_bytes) == c.expect_tx_bytes


@pytest.mark.parametrize("c", ["2x1", "1x2"])
def test_control_consumers_releasing_only_their_own_cta_fail(c):
    """The model can fail: a consumer that releases only its own CTA's stage (CUTLASS arrives on every CTA
    that multicasts into this one). With the cluster's count the ring deadlocks; with a one-CTA count the
    peer's producer overwrites a stage this CTA's MMAs still read."""
    from ptxgen.model.sim import pipesim

    spec = make_spec(**BASE, cluster=c)
    cfg = _cluster_config(spec)
    own_only = pipesim.explore(dataclasses.replace(cfg, release_peers=False), range(4))
    assert not own_only.ok and any("deadlock" in p for p in own_only.problems)
    one_cta_count = pipesim.explore(dataclasses.replace(cfg, release_peers=False, empty_arrivals=cfg.empty_arrivals // 2), range(6))
    assert any("early overwrite" in p for p in one_cta_count.problems)


def test_control_expecting_only_half_the_shared_operand_fails():
    """The model can fail: a full barrier that expects only this CTA's own share tears reads."""
    from ptxgen.model.sim import pipesim

    cfg = _cluster_config(make_spec(**BASE, cluster="2x1"))
    half = dataclasses.replace(cfg, expect_tx_bytes=sum(cfg.copy_bytes) + sum(cfg.mc_copy_bytes))
    r = pipesim.explore(half, range(6))
    assert not r.ok and any("torn read" in p or "stale read" in p for p in r.problems)
