"""f32 output through the wgmma TMA-store epilogue (``--epilogue tma --out-dtype f32``, sm_90a; ptxgen.derive.store.epilogue,
writer ``st.shared.v2.f32``): the rules, the plan against the independent models (the fragment map, the TMA store's read of
the 128-byte-swizzled staging, where each box lands in D at the problem's edges), controls that must fail, the rendered
expressions against the plan, NVRTC + SASS (L2). The GPU tests are tests/test_epilogue_ops.py::test_f32_through_the_tma_store
and ::test_block_fp8_matches_the_recipe[...-f32-tma] (``-k f32_tma``)."""

from __future__ import annotations

import dataclasses

import pytest

from ptxgen.derive.store.epilogue import StorePlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.rules import F32_STORE_CHUNK_COLS
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import kernel_view, render_kernel
from ptxgen.isa.types import DType, Epilogue, SpecError, Swizzle
from ptxgen.model.bridges.check_store import check_store_plan, check_tma_store_problem

BASE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4,
            schedule="persistent", epilogue="tma", out_dtype="f32")


def spec(**kw):
    return make_spec(**{**BASE, **kw})


def bfp8_spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(out_dtype="f32", epilogue="tma", stages=4, **kw)


def _copy(p: StorePlan, cls):
    return cls(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)})


# -- rules and plan --------------------------------------------------------------------------------
def test_plan():
    p = plan_kernel(spec()).store
    assert (p.writer, p.chunk_cols, p.chunks_per_slab, p.tma.box, p.tma.element_bytes) == ("st.shared.v2.f32", 32, 8, (32, 64), 4)
    assert p.chunk_cols == F32_STORE_CHUNK_COLS and p.tma.data_type.name == "FLOAT32" and p.tma.swizzle.json_name == "128B"
    assert p.buffer_bytes == 8192 and p.buffers_per_storer == 2 and p.edge_elements == 4 and p.stmatrix_per_chunk == 0
    assert p.use_tma_c_expr == "n0 + 256 <= N || N % 4 == 0"
    # the staging is the 16-bit store's (same bytes, same shared-memory plan): only the writer and the chunk differ
    bf16 = spec(out_dtype="bf16")
    assert spec().smem_plan() == bf16.smem_plan() and plan_kernel(bf16).store.writer == "stmatrix"
    assert [d.name for d in p.derivation if d.name == "st.shared.v2.f32"]


@pytest.mark.parametrize("kw, field, words", [
    (dict(bn=200), "--bn", "32 f32 columns"),
    (dict(arch="sm_100a", stages=3), "--epilogue", "wgmma (sm_90a) only"),
    (dict(d_major="m", schedule="tile", bn=64), "--d-major", "stmatrix.trans"),
    (dict(fuse="c=tma,bias=col"), "--fuse", "16-bit elements"),
], ids=["bn-200", "tcgen05", "m-major", "c-through-tma"])
def test_refusals(kw, field, words):
    with pytest.raises(SpecError) as e:
        spec(**kw)
    assert e.value.field == field and words in str(e.value), str(e.value)


def test_legal_forms():
    assert spec(bn=160, stages=4).store_staging_bytes == 2 * 2 * 8192  # BN a multiple of 32, not of 64
    assert spec(bn=128, consumers="pingpong", stages=5).epilogue is Epilogue.TMA
    assert spec(fuse="bias=col,gelu_tanh").fuse is not None  # a chain runs on the registers before the store
    assert bfp8_spec().epilogue is Epilogue.TMA and bfp8_spec().out_dtype is DType.F32


def test_f32_defaults_take_the_tma_store():
    """Since 2026-12-02 (measured 1.0-4.6% faster, runs/2026-12-02-stage-release-f32-store/run5 and runs/2026-12-02-gpu-tier-f32-store) the block-FP8 default for f32 and an f32 pick
    keep the TMA store where the rules accept it; control: an M-major D (refused: stmatrix.trans) takes the direct stores."""
    from ptxgen.api.fp8blocks import default_spec
    from ptxgen.api.select import spec_or_direct_store

    d = default_spec(out_dtype="f32")
    assert d.epilogue is Epilogue.TMA and d.stages == 4 and plan_kernel(d).store.writer == "st.shared.v2.f32"
    assert spec_or_direct_store(spec().to_json()).epilogue is Epilogue.TMA
    m_major = {**spec(out_dtype="bf16", d_major="m", bn=128, stages=3).to_json(), "out_dtype": "f32"}
    assert spec_or_direct_store(m_major).epilogue is Epilogue.DIRECT


