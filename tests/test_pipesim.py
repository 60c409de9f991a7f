"""The mbarrier pipeline: the derived plans pass the independent simulator, and the simulator can fail.

(a) every plan of a grid of legal specs (both archs, both loaders, stages 1..6, every BM) is clean;
(b) control tests: each breaks one number of a real plan and names the failure the simulator must find;
(c) the mbarrier primitive against hand-written phase/parity values.
"""

from dataclasses import replace

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.model.sim import pipesim
from ptxgen.model.bridges.check_pipeline import check_plan, check_spec, config_of, default_k_tiles, default_tiles
from ptxgen.model.sim.pipesim import Config, MBarrier, explore, simulate

SEEDS = range(8)


def _spec(arch, loader, stages, bm):
    return make_spec(bm=bm, bn=128, bk=32, a="kmajor-sw64", arch=arch, stages=stages, loader=loader)


GRID = [(arch, loader, s, bm)
        for arch, bms in (("sm_90a", (64, 128, 192, 256)), ("sm_100a", (64, 128)))
        for loader in ("tma", "cp.async")
        for s in range(1, 7)
        for bm in bms]


# ---- (a) the derived plans are clean ---------------------------------------------------------------


# cp.async is the slowest to explore: every run keeps 1 to 3 stages at every BM and 6 stages at one BM per arch; the
# slow tier has the rest (4 and 5 stages, 6 stages at the other BMs)
CP_ASYNC_6_STAGE_BM = {"sm_90a": 128, "sm_100a": 64}


def _slow_pipesim_case(arch, loader, stages, bm) -> bool:
    return loader == "cp.async" and (stages in (4, 5) or (stages == 6 and bm != CP_ASYNC_6_STAGE_BM[arch]))


@pytest.mark.parametrize("arch,loader,stages,bm", [pytest.param(*g, marks=pytest.mark.slow) if _slow_pipesim_case(*g) else g
                                                   for g in GRID], ids=lambda v: str(v))
def test_derived_plan_is_clean(arch, loader, stages, bm):
    assert check_spec(_spec(arch, loader, stages, bm)) == []


def test_check_plan_defaults_cover_the_ring():
    assert default_k_tiles(1) == (1, 2, 5)
    assert default_k_tiles(4) == (1, 2, 3, 4, 5, 14)
    plan = plan_kernel(_spec("sm_90a", "tma", 3, 128)).pipeline
    assert check_plan(plan) == []  # one copy of expect_tx_bytes when no copy list is given


def test_plan_numbers_reach_the_simulator():
    c = config_of(plan_kernel(_spec("sm_90a", "cp.async", 4, 192)).pipeline, 9)
    assert (c.arch, c.loader, c.stages, c.k_tiles) == ("sm_90a", "cp.async", 4, 9)
    assert (c.full_arrivals, c.producer_threads, c.empty_arrivals, c.consumer_groups) == (128, 128, 3, 3)
    assert (c.producer_parity_flip, c.consumer_parity_flip, c.release_lag, c.acc_barrier) == (1, 0, 1, False)
    c = config_of(plan_kernel(_spec("sm_100a", "tma", 2, 128)).pipeline, 5)
    assert (c.full_arrivals, c.producer_threads, c.empty_arrivals, c.release_lag, c.acc_barrier) == (1, 1, 1, 0, True)
    assert c.expect_tx_bytes == (128 * 32 + 128 * 32) * 2


def test_persistent_tiles_and_a_fresh_seed_set_are_clean():
    base = config_of(plan_kernel(_spec("sm_100a", "tma", 3, 128)).pipeline, 4)
    assert explore(replace(base, tiles_per_cta=3), range(20)).ok
    base = config_of(plan_kernel(_spec("sm_90a", "tma", 2, 256)).pipeline, 5)
    r = explore(replace(base, tiles_per_cta=2), range(100, 140))
    assert r.ok and not r.warnings, r.problems + r.warnings


def _pp_spec(loader, stages, bm=128, bn=128):
    return make_spec(bm=bm, bn=bn, bk=64, a="kmajor-sw128", b="kmajor-sw128", arch="sm_90a", stages=stages,
                     schedule="persistent", consumers="pingpong", loader=loader)


