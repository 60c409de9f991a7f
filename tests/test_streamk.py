"""Stream-K for the last wave (ptxgen.derive.store.streamk): the work of every launch is a bijection of (item, K-tile) onto
the CTAs, the waits cannot form a cycle, the workspace slots and flags are a bijection (L1, hypothesis, with controls
that must fail); the rendered C against the plan; the spec rules; the launches (no GPU); NVRTC + SASS (L2); the
cost model's stream-K term and the chooser's +stream-k; (gpu tier) the kernels against float64, bit for bit twice."""

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.derive.store.streamk import FLAG_REGION_BYTES, MIN_K_TILES_PER_SPLIT, StreamKLayout, StreamKPlan
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.streamk_view import layout_c, unit_c
from ptxgen.isa.types import SpecError
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import choose
from ptxgen.runtime.choose.costmodel import BY_NAME, best_streamk, predict_streamk, predict_us, shipped_costs
from ptxgen.runtime.launch.launch import Problem, gemm_launches, workspace_bytes

BASE = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16", bk=64,
            schedule="persistent")


def sk_spec(bm=128, bn=192, stages=4, s=8, **kw):
    return make_spec(bm=bm, bn=bn, stages=stages, stream_k=s, **{**BASE, **kw})


# -- L1: the work and the waits ---------------------------------------------------------------------------------------
def check_assignment(assign, items: int, k_tiles: int) -> list[str]:
    """Independent checks of a per-cluster work list [(item, split, first K-tile, K-tiles), ...]: every (item, K-tile)
    exactly once; an item split in parts runs its parts on distinct clusters, each part the last entry of its cluster,
    and no cluster runs two parts (so the owner's wait is on clusters that never wait: no cycle)."""
    problems = []
    seen = {}
    parts = {}
    for c, entries in enumerate(assign):
        split_entries = [e for e in entries if e[3] != k_tiles or e[1] != 0]
        for item, z, first, count in entries:
            if not 0 <= item < items:
                problems.append(f"item {item} out of range")
            for t in range(first, first + count):
                if not 0 <= t < k_tiles:
                    problems.append(f"K-tile {t} of item {item} out of range")
                seen[(item, t)] = seen.get((item, t), 0) + 1
        for e in entries:
            if e[1] != 0 or e[3] != k_tiles:
                parts.setdefault(e[0], []).append((c, e))
        if len(split_entries) > 1 or (split_entries and entries[-1] != split_entries[0]):
            problems.append(f"cluster {c} runs a part that is not its one last entry")
    missing = [(i, t) for i in range(items) for t in range(k_tiles) if seen.get((i, t), 0) != 1]
    if missing:
        problems.append(f"{len(missing)} (item, K-tile) pairs not covered exactly once, e.g. {missing[0]}")
    for item, ps in parts.items():
        clusters = [c for c, _ in ps]
        if len(set(clusters)) != len(clusters):
            problems.append(f"item {item}: two parts on one cluster")
        if sorted(e[1] for _, e in ps) != list(range(len(ps))):
            problems.append(f"item {item}: splits {sorted(e[1] for _, e in ps)}")
    return problems


layouts = st.tuples(st.integers(1, 3000), st.integers(1, 132), st.integers(1, 20_000), st.integers(2, 16),
                    st.sampled_from([1, 2]))


@settings(max_examples=300, deadline=None)
@given(layouts)
def test_every_item_and_k_tile_runs_exactly_once_and_waits_cannot_cycle(args):
    items, clusters, k, smax, cs = args
    p = StreamKPlan(smax, 64, cs, 2, 128 * 192)
    lay = p.layout(items, clusters, k)
    assert check_assignment(p.assignment(lay), items, lay.k_tiles) == []
    assert lay.last_items * lay.splits <= clusters
    if lay.splits > 1:
        assert lay.last_items == items % clusters and lay.splits <= smax
        assert lay.k_tiles // lay.splits >= MIN_K_TILES_PER_SPLIT - 1  # each part keeps >= MIN K-tiles (rounded down)
    else:
        assert lay.work_entries == items


