"""The TMA-store epilogue (--epilogue tma): spec rules, the staging plan against the independent models (L1),
the rendered expressions against the plan, the ABI and launcher, and the compiled SASS (L2).

The GPU tier (tests/test_gpu.py STORE_EPILOGUE and the sanitizer flagships) runs the kernels on an H200."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pytest

from ptxgen.derive.store.epilogue import SLAB_ROWS, StorePlan, plan_store
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.operands.smem import SMEM_LIMIT_BYTES
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.emit.views.epilogue_view import store_view
from ptxgen.emit.render import render_kernel
from ptxgen.isa.types import Epilogue, SpecError, Swizzle
from ptxgen.model.bridges.check_store import check_store_plan
from ptxgen.runtime.launch.launch import Problem, gemm_args

BASE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4, out_dtype="bf16")


def store_spec(**kw) -> TileSpec:
    return make_spec(**{**BASE, "epilogue": "tma", **kw})


def _eval_c(expr: str, **env) -> int:
    """Evaluate a rendered C integer expression (casts, u suffixes and integer division made Python)."""
    py = re.sub(r"static_cast<unsigned>", "", expr)
    py = re.sub(r"(\d)u\b", r"\1", py).replace("/", "//").replace("||", " or ").replace("&&", " and ")
    return eval(py, {}, env)


# -- spec -----------------------------------------------------------------------------------------
def test_default_is_direct_and_old_names_and_json_are_unchanged():
    direct = make_spec(**BASE)
    assert direct.epilogue is Epilogue.DIRECT
    assert "epilogue" not in direct.to_json() and "--epilogue" not in direct.cli_args()
    assert direct.kernel_name == "ptxgen_sm90a_bf16_f32_obf16_128x256x64_s4_a_k_sw128_ok_b_k_sw128_ok"
    tma = store_spec()
    assert tma.kernel_name == direct.kernel_name + "_tmastore"
    assert tma.to_json()["epilogue"] == "tma" and TileSpec.from_json(tma.to_json()) == tma
    assert "--epilogue tma" in tma.cli_args()


@pytest.mark.parametrize(
    "kw, field, words",
    [
        (dict(arch="sm_100a", bm=64), "--epilogue", "M=128 data path"),
        (dict(arch="sm_100a", out_dtype="f32", stages=3), "--epilogue", "16-bit outputs"),  # wgmma f32: test_f32_store.py
        (dict(dtype="f16", acc="f16", out_dtype="f16"), "--epilogue", "f32 accumulators"),
        (dict(bn=200), "--bn", "multiple of 64"),
        (dict(bm=256, bn=128, stages=4), "--stages", "more than the 232448 B limit"),
    ],
    ids=["blackwell-m64", "tcgen05-f32-out", "f16-acc", "bn-200", "smem"],
)
def test_illegal_store_epilogues_are_refused_with_the_rule(kw, field, words):
    with pytest.raises(SpecError) as e:
        store_spec(**kw)
    assert e.value.field == field and words in str(e.value), str(e.value)


def test_cli_refuses_an_illegal_store_epilogue_with_exit_2():
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "explain", "--bm", "64", "--bn", "128", "--bk", "32", "--a",
                           "kmajor-sw64", "--epilogue", "tma"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--epilogue=tma is illegal" in proc.stderr


def test_staging_buffers_sit_on_the_swizzle_repeat_apart_from_rings_and_barriers():
    for kw in (dict(), dict(bm=64, bn=64, stages=3), dict(bm=256, bn=128, stages=3), dict(bn=128, consumers="pingpong", schedule="persistent", stages=5),
               dict(arch="sm_100a", stages=3)):
        s = store_spec(**kw)
        p = s.smem_plan()
        storers, rows = (s.consumer_warpgroups, 64) if s.arch.value == "sm_90a" else (4, 32)
        assert p.store_offset % 1024 == 0 and p.store_bytes == 2 * rows * 128 * storers
        ring_end = p.b_offset + s.stages * p.b_stage_bytes
        first_barrier = min(off for _, off, _ in p.barrier_arrays)
        assert ring_end <= p.store_offset and p.store_offset + p.store_bytes <= first_barrier
        assert p.dynamic_bytes <= SMEM_LIMIT_BYTES and p.base_alignment >= 1024


# -- L1: what stmatrix writes is what the TMA store reads ------------------------------------------
@pytest.mark.parametrize("out", ["bf16", "f16"])
@pytest.mark.parametrize("bn", [64, 128, 192, 256])
def test_tma_store_reads_back_every_chunk_of_the_fragment(bn, out):
    plan = plan_store(store_spec(bn=bn, out_dtype=out, stages=3))
    for base in (0, 1024, 196608):
        assert check_store_plan(plan, bn, seed=bn, base=base) == []


class _SwappedMatrices(StorePlan):
    @staticmethod
    def fragment_elements(call, matrix):  # rows 8-15 and the next column group traded places
        return StorePlan.fragment_elements(call, {1: 2, 2: 1}.get(matrix, matrix))


class _RowsNotHalved(StorePlan):
    def stmatrix_row_cell(self, warp, lane, call):
        row, cell = super().stmatrix_row_cell(warp, lane, call)
        return row - 8 * ((lane // 8) % 2) + 8 * (lane // 16), cell  # matrix q on rows 8 (q // 2): wrong


@pytest.mark.parametrize(
    "break_it",
    [
        lambda p: dataclasses.replace(p, staging=dataclasses.replace(p.staging, swizzle=Swizzle.NONE)),
        lambda p: dataclasses.replace(p, staging=dataclasses.replace(p.staging, swizzle=Swizzle.SW64)),
        lambda p: _SwappedMatrices(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)}),
        lambda p: _RowsNotHalved(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)}),
        lambda p: dataclasses.replace(p, tma=dataclasses.replace(p.tma, swizzle=type(p.tma.swizzle).B64, box=(32, 64))),
    ],
    ids=["no-swizzle", "sw64-staging", "matrices-swapped", "rows-not-halved", "tma-map-64B"],
)
def test_control_a_wrong_staging_plan_fails_the_model_check(break_it):
    plan = plan_store(store_spec())
    assert check_store_plan(plan, 256) == []
    assert check_store_plan(break_it(plan), 256), "the model check passed a broken plan"


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_tcgen05_tma_store_reads_back_every_chunk_of_the_tmem_rows(bn):
    plan = plan_store(store_spec(arch="sm_100a", bn=bn, stages=3))
    assert plan.writer == "st.shared.v4" and plan.rows == 32 and plan.storers == 4 and plan.tma.box == (64, 32)
    for base in (0, 4096):
        for tmem_chunk in (32, 16):
            assert check_store_plan(plan, bn, seed=bn, base=base, tmem_chunk=tmem_chunk) == []


def test_control_a_wrong_tcgen05_staging_fails_the_model_check():
    plan = plan_store(store_spec(arch="sm_100a"))
    assert check_store_plan(dataclasses.replace(plan, staging=dataclasses.replace(plan.staging, swizzle=Swizzle.SW32)), 256)
    wrong_rows = dataclasses.replace(plan, tma=dataclasses.replace(plan.tma, box=(64, 64)))  # one box over two warps' rows
    assert check_store_plan(wrong_rows, 256)


# -- emit: the rendered C is the plan -------------------------------------------------------------
def test_rendered_stmatrix_addresses_are_the_plans():
    plan = plan_store(store_spec())
    view = store_view(plan)
    assert len(view.calls) == plan.stmatrix_per_chunk == 4
    for j, call in enumerate(view.calls):
        for wg_tid in range(128):
            got = _eval_c(call.offset_expr, wg_tid=wg_tid, lane=wg_tid % 32)
            assert got == plan.stmatrix_offset(wg_tid // 32, wg_tid % 32, j)
        assert call.elems == tuple(plan.fragment_elements(j, q) for q in range(4))


def test_rendered_tcgen05_row_cell_offsets_are_the_plans():
    plan = plan_store(store_spec(arch="sm_100a"))
    view = store_view(plan, tmem_chunk=32)
    assert (view.tmem_loads, view.cells_per_load, view.rows) == (2, 4, 32)
    for lane in range(32):
        for cell in range(8):
            assert _eval_c(view.row_cell_expr, lane=lane, cell=cell) == plan.row_cell_offset(lane, cell)


def test_rendered_edge_rule_is_the_plans():
    plan = plan_store(store_spec(bn=128))
    expr = store_view(plan).use_tma_expr
    for n in (1, 7, 8, 100, 127, 128, 129, 130, 136, 1000, 1001):
        for n0 in range(0, n, 128):
            assert bool(_eval_c(expr, n0=n0, N=n)) == plan.uses_tma(n0, 128, n), (n0, n)
    assert not plan.uses_tma(0, 128, 45) and plan.uses_tma(0, 128, 48) and plan.uses_tma(0, 128, 200)


def test_kernel_text_has_both_epilogues_and_waits_before_exit():
    src = render_kernel(plan_kernel(store_spec(schedule="persistent")))
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in src and "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in src
    assert src.count("tma_store_2d(&tmap_d") == 1 and "bulk_wait_read<1>()" in src and "bulk_wait_all()" in src
    assert "reinterpret_cast<unsigned short*>(D)" in src  # the direct stores for tiles a TMA store cannot clip


# -- ABI and launcher ------------------------------------------------------------------------------
def test_abi_carries_d_s_tensor_map_and_the_launcher_encodes_it():
    plan = plan_kernel(store_spec())
    names = [p.name for p in plan.abi.params]
    assert names[:4] == ["tmap_a", "tmap_b", "tmap_d", "D"]
    seen = []
    p = Problem(777, 1501, 333, 336, 336, 1504)
    args = gemm_args(plan, 0x1000, 0x2000, 0x3000, p, encode=lambda a: seen.append(a) or bytes(128))
    assert len(seen) == 3
    d = seen[2]
    assert d.global_address == 0x3000 and d.global_dims == (1501, 777) and d.global_strides == (1504 * 2,)
    assert d.box == (64, 64) and d.swizzle == 3 and d.element_bytes == 2
    assert args is not None


def test_tune_searches_store_epilogue_variants():
    from ptxgen.runtime.choose.tune import candidates

    c = candidates("bf16", "sm_90a")
    store = [s for s in c if s.epilogue is Epilogue.TMA]
    assert store and len(store) == len([s for s in c if s.epilogue is Epilogue.DIRECT])
    assert all(s.smem_plan().dynamic_bytes <= SMEM_LIMIT_BYTES for s in store)


# -- L2: compiled SASS ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw",
    [dict(schedule="persistent", raster_group=16),
     dict(bn=128, stages=5, schedule="persistent", consumers="pingpong", out_dtype="f16", dtype="f16"),
     dict(bm=64, bn=64, stages=3, loader="cp.async"),
     dict(dtype="e4m3", bk=128, stages=4, schedule="persistent")],
    ids=["cooperative", "pingpong-f16", "cp.async", "e4m3"],
)
def test_store_epilogue_sass_has_stmatrix_and_tma_stores(kw):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = store_spec(**kw)
    compiled = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_90a")
    rep = check_sass(spec, compiled.cubin)
    assert rep.ok, rep.problems
    assert rep.structure["stmatrix"] > 0 and rep.structure["TMA stores"] > 0 and rep.local_bytes == 0


@pytest.mark.parametrize(
    "kw",
    [dict(schedule="persistent"), dict(bn=128, dtype="f16", out_dtype="f16", loader="cp.async"), dict(dtype="e4m3", bk=128, stages=3)],
    ids=["persistent", "cp.async-f16", "e4m3"],
)
def test_tcgen05_store_epilogue_sass_has_16_byte_shared_stores_and_tma_stores(kw):
    """L2 only: no Blackwell GPU has run these kernels."""
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    spec = store_spec(arch="sm_100a", **kw)
    compiled = compile_cuda(render_kernel(plan_kernel(spec)), spec.kernel_name, "sm_100a")
    rep = check_sass(spec, compiled.cubin)
    assert rep.ok, rep.problems
    assert rep.structure["16-byte shared stores"] > 0 and rep.structure["TMA stores"] > 0 and rep.local_bytes == 0
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in compiled.ptx and "st.shared.v4.b32" in compiled.ptx


def test_slab_rows_match_the_wgmma_fragment():
    assert SLAB_ROWS == 64  # one m64 D fragment per consumer warpgroup slab


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_show_draws_the_staging_buffer_and_its_conflict_free_wave(arch):
    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.pictures.svg import layout_svg

    spec = store_spec(arch=arch, stages=3)
    svg = layout_svg(derive(spec), ("d",))
    plan = plan_store(spec)
    cells = re.findall(r'<g class="cell" data-offset="(\d+)" data-row="(\d+)" data-col="(\d+)">', svg)
    assert len(cells) == 16 * 8
    for off, row, col in cells:  # every drawn cell is where the plan puts it
        assert plan.row_cell_offset(int(row), int(col)) == int(off)
    outlined = re.findall(r'<g class="cell" data-offset="(\d+)"[^>]*>\s*<rect [^>]*stroke="#d62728"', svg)
    assert len(outlined) == 8 and len({int(o) % 128 // 16 for o in outlined}) == 8  # 8 rows, 8 different bank groups
    assert "(8 bank groups)" in svg
    assert layout_svg(derive(make_spec(**BASE)), ("d",)).count('class="cell"') == 0  # no staging without the epilogue