# cp.async ping-pong: 2 stages at 128 x 128 and 3 at 64 x 256 in every run, the other depths in the slow tier
@pytest.mark.parametrize("loader,stages,bm,bn", [pytest.param(ld, s, 128, 128, marks=pytest.mark.slow) if ld == "cp.async" and s > 2
                                                  else (ld, s, 128, 128) for ld in ("tma", "cp.async") for s in range(2, 7)]
                         + [("tma", 4, 64, 256), ("cp.async", 3, 64, 256)], ids=lambda v: str(v))
def test_pingpong_plan_is_clean(loader, stages, bm, bn):
    # check_plan runs 1, 2, 3, 5 CTA tiles: each warpgroup gets odd and even tile counts (and none)
    assert check_spec(_pp_spec(loader, stages, bm, bn)) == []


def test_pingpong_plan_numbers_reach_the_simulator():
    plan = plan_kernel(_pp_spec("tma", 3)).pipeline
    assert plan.pingpong and default_tiles(plan) == (1, 2, 3, 5)
    c = config_of(plan, 4, tiles_per_cta=5)
    assert (c.pingpong, c.consumer_groups, c.empty_arrivals, c.release_lag, c.tiles_per_cta) == (True, 2, 1, 1, 5)
    assert (c.order_barrier, c.order_parity_flip) == (True, 0)
    assert not config_of(plan_kernel(_spec("sm_90a", "tma", 3, 128)).pipeline, 4).pingpong
    assert default_tiles(plan_kernel(_spec("sm_90a", "tma", 3, 128)).pipeline) == (1, 3)


def test_pingpong_counts_and_a_fresh_seed_set():
    cfg = replace(config_of(plan_kernel(_pp_spec("tma", 2)).pipeline, 3), tiles_per_cta=5)
    r = simulate(cfg, 11)
    assert r.ok and not r.warnings and r.counts["mmas"] == 15  # each K-tile read by one warpgroup
    assert r.counts["arrivals"] == 15 + 15 + 5  # fills, one release per K-tile, one order arrive per tile
    r = explore(replace(cfg, k_tiles=4, tiles_per_cta=7), range(100, 160))
    assert r.ok and not r.warnings, r.problems + r.warnings


# ---- (b) control tests: the simulator fails when a number is wrong ----------------------------------


def _base(arch="sm_90a", loader="tma", stages=2, bm=128) -> Config:
    return config_of(plan_kernel(_spec(arch, loader, stages, bm)).pipeline, 1)


def _run(cfg: Config, ks=None, seeds=SEEDS) -> pipesim.Result:
    total = pipesim.Result(counts={})
    for k in ks or default_k_tiles(cfg.stages):
        total.merge(explore(replace(cfg, k_tiles=k), seeds))
    return total


def _has(r: pipesim.Result, *words: str) -> bool:
    return any(all(w in p for w in words) for p in r.problems)


@pytest.mark.parametrize("arch,loader", [("sm_90a", "tma"), ("sm_90a", "cp.async"), ("sm_100a", "tma"), ("sm_100a", "cp.async")])
def test_producer_parity_not_flipped_deadlocks(arch, loader):
    # empty[s] wait with parity 0 on a fresh barrier waits for a release that needs a fill first
    r = _run(replace(_base(arch, loader, 2, 64), producer_parity_flip=0), ks=(1, 3))
    assert not r.ok and _has(r, "deadlock", "waits empty[0] parity 0", "full[0]")


@pytest.mark.parametrize("arch,loader", [("sm_90a", "tma"), ("sm_90a", "cp.async"), ("sm_100a", "tma"), ("sm_100a", "cp.async")])
def test_consumer_parity_flipped_reads_stale_stage(arch, loader):
    # full[s] wait with parity 1 passes at once on a fresh barrier: the MMAs read a stage not yet (fully) written
    r = _run(replace(_base(arch, loader, 2, 64), consumer_parity_flip=1), ks=(1, 4))
    assert not r.ok
    assert _has(r, "stale read", "K-tile 0", "stage 0", "full[0]") or _has(r, "torn read", "K-tile 0", "stage 0", "full[0]")


def test_one_empty_arrival_too_many_deadlocks():
    # empty[s] never completes a phase: the producer's second round waits forever
    r = _run(replace(_base("sm_90a", "tma", 3, 128), empty_arrivals=3))
    assert _has(r, "deadlock", "TMA producer (K-tile 3) waits empty[0] parity 0", "2 of 3 arrivals pending") or \
        _has(r, "deadlock", "TMA producer (K-tile 3) waits empty[0] parity 0", "1 of 3 arrivals pending")


