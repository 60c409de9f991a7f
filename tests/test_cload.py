"""beta x C with C read through TMA (``--fuse c=tma``; ptxgen.derive.store.cload): the spec and its rules, the plan against
the independent models (which C element every accumulator element receives; the order of loads, waits and stores),
controls that must fail, the rendered kernel, the launcher, and NVRTC + SASS (codegen tier, no GPU). The GPU test is in
tests/test_epilogue_ops.py (``test_c_through_tma_matches_float64``)."""

import re
from dataclasses import replace

import pytest

from ptxgen.derive.store.cload import CLoadPlan
from ptxgen.derive.store.chainspec import parse_chain
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import kernel_view, render_kernel
from ptxgen.isa.tensormap import TmaSwizzle
from ptxgen.isa.types import SpecError
from ptxgen.model.bridges.check_cload import check_c_order, check_c_reads, check_c_reads_tmem
from ptxgen.runtime.launch.launch import Problem, gemm_args

BASE = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent", epilogue="tma")


def spec(**kw):
    return make_spec(**{**BASE, **kw})


# ---- the spec ---------------------------------------------------------------------------------------------------
def test_token_name_and_round_trip():
    ch = parse_chain("residual,c=tma,gelu")
    assert ch.c and ch.c_tma and ch.token == "c=tma,act=gelu_tanh,residual"
    assert parse_chain(ch.token) == ch and parse_chain("c").c_tma is False
    s = spec(fuse="c=tma")
    assert s.kernel_name.endswith("_fct") and s.kernel_name != spec(fuse="c").kernel_name
    assert make_spec(**s.to_json()) == s
    assert "c_tma" not in parse_chain("c,bias=col").to_json()  # the chains without it keep their JSON


@pytest.mark.parametrize("kw, rule", [
    (dict(epilogue="direct"), "staging"),
    (dict(arch="sm_100a", bm=64), "M=64"),
    (dict(out_dtype="f32"), "16-bit"),
    (dict(loader="cp.async"), "TMA loader"),
])
def test_rules_refuse_with_the_flag_named(kw, rule):
    with pytest.raises(SpecError) as e:
        spec(fuse="c=tma", **kw)
    assert e.value.field == "--fuse" and rule in str(e.value)


def test_bad_c_argument_is_refused():
    with pytest.raises(SpecError):
        parse_chain("c=ldg")


# ---- the plan -----------------------------------------------------------------------------------------------------
def test_c_map_is_derived_from_the_store_layout_value():
    p = plan_kernel(spec(fuse="c=tma,bias=col"))
    c, d = p.c_load.tma, p.store.tma
    assert c.layout is d.layout is p.store.staging
    assert (c.box, c.swizzle, c.copies, c.global_dims) == (d.box, d.swizzle, d.copies, d.global_dims)
    assert (c.operand, c.ld_name, c.expect_tx_bytes) == ("c", "ldc", p.store.buffer_bytes)
    assert p.tma_plan("c") is c
    names = [q.name for q in p.abi.params]
    assert names[names.index("ldc") + 1] == "tmap_c"
    assert ("c_full", p.layout.smem.barrier_offset("c_full"), 2) in p.layout.smem.barrier_arrays
    assert plan_kernel(spec(fuse="c")).c_load is None and "c_full" not in dict(
        (n, 0) for n, _, _ in plan_kernel(spec(fuse="c")).layout.smem.barrier_arrays)


# ---- L1: which C element each accumulator element receives ----------------------------------------------------------
CASES = [  # (spec kw, M, N, m0, n0, slab row 0)
    (dict(), 197, 250, 128, 128, 64),  # the last tile: rows past M, columns past N read zeros
    (dict(), 300, 344, 0, 128, 0),
    (dict(bn=256, stages=3), 200, 520, 128, 256, 64),
    (dict(bn=64, stages=5), 90, 70, 64, 0, 0),
    (dict(bn=192, stages=4), 64, 400, 0, 192, 0),
    (dict(consumers="pingpong", stages=5), 257, 300, 128, 256, 64),  # ping-pong: a warpgroup's second slab
]


@pytest.mark.parametrize("kw, m, n, m0, n0, row0", CASES)
def test_every_accumulator_element_gets_its_c(kw, m, n, m0, n0, row0):
    s = spec(fuse="c=tma", **kw)
    p = plan_kernel(s)
    assert check_c_reads(p.c_load, p.store, s.bn, m, n, m0, n0, row0) == []


