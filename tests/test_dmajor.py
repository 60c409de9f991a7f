"""M-major D (``--d-major m``, ptxgen.derive.store.output) and swap-AB (runtime.choose's swap-ab rule, api.launch.swapab).

Tiers: the spec field and its refusals; the L1 check (model.layouts.outmodel through model.bridges.check_dstore) of where the direct
epilogue stores every accumulator element, with controls that must fail; the binding of M-major outputs; the rule;
NVRTC + SASS (L2); and on the H200 (gpu) the kernels through ``ptxgen validate``'s runner, CompiledKernel and
``ptxgen.gemm`` against float64 at odd sizes.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.store.output import DMajor, plan_direct_store
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.emit.views.epilogue_view import wgmma_epilogue_view
from ptxgen.emit.render import render_kernel
from ptxgen.isa.types import SpecError
from ptxgen.model.layouts import outmodel
from ptxgen.model.bridges.check_dstore import check_direct_store
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import rules as swaprules
from ptxgen.runtime.choose import choose


def mspec(bm=128, bn=16, stages=10, d_major="m", **kw):
    fields = dict(bm=bm, bn=bn, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=stages,
                  out_dtype="bf16", d_major=d_major)
    return make_spec(**{**fields, **kw})


# -- the spec field ---------------------------------------------------------------------------------------------------
def test_field_round_trips_names_the_kernel_and_stays_out_of_default_json():
    s = mspec()
    assert s.d_major is DMajor.M and s.kernel_name.endswith("_dm")
    assert TileSpec.from_json(s.to_json()) == s and s.to_json()["d_major"] == "m" and "--d-major m" in s.cli_args()
    n = mspec(d_major="n")
    assert "d_major" not in n.to_json() and "--d-major" not in n.cli_args() and not n.kernel_name.endswith("_dm")
    assert make_spec(**{**n.to_json()}) == n


@pytest.mark.parametrize("kw,flag", [
    (dict(arch="sm_100a", bm=128, bn=16), "--arch"),
    (dict(epilogue="tma", bn=64, stages=4, out_dtype="f32"), "--epilogue"),  # 16-bit outputs only (test_mstore.py)
    (dict(fuse="bias=col"), "--fuse"),
    (dict(split_k=2), "--split-k"),
    (dict(batch="a"), "--batch"),
    (dict(grouped="offs", schedule="persistent"), "--grouped"),
])
def test_what_stores_d_another_way_is_refused_naming_why(kw, flag):
    with pytest.raises(SpecError) as e:
        mspec(**kw)
    assert e.value.field == "--d-major" and flag in e.value.rule


def test_control_an_unknown_value_names_the_field():
    with pytest.raises(SpecError) as e:
        mspec(d_major="k")
    assert e.value.field == "--d-major"


def test_cli_refuses_before_any_work_and_explains_the_stores(capsys):
    from ptxgen.cli import main

    base = ["--bm", "128", "--bn", "16", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16"]
    assert main(["explain", *base, "--arch", "sm_100a", "--d-major", "m"]) == 2
    assert "tcgen05" in capsys.readouterr().err
    assert main(["explain", *base, "--arch", "sm_90a", "--d-major", "m"]) == 0
    out = capsys.readouterr().out
    assert "M-major D" in out and "D[i, j] at j x ldd + i" in out


# -- L1: every accumulator element stored once, where D's layout puts it ----------------------------------------------
SHAPES = [(1, 1), (3, 16), (130, 17), (1001, 3), (64, 8), (200, 33)]


@pytest.mark.parametrize("d_major", ["m", "n"])
@pytest.mark.parametrize("bm,bn", [(64, 8), (64, 16), (128, 16), (128, 24), (192, 16), (256, 32)])
def test_direct_stores_put_every_element_at_its_address(d_major, bm, bn):
    s = mspec(bm=bm, bn=bn, stages=4, d_major=d_major)
    plan = plan_kernel(s)
    view = wgmma_epilogue_view(plan)  # the expressions the template places
    for m, n in SHAPES:
        ldd = (m + 5) if d_major == "m" else -(-(n + 3) // 8) * 8  # padded: the layout, not a tight fit, is checked
        assert check_direct_store(plan.direct, bm, bn, m, n, ldd, view.frag_row_expr, view.frag_col_expr) == [], (m, n)


def test_controls_a_wrong_rule_is_caught():
    m_plan, n_plan = plan_direct_store(DMajor.M), plan_direct_store(DMajor.N)
    # the row-major rule's expressions under the M-major meaning (and the reverse)
    assert check_direct_store(dataclasses.replace(n_plan, d_major=DMajor.M), 128, 16, 130, 17, 136)
    assert check_direct_store(dataclasses.replace(m_plan, d_major=DMajor.N), 128, 16, 130, 17, 136)
    # the pair's second column one element on (a vector store) instead of ldd
    assert check_direct_store(dataclasses.replace(m_plan, next_col_expr="1"), 128, 16, 130, 17, 130)
    assert check_direct_store(dataclasses.replace(m_plan, vector_pair=True), 128, 16, 130, 17, 130)
    # off by one row, and the column's stride wrong
    assert check_direct_store(dataclasses.replace(m_plan, offset_expr="static_cast<size_t>(col) * ldd + row + 1"), 64, 8, 9, 9, 9)
    assert check_direct_store(dataclasses.replace(m_plan, offset_expr="static_cast<size_t>(col) * (ldd + 1) + row"), 64, 8, 9, 9, 9)
    # the template's fragment row read wrong (rows +8 of each group missed)
    view = wgmma_epilogue_view(plan_kernel(mspec()))
    assert check_direct_store(m_plan, 128, 16, 130, 17, 130, view.frag_row_expr.replace("8 * ", "0 * "), view.frag_col_expr)


def test_control_the_model_sees_a_missing_and_a_stray_store():
    good = [(outmodel.address("m", r, c, 5), (r, c)) for r in range(3) for c in range(4)]
    assert outmodel.check_stores("m", 3, 4, 5, good) == []
    assert outmodel.check_stores("m", 3, 4, 5, good[1:])  # one element never stored
    assert outmodel.check_stores("m", 3, 4, 5, good + [(99, (3, 0))])  # a row past M stored
    assert outmodel.check_stores("m", 3, 4, 5, good + good[:1])  # stored twice


def test_the_rendered_kernel_places_the_plans_expressions():
    plan = plan_kernel(mspec())
    src = render_kernel(plan)
    assert f"d_out + {plan.direct.offset_expr};" in src and f"p[{plan.direct.next_col_expr}] = acc_to_out(" in src
    assert "reinterpret_cast<unsigned*>(p) = pair" not in src  # no vector store of the pair
    row_major = render_kernel(plan_kernel(mspec(d_major="n")))
    assert "d_out + static_cast<size_t>(row) * ldd + col;" in row_major and "*reinterpret_cast<unsigned*>(p) = pair;" in row_major


# -- the binding of an M-major out --------------------------------------------------------------------------------------
def _info(name, shape, strides, dtype="bf16", ptr=0x10000):
    from ptxgen.runtime.launch.arrays import ArrayInfo

    return ArrayInfo(name, ptr, shape, strides, dtype, 2 if dtype in ("bf16", "f16") else 4, (2, 0), "torch", "torch")


def test_m_major_out_binds_with_any_column_pitch_and_row_major_is_refused():
    from ptxgen.api.arrays.binding import bind
    from ptxgen.runtime.launch.arrays import ArgumentError

    s = mspec()
    a, b = _info("a", (1001, 1000), (1000, 1), ptr=0x100000), _info("b", (3, 1000), (1000, 1), ptr=0x800000)
    # out = d.t() of a row-major 3 x 1001 d: strides (1, 1001), a pitch of 2002 B (not 16-byte aligned) is fine
    p = bind(s, a, b, _info("out", (1001, 3), (1, 1001), ptr=0x2000002)).problem
    assert (p.m, p.n, p.ldd) == (1001, 3, 1001)
    with pytest.raises(ArgumentError, match="M-major"):
        bind(s, a, b, _info("out", (1001, 3), (3, 1), ptr=0x2000000))
    with pytest.raises(ArgumentError, match="overlap"):
        bind(s, a, b, _info("out", (1001, 3), (1, 1000), ptr=0x2000000))
    from ptxgen.runtime.launch.launch import Problem, problem_errors

    assert any("smaller than M" in e for e in problem_errors(s, Problem(1001, 3, 1000, 1000, 1000, 1000)))
    assert Problem.tight(s, 1001, 3, 1000).ldd == 1001 and Problem.tight(mspec(d_major="n"), 1001, 3, 1000).ldd == 3


# -- the rule -----------------------------------------------------------------------------------------------------------
# (M, N, K) -> (BM, BN, stages) written out by hand: BN = M rounded up to 8; BM 64 where ceil(N / 64) CTAs fit the 132
# SMs (4096: 64, 7168: 112), else 128 (16384: 128 CTAs); stages: 200 KB / ((BM + BN) x 128 B), at most 12 (BM 64) or 10
@pytest.mark.parametrize("m,n,k,tile", [
    (1, 7168, 16384, (64, 8, 12)), (3, 7168, 16384, (64, 8, 12)), (16, 7168, 16384, (64, 16, 12)),
    (1, 16384, 4096, (128, 8, 10)), (16, 16384, 4096, (128, 16, 10)), (17, 16384, 4096, (128, 24, 10)),
    (17, 4096, 4096, (64, 24, 12)), (32, 7168, 16384, (64, 32, 12)), (48, 16384, 4096, (128, 48, 9)),
    (64, 7168, 16384, (64, 64, 12)), (64, 16384, 4096, (128, 64, 8)), (40, 32768, 4096, (128, 40, 9))])
@pytest.mark.parametrize("dtype", ["bf16", "e4m3"])
def test_swap_ab_takes_small_m_against_large_weights(m, n, k, tile, dtype):
    c = choose(dtype, "sm_90a", m, n, k)
    assert c.chosen_by == "swap-ab" and c.swap_ab and c.spec.d_major is DMajor.M and c.spec.dtype.value == dtype
    assert (c.spec.bm, c.spec.bn, c.spec.stages, c.spec.split_k, c.spec.stream_k) == (*tile, 1, 1)
    assert c.spec.bk * c.spec.dtype.bytes == 128  # the table's 128 bytes of K per stage


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64), st.integers(1, 40000), st.integers(16, 20000), st.sampled_from(["bf16", "e4m3", "f16"]))
def test_every_swap_ab_pick_is_a_legal_kernel_that_covers_m(m, n, k, dtype):
    c = choose(dtype, "sm_90a", m, n, k)
    if not c.swap_ab:
        return
    s = c.spec
    assert s.bn >= m and s.bn - 8 < max(m, 8) and s.bn % 8 == 0  # the fewest wgmma columns that hold the M rows
    ctas = -(-n // s.bm)
    assert ctas >= swaprules.SWAP_AB_MIN_FILL * 132 and (ctas <= 132 or s.bm == 128)  # fills the SMs, one wave where it can
    assert n * k >= swaprules.SWAP_AB_MIN_WEIGHT and s.d_major is DMajor.M


def test_swap_ab_covers_f16_which_has_no_tuned_entries():
    c = choose("f16", "sm_90a", 3, 16384, 4096)
    assert c.chosen_by == "swap-ab" and c.spec.dtype.value == "f16" and c.spec.d_major is DMajor.M
    assert choose("f16", "sm_90a", 3, 4096, 4096).chosen_by == "swap-ab"  # bf16's rules, lent (BORROWS_TABLE)
    c = choose("f16", "sm_90a", 3, 16384, 4096, table=[])  # no table to borrow: swap-ab still, else the default
    assert c.chosen_by == "swap-ab" and c.spec.dtype.value == "f16"
    assert choose("f16", "sm_90a", 3, 2048, 4096, table=[]).chosen_by == "default"  # 32 CTAs of 64 rows: under the fill


def test_swap_ab_keeps_away_from_what_was_not_measured_a_win():
    assert choose("bf16", "sm_90a", 65, 7168, 16384).chosen_by != "swap-ab"  # M = 128 lost to small-m / split-k
    assert choose("bf16", "sm_90a", 128, 4096, 4096).chosen_by != "swap-ab"
    assert choose("bf16", "sm_90a", 16, 4096, 2048).chosen_by != "swap-ab"  # below the smallest weights measured
    assert choose("bf16", "sm_90a", 16, 3072, 8192).chosen_by != "swap-ab"  # 48 CTAs of 64 rows: under 40% of the SMs
    assert choose("e4m3", "sm_90a", 16, 3072, 8192).chosen_by != "swap-ab"
    assert choose("bf16", "sm_90a", 1, 7168, 16384, allow_swap=False).chosen_by == "split-k"


def test_control_the_fill_bound_decides(monkeypatch):
    monkeypatch.setattr(swaprules, "SWAP_AB_MIN_FILL", 0.0)
    assert choose("bf16", "sm_90a", 16, 3072, 8192).chosen_by == "swap-ab"
    monkeypatch.setattr(swaprules, "SWAP_AB_MAX_M", 16)
    assert choose("bf16", "sm_90a", 17, 7168, 16384).chosen_by == "split-k"


def test_control_the_rule_switch(monkeypatch):
    monkeypatch.setattr(choose_mod, "SWAP_AB_RULE", False)
    assert choose("bf16", "sm_90a", 1, 7168, 16384).chosen_by == "split-k"


def test_gemm_spec_reports_the_swap_and_the_fused_path_never_gets_it():
    from ptxgen.api.select import _gemm_choice, _gemm_spec

    a, b = _info("a", (3, 4096), (4096, 1)), _info("b", (16384, 4096), (4096, 1), ptr=0x4000000)
    spec, why, swap = _gemm_choice(a, b, None, None, "sm_90a", allow_swap=True)
    assert swap and spec.d_major is DMajor.M and "swap-AB" in why
    assert _gemm_spec(a, b, None, None, "sm_90a")[0].d_major is DMajor.N


# -- L2: NVRTC and the SASS check ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [mspec(), mspec(bm=64, bn=16, stages=12, dtype="f16", out_dtype="f16"),
                                  mspec(out_dtype="f32"), mspec(bm=128, bn=8, stages=12, acc="f16", dtype="f16", out_dtype="f16"),
                                  mspec(bm=128, bn=16, stages=4, schedule="persistent"),
                                  mspec(bn=168, stages=6, schedule="tile"), mspec(bn=104, stages=6, schedule="tile"),
                                  mspec(bm=64, bn=24, stages=12), mspec(bm=128, bn=40, stages=9),
                                  mspec(bm=64, bn=64, bk=128, stages=12, dtype="e4m3"),
                                  mspec(bm=128, bn=8, bk=128, stages=10, dtype="e4m3")], ids=lambda s: s.kernel_name)
def test_m_major_kernels_compile_with_the_mmas_and_no_local_memory(spec):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    c = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, c.cubin)
    assert rep.ok, rep.problems


# -- on the H200 ----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("spec,m,n,k", [(mspec(), 1001, 3, 1000), (mspec(bm=64, bn=16, stages=12, dtype="f16", out_dtype="f16"), 4097, 1, 200),
                                        (mspec(out_dtype="f32"), 999, 16, 4100), (mspec(bm=128, bn=8, stages=12), 130, 7, 72)],
                         ids=lambda x: getattr(x, "kernel_name", str(x)))
def test_m_major_kernels_match_float64_and_write_nothing_else(gpu, spec, m, n, k):
    """ptxgen validate's runner: NaN around the operands, poison around D (M-major), float64 reference."""
    from ptxgen.runtime.check.validate import validate_spec

    r = validate_spec(spec, m, n, k, seed=7)
    assert r.passed, r.verdict


