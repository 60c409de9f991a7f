"""FP8 (e4m3) output through the wgmma TMA-store epilogue (``--out-dtype e4m3 --epilogue tma`` with a ``scale=`` chain;
ptxgen.derive.store.epilogue, writer ``st.shared.b16``): the plan against the independent models (the fragment map, the TMA
store's read of the 128-byte-swizzled staging), controls that must fail, the API's opt-in, NVRTC + SASS. The GPU test is
tests/test_epilogue_ops.py::test_fp8_through_the_tma_store."""

import pytest

from ptxgen.derive.store.epilogue import StorePlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import kernel_view, render_kernel
from ptxgen.isa.types import DType, SpecError
from ptxgen.model.bridges.check_store import check_store_plan

BASE = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4,
            schedule="persistent", epilogue="tma", out_dtype="e4m3", fuse="scale=row")


def spec(**kw):
    return make_spec(**{**BASE, **kw})


def test_plan():
    p = plan_kernel(spec(bn=256, stages=3)).store
    assert (p.writer, p.chunk_cols, p.chunks_per_slab, p.tma.box, p.tma.element_bytes) == ("st.shared.b16", 128, 2, (128, 64), 1)
    assert p.buffer_bytes == 8192 and p.edge_elements == 16 and p.stmatrix_per_chunk == 0
    assert plan_kernel(spec(out_dtype="bf16", fuse="bias=col")).store.writer == "stmatrix"  # 16-bit outputs unchanged


@pytest.mark.parametrize("kw", [dict(), dict(bn=256, stages=3), dict(consumers="pingpong", stages=5),
                                dict(bm=64, bn=128, fuse="bias=col,gelu,scale=tensor")])
def test_the_tma_store_reads_back_every_chunk(kw):
    s = spec(**kw)
    assert check_store_plan(plan_kernel(s).store, s.bn) == []


class _NoSwizzle(StorePlan):
    def pair_offset(self, warp, lane, group, half):
        row, col = self.pair_row_col(warp, lane, group, half)
        return row * 128 + col


class _ByteOrder(StorePlan):
    def pair_row_col(self, warp, lane, group, half):
        row, col = super().pair_row_col(warp, lane, group, half)
        return row, col + 1 - 2 * (col % 2)  # the pair one byte off


class _HalvesSwapped(StorePlan):
    def pair_row_col(self, warp, lane, group, half):
        return super().pair_row_col(warp, lane, group, 1 - half)


@pytest.mark.parametrize("cls", [_NoSwizzle, _ByteOrder, _HalvesSwapped])
def test_controls_fail(cls):
    p = plan_kernel(spec()).store
    bad = cls(**{f: getattr(p, f) for f in p.__dataclass_fields__})
    assert check_store_plan(bad, 128)


def pair_stores_are_the_plans(plan) -> str:
    """Assert the rendered pair stores' offset expressions (evaluated for sample lanes and warps) are the plan's
    pair_offset, pair k = (group k // 2, half k % 2) storing elements 4g + 2h, +1; return the rendered source.
    Shared with tests/test_f32_store.py (the f32 writer has the same pair structure)."""
    v = kernel_view(plan)
    assert len(v.store.pair_stores) == 2 * plan.store.chunk_cols // 8
    for lane in (0, 5, 13, 31):
        for warp in (0, 3):
            for k, st in enumerate(v.store.pair_stores):
                g, h = divmod(k, 2)
                expr = st.offset_expr.replace("static_cast<unsigned>", "").replace("u", "").replace("/", "//")
                assert eval(expr, {}, {"wg_tid": 32 * warp + lane, "lane": lane}) == plan.store.pair_offset(warp, lane, g, h)
                assert (st.first, st.second) == (4 * g + 2 * h, 4 * g + 2 * h + 1)
    return render_kernel(plan)


def test_rendered_stores_are_the_plans():
    src = pair_stores_are_the_plans(plan_kernel(spec()))
    assert "stmatrix_x4(" not in src.split("acc_to_out")[-1]
    assert "pack_pair(" in src and "<< 8" in src


@pytest.mark.parametrize("kw, field", [(dict(bn=64), "--bn"), (dict(arch="sm_100a"), "--fuse"),
                                       (dict(fuse=None), "--out-dtype")])
def test_refusals(kw, field):
    with pytest.raises(SpecError) as e:
        spec(**kw)
    assert e.value.field == field


def test_api_keeps_the_direct_epilogue_unless_asked():
    from ptxgen.api.fused import fused_spec
    from ptxgen.derive.store.chainspec import parse_chain

    tma = make_spec(**{**BASE, "out_dtype": "bf16", "fuse": None})
    assert fused_spec(tma, parse_chain("scale=row"), "e4m3").epilogue.value == "direct"
    assert fused_spec(tma, parse_chain("scale=row"), "e4m3", fp8_tma_store=True).epilogue.value == "tma"
    with pytest.raises(SpecError):
        fused_spec(make_spec(**{**BASE, "bn": 64, "out_dtype": "bf16", "fuse": None}), parse_chain("scale=row"), "e4m3",
                   fp8_tma_store=True)


@pytest.mark.parametrize("kw", [dict(fuse="bias=col:bf16,gelu,scale=row"),
                                pytest.param(dict(fuse="c,residual,scale=tensor", bn=256, stages=3), marks=pytest.mark.slow)],
                         ids=["row-bias-gelu", "tensor-c-residual-bn256"])
def test_compiles_without_local_memory(kw):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = spec(**kw)
    assert s.out_dtype is DType.E4M3
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, s.arch.value)
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    rep = check_sass(s, c.cubin, sass=sass)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "STS.U16" in sass and "STSM" not in sass and "UTMASTG.2D" in sass and "F2FP.SATFINITE.E4M3" in sass
