"""The chain's rowscale step (acc x scale_a[r] x scale_b[n] before alpha: torch._scaled_mm's row-wise FP8 recipe):
parsing and rules, L1 (the loads and the step order against the independent epilogue model, with controls that must
fail), L2 (the dense e4m3 kernels the chooser picks, with the step and a bias after it, through NVRTC with the SASS gate)."""

from dataclasses import replace

import numpy as np
import pytest

from ptxgen.derive.store.chainspec import ChainSpec, parse_chain
from ptxgen.derive.store.fusion import plan_chain, step_names
from ptxgen.derive.store.fusion_loads import Load, tmem_loads, wgmma_loads
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import Arch, DType, Epilogue, SpecError
from ptxgen.model.bridges.check_fusion import check_chain_plan
from ptxgen.model.layouts import epimodel
from ptxgen.model.numerics import chainref


def _plan(tok, arch=Arch.SM90A, bm=128, bn=64):
    ch = parse_chain(tok)
    return plan_chain(ch, arch, bm, bn, DType.E4M3 if ch.fp8_scale else DType.BF16, Epilogue.DIRECT)


def test_parse_token_and_name():
    ch = parse_chain("bias=col:f32, rowscale")
    assert ch.rowscale and ch.token == "rowscale,bias=col:f32" and parse_chain(ch.token) == ch
    assert ch.operands() == ("scale_a", "scale_b", "bias") and ch.name_suffix == "_fqbcf32"
    assert parse_chain("rowscale").token == "rowscale" and parse_chain("rowscale").name_suffix == "_fq"
    assert step_names(ch) == ("rowscale", "alpha", "bias")
    assert ChainSpec(alpha=True).rowscale is False and "rowscale" not in ChainSpec(alpha=True).to_json()


def test_rules():
    with pytest.raises(SpecError) as e:
        parse_chain("rowscale,rowscale")
    assert e.value.field == "--fuse"
    with pytest.raises(SpecError) as e:
        make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
                  stages=4, epilogue="tma", fuse="rowscale,c=tma")
    assert e.value.field == "--fuse" and "TMA" in str(e.value)


@pytest.mark.parametrize("tok", ["rowscale", "rowscale,bias=col:f32", "rowscale,bias=col:bf16,gelu", "rowscale,c,bias=row,residual",
                                 "rowscale,bias=col,scale=row"])
@pytest.mark.parametrize("arch, bm, bn", [(Arch.SM90A, 128, 256), (Arch.SM90A, 64, 64), (Arch.SM100A, 128, 256), (Arch.SM100A, 64, 96)])
def test_every_register_gets_its_scales(tok, arch, bm, bn):
    assert check_chain_plan(_plan(tok, arch, bm, bn), seed=bn, chunk=32 if bn % 32 == 0 else 16) == []