def _torch():
    return pytest.importorskip("torch")


def _rel(torch, got, a, b):
    ref = a.double() @ b.double().t()
    return float(torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(1, 1001, 1000), (3, 4097, 200), (16, 999, 4104)])  # K-major rows 16-byte aligned (no packing here)
def test_compiled_kernel_called_swapped_writes_a_row_major_d(gpu, m, n, k):
    import ptxgen

    torch = _torch()
    kern = ptxgen.compile(mspec())
    g = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert kern(b, a, out.t()).data_ptr() == out.data_ptr()
    kern(b, a, out.t())  # the hot path
    fresh = kern(b, a)  # allocated: an N x M M-major view
    torch.cuda.synchronize()
    assert fresh.shape == (n, m) and fresh.stride(0) == 1
    assert _rel(torch, out, a, b) < 1e-2 and _rel(torch, fresh.t(), a, b) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,dtype,out_dtype", [(1, 1001, 1000, "bfloat16", None), (3, 4097, 200, "float16", None),
                                                   (16, 999, 4100, "bfloat16", "f32"), (3, 16385, 4100, "bfloat16", None)])
def test_gemm_takes_the_swap_through_the_dispatch_cache(gpu, monkeypatch, m, n, k, dtype, out_dtype):
    """ptxgen.gemm at odd sizes with the swap-ab rule (its weight bound lowered for the small shapes; 3 x 16385 x 4100 is
    above it as shipped): the slow path, then the hot path with new data, with and without out."""
    import ptxgen
    from ptxgen.api import dispatch

    torch = _torch()
    if n * k < swaprules.SWAP_AB_MIN_WEIGHT or n < 64 * 53:  # (and their few CTAs)
        monkeypatch.setattr(swaprules, "SWAP_AB_MIN_WEIGHT", 0)
        monkeypatch.setattr(swaprules, "SWAP_AB_MIN_FILL", 0.0)
    tdt = getattr(torch, dtype)
    odt = {None: tdt, "f32": torch.float32}[out_dtype]
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(m, k, device="cuda", dtype=tdt, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=tdt, generator=g)
    spec, why = ptxgen.api.gemm_spec(a, b, out_dtype=out_dtype)
    assert spec.d_major is DMajor.M and "swap-AB" in why
    out = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
    before = len(dispatch._SWAPPED)
    assert ptxgen.gemm(a, b, out, out_dtype=out_dtype) is out
    torch.cuda.synchronize()
    assert _rel(torch, out, a, b) < 1e-2
    a2 = torch.randn(m, k, device="cuda", dtype=tdt, generator=g)
    r = ptxgen.gemm(a2, b, out, out_dtype=out_dtype)  # the hot path (an entry of the swapped table)
    fresh = ptxgen.gemm(a2, b, out_dtype=out_dtype)  # allocated: row-major M x N
    fresh2 = ptxgen.gemm(a, b, out_dtype=out_dtype)  # its hot path
    torch.cuda.synchronize()
    assert len(dispatch._SWAPPED) > before  # (an out whose rows are not 16-byte aligned is packed first: api.dispatch)
    assert r is out and fresh.shape == (m, n) and fresh.stride(1) == 1
    assert _rel(torch, out, a2, b) < 1e-2 and _rel(torch, fresh, a2, b) < 1e-2 and _rel(torch, fresh2, a, b) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(331, 8200, 8192), (201, 8208, 8192)])