@settings(max_examples=200, deadline=None)
@given(layouts)
def test_workspace_slots_and_flags_are_a_bijection(args):
    items, clusters, k, smax, cs = args
    p = StreamKPlan(smax, 64, cs, 2, 128 * 192)
    lay = p.layout(items, clusters, k)
    slots, flags = [], []
    for item in range(lay.dp_items, items):
        for r in range(cs):
            flags += [p.flag_index(item, r, g, lay) for g in range(p.groups)]
            slots += [p.slot_index(item, z, r, lay) for z in range(1, lay.splits)]
    assert sorted(slots) == list(range(lay.data_slots * cs))
    assert sorted(flags) == list(range(len(flags))) and 4 * len(flags) <= FLAG_REGION_BYTES
    assert p.workspace_bytes(lay) == FLAG_REGION_BYTES + len(slots) * p.slot_bytes
    assert p.workspace_bound(items, clusters, k) >= p.workspace_bytes(lay)


BLOCK_FP8_PLANS = None


def block_fp8_stream_k_plans():
    """The StreamKPlans of block-scaled FP8 kernels (BK = 128, 128 x 192 slots; 1x1 and 2x1 clusters), as plan_kernel
    derives them from the specs."""
    global BLOCK_FP8_PLANS
    if BLOCK_FP8_PLANS is None:
        import ptxgen.api.fp8blocks

        BLOCK_FP8_PLANS = [plan_kernel(ptxgen.api.fp8blocks.default_spec(stream_k=s, **kw)).stream_k
                           for s, kw in ((8, {}), (16, {"fp8_scale_load": "block"}), (4, {"cluster": "2x1"}))]
    return BLOCK_FP8_PLANS


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 132), st.integers(1, 20_000), st.integers(0, 2))
def test_block_fp8_plans_split_as_a_bijection_with_a_bijective_workspace(items, clusters, k, which):
    p = block_fp8_stream_k_plans()[which]
    assert (p.bk, p.groups, p.tile_floats) == (128, 2, 128 * 192)
    lay = p.layout(items, max(1, clusters // p.cluster_size), k)
    assert check_assignment(p.assignment(lay), items, lay.k_tiles) == []
    slots = [p.slot_index(i, z, r, lay) for i in range(lay.dp_items, items) for r in range(p.cluster_size)
             for z in range(1, lay.splits)]
    flags = [p.flag_index(i, r, g, lay) for i in range(lay.dp_items, items) for r in range(p.cluster_size)
             for g in range(p.groups)]
    assert sorted(slots) == list(range(lay.data_slots * p.cluster_size)) and sorted(flags) == list(range(len(flags)))
    assert 4 * len(flags) <= FLAG_REGION_BYTES


def test_control_a_layout_that_splits_beyond_the_idle_clusters_is_caught():
    p = StreamKPlan(8, 64, 1, 2, 1)
    good = p.layout(1060, 132, 4000)
    bad = StreamKLayout(1060, 132, good.k_tiles, 40, good.dp_items, good.last_items)  # 4 x 40 > 132 units in one round
    assert check_assignment(p.assignment(bad), 1060, good.k_tiles) != []
    assert check_assignment(p.assignment(good), 1060, good.k_tiles) == []


def test_control_a_split_that_drops_the_remainder_is_caught():
    p = StreamKPlan(8, 64, 1, 2, 1)
    lay = p.layout(1060, 132, 4000)

    class Dropping(StreamKPlan):
        @staticmethod
        def k_range(split, parts, k_tiles):
            return split * (k_tiles // parts), k_tiles // parts

    d = Dropping(8, 64, 1, 2, 1)
    assert check_assignment(d.assignment(lay), 1060, lay.k_tiles) != []


def test_control_whole_last_round_with_split_entries_elsewhere_is_caught():
    # the split units listed first (not the last round): a cluster runs a part, then more work (its owner could wait
    # on a cluster that is still busy with whole tiles; the checker says so)
    p = StreamKPlan(8, 64, 1, 2, 1)
    lay = p.layout(1060, 132, 4000)
    n = lay.last_items * lay.splits
    order = list(range(lay.dp_items, lay.work_entries)) + list(range(lay.dp_items))
    assign = [[p.unit(order[w], lay) for w in range(c, lay.work_entries, 132)] for c in range(132)]
    assert n and check_assignment(assign, 1060, lay.k_tiles) != []


# -- the rendered C against the plan -----------------------------------------------------------------------------------
def run_c(lines, env):
    """Run rendered ``const int x = expr;`` statements (C integer division on non-negative ints) as Python."""
    env = dict(env, min=min, max=max)
    for line in lines:
        stmt = line.split("//")[0].strip().rstrip(";")
        m = re.match(r"const int (\w+) = (.*)", stmt)
        assert m, line
        name, expr = m.groups()
        expr = expr.replace("static_cast<int>(gridDim.x)", "gridDim_x")
        env[name] = int(eval(re.sub(r"(?<![/])/(?![/])", "//", expr), {}, env))
    return env


@settings(max_examples=150, deadline=None)
@given(layouts)
def test_rendered_c_matches_the_plan(args):
    items, clusters, k, smax, cs = args
    p = StreamKPlan(smax, 64, cs, 2, 1)
    lay = p.layout(items, clusters, k)
    env = run_c(layout_c(p, "num_items"), {"num_items": items, "gridDim_x": clusters * cs, "k_tiles_total": lay.k_tiles})
    assert (env["sk_splits"], env["sk_dp"], env["sk_work"]) == (lay.splits, lay.dp_items, lay.work_entries)
    for w in sorted({0, lay.dp_items - 1, lay.dp_items, lay.work_entries - 1} - {-1}):
        u = run_c(unit_c(), {**env, "work": w})
        item, z, first, count = p.unit(w, lay)
        assert (u["tile"], u["sk_split"], u["kt_first"], u["num_k_tiles"]) == (item, z, first, count)
        assert u["sk_parts"] == (1 if w < lay.dp_items else lay.splits)


def test_control_a_wrong_c_statement_is_caught():
    p = StreamKPlan(8, 64, 1, 2, 1)
    lay = p.layout(1060, 132, 4000)
    env = run_c(layout_c(p, "n"), {"n": 1060, "gridDim_x": 132, "k_tiles_total": lay.k_tiles})
    wrong = tuple(line.replace("sk_unit % sk_parts", "sk_unit / sk_parts") for line in unit_c())
    w = lay.dp_items + 10  # unit 10 of S = 8: split 2 (10 / 8 = 1 would be the wrong one)
    u = run_c(wrong, {**env, "work": w})
    assert (u["tile"], u["sk_split"]) != p.unit(w, lay)[:2]


# -- the spec and the launch --------------------------------------------------------------------------------------------
def test_stream_k_field_round_trips_and_names_the_kernel():
    s = sk_spec(s=8)
    assert s.kernel_name.endswith("_streamk8") and "--stream-k 8" in s.cli_args()
    assert make_spec(**s.to_json()) == s and "stream_k" not in sk_spec(s=1).to_json()
    assert plan_kernel(s).stream_k.groups == 2 and plan_kernel(sk_spec(s=1)).stream_k is None
    assert [q.name for q in plan_kernel(s).abi.params][-1] == "W"


@pytest.mark.parametrize("kw,flag", [
    (dict(s=17), "--stream-k"), (dict(schedule="tile"), "--stream-k"), (dict(consumers="pingpong"), "--stream-k"),
    (dict(bm=256, bn=128), "--stream-k"), (dict(split_k=2), None), (dict(arch="sm_100a"), None),
])
def test_illegal_stream_k_specs_name_the_field(kw, flag):
    with pytest.raises(SpecError) as e:
        sk_spec(**kw)
    if flag:
        assert e.value.field == flag


def test_launch_passes_the_workspace_and_keeps_the_grid_resident():
    plan = plan_kernel(sk_spec(s=8, epilogue="direct"))
    p = Problem(2500, 10000, 4000, 4000, 4000, 10000)
    wb = workspace_bytes(plan, p, 132)
    exact = FLAG_REGION_BYTES + 4 * 7 * 128 * 192 * 4  # 132 CTAs: 4 last-round tiles x 7 partials of 128 x 192 floats
    assert exact <= wb <= FLAG_REGION_BYTES + 132 * 128 * 192 * 4  # any grid: at most one partial per CTA
    (kern, grid, block, args), = gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40000, p, 132,
                                               encode=lambda a: bytes(128))
    assert grid == (132, 1, 1)
    assert args.values[-1].value == 0x40000
    with pytest.raises(Exception):  # a workspace that is not 128-byte aligned
        gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40010, p, 132, encode=lambda a: bytes(128))


def test_explain_prints_the_stream_k_plan():
    from ptxgen.derive.tile.explain import explain_text
    from ptxgen.derive.tile.layout import derive

    text = explain_text(derive(sk_spec(s=8)))
    assert "Stream-K" in text and "stream_k_reduction" in text


# -- NVRTC + SASS (L2) -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,dtype", [("p128x192", "bf16"), ("p128x192c2", "bf16"), ("p128x224c2", "bf16"), ("p128x256", "e4m3"),
                                        ("p128x256c2", "e4m3")])