class _ShiftedChunks(CLoadPlan):
    def box_origin(self, chunk, slab_row0):
        return chunk * self.chunk_cols // 2, slab_row0  # wrong chunk offset


class _ForgotSlab(CLoadPlan):
    def box_origin(self, chunk, slab_row0):
        return chunk * self.chunk_cols, 0  # every slab loads the first slab's rows


def _as(cls, p: CLoadPlan) -> CLoadPlan:
    return cls(**{f: getattr(p, f) for f in ("tma", "barriers", "expect_tx_bytes", "chunk_cols", "reader", "derivation")})


@pytest.mark.parametrize("control", ["chunk offset", "slab row", "swizzle none", "swizzle 128B atom 32B", "ld pitch wrong box"])
def test_controls_fail(control):
    s = spec(fuse="c=tma")
    p = plan_kernel(s)
    c = p.c_load
    if control == "chunk offset":
        c = _as(_ShiftedChunks, c)
    elif control == "slab row":
        c = _as(_ForgotSlab, c)
    elif control == "swizzle none":
        c = replace(c, tma=replace(c.tma, swizzle=TmaSwizzle.NONE))
    elif control == "swizzle 128B atom 32B":
        c = replace(c, tma=replace(c.tma, swizzle=TmaSwizzle.B128_ATOM_32B))
    else:
        c = replace(c, tma=replace(c.tma, box=(64, 32)))
    try:
        problems = check_c_reads(c, p.store, s.bn, 300, 300, 128, 128, 64)
    except (ValueError, IndexError) as e:  # the model refuses the map outright
        problems = [str(e)]
    assert problems


TMEM_CASES = [  # tcgen05 (L1/L2 only): (spec kw, M, N, m0, n0)
    (dict(bn=256, stages=3), 197, 300, 128, 256),
    (dict(bn=128), 300, 344, 256, 128),
    (dict(bn=64, stages=5), 130, 70, 128, 64),
]


@pytest.mark.parametrize("kw, m, n, m0, n0", TMEM_CASES)
def test_tcgen05_every_register_gets_its_c(kw, m, n, m0, n0):
    s = spec(arch="sm_100a", fuse="c=tma", **kw)
    p = plan_kernel(s)
    assert p.c_load.reader == "ld.shared.v4" and p.c_load.barriers == 4
    assert check_c_reads_tmem(p.c_load, p.store, s.bn, m, n, m0, n0, kernel_view(p).epi.chunk) == []


@pytest.mark.parametrize("control", ["chunk offset", "warp row", "swizzle none"])
def test_tcgen05_controls_fail(control):
    s = spec(arch="sm_100a", fuse="c=tma")
    p = plan_kernel(s)
    c = {"chunk offset": lambda: _as(_ShiftedChunks, p.c_load), "warp row": lambda: _as(_ForgotSlab, p.c_load),
         "swizzle none": lambda: replace(p.c_load, tma=replace(p.c_load.tma, swizzle=TmaSwizzle.NONE))}[control]()
    assert check_c_reads_tmem(c, p.store, s.bn, 300, 300, 128, 128)


# ---- L1: order of the C loads, the waits and the stores (the new c_full barrier) ---------------------------------------
def test_order_of_loads_waits_and_stores():
    p = plan_kernel(spec(fuse="c=tma"))
    assert check_c_order(p.c_load, p.store, chunks=11) == []


def test_order_controls_fail():
    p = plan_kernel(spec(fuse="c=tma"))
    assert any("passes before" in x for x in check_c_order(p.c_load, p.store, 5, parity=lambda j: (j + 1) % 2))
    assert any("still reads" in x for x in check_c_order(p.c_load, p.store, 5, wait_read=2))


# ---- the rendered kernel --------------------------------------------------------------------------------------------
def _c_eval(expr: str, **env) -> int:
    return int(eval(expr.replace("/", "//"), {}, env))  # noqa: S307 - our own rendered expressions