def test_one_empty_arrival_too_many_without_a_second_round_only_warns():
    r = _run(replace(_base("sm_90a", "tma", 3, 128), empty_arrivals=3), ks=(1, 2, 3))
    assert r.ok and any("empty[0] ends mid-phase" in w and "1 of 3 arrivals pending" in w for w in r.warnings)


def test_one_empty_arrival_too_few_overwrites_early():
    # two consumer warpgroups, empty count 1: the first release alone lets the producer refill the stage
    r = _run(replace(_base("sm_90a", "tma", 2, 128), empty_arrivals=1))
    assert not r.ok and _has(r, "early overwrite", "stage 0", "empty[0]", "K-tile 0")


def test_tcgen05_empty_arrivals_two_deadlocks():
    r = _run(replace(_base("sm_100a", "tma", 2, 128), empty_arrivals=2), ks=(3,))
    assert _has(r, "deadlock", "TMA producer (K-tile 2) waits empty[0] parity 0", "empty[0]: phase 0, 1 of 2 arrivals pending")


def test_cp_async_full_arrivals_too_small_reads_torn_stage():
    # 128 producer threads, full count 127: the phase can complete before the last thread's copy landed
    base = _base("sm_90a", "cp.async", 2, 64)
    assert base.full_arrivals == base.producer_threads == 128
    r = _run(replace(base, full_arrivals=127), ks=(5, 8))
    assert not r.ok and _has(r, "torn read", "not landed", "full[")


def test_expect_tx_smaller_than_delivered_completes_full_early():
    # 4 KiB announced less than the copies deliver: the consumers may read before the last bytes land,
    # or a piece steps tx-count past zero and the phase never completes; the leftover bytes stay pending
    base = replace(_base("sm_90a", "tma", 3, 64), copy_bytes=(4096, 4096, 4096))
    assert base.expect_tx_bytes == 64 * 32 * 2 + 128 * 32 * 2 == 12288
    r = _run(replace(base, expect_tx_bytes=12288 - 4096), seeds=range(16))
    assert _has(r, "torn read", "not landed", "full[")
    assert any("tx-count -4096" in w for w in r.warnings)


def test_expect_tx_larger_than_delivered_deadlocks():
    base = replace(_base("sm_100a", "tma", 2, 128), copy_bytes=(8192, 8192))
    r = _run(replace(base, expect_tx_bytes=16384 + 16), ks=(1,))
    # the 16 bytes never come: full[0] stays open, the MMA thread never issues, acc_full never completes
    assert _has(r, "deadlock", "MMA thread (K-tile 0) waits full[0] parity 0",
                "full[0]: phase 0, 0 of 1 arrivals pending, tx-count 16")


def test_release_before_mma_completion_overwrites_early():
    # release_lag 0 but wgmma.wait_group(1): the arrive on empty[s] comes while that K-tile's MMAs still read
    base = _base("sm_90a", "tma", 2, 128)
    assert base.release_lag == 1
    assert explore(replace(base, k_tiles=7, release_lag=0, mma_wait_depth=0), SEEDS).ok  # release after wait_group(0): fine
    r = _run(replace(base, release_lag=0, mma_wait_depth=1))
    assert not r.ok and _has(r, "early overwrite", "have not completed", "empty[")


def test_release_lag_one_with_a_single_stage_deadlocks():
    # why the plan uses release_lag 0 when S == 1: K-tile 0's stage would be released only at K-tile 1,
    # whose fill waits for that very release
    base = _base("sm_90a", "tma", 1, 128)
    assert base.release_lag == 0
    r = _run(replace(base, release_lag=1), ks=(2,))
    assert _has(r, "deadlock", "TMA producer (K-tile 1) waits empty[0] parity 0", "consumer warpgroup 0 (K-tile 1) waits full[0] parity 1")


def test_tcgen05_epilogue_without_acc_full_reads_early():
    base = _base("sm_100a", "tma", 2, 128)
    assert base.acc_barrier
    r = _run(replace(base, epilogue_waits_acc=False))
    assert not r.ok and _has(r, "early accumulator read", "epilogue warp", "CTA tile 0")