def test_stream_k_kernels_compile_without_local_memory_and_use_release_acquire(name, dtype):
    from ptxgen.runtime.compile.sass import check_sass, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = dataclasses.replace(BY_NAME[name].spec(dtype), stream_k=8)
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "REDG.E.ADD.S32.STRONG.GPU" in sass  # the flag's release add (one per partial, counts only)
    assert "LDG.E.STRONG.GPU" in sass and "MEMBAR.ALL.GPU" in sass  # the owner's acquire load; the release fence
    assert sass.count("ATOM") == 0  # no atomics on data


SWAPPED_L2 = [(bn, s, e) for bn in (200, 168, 136) for s in (2, 3) for e in ("tma", "direct")]
SWAPPED_L2_DEFAULT = {(200, 3, "tma"), (200, 2, "direct")}


@pytest.mark.parametrize("bn,s,epilogue", [pytest.param(*c, marks=() if c in SWAPPED_L2_DEFAULT else pytest.mark.slow)
                                           for c in SWAPPED_L2])
def test_swapped_stream_k_kernels_compile_with_their_wgmmas_and_no_local_memory(bn, s, epilogue):
    """The swap-AB kernel (128 x BN' over N x M, M-major D; runtime.choose.swap._swapped) in its stream-K form, both
    epilogues: BK / 16 = 4 HGMMA 64 x BN' x 16 a K-tile, the M-major TMA store's stmatrix.trans, the flag protocol."""
    from ptxgen.runtime.compile.sass import check_sass, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda
    from test_swap_streamk import swapped_sk

    spec = swapped_sk(bn, s, epilogue)
    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.stack_bytes == 0, rep.problems
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    hgmma = re.findall(r"HGMMA\.(\d+)x(\d+)x(\d+)\.F32\.BF16", sass)
    assert len(hgmma) == 64 // 16 and set(hgmma) == {("64", str(bn), "16")}
    assert "REDG.E.ADD.S32.STRONG.GPU" in sass and "LDG.E.STRONG.GPU" in sass and sass.count("ATOM") == 0
    assert ("STSM.16.MT88" in sass) == (epilogue == "tma")  # the M-major TMA store transposes with stmatrix.trans