CONTROLS = {
    # scale_a read by the column and scale_b by the row (the two vectors swapped)
    "scales swapped": lambda p: lambda op, w, l, *a: tuple(replace(x, operand=op) for x in wgmma_loads(
        p.chain, {"scale_a": "scale_b", "scale_b": "scale_a"}[op], w, l, p.bn)) if op in ("scale_a", "scale_b") else
    wgmma_loads(p.chain, op, w, l, p.bn),
    # scale_a loaded once per thread (its second row, 8 down, given the first row's scale)
    "one row": lambda p: lambda op, w, l, *a: (
        replace(wgmma_loads(p.chain, op, w, l, p.bn)[0], targets=(tuple(range(p.bn // 2)),)),) if op == "scale_a" else
    wgmma_loads(p.chain, op, w, l, p.bn),
    # scale_b of a column pair: the pair's second column given the first's scale
    "pair": lambda p: lambda op, w, l, *a: tuple(replace(x, targets=(x.targets[0], x.targets[0])) for x in
                                                  wgmma_loads(p.chain, op, w, l, p.bn)) if op == "scale_b" else
    wgmma_loads(p.chain, op, w, l, p.bn),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_load_controls_fail(name):
    p = _plan("rowscale,bias=col")
    assert check_chain_plan(p) == []
    assert check_chain_plan(p, loads=CONTROLS[name](p)), name


def test_tmem_control_fails():
    p = _plan("rowscale", Arch.SM100A)
    assert check_chain_plan(p) == []
    wrong = lambda op, w, l, c0, ch: (Load(op, None, c0, tuple((j,) for j in range(ch))),) if op == "scale_a" else \
        tmem_loads(p.chain, op, p.bm, w, l, c0, ch)  # scale_a indexed by the column
    assert check_chain_plan(p, loads=wrong)


@pytest.mark.parametrize("steps", [("alpha", "bias", "rowscale"), ("alpha", "bias"), ("rowscale", "alpha")])
def test_step_order_controls_fail(steps):
    """The scales after the bias, left out, or the bias left out: the model's element values disagree."""
    p = _plan("rowscale,bias=col:f32")
    assert check_chain_plan(p) == []
    assert check_chain_plan(p, steps=steps)


def test_model_reads_and_computes_by_hand():
    ch = parse_chain("rowscale,bias=col:f32").to_json()
    assert epimodel.reads(ch, 5, 7) == {"scale_a": (5,), "scale_b": (7,), "bias": (7,)}
    arrays = {"scale_a": np.arange(8.0), "scale_b": np.full(9, 0.5), "bias": np.arange(9.0) * 10}
    assert epimodel.element_value(ch, 5, 7, 4.0, arrays, alpha=2.0) == 4.0 * 5 * 0.5 * 2.0 + 70.0


def test_reference_scales_before_bias():
    acc = np.array([[1.0, 2.0], [3.0, 4.0]])
    y, d, _ = chainref.chain(acc, bias=np.array([1.0, -1.0]), scale_a=np.array([2.0, 0.5]), scale_b=np.array([[1.0, 3.0]]),
                             out="f32")
    assert y.tolist() == [[3.0, 11.0], [2.5, 5.0]]


def test_rendered_chain_scales_first():
    """The template's chain_pair multiplies by the two scales before alpha and the bias."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    s = make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", out_dtype="bf16", arch="sm_90a",
                  stages=4, fuse="rowscale,bias=col:bf16")
    src = render_kernel(plan_kernel(s))
    body = src[src.index("void chain_pair("):]
    assert body.index("ca.alpha * ((v0 * row_sa) * col_sb.x)") < body.index("y0 += col_bias.x")
    assert "SCALE_A" in src and "SCALE_B" in src


# ---- L2 --------------------------------------------------------------------------------------
def _chosen(m, n, k, tok, b="e4m3", out="bf16", a="e4m3"):
    from ptxgen.api.fused import fused_spec
    from ptxgen.api.select import select_spec

    s, _ = select_spec(a, "sm_90a", m, n, k)
    if b != a:
        s = make_spec(**{**s.to_json(), "b_dtype": b})
    return fused_spec(s, parse_chain(tok), out)


def _compile_ok(s):
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, s.arch.value)
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0, (s.kernel_name, rep.problems)
    return c


@pytest.mark.parametrize("mnk", [(4096, 7168, 16384), (2048, 7168, 4096), (64, 4096, 4096)], ids=["coop", "pingpong", "splitk"])
@pytest.mark.parametrize("tok", ["rowscale", "rowscale,bias=col:bf16", "rowscale,bias=col:f32"])
def test_chosen_e4m3_kernels_compile_with_the_step(mnk, tok):
    s = _chosen(*mnk, tok)
    assert s.fuse.rowscale and s.dtype is DType.E4M3
    _compile_ok(s)


@pytest.mark.parametrize("tok", ["rowscale,bias=col:f16", "rowscale,bias=col:f32"])
def test_chosen_e4m3_kernel_with_an_f32_output(tok):
    """f32 outputs take the scales in a pass of their own (ChainView.rowscale_pass)."""
    s = _chosen(4096, 7168, 16384, tok, out="f32")
    src = _compile_ok(s)
    assert s.out_dtype is DType.F32 and src


def test_mixed_fp8_kernel_compiles_with_the_step():
    _compile_ok(_chosen(2048, 7168, 4096, "rowscale,bias=col:f32", b="e5m2"))


@pytest.mark.parametrize("tok, out", [("rowscale,bias=col:bf16", "bf16"), ("rowscale,bias=col:bf16", "f32")])
def test_e5m2_kernel_compiles_with_the_step(tok, out):
    """e5m2 x e5m2: the chooser's untuned 128 x 256 direct-store tile. (With an f32 bias and an f32 output it spills
    8 B: docs/epilogue-chain.md.)"""
    _compile_ok(_chosen(300, 136, 256, tok, b="e5m2", out=out, a="e5m2"))


@pytest.mark.slow
def test_tcgen05_e4m3_kernel_compiles_with_the_step():
    """sm_100a: L2 only (no Blackwell GPU has run it)."""
    _compile_ok(make_spec(bm=128, bn=256, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", out_dtype="bf16",
                          arch="sm_100a", stages=4, fuse="rowscale,bias=col:bf16"))


# ---- the door: ptxgen.api.fused.gemm(scale_a=, scale_b=) up to the launch, on a simulated 9.0 device ---------------
from test_fusion_codegen import _Arr, simulated, spec  # noqa: E402,F401  (the simulated device and its arrays)


def test_fused_gemm_marshals_the_row_scales(simulated):
    import ptxgen.api.fused as fused

    m, n, k = 100, 72, 64
    a, b, out = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1)), _Arr((m, n), strides=(n, 1))
    sa, sb, bias = _Arr((m, 1), "float32", strides=(1, 5)), _Arr((1, n), "float32", strides=(n, 1)), _Arr((n,), "float32")
    plain = spec(bn=64, stages=3, schedule="tile")
    assert fused.gemm(a, b, out, bias=bias, scale_a=sa, scale_b=sb, spec=plain) is out
    ((name, grid, block, args, stream),) = simulated
    assert name.endswith("_fqbcf32")
    assert args[2:] == [out.ptr, m, n, k, n, 1.0, sa.ptr, sb.ptr, bias.ptr]
    with pytest.raises(fused.ArgumentError, match="both scale_a"):
        fused.gemm(a, b, out, scale_a=sa, spec=plain)
    with pytest.raises(fused.ArgumentError, match="scale_b"):
        fused.gemm(a, b, out, scale_a=sa, scale_b=_Arr((m,), "float32"), spec=plain)  # N long, not M
    with pytest.raises(fused.ArgumentError, match="contiguous"):
        fused.gemm(a, b, out, scale_a=_Arr((m, 1), "float32", strides=(2, 1)), scale_b=sb, spec=plain)
    with pytest.raises(fused.DTypeError, match="scale_a"):
        fused.gemm(a, b, out, scale_a=_Arr((m,), "bfloat16"), scale_b=sb, spec=plain)


def test_plan_reports_the_dense_kernel():
    torch = pytest.importorskip("torch")

    import ptxgen.api

    m, n, k = 2048, 7168, 4096
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn, device="meta")
    b = torch.empty(n, k, dtype=torch.float8_e4m3fn, device="meta")
    sa, sb = torch.empty(m, 1, device="meta"), torch.empty(1, n, device="meta")
    p = ptxgen.api.plan("scaled_gemm", a, b, sa, sb, bias=torch.empty(n, dtype=torch.bfloat16, device="meta"), device="h100")
    assert p.path.value == "hot" and p.kernel.endswith("_fqbcbf16") and "groupedoffs" not in p.kernel, str(p)
    assert ptxgen.api.plan("scaled_gemm", a, b, sa, sb, device="h100").kernel.endswith("_fq")
    mixed = ptxgen.api.plan("scaled_gemm", a, b.to(torch.float8_e5m2), sa, sb, device="h100")
    assert "groupedoffs_rowwise" in mixed.kernel and "one input type" in mixed.why
    bad = ptxgen.api.plan("scaled_gemm", a, b, sa, torch.empty(1, n + 1, device="meta"), device="h100")
    assert bad.path.value == "refused" and "scale_b" in bad.why


@pytest.mark.parametrize("operand", ["scale_a", "scale_b"])
def test_rendered_rows_and_columns_are_the_plans(operand):
    """The C rows (row_lo, row_lo + 8: sa_lo, sa_hi) and columns (n0 + the fragment column: the scale_b pair) the
    rendered chain uses for each register agree with the plan's loads of each vector; control: the second row's pair
    starting one register early."""
    from types import SimpleNamespace

    from ptxgen.emit.views.chain import chain_view
    from test_fusion_codegen import _rendered_rows_cols_problems

    plan = _plan("rowscale,bias=col", bn=64)
    only = SimpleNamespace(chain=SimpleNamespace(operands=lambda: (operand,)), loads=plan.loads, bn=plan.bn)
    v = chain_view(plan)
    assert _rendered_rows_cols_problems(only, v) == []
    assert _rendered_rows_cols_problems(only, replace(v, frag=replace(v.frag, hi_pair=1)))