# -- L1: staged by the plan, read by the TMA model, landed in D ------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(bn=128, consumers="pingpong", stages=5), dict(bm=64, bn=96, stages=4),
                                dict(bm=192, bn=160, stages=3)])
def test_the_tma_store_reads_back_every_chunk(kw):
    s = spec(**kw)
    p = plan_kernel(s).store
    for base in (0, 1024, 196608):
        assert check_store_plan(p, s.bn, seed=s.bn, base=base) == []


def test_block_fp8_plan_reads_back_every_chunk():
    s = bfp8_spec()
    p = plan_kernel(s).store
    assert (p.writer, s.bn, p.chunks_per_slab) == ("st.shared.v2.f32", 192, 6)
    assert check_store_plan(p, s.bn) == []


# (M, N, ldd): edges in M and N; N x 4 B a multiple of 16 (the crossing tile through TMA) and not (it takes the direct
# stores); several tiles a row and a column
PROBLEMS = [(200, 300, 300), (200, 301, 304), (64, 130, 132), (129, 256, 260)]


def _problem(store: StorePlan, m=200, n=301, ldd=304) -> list[str]:
    kp = plan_kernel(spec(bn=128))
    return check_tma_store_problem(store, kp.direct, 128, 128, m, n, ldd)


@pytest.mark.parametrize("m,n,ldd", PROBLEMS)
def test_every_element_of_d_lands_once_at_its_place(m, n, ldd):
    assert _problem(plan_kernel(spec(bn=128)).store, m, n, ldd) == []


class _NoSwizzle(StorePlan):
    def pair_offset(self, warp, lane, group, half):
        row, col = self.pair_row_col(warp, lane, group, half)
        return row * 128 + col * 4


class _OddPairWrongCell(StorePlan):
    def pair_row_col(self, warp, lane, group, half):
        row, col = super().pair_row_col(warp, lane, group, half)
        return row, col + 4 if lane % 2 else col  # the second pair of a 4-column half-group one cell over


class _HalfWordOff(StorePlan):
    def pair_row_col(self, warp, lane, group, half):
        row, col = super().pair_row_col(warp, lane, group, half)
        return row, col + 1  # one f32 over: the 8-byte store misaligned


class _RowsSwapped(StorePlan):
    def pair_row_col(self, warp, lane, group, half):
        return super().pair_row_col(warp, lane, group, 1 - half)


@pytest.mark.parametrize("cls", [_NoSwizzle, _OddPairWrongCell, _HalfWordOff, _RowsSwapped])
def test_controls_fail_the_chunk_check(cls):
    p = plan_kernel(spec(bn=128)).store
    assert check_store_plan(_copy(p, cls), 128)


@pytest.mark.parametrize("cls", [_NoSwizzle, _OddPairWrongCell])
def test_controls_fail_the_problem_check(cls):
    assert _problem(_copy(plan_kernel(spec(bn=128)).store, cls))