# -- the cost model and the choice -------------------------------------------------------------------------------------
COSTS = shipped_costs()[1]


def test_the_model_splits_only_a_partial_last_round():
    c = BY_NAME["p128x192"]
    full = predict_streamk(c, COSTS[c.name], 128 * 132, 192 * 8, 4000, 8)  # 8 full rounds, no last round
    assert full.splits == 1 and full.predicted_us == pytest.approx(predict_us(c, COSTS[c.name], 128 * 132, 192 * 8, 4000))
    b = best_streamk(c, COSTS[c.name], 2500, 10000, 4000)
    assert b.splits > 1 and b.last_items == 4 and b.split_last_us < b.plain_last_us
    assert best_streamk(BY_NAME["pp128x128"], COSTS["pp128x128"], 2500, 10000, 4000) is None  # no stream-K form


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20_000), st.integers(1, 20_000), st.integers(16, 20_000), st.sampled_from(
    ["p128x192", "p128x256", "p128x224", "p128x192c2", "p128x256c2", "p128x160c2"]), st.integers(2, 16))
def test_the_model_splits_as_the_kernel_will(m, n, k, name, smax):
    """The cost model's S and L are the kernel's: StreamKPlan.layout on the grid the ABI launches (a stream-K kernel:
    one CTA per SM, one cluster per two with a cluster, however few the work items)."""
    c = BY_NAME[name]
    plan = plan_kernel(dataclasses.replace(c.spec(), stream_k=smax))
    from ptxgen.runtime.launch.launch import streamk_items

    items = streamk_items(plan, Problem(m, n, k, k, k, n))
    lay = plan.stream_k.layout(items, plan.abi.grid(m, n, 132)[0] // plan.stream_k.cluster_size, k)
    pred = predict_streamk(c, COSTS[name], m, n, k, smax)
    assert (pred.splits, pred.last_items if pred.splits > 1 else 0) == (lay.splits, lay.last_items)


def test_a_single_partial_wave_splits_over_every_sm_in_the_kernel_and_the_model():
    # 838 x 1309 x 8000 with 128 x 256 tiles: 42 tiles. Before 2026-12-07 the stream-K grid was min(tiles, SMs) = 42 CTAs,
    # nothing to split, while an earlier model assumed 132 CTAs and predicted 3 splits (the chooser took a kernel 0.53x
    # as fast in that run). Now the grid is every SM (KernelABI.fills_sms) and the model and the kernel agree on 3.
    plan = plan_kernel(sk_spec(bn=256, s=16))
    grid = plan.abi.grid(838, 1309, 132)[0]
    assert grid == 132 and plan.stream_k.layout(42, grid, 8000).splits == 3
    assert predict_streamk(BY_NAME["p128x256"], COSTS["p128x256"], 838, 1309, 8000, 16).splits == 3
    # control: the old grid (one CTA per tile) has no partial round to split
    assert plan.stream_k.layout(42, 42, 8000).splits == 1
    # and a persistent kernel without stream-K keeps one CTA per tile
    assert plan_kernel(sk_spec(bn=256, s=1)).abi.grid(838, 1309, 132)[0] == 42


# runs/2026-12-07-h100-single-wave-streamk run 1 (H100, the pick against the pick before the change, one process): one
# partial round split along K ran 2.55x as fast at 285 x 152 x 10368 and 0.79x / 0.81x / 0.86x at 972 x 1031 x 1600,
# 353 x 983 x 1536, 431 x 1782 x 1536 (K short: the split's fixed cost outweighs half a tile's K-tiles)
def _h100_pick(m, n, k, dtype="bf16"):
    from ptxgen.runtime.choose import Problem
    from ptxgen.runtime.choose.calibration import shipped

    return choose(Problem(dtype, "sm_90a", m, n, k), shipped()["h100-80gb-hbm3"].device)


def test_one_partial_round_splits_where_k_is_long():
    c = _h100_pick(285, 152, 10368)
    assert c.spec.stream_k > 1 and c.chosen_by.endswith("+stream-k") and "split" in c.why


def test_control_the_single_wave_switch_off_keeps_that_round_whole(monkeypatch):
    monkeypatch.setattr(choose_mod, "STREAM_K_SINGLE_WAVE", False)
    assert _h100_pick(285, 152, 10368).spec.stream_k == 1


@pytest.mark.parametrize("shape", [(972, 1031, 1600), (353, 983, 1536), (431, 1782, 1536)])
def test_the_split_rounds_fixed_cost_keeps_short_k_whole(monkeypatch, shape):
    from ptxgen.runtime.choose import costmodel

    assert _h100_pick(*shape).spec.stream_k == 1
    monkeypatch.setattr(costmodel, "STREAMK_FIXUP_US", 0.0)  # control: without it the model splits these
    assert _h100_pick(*shape).spec.stream_k > 1


def test_chooser_takes_stream_k_where_the_last_round_is_nearly_empty():
    c = choose("bf16", "sm_90a", 2500, 10000, 4000)
    assert c.chosen_by == "cost-model+stream-k" and c.spec.stream_k > 1 and "stream-K" in c.why
    c = choose("bf16", "sm_90a", 1500, 9000, 3000)
    assert c.chosen_by == "cost-model+off-sector+stream-k" and c.spec.cluster.value == "2x1"


def test_control_stream_k_rule_off_keeps_the_pick(monkeypatch):
    before = choose("bf16", "sm_90a", 2500, 10000, 4000)
    monkeypatch.setattr(choose_mod, "STREAM_K_RULE", False)
    c = choose("bf16", "sm_90a", 2500, 10000, 4000)
    assert c.chosen_by == "cost-model" and c.spec.stream_k == 1
    assert dataclasses.replace(before.spec, stream_k=1) == c.spec  # the same base kernel


def test_stream_k_never_touches_the_tuned_six_or_full_last_rounds():
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096), (2048, 2048, 8192), (8192, 8192, 1024),
                    (4096, 4096, 16384), (12000, 1000, 6000), (4096, 4096, 5000)):
        assert choose("bf16", "sm_90a", m, n, k).spec.stream_k == 1