def test_tcgen05_without_acc_commit_deadlocks():
    r = _run(replace(_base("sm_100a", "tma", 2, 128), acc_barrier=False), ks=(2,))
    assert _has(r, "deadlock", "waits acc_full[0] parity 0", "acc_full[0]: phase 0, 1 of 1 arrivals pending")


def test_persistent_tcgen05_epilogue_without_acc_full_overwrites_accumulator():
    base = replace(_base("sm_100a", "tma", 2, 128), tiles_per_cta=2, epilogue_waits_acc=False)
    r = _run(base, ks=(3,))
    assert _has(r, "early accumulator read", "CTA tile 1") or _has(r, "early accumulator overwrite")


def _pp_base(loader="tma", stages=2) -> Config:
    return config_of(plan_kernel(_pp_spec(loader, stages)).pipeline, 1)


def _pp_run(cfg: Config, ks=(1, 2, 3, 5), tiles=(2, 3, 5), seeds=range(16)) -> pipesim.Result:
    total = pipesim.Result(counts={})
    for n in tiles:
        total.merge(_run(replace(cfg, tiles_per_cta=n), ks=ks, seeds=seeds))
    return total


@pytest.mark.parametrize("loader", ["tma", "cp.async"])
def test_pingpong_without_order_barrier_reads_stale_stage(loader):
    # the warpgroups run freely: warpgroup 1's parity wait on full[s] for CTA tile 1 can be a whole phase
    # behind (a fresh full[0] passes parity 1 at once) and returns before the stage holds its K-tile
    r = _pp_run(replace(_pp_base(loader), order_barrier=False))
    assert not r.ok
    assert _has(r, "stale read", "reader 1", "CTA tile 1", "wait returned too early")
    assert _has(r, "early overwrite", "empty[") or loader == "cp.async"
    # K = 1 with S = 2: each warpgroup owns one stage, so even without the order there is no hazard
    assert _pp_run(replace(_pp_base(loader), order_barrier=False), ks=(1,)).ok


@pytest.mark.parametrize("loader", ["tma", "cp.async"])
def test_pingpong_order_parity_flipped_deadlocks(loader):
    # each wait asks for the phase before the right one: it passes early when the other warpgroup lags,
    # and blocks forever when the other has arrived exactly as often as it should and has no tile left
    r = _pp_run(replace(_pp_base(loader), order_parity_flip=1), ks=(1,))
    assert _has(r, "deadlock", "waits order[", "1 of 1 arrivals pending")
    r = _pp_run(replace(_pp_base(loader), order_parity_flip=1), ks=(3,))
    assert _has(r, "stale read", "reader 1", "CTA tile 1")


@pytest.mark.parametrize("loader", ["tma", "cp.async"])
def test_pingpong_two_empty_arrivals_deadlocks(loader):
    # only the warpgroup that read a stage releases it: a count of 2 never completes the phase the refill waits for
    r = _pp_run(replace(_pp_base(loader), empty_arrivals=2), ks=(3,), tiles=(2,), seeds=range(4))
    assert not r.ok and _has(r, "deadlock", "waits empty[0] parity 0", "empty[0]: phase 0, 1 of 2 arrivals pending")


def test_pingpong_needs_two_wgmma_warpgroups():
    with pytest.raises(ValueError):
        simulate(Config(pingpong=True, consumer_groups=3))
    with pytest.raises(ValueError):
        simulate(Config(arch="sm_100a", pingpong=True, consumer_groups=2))


# ---- the simulator itself ----------------------------------------------------------------------------


def test_simulation_is_deterministic_per_seed_and_varies_across_seeds():
    cfg = replace(_base("sm_90a", "cp.async", 3, 128), k_tiles=5)
    a, b = simulate(cfg, 7), simulate(cfg, 7)
    assert a.counts == b.counts and a.ok
    assert len({simulate(cfg, s).counts["steps"] for s in range(6)}) > 1


def test_counts_add_up():
    cfg = Config(arch="sm_90a", loader="tma", stages=2, k_tiles=5, consumer_groups=2, empty_arrivals=2,
                 expect_tx_bytes=300, copy_bytes=(100, 200), release_lag=1)
    r = simulate(cfg, 3)
    assert r.ok and r.counts["mmas"] == 5 * 2
    assert r.counts["arrivals"] == 5 + 5 * 2  # one arrive.expect_tx per fill, one release per warpgroup per K-tile
    assert simulate({"arch": "sm_100a", "k_tiles": 2, "expect_tx_bytes": 64, "acc_barrier": True}, 0).ok