@pytest.mark.parametrize("rule, n, fails", [
    ("n0 + 128 <= N || N % 4 == 0", 301, False),  # the plan's rule (control of the controls)
    ("1", 301, True),  # every tile through TMA: the crossing tile writes columns 301..303
    ("n0 + 128 <= N || N % 2 == 0", 302, True),  # an 8-byte granule: N = 302 (1208 B rows) writes columns 302, 303
    ("n0 + 128 <= N || N % 8 == 0", 300, False),  # the 16-bit rule: stricter for f32, so the crossing tile goes direct
])
def test_the_edge_rule_against_the_measured_overrun(rule, n, fails):
    p = plan_kernel(spec(bn=128)).store
    assert p.use_tma_c_expr == "n0 + 128 <= N || N % 4 == 0"
    assert bool(_problem(dataclasses.replace(p, use_tma_c_expr=rule), n=n, ldd=-(-(n + 1) // 4) * 4)) == fails


def test_control_a_wrong_tma_map_fails():
    p = plan_kernel(spec(bn=128)).store
    bad = dataclasses.replace(p, staging=dataclasses.replace(p.staging, swizzle=Swizzle.SW64))
    assert check_store_plan(bad, 128)
    bad = dataclasses.replace(p, tma=dataclasses.replace(p.tma, swizzle=type(p.tma.swizzle).B64, box=(16, 64)))
    assert check_store_plan(bad, 128)


# -- the rendered stores are the plan's ------------------------------------------------------------
def test_rendered_stores_are_the_plans():
    from test_fp8_store import pair_stores_are_the_plans

    plan = plan_kernel(spec())
    assert kernel_view(plan).store.pair_words
    src = pair_stores_are_the_plans(plan)
    assert "st.shared.v2.f32" in src and "stmatrix_x4(buf" not in src and "pack_pair(" not in src
    assert "tma_store_2d(&tmap_d, buf, n0 + c * 32, m0 + wg * 64)" in src  # chunk c: columns 32c.., the slab's rows


def test_explain_json_names_the_writer():
    j = {"epilogue": plan_kernel(spec()).store.to_json()}
    assert j["epilogue"]["writer"] == "st.shared.v2.f32" and j["epilogue"]["chunk"] == [64, 32]
    assert j["epilogue"]["tma"] == {"swizzle": "128B", "box": [32, 64]}


# -- L2: NVRTC (sm_90a) + the SASS gate ------------------------------------------------------------
L2 = [
    pytest.param(lambda: spec(), id="bf16-128x256-persistent"),
    pytest.param(lambda: spec(bn=128, consumers="pingpong", stages=5), id="bf16-128x128-pingpong"),
    pytest.param(lambda: spec(fuse="bias=col,gelu_tanh", bn=128), id="fused-bias-gelu"),
    pytest.param(lambda: spec(fuse="c,bias=row:f32,silu,residual", bn=128), id="fused-all"),
    pytest.param(lambda: spec(fuse="bias=col,relu", bn=128, consumers="pingpong", stages=5), id="fused-pingpong-bias-relu"),
    pytest.param(lambda: spec(bm=192, bn=160, stages=3), id="bf16-192x160"),
    pytest.param(lambda: spec(bm=64, bn=96, schedule="tile"), id="bf16-64x96-tile"),
    pytest.param(lambda: spec(bm=256, bn=128, stages=3), id="bf16-256x128"),
    pytest.param(lambda: bfp8_spec(), id="blockfp8-128x192"),
    pytest.param(lambda: bfp8_spec(bm=192, bn=128), id="blockfp8-192x128"),
    pytest.param(lambda: bfp8_spec(fp8_overlap="interleave"), id="blockfp8-interleave"),
    pytest.param(lambda: bfp8_spec(fp8_stagger="half"), id="blockfp8-half"),
    pytest.param(lambda: bfp8_spec(bn=128), id="blockfp8-128x128"),
    pytest.param(lambda: bfp8_spec(bn=160), id="blockfp8-128x160"),  # a multiple of 32, not of 64: f32 only
    pytest.param(lambda: bfp8_spec(fp8_scale_load="block"), id="blockfp8-block"),
]


@pytest.mark.parametrize("make", L2)
def test_compiles_without_local_memory(make):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = make()
    assert s.out_dtype is DType.F32 and s.epilogue is Epilogue.TMA
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, s.arch.value)
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    rep = check_sass(s, c.cubin, sass=sass)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "STS.64" in sass and "UTMASTG.2D" in sass and "STSM" not in sass


# -- the bench's pairs (tools/bench_f32store.py): the same kernel but for the epilogue -----------------------------------
def test_bench_pairs_differ_only_in_the_epilogue(monkeypatch):
    import pathlib
    import sys

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
    sys.modules.pop("bench_f32store", None)
    import bench_f32store as bench

    pairs = bench.blockfp8_pairs((192, 160)) + [p for sh in bench.BF16_SHAPES for p in bench.bf16_pairs(*map(int, sh.split("x")))]
    assert len(pairs) >= 4
    for name, direct, tma in pairs:
        assert (direct.epilogue, tma.epilogue, direct.out_dtype, tma.out_dtype) == (
            Epilogue.DIRECT, Epilogue.TMA, DType.F32, DType.F32), name
        assert dataclasses.replace(tma, epilogue=Epilogue.DIRECT, stages=direct.stages) == direct, name
        assert plan_kernel(tma).store.writer == "st.shared.v2.f32"
    d, t = bench.blockfp8_pairs()[0][1:]
    assert (d.bm, d.bn, d.stages, t.stages) == (128, 192, 5, 4)  # the direct stores with 5 stages against the TMA store with 4