def test_the_ranking_takes_a_kernel_by_its_stream_k_form():
    # 5000^3: 128 x 256 in 2x1 clusters is 400 cluster tiles on 66 clusters (6 rounds + 4): ranked by its stream-K form it
    # beats the 128 x 224 kernel the model picked without stream-K (run 1: 1.000 / 1.014 against 0.961)
    c = choose("bf16", "sm_90a", 5000, 5000, 5000)
    assert c.chosen_by == "cost-model+off-sector+stream-k" and (c.spec.bm, c.spec.bn, c.spec.stream_k) == (128, 256, 8)
    from ptxgen.runtime.choose.costmodel import rank

    plain = rank(COSTS, 5000, 5000, 5000, off_sector=True)
    assert plain[0].candidate.name == "p128x224c2" and all(r.streamk is None for r in plain)


def test_e4m3_takes_stream_k_from_its_own_cost_table():
    # 5120^3: 800 tiles of 128 x 256 = 6 rounds + 8; run 1 of 2026-12-01-swapab-small-m: 224.0 us whole, 207.7 us in this form
    c = choose("e4m3", "sm_90a", 5120, 5120, 5120)
    assert c.chosen_by == "cost-model+stream-k" and (c.spec.bm, c.spec.bn, c.spec.bk) == (128, 256, 128) and c.spec.stream_k > 1
    # rows 4000 B (32 past a line): the cost model does not rank them; nearest-fit's 128 x 256 kernel in its stream-K form
    c = choose("e4m3", "sm_90a", 2512, 10000, 4000)
    assert c.chosen_by == "nearest-fit+stream-k" and (c.spec.bm, c.spec.bn) == (128, 256) and "stream-K" in c.why
    assert 2 <= c.spec.stream_k <= 8  # 8 last-round tiles on 132 CTAs, 32 K-tiles: at most 8 splits of 4 K-tiles
    assert choose("e4m3", "sm_90a", 336, 8192, 8192).spec.stream_k == 1  # 96 tiles: one partial round, nothing idle to fill