def test_bad_config_is_refused():
    with pytest.raises(ValueError):
        simulate(Config(stages=0))
    with pytest.raises(ValueError):
        simulate(Config(loader="ldgsts"))


# ---- (c) the mbarrier primitive, by hand -------------------------------------------------------------


def test_fresh_barrier_parity():
    b = MBarrier("b", 2)
    assert (b.phase, b.pending, b.tx) == (0, 2, 0)
    assert b.test_wait(1) is True  # the "previous" phase (parity 1) counts as complete
    assert b.test_wait(0) is False  # phase 0 has not completed


def test_arrivals_complete_a_phase_and_reset():
    b = MBarrier("b", 2)
    assert b.arrive() is False
    assert (b.phase, b.pending) == (0, 1)
    assert b.test_wait(0) is False
    assert b.arrive() is True
    assert (b.phase, b.pending, b.tx) == (1, 2, 0)
    assert b.test_wait(0) is True and b.test_wait(1) is False
    b.arrive()
    b.arrive()
    assert b.phase == 2
    assert b.test_wait(1) is True and b.test_wait(0) is False  # phase 1 (parity 1) completed, phase 2 open


def test_expect_tx_then_bytes_in_pieces():
    b = MBarrier("full", 1)
    assert b.arrive_expect_tx(100) is False
    assert (b.pending, b.tx, b.phase) == (0, 100, 0)
    assert b.complete_tx(60) is False
    assert b.tx == 40 and b.test_wait(0) is False
    assert b.complete_tx(40) is True
    assert (b.phase, b.pending, b.tx) == (1, 1, 0)


def test_bytes_alone_do_not_complete_a_phase():
    b = MBarrier("full", 1)
    b.expect_tx(64)
    assert b.complete_tx(64) is False  # tx-count 0 but one arrival still pending
    assert (b.phase, b.pending, b.tx) == (0, 1, 0)
    assert b.arrive() is True and b.phase == 1


def test_negative_tx_is_transient_and_blocks_completion():
    b = MBarrier("full", 2)
    b.arrive_expect_tx(50)
    assert (b.pending, b.tx) == (1, 50)
    assert b.complete_tx(80) is False and b.tx == -30
    assert b.arrive() is False  # pending 0, tx-count -30: not complete
    assert b.expect_tx(30) is True  # back to 0 with no arrival pending
    assert (b.phase, b.pending, b.tx) == (1, 2, 0)


def test_arrive_with_nothing_pending_is_reported():
    b = MBarrier("empty[0]", 1)
    b.arrive_expect_tx(16)  # pending 0, tx-count 16: the phase is open
    assert b.arrive() is False
    assert b.pending == 0 and b.misuse and "empty[0]" in b.misuse[0]
    assert b.mid_phase() and "tx-count 16" in b.state()


# ---- tcgen05: two accumulator stages in TMEM ----------------------------------------------------------------


def test_two_accumulator_stages_are_clean_and_reach_the_simulator():
    from ptxgen.model.bridges.check_pipeline import check_spec, config_of

    spec = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", schedule="persistent", stages=3)
    plan = plan_kernel(spec).pipeline
    assert plan.acc_stages == 2 and config_of(plan, 4).acc_stages == 2
    assert check_spec(spec) == []
    assert check_plan(plan, tiles_per_cta=(2, 5, 6)) == []


def test_control_mma_not_waiting_for_the_epilogue_overwrites_an_accumulator_stage():
    """The check can fail: if the MMA thread does not wait acc_empty, tile tc's MMAs start in a stage whose
    previous tile (tc - 2) the epilogue has not read out yet."""
    from ptxgen.model.bridges.check_pipeline import config_of

    plan = plan_kernel(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", schedule="persistent", stages=2)).pipeline
    cfg = config_of(plan, 3, tiles_per_cta=6)
    assert pipesim.explore(cfg, range(8)).ok
    reckless = replace(cfg, mma_waits_acc_empty=False)
    assert any("early accumulator overwrite" in p for p in pipesim.explore(reckless, range(16)).problems)
