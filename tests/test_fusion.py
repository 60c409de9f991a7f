"""The fused epilogue chain at L1: parsing and rules, the thread loads against the independent model
(ptxgen.model.layouts.epimodel) over the legal space, controls that must fail, and the float64 reference."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.store.chainspec import ChainSpec, parse_chain
from ptxgen.derive.store.fusion import AmaxPlan, check_chain, plan_chain
from ptxgen.derive.store.fusion_loads import Load, tmem_loads, wgmma_loads
from ptxgen.isa import numerics
from ptxgen.isa.epiops import Activation, BiasAxis, ScaleMode
from ptxgen.isa.types import Arch, DType, Epilogue, SpecError
from ptxgen.model.numerics import chainref
from ptxgen.model.layouts import epimodel
from ptxgen.model.bridges.check_fusion import check_chain_plan

BIAS = st.sampled_from([None, "col", "row"])
chains = st.builds(
    lambda c, bias, bdt, act, res, scale: ChainSpec(True, c, None if bias is None else BiasAxis(bias), bdt, act, res, scale),
    st.booleans(), BIAS, st.sampled_from([DType.F32, DType.BF16, DType.F16]), st.sampled_from(list(Activation)),
    st.booleans(), st.sampled_from([None, ScaleMode.TENSOR, ScaleMode.ROW]),
)


def _out(chain: ChainSpec) -> DType:
    return DType.E4M3 if chain.fp8_scale else DType.BF16


# ---- parsing and rules ------------------------------------------------------------------------
def test_parse_canonical_order_and_round_trip():
    ch = parse_chain("residual, gelu_erf ,bias=row:f32, c")
    assert ch.token == "c,bias=row:f32,act=gelu_erf,residual"
    assert parse_chain(ch.token) == ch
    assert parse_chain("alpha").token == "alpha" and parse_chain("none") is None and parse_chain("") is None
    assert parse_chain("silu").activation is Activation.SILU and parse_chain("gelu").activation is Activation.GELU_TANH


@pytest.mark.parametrize("bad", ["bias=diag", "act=tanh", "relu,silu", "bias=col:s8", "residual=2", "scale=col", "wat", 3])
def test_parse_refuses_with_the_flag_named(bad):
    with pytest.raises(SpecError) as e:
        parse_chain(bad)
    assert e.value.field == "--fuse"


@given(chains)
def test_token_round_trips_over_the_space(ch):
    assert parse_chain(ch.token) == ch
    assert ch.name_suffix.startswith("_f") and ch.name_suffix.replace("_", "").isalnum()


@pytest.mark.parametrize("kw, field", [
    (dict(acc=DType.S32), "--fuse"),
    (dict(out=DType.BF16, chain="scale=row"), "--fuse"),
    (dict(out=DType.E4M3, chain="bias=col"), "--out-dtype"),
    (dict(arch=Arch.SM100A, out=DType.E4M3, chain="scale=tensor", epilogue=Epilogue.TMA), "--fuse"),
    (dict(pair=True), "--fuse"),
    (dict(block_scaled=True), "--fuse"),
    (dict(arch=Arch.SM100A, out=DType.E4M3, chain="scale=row", bn=40), "--bn"),
])
def test_rules(kw, field):
    args = dict(chain="bias=col", arch=Arch.SM90A, acc=DType.F32, out=DType.BF16, epilogue=Epilogue.DIRECT, bm=128, bn=128,
                pair=False, block_scaled=False)
    args.update(kw)
    args["chain"] = parse_chain(args["chain"])
    with pytest.raises(SpecError) as e:
        check_chain(**args)
    assert e.value.field == field


def test_legal_chain_passes_the_rules():
    check_chain(parse_chain("c,bias=col,gelu,residual"), Arch.SM90A, DType.F32, DType.BF16, Epilogue.TMA, 128, 8, False, False)
    check_chain(parse_chain("scale=row"), Arch.SM100A, DType.F32, DType.E4M3, Epilogue.DIRECT, 64, 48, False, False)


# ---- L1: the loads against the independent model ------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(chains, st.sampled_from([Arch.SM90A, Arch.SM100A]), st.sampled_from([64, 128]), st.integers(1, 32), st.integers(0, 99))
def test_every_register_gets_its_element(ch, arch, bm, n8, seed):
    bn = 8 * n8
    chunk = 32 if bn % 32 == 0 else 16 if bn % 16 == 0 else 8
    plan = plan_chain(ch, arch, bm, bn, _out(ch), Epilogue.DIRECT)
    assert check_chain_plan(plan, seed=seed, chunk=chunk) == []


def _plan(tok, arch=Arch.SM90A, bm=128, bn=64):
    ch = parse_chain(tok)
    return plan_chain(ch, arch, bm, bn, _out(ch), Epilogue.DIRECT)


def _swap(load: Load, **kw) -> Load:
    return replace(load, **kw)


CONTROLS = {
    # a column bias indexed by the row (the axis confused)
    "bias by row": ("bias=col", Arch.SM90A,
                    lambda p: lambda op, w, l, *a: wgmma_loads(replace(p.chain, bias=BiasAxis.ROW), op, w, l, p.bn)),
    # the +8 rows feed the upper registers (elements 2, 3 of a group taken for 0, 1)
    "halves swapped": ("c", Arch.SM90A, lambda p: lambda op, w, l, *a: tuple(
        _swap(x, row=x.row + 8 if x.row % 16 < 8 else x.row - 8) for x in wgmma_loads(p.chain, op, w, l, p.bn))),
    # lane % 4 ignored: every lane of a quad loads columns 8g, 8g+1
    "quad column": ("bias=col", Arch.SM90A, lambda p: lambda op, w, l, *a: wgmma_loads(p.chain, op, w, l - l % 4, p.bn)),
    # the second column of a pair feeds the first register
    "pair order": ("residual", Arch.SM90A, lambda p: lambda op, w, l, *a: tuple(
        _swap(x, targets=x.targets[::-1]) for x in wgmma_loads(p.chain, op, w, l, p.bn))),
    # a row bias loaded once for both rows of the thread
    "one row": ("bias=row", Arch.SM90A, lambda p: lambda op, w, l, *a: (
        _swap(wgmma_loads(p.chain, op, w, l, p.bn)[0], targets=(tuple(range(p.bn // 2)),)),)),
    # tcgen05: the chunk's column origin forgotten
    "tmem col0": ("c", Arch.SM100A, lambda p: lambda op, w, l, c0, ch: tmem_loads(p.chain, op, p.bm, w, l, 0, ch)),
    # tcgen05 M=64: lanes 16..31 treated as rows 16w + lane
    "tmem m64 lanes": ("bias=row", Arch.SM100A, lambda p: lambda op, w, l, c0, ch: (
        Load(op, 16 * w + l % 16, None, (tuple(range(ch)),)),)),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_controls_fail(name):
    tok, arch, wrong = CONTROLS[name]
    p = _plan(tok, arch, bm=64 if name == "tmem m64 lanes" else 128)
    assert check_chain_plan(p) == []
    assert check_chain_plan(p, loads=wrong(p)), name


@pytest.mark.parametrize("arch, per_row, masks, writers", [
    (Arch.SM90A, True, (1,), tuple(range(0, 32, 4))),  # one butterfly step: half the quad's columns missing
    (Arch.SM90A, True, (4, 8), tuple(range(0, 32, 4))),  # across rows instead of across the quad
    (Arch.SM90A, False, (16, 8, 4, 2), (0,)),  # per tensor, one step short
    (Arch.SM100A, True, (), tuple(range(16))),  # M=128 with M=64's writers: rows 16.. of each warp never written
])
def test_amax_controls_fail(arch, per_row, masks, writers):
    p = _plan("scale=row" if per_row else "scale=tensor", arch)
    assert check_chain_plan(p) == []
    bad = replace(p, amax=AmaxPlan(per_row, masks, writers))
    assert check_chain_plan(bad)


# ---- the float64 reference ------------------------------------------------------------------------
def test_reference_order_by_hand():
    acc = np.array([[1.0, -3.0]])
    y, d, amax = chainref.chain(acc, alpha=2.0, beta=0.5, c=np.array([[2.0, 2.0]]), bias=np.array([1.0, 0.0]), act="relu",
                                residual=np.array([[-1.0, 0.25]]), out="f32")
    # (2 x 1 + 0.5 x 2 + 1) = 4 -> relu 4 -> + (-1) = 3;  (2 x -3 + 1 + 0) = -5 -> relu 0 -> + 0.25
    assert y.tolist() == [[3.0, 0.25]] and amax is None
    y, d, amax = chainref.chain(np.array([[1.0, -600.0], [0.5, 2.0]]), scale=np.array([1.0, 2.0]), scale_mode="row", out="e4m3")
    assert d.tolist() == [[1.0, -448.0], [1.0, 4.0]] and amax.tolist() == [600.0, 2.0]


def test_reference_activations_differ_where_they_should():
    y = np.linspace(-4, 4, 81)
    gt, ge = chainref.activation(y, "gelu_tanh"), chainref.activation(y, "gelu_erf")
    assert 1e-5 < np.abs(gt - ge).max() < 1e-2  # the tanh approximation is close to, not equal to, erf
    assert chainref.activation(np.array([0.0, 1.0]), "silu").tolist() == [0.0, 1.0 / (1.0 + np.exp(-1.0))]


def test_e4m3_rounding_agrees_with_the_code_table():
    """Every finite e4m3 value rounds to itself, midpoints go to the even code (numerics' table, separately written)."""
    vals = numerics.E4M3[:0x7F]
    assert np.array_equal(chainref.round_e4m3(vals), vals)
    mids = (vals[:-1] + vals[1:]) / 2
    want = np.where(np.arange(len(mids)) % 2 == 0, vals[:-1], vals[1:])
    assert np.array_equal(chainref.round_e4m3(mids), want)
    assert chainref.round_e4m3(np.array([1e6, -1e6])).tolist() == [448.0, -448.0]


def test_bf16_rounding_ties_to_even():
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 2.0 ** -9), 3.0])
    assert chainref.round_bf16(x).tolist() == [1.0, 1 + 2.0 ** -6, -1.0, 3.0]
    r = np.random.default_rng(1).standard_normal(1000) * 100
    assert np.all(np.abs(chainref.round_bf16(r) - r) <= np.abs(r) * 2.0 ** -8)


def test_model_source_index_meaning():
    ch = parse_chain("c,bias=row,scale=row").to_json()
    assert epimodel.source_index(ch, "bias", 5, 7) == (5,) and epimodel.source_index(ch, "c", 5, 7) == (5, 7)
    assert epimodel.source_index(parse_chain("scale=tensor").to_json(), "scale", 5, 7) == (0,)