def test_control_e4m3_stream_k_off_keeps_the_whole_kernels(monkeypatch):
    before = choose("e4m3", "sm_90a", 2512, 10000, 4000)
    monkeypatch.setattr(choose_mod, "STREAM_K_FAMILIES", ("16bit",))
    c = choose("e4m3", "sm_90a", 2512, 10000, 4000)
    assert c.chosen_by == "nearest-fit" and c.spec == dataclasses.replace(before.spec, stream_k=1)
    assert choose("e4m3", "sm_90a", 5120, 5120, 5120).chosen_by == "cost-model"
    assert choose("bf16", "sm_90a", 2500, 10000, 4000).chosen_by == "cost-model+stream-k"  # 16-bit unchanged
    monkeypatch.setattr(choose_mod, "STREAM_K_FAMILIES", ("16bit", "e4m3"))
    monkeypatch.setattr(choose_mod, "COST_MODEL", False)  # the switch turns nearest-fit's stream-K form off too
    assert choose("e4m3", "sm_90a", 2512, 10000, 4000).chosen_by == "nearest-fit"


def test_gemm_selection_runs_the_stream_k_pick():
    from ptxgen.api.select import select_spec

    spec, why = select_spec("bf16", "sm_90a", 2500, 10000, 4000)
    c = choose("bf16", "sm_90a", 2500, 10000, 4000)
    assert spec == c.spec and spec.stream_k > 1 and why == c.why  # ptxgen.gemm runs what ptxgen bench chose


# -- on the H200 (gpu tier) -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name,s,m,n,k", [
    ("p128x192", 8, 2500, 10000, 4000),    # 1060 tiles: 4 in the last round, split 8 ways
    ("p128x192", 3, 1000, 7000, 1000),     # 8 x 37 = 296 tiles: 32 in the last round, 3 ways, K = 16 K-tiles
    ("p128x192c2", 3, 1500, 9000, 3000),   # 2x1 clusters, rows 112 B past a line
    ("p128x224", 5, 2777, 3333, 1111),     # odd everything: partial tiles along M and N, a K tail; 330 tiles: 66 split 2
    ("p128x224c2", 4, 1379, 5003, 2049),   # a cluster with an inactive CTA in the last row, a K tail
    ("p128x256:e4m3", 4, 1100, 4000, 2000),   # e4m3: 144 tiles, 12 in the last round split 4 ways, 16 K-tiles of 128
    ("p128x256c2:e4m3", 3, 1000, 5008, 1488),  # e4m3 2x1 clusters: 80 cluster tiles, 14 split 3 ways; rows 16 B off a sector
])
def test_stream_k_kernels_match_float64_twice(gpu, name, s, m, n, k):
    from ptxgen.runtime.check.validate import validate_spec

    name, _, dtype = name.partition(":")
    spec = dataclasses.replace(BY_NAME[name].spec(dtype or "bf16"), stream_k=s)
    r = validate_spec(spec, m, n, k, seed=11)
    assert r.passed, r.verdict
