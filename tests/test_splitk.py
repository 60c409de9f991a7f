"""Split-K (ptxgen.derive.store.splitk): the K-range of each split (L1, hypothesis), the rendered C against the plan, the
workspace indices, the one-launch last-arrival protocol replayed for every arrival order (L1, ptxgen.model.sim.splitkmodel,
with controls), the spec rules, the launch (no GPU), NVRTC + SASS of the kernel (L2), the split-k choice rule, and (gpu
tier) the kernels against float64 and torch, called again, under CUDA-graph capture, and bit for bit run to run."""

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.rules import MAX_SPLIT_K
from ptxgen.derive.tile.spec import make_spec
from ptxgen.derive.store.splitk import SplitPlan, plan_split
from ptxgen.derive.store.streamk import FLAG_REGION_BYTES
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.splitk_view import k_range_c, split_view
from ptxgen.model.sim.splitkmodel import replay
from ptxgen.isa.types import SpecError
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import choose
from ptxgen.runtime.launch.errors import ProblemError
from ptxgen.runtime.launch.launch import Problem, gemm_launches, workspace_bytes

BASE = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16", bk=64)


def split_spec(bm=64, bn=128, stages=8, s=4, **kw):
    return make_spec(bm=bm, bn=bn, stages=stages, split_k=s, **{**BASE, **kw})


def coverage(k_range, splits: int, k_tiles: int) -> list[int]:
    """How many splits take each K-tile (an independent count over the ranges, not the plan's formula)."""
    seen = [0] * k_tiles
    for z in range(splits):
        first, count = k_range(z)
        assert count >= 0 and first >= 0
        for t in range(first, first + count):
            if t >= k_tiles:
                return seen + [1]  # a K-tile past the end: not a cover of 0..T-1
            seen[t] += 1
    return seen


