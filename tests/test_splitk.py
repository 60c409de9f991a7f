"""Split-K (ptxgen.derive.store.splitk): the K-range of each split (L1, hypothesis), the rendered C against the plan, the
spec rules, the launches (no GPU), NVRTC + SASS of both kernels of a split-K module (L2), the split-k choice rule, and
(gpu tier) the kernels against float64 and run twice bit for bit."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.rules import MAX_SPLIT_K
from ptxgen.derive.tile.spec import make_spec
from ptxgen.derive.store.splitk import REDUCE_THREADS, WORKSPACE_VECTOR, SplitPlan, plan_split
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.splitk_view import k_range_c
from ptxgen.isa.types import SpecError
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import choose
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
    p = SplitPlan(s, bk)
    t = -(-k // bk)
    assert coverage(lambda z: p.k_range(z, k), s, t) == [1] * t
    counts = [p.k_range(z, k)[1] for z in range(s)]
    assert max(counts) - min(counts) <= 1  # balanced to within one K-tile


@settings(max_examples=150, deadline=None)
@given(k=st.integers(1, 100_000), bk=st.sampled_from([32, 64, 128]), s=st.integers(2, MAX_SPLIT_K))
def test_rendered_c_matches_the_plan(k, bk, s):
    p = SplitPlan(s, bk)
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
    p = SplitPlan(3, 64)
    lines = tuple(line.replace("min(k_split,", "min(0,") for line in k_range_c(p, 64))
    assert any(_c_k_range(lines, z, 1000) != p.k_range(z, 1000) for z in range(3))


def test_workspace_and_reduction_cover_every_element():
    p = SplitPlan(4, 64)
    for m, n in ((1, 1), (37, 1001), (5, 4096), (128, 7168)):
        ld = p.workspace_ld(n)
        assert ld >= n and ld % WORKSPACE_VECTOR == 0 and ld - n < WORKSPACE_VECTOR
        assert p.workspace_bytes(m, n) == 4 * m * ld * 4
        assert p.reduce_grid(m, n)[0] * REDUCE_THREADS >= m * ld // WORKSPACE_VECTOR > (p.reduce_grid(m, n)[0] - 1) * REDUCE_THREADS
    assert plan_split(1, 64) is None


# -- the spec ---------------------------------------------------------------------------------------------------------
def test_split_k_field_round_trips_and_names_the_kernel():
    s = split_spec(s=4)
    assert s.kernel_name.endswith("_sk4") and s.split and s.stored_dtype.value == "f32" and s.out_dtype.value == "bf16"
    assert "--split-k 4" in s.cli_args()
    assert make_spec(**{**s.to_json()}) == s
    plain = split_spec(s=1)
    assert "split_k" not in plain.to_json() and "--split-k" not in plain.cli_args() and "_sk" not in plain.kernel_name


@pytest.mark.parametrize("kw,flag", [
    (dict(s=0), "--split-k"), (dict(s=MAX_SPLIT_K + 1), "--split-k"),
    (dict(schedule="persistent"), "--split-k"), (dict(epilogue="tma"), "--split-k"),
    (dict(arch="sm_100a", bm=128, a="kmajor-sw128"), "--split-k"),
])
def test_illegal_split_specs_name_the_field(kw, flag):
    with pytest.raises(SpecError) as e:
        split_spec(**kw)
    assert e.value.field == flag


def test_explain_prints_the_split_plan():
    from ptxgen.derive.tile.explain import explain_text
    from ptxgen.derive.tile.layout import derive

    text = explain_text(derive(split_spec(s=3)))
    for word in ("Split-K (3 splits", "k_range", "workspace", "reduction", "_sk3_reduce"):
        assert word in text


# -- the launches (no GPU) --------------------------------------------------------------------------------------------
def test_launches_write_the_workspace_then_reduce_into_d():
    s = split_spec(s=4)
    plan = plan_kernel(s)
    p = Problem.padded(s, 37, 1001, 1000)
    assert workspace_bytes(plan, p) == 4 * 37 * 1004 * 4
    ls = gemm_launches(plan, "mma", "reduce", 0x10000, 0x20000, 0x30000, 0x40000, p, 132, encode=lambda a: bytes(128))
    (k1, g1, b1, a1), (k2, g2, b2, a2) = ls
    assert (k1, k2) == ("mma", "reduce")
    assert g1 == (1 * 8, 1, 4)  # ceil(37 / 64) x ceil(1001 / 128) tiles, z = the 4 splits
    names = [q.name for q in plan.abi.params]
    vals = dict(zip(names, a1.read_back()))
    assert vals["D"] == 0x40000 and vals["ldd"] == 1004 and (vals["M"], vals["N"], vals["K"]) == (37, 1001, 1000)  # D: the workspace
    assert a2.read_back() == [0x40000, 0x30000, 37, 1001, 1004, p.ldd]
    assert g2 == (-(-37 * 1004 // 4 // REDUCE_THREADS), 1, 1) and b2 == (REDUCE_THREADS, 1, 1)
    one = gemm_launches(plan_kernel(split_spec(s=1)), "mma", None, 0x10000, 0x20000, 0x30000, 0, p, 132, encode=lambda a: bytes(128))
    assert len(one) == 1 and one[0][1][2] == 1


# -- NVRTC + SASS (L2) ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [split_spec(s=4), split_spec(bm=128, bn=192, stages=4, s=3),
                                  split_spec(s=2, loader="cp.async", out_dtype="f32")], ids=lambda s: s.kernel_name)
def test_split_module_compiles_both_kernels_without_local_memory(spec):
    from ptxgen.runtime.compile.sass import check_sass, function_resources, run_tool
    from ptxgen.runtime.compile.toolchain import compile_cuda

    plan = plan_kernel(spec)
    src = render_kernel(plan)
    assert f"(kt_first + kt) * {spec.bk}" in src and "blockIdx.z" in src
    c = compile_cuda(src, spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok, rep.problems
    funcs = function_resources(run_tool("cuobjdump", ["--dump-resource-usage"], c.cubin))
    assert set(funcs) == {spec.kernel_name, plan.reduce_abi.name}
    assert all(f["LOCAL"] == 0 and f["STACK"] == 0 for f in funcs.values())
    sass = run_tool("cuobjdump", ["--dump-sass", "--function", plan.reduce_abi.name], c.cubin)
    assert "LDG.E.EF.128" in sass or "LDG.E.128" in sass  # the partials are read as 16-byte vectors
    assert "ATOM" not in sass and "RED." not in sass  # no atomics: a fixed order


def test_control_the_local_memory_check_sees_the_reduction_kernel():
    from ptxgen.runtime.compile.sass import function_resources

    text = (" Function k_reduce:\n  REG:24 STACK:16 SHARED:0 LOCAL:16\n Function k:\n  REG:168 STACK:0 SHARED:0 LOCAL:0\n")
    funcs = function_resources(text)
    assert funcs["k_reduce"]["LOCAL"] == 16 and funcs["k"]["REG"] == 168


# -- the choice -------------------------------------------------------------------------------------------------------
def test_split_k_rule_fills_one_wave_at_small_m():
    c = choose("bf16", "sm_90a", 1, 7168, 16384, allow_swap=False)  # (the swap-ab rule takes this shape: tests/test_dmajor.py)
    assert c.chosen_by == "split-k" and c.spec.split_k == 2 and (c.spec.bm, c.spec.bn) == (64, 128)
    c = choose("bf16", "sm_90a", 16, 4096, 4096, allow_swap=False)  # (swap-ab takes M <= 64 on these weights)
    assert c.chosen_by == "split-k" and c.spec.split_k * 64 <= 132
    assert choose("bf16", "sm_90a", 64, 16384, 4096, allow_swap=False).chosen_by == "small-m"  # 128 CTAs: no split
    assert choose("bf16", "sm_90a", 1, 4096, 512).chosen_by == "small-m"  # 8 K-tiles: too few for two splits of 8
    assert choose("bf16", "sm_90a", 2, 885, 2432).chosen_by == "small-m"  # below the smallest B measured to gain
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