def test_gemm_takes_the_swap_for_m_over_128_where_a_tile_fits_m(gpu, reference_chooser, m, n, k):
    """The swap rule for M > 128 (choose's cost-model+swap-ab: 2 x 168 / 2 x 104 rows over M, a partial last N' tile of
    8 / 16 rows) through ptxgen.gemm, slow path then hot path, against float64."""
    import ptxgen

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    spec, why = ptxgen.api.gemm_spec(a, b)
    assert spec.d_major is DMajor.M and spec.bn in (104, 168) and "swap-AB" in why
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert ptxgen.gemm(a, b, out) is out
    fresh = ptxgen.gemm(a, b)  # allocated, then the hot path
    torch.cuda.synchronize()
    assert _rel(torch, out, a, b) < 1e-2 and _rel(torch, fresh, a, b) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,dtype", [(17, 4096, 4096, "bfloat16"), (40, 7168, 4104, "bfloat16"), (64, 16384, 4096, "bfloat16"),
                                         (16, 7168, 16384, "float8_e4m3fn"), (64, 7168, 4096, "float8_e4m3fn"),
                                         (48, 16384, 2048, "float8_e4m3fn")])
def test_gemm_swaps_up_to_m_64_in_bf16_and_e4m3(gpu, m, n, k, dtype):
    """ptxgen.gemm as shipped (no rule lowered) on swap-ab shapes of M 17..64 and e4m3: the M-major D through the dispatch
    cache, against float64 of the same (rounded) inputs."""
    import ptxgen

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(m)
    a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(getattr(torch, dtype))
    b = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(getattr(torch, dtype))
    spec, why = ptxgen.api.gemm_spec(a, b)
    assert spec.d_major is DMajor.M and "swap-AB" in why and spec.bn >= m
    out = ptxgen.gemm(a, b)
    again = ptxgen.gemm(a, b)  # the hot path
    torch.cuda.synchronize()
    assert out.shape == (m, n) and out.stride(1) == 1
    assert _rel(torch, out.float(), a.float(), b.float()) < 1e-2 and torch.equal(out, again)