def _c_k_range(lines, z: int, k: int) -> tuple[int, int]:
    """Run the rendered C statements (integer division on non-negative ints) for split z."""
    env = {"K": k, "k_split": z, "min": min}
    for line in lines:
        stmt = line.split("//")[0].strip().rstrip(";")
        m = re.match(r"const int (\w+) = (.*)", stmt)
        assert m, line
        name, expr = m.groups()
        env[name] = int(eval(re.sub(r"(?<![/])/(?![/])", "//", expr), {}, env))
    return env["kt_first"], env["num_k_tiles"]


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 200_000), bk=st.sampled_from([16, 32, 64, 128, 256]), s=st.integers(2, MAX_SPLIT_K))
def test_every_k_tile_in_exactly_one_split(k, bk, s):
    p = SplitPlan(s, bk, 1, 64 * 128)
    t = -(-k // bk)
    assert coverage(lambda z: p.k_range(z, k), s, t) == [1] * t
    counts = [p.k_range(z, k)[1] for z in range(s)]
    assert max(counts) - min(counts) <= 1  # balanced to within one K-tile


@settings(max_examples=150, deadline=None)
@given(k=st.integers(1, 100_000), bk=st.sampled_from([32, 64, 128]), s=st.integers(2, MAX_SPLIT_K))
def test_rendered_c_matches_the_plan(k, bk, s):
    p = SplitPlan(s, bk, 1, 64 * 128)
    lines = k_range_c(p, bk)
    for z in range(s):
        assert _c_k_range(lines, z, k) == p.k_range(z, k)


def test_control_a_partition_that_drops_the_remainder_is_caught():
    # first = z * (T / S), count = T / S: the last T % S K-tiles belong to no split
    k, bk, s = 1000, 64, 3  # T = 16, 16 = 3 x 5 + 1
    t = -(-k // bk)
    wrong = coverage(lambda z: (z * (t // s), t // s), s, t)
    assert wrong != [1] * t and wrong.count(0) == 1
    overlap = coverage(lambda z: (z * (t // s), -(-t // s)), s, t)  # rounding every count up overlaps or overruns
    assert overlap != [1] * t


def test_control_a_wrong_c_expression_is_caught():
    p = SplitPlan(3, 64, 1, 64 * 128)
    lines = tuple(line.replace("min(k_split,", "min(0,") for line in k_range_c(p, 64))
    assert any(_c_k_range(lines, z, 1000) != p.k_range(z, 1000) for z in range(3))


def _workspace_bytes_touched(p: SplitPlan, tiles: int, vectors_per_thread: int):
    """Every counter's and every partial vector's byte offset, by an independent walk over (tile, split, warpgroup,
    thread, vector): (counter offsets, vector offsets)."""
    counters = [4 * p.counter_index(t, g) for t in range(tiles) for g in range(p.groups)]
    vectors = [FLAG_REGION_BYTES + p.slot_index(t, z) * p.slot_bytes + 16 * p.vector_index(g, v, th, vectors_per_thread)
               for t in range(tiles) for z in range(p.splits) for g in range(p.groups) for th in range(128)
               for v in range(vectors_per_thread)]
    return counters, vectors


@pytest.mark.parametrize("s,bm,bn,tiles", [(2, 64, 128, 3), (3, 128, 192, 2), (8, 64, 64, 5)])
def test_workspace_holds_every_counter_and_partial_once(s, bm, bn, tiles):
    groups = bm // 64
    p = plan_split(s, 64, groups, bm * bn)
    vpt = 64 * bn // 128 // 4  # a warpgroup's 64 x BN floats over 128 threads, 4 a vector
    counters, vectors = _workspace_bytes_touched(p, tiles, vpt)
    assert len(set(counters)) == len(counters) and max(counters) + 4 <= FLAG_REGION_BYTES and min(counters) >= 0
    assert len(set(vectors)) == len(vectors) and min(vectors) >= FLAG_REGION_BYTES
    assert max(vectors) + 16 <= p.workspace_bytes(tiles)
    assert p.workspace_bytes(tiles) - (max(vectors) + 16) < 128  # no slack past the last slot's 128-byte rounding
    assert len(vectors) * 16 == tiles * s * bm * bn * 4  # every float of every (tile, split) partial, once
    assert p.max_tiles * groups * 4 == FLAG_REGION_BYTES
    assert plan_split(1, 64, 1, 64 * 128) is None


def test_control_a_slot_index_without_the_split_is_caught():
    class NoSplit(SplitPlan):
        def slot_index(self, tile, split):  # every split of a tile in one slot
            return tile

    counters, vectors = _workspace_bytes_touched(NoSplit(3, 64, 1, 64 * 128), 2, 16)
    assert len(set(vectors)) < len(vectors)


def _eval_c(expr: str, **env) -> int:
    return int(eval(re.sub(r"(?<![/])/(?![/])", "//", expr), {}, env))


@pytest.mark.parametrize("spec_kw", [dict(s=4), dict(bm=128, bn=192, stages=4, s=3)])
def test_rendered_indices_match_the_plan(spec_kw):
    plan = plan_kernel(split_spec(**spec_kw))
    v, p = split_view(plan), plan.split
    vpt = plan.spec.accumulator_registers // 4
    for tile in (0, 1, 7, 63):
        for g in range(p.groups):
            assert _eval_c(v.counter_expr, tile=tile, wg=g) == p.counter_index(tile, g)
            for th in (0, 5, 127):
                assert _eval_c(v.thread_expr, wg=g, wg_tid=th) == p.vector_index(g, 0, th, vpt)
        for z in range(p.splits):
            assert _eval_c(v.slot_expr, tile=tile, k_split=z) == p.slot_index(tile, z)
    assert f"W + {FLAG_REGION_BYTES}u" in v.store_partial[0] and f"* {p.slot_bytes // 16} +" in v.store_partial[0]
    src = render_kernel(plan)
    block = src[src.index("// split-K: every split stores"):src.index("in split order: the same sum")]
    assert "while (" not in block and "flag_acquire_load(" not in block  # nobody waits: the last arrival reduces


# -- the one-launch protocol, every arrival order (L1) ------------------------------------------------------------------
def _kernel_protocol(src: str) -> tuple[int, tuple[int, ...]]:
    """(the count on which a split reduces, the slots it reads in order), read from the rendered kernel."""
    last = re.findall(r"counter_acq_rel_add\(sk_counter, 1\) == (\d+);", src)
    first = re.findall(r"const float4\* const sk_src0 = .*?static_cast<size_t>\(tile \* \d+ \+ (\d+)\)", src)
    loop = re.findall(r"for \(int z = (\d+); z < (\d+); \+\+z\) \{  // in split order", src)
    assert len(last) == len(first) == len(loop) == 1, (last, first, loop)
    lo, hi = map(int, loop[0])
    return int(last[0]), (int(first[0]), *range(lo, hi))


def _partials(s: int, seed: int = 0) -> list[np.ndarray]:
    """Partial tiles whose f32 sum depends on the order of the additions (large terms that cancel, small ones)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(64) * 10.0 ** rng.integers(-3, 8, 64)).astype(np.float32) for _ in range(s)]


def _fixed_order_sum(parts: list[np.ndarray]) -> np.ndarray:
    acc = parts[0].copy()
    for x in parts[1:]:
        acc = np.float32(acc) + x  # f32 + f32, rounded to f32
    return acc.astype(np.float32)


@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_every_arrival_order_gives_the_same_bits(s):
    src = render_kernel(plan_kernel(split_spec(s=s)))
    last, order = _kernel_protocol(src)
    parts = _partials(s, seed=s)
    want = _fixed_order_sum(parts)
    for arrival in itertools.permutations(range(s)):
        r = replay(parts, arrival, last, order)
        assert r.problems == () and r.reducer == arrival[-1] and r.counter_after == 0, (arrival, r)
        assert r.d.tobytes() == want.tobytes(), arrival
        again = replay(parts, arrival[::-1], last, order, counter=r.counter_after)  # the next launch on the stream
        assert again.problems == () and again.d.tobytes() == want.tobytes()


def test_control_a_sum_in_arrival_order_depends_on_the_order():
    s = 4
    parts = _partials(s, seed=11)
    got = {replay(parts, arrival, s - 1, None).d.tobytes() for arrival in itertools.permutations(range(s))}
    assert len(got) > 1


def test_control_a_wrong_count_or_no_reset_is_caught():
    s = 4
    parts = _partials(s)
    early = replay(parts, (2, 0, 3, 1), s - 2, tuple(range(s)))  # reduces on the third arrival: a slot not stored yet
    assert early.problems and "not stored" in early.problems[0]
    first = replay(parts, (0, 1, 2, 3), s - 1, tuple(range(s)), reset=False)
    second = replay(parts, (0, 1, 2, 3), s - 1, tuple(range(s)), counter=first.counter_after, reset=False)
    assert first.problems == () and first.counter_after == s and second.d is None and second.problems
    src = render_kernel(plan_kernel(split_spec(s=s))).replace(f"== {s - 1};", f"== {s - 2};")
    last, order = _kernel_protocol(src)
    assert replay(parts, (3, 2, 1, 0), last, order).problems  # the rendered-C reading sees a wrong constant


# -- the spec ---------------------------------------------------------------------------------------------------------
def test_split_k_field_round_trips_and_names_the_kernel():
    s = split_spec(s=4)
    assert s.kernel_name.endswith("_sk4") and s.split and s.out_dtype.value == "bf16"
    assert "--split-k 4" in s.cli_args()
    assert make_spec(**{**s.to_json()}) == s
    plain = split_spec(s=1)
    assert "split_k" not in plain.to_json() and "--split-k" not in plain.cli_args() and "_sk" not in plain.kernel_name


@pytest.mark.parametrize("kw,flag", [
    (dict(s=0), "--split-k"), (dict(s=MAX_SPLIT_K + 1), "--split-k"),
    (dict(schedule="persistent"), "--split-k"), (dict(epilogue="tma"), "--split-k"),
    (dict(arch="sm_100a", bm=128, a="kmajor-sw128"), "--split-k"),
    (dict(dtype="e4m3", bk=128, stages=4, fp8_blocks="1x128x128"), "--split-k"),
])
def test_illegal_split_specs_name_the_field(kw, flag):
    with pytest.raises(SpecError) as e:
        split_spec(**kw)
    assert e.value.field == flag


def test_explain_prints_the_split_plan():
    from ptxgen.derive.tile.explain import explain_text
    from ptxgen.derive.tile.layout import derive

    text = explain_text(derive(split_spec(s=3)))
    for word in ("Split-K (3 splits", "one launch", "k_range", "split_k_workspace", "split_k_reduction", "slots 0, 1, ..., 2",
                 "unsigned char* __restrict__ W"):
        assert word in text
    assert "_reduce" not in text and "second kernel" not in text


# -- the launch (no GPU) ---------------------------------------------------------------------------------------------
def test_one_launch_writes_d_with_the_workspace_as_w():
    s = split_spec(s=4)
    plan = plan_kernel(s)
    p = Problem.padded(s, 37, 1001, 1000)
    tiles = 1 * 8  # ceil(37 / 64) x ceil(1001 / 128)
    assert workspace_bytes(plan, p) == FLAG_REGION_BYTES + tiles * 4 * 64 * 128 * 4
    (k1, g1, b1, a1), = gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40000, p, 132, encode=lambda a: bytes(128))
    assert k1 == "mma" and g1 == (tiles, 1, 4)  # z = the 4 splits
    vals = dict(zip([q.name for q in plan.abi.params], a1.read_back()))
    assert vals["D"] == 0x30000 and vals["W"] == 0x40000 and vals["ldd"] == p.ldd
    assert (vals["M"], vals["N"], vals["K"]) == (37, 1001, 1000)
    with pytest.raises(ProblemError):  # a workspace that is not 128-byte aligned
        gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40040, p, 132, encode=lambda a: bytes(128))
    big = Problem.padded(s, 64 * 33, 128 * 125, 1000)  # 4125 tiles: more than the 4096 counters
    with pytest.raises(ProblemError, match="tile counters"):
        gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40000, big, 132, encode=lambda a: bytes(128))
    one = gemm_launches(plan_kernel(split_spec(s=1)), "mma", 0x10000, 0x20000, 0x30000, 0, p, 132, encode=lambda a: bytes(128))
    assert len(one) == 1 and one[0][1][2] == 1 and "W" not in [q.name for q in plan_kernel(split_spec(s=1)).abi.params]


# -- NVRTC + SASS (L2) ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [split_spec(s=4), split_spec(bm=128, bn=192, stages=4, s=3),
                                  split_spec(s=2, loader="cp.async", out_dtype="f32"),
                                  split_spec(bn=128, s=2, dtype="e4m3", bk=128),
                                  split_spec(s=4, fuse="c,bias=col:bf16,gelu_erf,residual"),
                                  split_spec(bm=128, bn=192, stages=4, s=3, fuse="bias=col,relu,scale=row", out_dtype="e4m3")],
                         ids=lambda s: s.kernel_name)
def test_split_kernel_compiles_as_one_function_without_local_memory(spec):
    from ptxgen.runtime.compile.sass import check_sass, function_resources, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda

    plan = plan_kernel(spec)
    src = render_kernel(plan)
    assert f"(kt_first + kt) * {spec.bk}" in src and "blockIdx.z" in src and "_reduce" not in src
    c = compile_cuda(src, spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok, rep.problems
    funcs = function_resources(run_tool("cuobjdump", ["--dump-resource-usage"], c.cubin))
    assert set(funcs) == {spec.kernel_name}  # one kernel: no reduction kernel in the module
    assert all(f["LOCAL"] == 0 and f["STACK"] == 0 for f in funcs.values())
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert sass.count("ATOMG.E.ADD.S32.STRONG.GPU") == 1  # the tile counter's one add (acq_rel: MEMBAR.ALL.GPU before it)
    assert "MEMBAR.ALL.GPU" in sass and "BAR.RED.OR" in sass  # the release fence; the verdict handed to the warpgroup
    assert "LDG.E.128.STRONG.GPU" in sass and "STG.E.128.STRONG.GPU" in sass  # the partials: 16-byte L2 vectors


def test_a_fused_chain_runs_once_after_the_sum():
    """--fuse with --split-k: the chain sits inside the last arrival's branch, after the fixed-order sum (the other
    splits never reach it), as the epilogue of a kernel without a split would run it."""
    src = render_kernel(plan_kernel(split_spec(s=2, fuse="bias=col:f32,relu")))
    reduce_at, sum_at = src.index("if (sk_last) {"), src.index("in split order: the same sum")
    chain_at = src.index("fused epilogue chain on this warpgroup")
    assert reduce_at < sum_at < chain_at and src.count("fused epilogue chain on this warpgroup") == 1
    plain = render_kernel(plan_kernel(split_spec(s=1, fuse="bias=col:f32,relu")))
    assert "sk_last" not in plain and "fused epilogue chain on this warpgroup" in plain


def test_non_split_kernels_have_no_counter():
    """The split-K pieces render only with a split (the sm_100a and plain sm_90a kernels are as before)."""
    for spec in (split_spec(s=1), make_spec(bm=128, bn=256, stages=4, **{**BASE, "arch": "sm_100a"})):
        src = render_kernel(plan_kernel(spec))
        assert "counter_acq_rel_add" not in src and "named_barrier_or" not in src and "sk_last" not in src


# -- the choice -------------------------------------------------------------------------------------------------------
def test_split_k_rule_fills_one_wave_at_small_m(monkeypatch):
    c = choose("bf16", "sm_90a", 1, 7168, 16384, allow_swap=False)  # (the swap-ab rule takes this shape: tests/test_dmajor.py)
    assert c.chosen_by == "split-k" and c.spec.split_k == 2 and (c.spec.bm, c.spec.bn) == (64, 128)
    c = choose("bf16", "sm_90a", 16, 4096, 4096, allow_swap=False)  # (swap-ab takes M <= 64 on these weights)
    assert c.chosen_by == "split-k" and c.spec.split_k * 64 <= 132
    assert choose("bf16", "sm_90a", 64, 16384, 4096, allow_swap=False).chosen_by == "small-m"  # 128 CTAs: no split
    assert choose("bf16", "sm_90a", 1, 4096, 512).chosen_by == "small-m"  # 8 K-tiles: too few for two splits of 8
    light = choose("bf16", "sm_90a", 2, 885, 2432)  # 14 tiles: the split for few tiles (tests/test_tiny_split.py) takes it
    assert light.chosen_by == "split-k" and "few tiles, long K" in light.why
    monkeypatch.setattr(choose_mod, "TINY_SPLIT_RULE", False)
    assert choose("bf16", "sm_90a", 2, 885, 2432).chosen_by == "small-m"  # below the smallest B measured to gain
    monkeypatch.undo()
    c = choose("bf16", "sm_90a", 1, 4096, 4096, allow_swap=False)
    assert c.spec.split_k == 2 and c.spec.split_k * -(-4096 // c.spec.bn) <= 132


def test_split_k_rule_off_keeps_the_earlier_rules(monkeypatch):
    monkeypatch.setattr(choose_mod, "SPLIT_K_RULE", False)
    c = choose("bf16", "sm_90a", 1, 7168, 16384, allow_swap=False)
    assert c.chosen_by == "small-m" and c.spec.split_k == 1


def test_split_k_never_touches_the_tuned_six_or_few_waves():
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096), (2048, 2048, 8192), (8192, 8192, 1024),
                    (4096, 4096, 16384), (333, 8192, 8192), (12000, 1000, 6000), (2500, 10000, 4000), (128, 16384, 4096)):
        assert choose("bf16", "sm_90a", m, n, k).spec.split_k == 1
    assert choose("e4m3", "sm_90a", 16, 4096, 2048).spec.split_k == 1  # e4m3 below FP8_SMALL_M_MIN_WEIGHT: the table's


# -- on the H200 (gpu tier) -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("s,m,n,k", [(3, 37, 1001, 4104), (8, 1, 4097, 200)])
def test_split_kernels_match_float64(gpu, s, m, n, k):
    from ptxgen.runtime.check.validate import validate_spec

    r = validate_spec(split_spec(s=s), m, n, k, seed=3)
    assert r.passed, r.verdict


@pytest.mark.gpu
@pytest.mark.parametrize("s,bn,m,n,k", [(2, 128, 16, 7168, 16384), (3, 64, 37, 1008, 4224)])
def test_fp8_split_kernels_match_float64(gpu, s, bn, m, n, k):
    """The e4m3 split kernels the choice rule may pick (BK = 128, 64-row tiles), against float64."""
    from ptxgen.runtime.check.validate import validate_spec

    r = validate_spec(split_spec(bn=bn, s=s, dtype="e4m3", bk=128), m, n, k, seed=5)
    assert r.passed, r.verdict


def _counters_zero(torch) -> bool:
    """Every split-K / stream-K workspace this process holds has its counter region back at zero."""
    from ptxgen.api.launch import launchplan

    owners = [w[2] for w in launchplan._STREAMK_WORKSPACES.values() if hasattr(w[2], "view")]
    return bool(owners) and all(bool((o[:FLAG_REGION_BYTES].view(torch.int32) == 0).all()) for o in owners)


@pytest.mark.gpu
@pytest.mark.parametrize("s,bm,bn,m,n,k", [
    (3, 64, 128, 37, 1001, 4104),  # K not a multiple of BK, partial tiles
    (8, 64, 128, 1, 4097, 200),  # T = 4 K-tiles < S = 8: four splits multiply nothing
    (3, 128, 192, 200, 700, 3000),  # two consumer warpgroups, a counter each
])
def test_compiled_kernel_is_right_repeatable_and_graph_safe(torch_cuda, s, bm, bn, m, n, k):
    """The CompiledKernel of a split-K spec against float64 and torch, called three times in a row (bit-identical: the
    counters went back to zero and the sum is order-fixed), then captured in a CUDA graph and replayed twice (the
    graph's own workspace), then eager again; the stream's counters are zero at the end."""
    import ptxgen

    torch = torch_cuda
    kern = ptxgen.compile(split_spec(bm=bm, bn=bn, stages=4, s=s))
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    ref = a.double() @ b.double().T
    theirs = float((torch.mm(a, b.T).double() - ref).abs().max())
    outs = [kern(a, b) for _ in range(3)]
    torch.cuda.synchronize()
    err = float((outs[0].double() - ref).abs().max())
    assert err <= max(2 * theirs, 8e-3 * float(ref.abs().max())), (err, theirs)
    assert all(torch.equal(o.view(torch.int16), outs[0].view(torch.int16)) for o in outs[1:])
    out = torch.full((m, -(-n // 8) * 8), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]  # 16-byte rows
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kern(a, b, out)  # warm-up on the capture stream (its own eager workspace)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kern(a, b, out)
    for _ in range(2):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16), outs[0].view(torch.int16))
    again = kern(a, b)
    torch.cuda.synchronize()
    assert torch.equal(again.view(torch.int16), outs[0].view(torch.int16)) and _counters_zero(torch)


@pytest.mark.gpu
def test_gemm_runs_the_split_pick_in_one_launch(torch_cuda):
    """ptxgen.gemm at 128 x 4096 x 4096 (the chooser's split-K pick on an H100/H200): right against float64, bit-identical
    over repeated calls, and one kernel launch a call (the profiler sees no second kernel)."""
    import ptxgen

    torch = torch_cuda
    m, n, k = 128, 4096, 4096
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    spec, _ = ptxgen.api.gemm_spec(a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16))
    if spec.split_k < 2:
        pytest.skip(f"the chooser picks {spec.kernel_name} on this GPU, not a split-K kernel")
    outs = [ptxgen.gemm(a, b) for _ in range(5)]
    torch.cuda.synchronize()
    ref = a.double() @ b.double().T
    theirs = float((torch.mm(a, b.T).double() - ref).abs().max())
    assert float((outs[0].double() - ref).abs().max()) <= max(2 * theirs, 8e-3 * float(ref.abs().max()))
    assert all(torch.equal(o.view(torch.int16), outs[0].view(torch.int16)) for o in outs[1:])
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            ptxgen.gemm(a, b, outs[1])
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA" and e.name.startswith("ptxgen_")]
    assert len(kernels) == 3 and {e.name for e in kernels} == {spec.kernel_name}, [e.name for e in kernels]
    assert _counters_zero(torch)