def test_rendered_kernel_uses_the_plan():
    plan = plan_kernel(spec(fuse="c=tma,bias=col,gelu"))
    v = kernel_view(plan)
    src = render_kernel(plan)
    # ldmatrix at exactly the stmatrix addresses, once per stmatrix call
    for call in v.store.calls:
        assert f"ldmatrix_x4(buf + {call.offset_expr}, cw);" in src and f"stmatrix_x4(buf + {call.offset_expr}," in src
    assert src.count("ldmatrix_x4(buf") == len(v.store.calls) * len(v.slabs)
    # the box origin and the waited parity are the plan's
    for c in range(plan.store.chunks_per_slab):
        assert _c_eval(v.c_load.col_expr, c=c) == plan.c_load.box_origin(c, 0)[0]
    for j in range(6):
        assert _c_eval(v.c_load.parity_expr.replace("static_cast<unsigned>(store_chunk)", "store_chunk").rstrip("u"),
                       store_chunk=j) == plan.c_load.wait_parity(j)
    # each ldmatrix register feeds the fragment elements the stmatrix register of the same call packs
    for j, pairs in enumerate(v.c_load.calls):
        for q, pr in enumerate(pairs):
            assert (pr.reg, pr.first) == (q, plan.store.fragment_elements(j, q)[0])
            assert (pr.row == "row_lo + 8") == (pr.first % 4 >= 2)
    off = plan.layout.smem.barrier_offset("c_full")
    assert f"mbar_init(base + {off}u, 1);" in src and f"mbar_init(base + {off + 8}u, 1);" in src
    # the C load sits between the buffer's release and the first stmatrix of the chunk; the direct-store tiles keep
    # the global C loads (chain_pair without c_in)
    body = src[src.index("bulk_wait_read<1>()"):]
    assert body.index("tma_load_2d(buf, &tmap_c") < body.index("mbar_wait(c_bar") < body.index("ldmatrix_x4") < body.index("stmatrix_x4")
    assert re.search(r"chain_pair\(acc0\[i\], acc0\[i \+ 1\], row_lo, col, M, N, cb, rb_lo, sc_lo, am_lo, ca\);", src)


def test_rendered_tcgen05_kernel_uses_the_plan():
    plan = plan_kernel(spec(arch="sm_100a", fuse="c=tma,bias=col"))
    v = kernel_view(plan)
    src = render_kernel(plan)
    assert f"ld_shared_v4(buf + {v.store.row_cell_expr}, cw + 4 * cell);" in src and "ldmatrix" not in src
    for h in range(plan.store.chunk_cols // v.epi.chunk):
        for i in range(0, v.epi.chunk, 2):
            word = v.c_load.word_expr.replace("cw[", "").rstrip("]")
            assert _c_eval(word, h=h, i=i) == plan.c_load.row_word(h * v.epi.chunk + i)
    assert "tma_load_2d(buf, &tmap_c, n0 + c * 64, m0 + warp * 32, c_bar);" in src and "&cv);" in src
    off = plan.layout.smem.barrier_offset("c_full")
    assert all(f"mbar_init(base + {off + 8 * w}u, 1);" in src for w in range(4))


def test_kernels_without_it_are_untouched():
    for kw in (dict(fuse="c"), dict(fuse="c,bias=col,gelu", consumers="pingpong", stages=5), dict()):
        src = render_kernel(plan_kernel(spec(**kw)))
        assert "ldmatrix" not in src and "c_bar" not in src and "tmap_c" not in src and "c_in" not in src


def test_launcher_encodes_cs_map_from_c_and_ldc():
    plan = plan_kernel(spec(fuse="c=tma"))
    seen = []

    def encode(args):
        seen.append(args)
        return bytes(128)

    p = Problem(197, 250, 136, 136, 136, 256)
    gemm_args(plan, 0, 0, 0x10000, p, encode=encode, extra=dict(alpha=1.0, beta=0.5, C=0x20000, ldc=280))
    c_args = [a for a in seen if a.global_address == 0x20000]
    assert len(c_args) == 1
    assert c_args[0].global_dims == (250, 197) and c_args[0].global_strides[0] == 280 * 2


# ---- L2: NVRTC + SASS ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(fuse="c=tma,bias=col:bf16,gelu,residual"),
    pytest.param(dict(fuse="c=tma", consumers="pingpong", stages=5, out_dtype="f16"), marks=pytest.mark.slow),
    pytest.param(dict(arch="sm_100a", fuse="c=tma,bias=col:f32,gelu,residual", bn=256, stages=3), marks=pytest.mark.slow),
], ids=["cooperative-all", "pingpong-f16", "tcgen05-all"])
def test_compiles_without_local_memory(kw):
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    s = spec(**kw)
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, s.arch.value)
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    rep = check_sass(s, c.cubin, sass=sass)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "UTMALDG.2D" in sass and "UTMASTG.2D" in sass
    assert ("LDSM.16.M88.4" in sass) == (s.arch.value == "sm_90a")
    assert s.arch.value == "sm_90a" or "LDS.128" in sass  # tcgen05 reads its row's cells back with 16-byte loads
