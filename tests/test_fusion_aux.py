"""The pre-activation steps of the fused epilogue chain: ``aux`` (z = the value after bias, before the activation,
stored beside D) and ``dact`` (y x act'(aux[r, n]), the backward step). L1: which aux element every thread stores or
loads, against the independent model (ptxgen.model.layouts.epimodel), with controls; the derivative formulas (the
float64 reference and the rendered C) against torch.autograd in float64 on the CPU, with controls. L2: NVRTC + SASS
gate. The door on a simulated device, and (``gpu``) on the GPU against float64."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from ptxgen.derive.store.chainspec import parse_chain
from ptxgen.derive.store.fusion import check_chain, plan_chain
from ptxgen.derive.store.fusion_loads import Load
from ptxgen.isa.epiops import Activation
from ptxgen.isa.types import Arch, DType, Epilogue, SpecError
from ptxgen.model.bridges.check_fusion import check_chain_plan
from ptxgen.model.numerics import chainref

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_fusion_codegen import _Arr, _compile, simulated, spec  # noqa: E402,F401  (the simulated device and the spec base)

ACTS = ("relu", "gelu_tanh", "gelu_erf", "silu")


# ---- parsing and rules ------------------------------------------------------------------------
def test_tokens_order_and_names():
    ch = parse_chain("bias=col:bf16,gelu,aux")
    assert ch.token == "bias=col:bf16,aux,act=gelu_tanh" and ch.aux and ch.stores() == ("aux",) and ch.operands() == ("bias",)
    assert parse_chain(ch.token) == ch
    d = parse_chain("dgelu")
    assert d.token == "dact=gelu_tanh" and d.dact is Activation.GELU_TANH and d.operands() == ("aux",) and d.stores() == ()
    assert parse_chain("dact=gelu_erf") == parse_chain("dgelu_erf") and parse_chain("dsilu").token == "dact=silu"
    names = {parse_chain(t).name_suffix for t in ("bias=col,aux,gelu", "bias=col,gelu", "dgelu", "gelu", "drelu", "relu")}
    assert len(names) == 6  # every chain its own kernel name


@pytest.mark.parametrize("tok, out", [
    ("aux", DType.BF16),  # aux without an activation
    ("bias=col,aux", DType.BF16),
    ("gelu,dgelu", DType.BF16),  # the activation and its derivative in one chain
    ("dgelu,scale=tensor", DType.E4M3),  # FP8 output
    ("aux,gelu,scale=row", DType.E4M3),
])
def test_rules_refuse_naming_the_flag(tok, out):
    with pytest.raises(SpecError) as e:
        check_chain(parse_chain(tok), Arch.SM90A, DType.F32, out, Epilogue.DIRECT, 128, 128, False, False)
    assert e.value.field == "--fuse"


@pytest.mark.parametrize("tok", ["dact", "dact=none", "dact=tanh", "aux=1", "dgelu,dsilu"])
def test_bad_tokens_are_refused(tok):
    with pytest.raises(SpecError):
        parse_chain(tok)


def test_cli_refuses_aux_without_an_activation_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "ptxgen", "explain", "--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128",
                        "--arch", "sm_90a", "--fuse", "bias=col,aux"], capture_output=True, text=True)
    assert r.returncode == 2 and "--fuse" in r.stderr and "Traceback" not in r.stderr


def test_abi_takes_aux_and_ldaux_written_or_read():
    from ptxgen.derive.tile.kernel import plan_kernel

    fwd = {p.name: p.kind for p in plan_kernel(spec(fuse="bias=col,aux,gelu")).abi.params}
    bwd = {p.name: p.kind for p in plan_kernel(spec(fuse="dgelu")).abi.params}
    assert fwd["AUX"] == "wptr" and bwd["AUX"] == "ptr" and fwd["ldaux"] == bwd["ldaux"] == "i32"
    assert "AUX" not in {p.name for p in plan_kernel(spec(fuse="bias=col,gelu")).abi.params}


def test_chains_without_the_steps_render_as_before():
    """The new steps add nothing to a kernel that does not use them (generated/ stays byte-identical)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    src = render_kernel(plan_kernel(spec(fuse="c,bias=col:bf16,gelu_erf,residual")))
    assert "aux" not in src and "chain_dact" not in src and "store_from_f32" not in src
    fwd = render_kernel(plan_kernel(spec(fuse="bias=col,aux,gelu")))
    assert "store_from_f32(ca.aux" in fwd and "chain_dact" not in fwd
    bwd = render_kernel(plan_kernel(spec(fuse="dgelu_erf")))
    assert "chain_dact(z.x)" in bwd and "store_from_f32" not in bwd


# ---- L1: which aux element every thread stores / loads -----------------------------------------------
FAMILIES = [(Arch.SM90A, 64), (Arch.SM90A, 128), (Arch.SM100A, 128), (Arch.SM100A, 64)]


@pytest.mark.parametrize("arch, bm, bn", [(a, bm, bn) for a, bm in FAMILIES for bn in (8, 24, 64, 128, 256)
                                          if a is Arch.SM90A or bn % 32 == 0])  # tcgen05: 32-column chunks
@pytest.mark.parametrize("tok", ["bias=col,aux,gelu", "c,bias=row:f32,aux,silu,residual", "dgelu", "c,bias=col,dact=relu,residual"])
def test_aux_stores_and_loads_hit_each_elements_own_coordinates(arch, bm, bn, tok):
    plan = plan_chain(parse_chain(tok), arch, bm, bn, DType.BF16, Epilogue.DIRECT)
    assert check_chain_plan(plan) == []


def _shifted(plan, dc: int = 0, dr: int = 0, swap: bool = False):
    def wrong(operand, warp, lane, col0=0, chunk=32):
        out = []
        for l in plan.loads(operand, warp, lane, col0, chunk):
            if operand != "aux":
                out.append(l)
                continue
            t = tuple(reversed(l.targets)) if swap else l.targets
            out.append(Load(l.operand, None if l.row is None else l.row + dr, None if l.col is None else l.col + dc, t))
        return tuple(out)
    return wrong


@pytest.mark.parametrize("arch, bm", [(Arch.SM90A, 128), (Arch.SM100A, 128)])
@pytest.mark.parametrize("kw", [dict(dc=2), dict(dr=8), dict(swap=True)], ids=["col+2", "row+8", "pair-swapped"])
def test_controls_wrong_coordinates_fail(arch, bm, kw):
    fwd = plan_chain(parse_chain("bias=col,aux,gelu"), arch, bm, 64, DType.BF16, Epilogue.DIRECT)
    bwd = plan_chain(parse_chain("dgelu"), arch, bm, 64, DType.BF16, Epilogue.DIRECT)
    assert check_chain_plan(fwd, stores=_shifted(fwd, **kw))
    assert check_chain_plan(bwd, loads=_shifted(bwd, **kw))


# ---- the derivative formulas against torch.autograd (float64, CPU) -----------------------------------
def _torch_grad(z: np.ndarray, act: str) -> np.ndarray:
    torch = pytest.importorskip("torch")
    from ptxgen.ops.opsref import activation

    t = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    activation(t, act).sum().backward()
    return t.grad.numpy()


Z = np.concatenate([np.linspace(-12.0, 12.0, 4801), [-60.0, -30.0, -1e-3, 1e-3, 30.0, 60.0]])


@pytest.mark.parametrize("act", ACTS)
def test_reference_derivative_is_torchs(act):
    z = Z[Z != 0.0]  # relu at 0: torch's subgradient convention (0), the reference's too; left out of the comparison
    assert np.abs(chainref.activation_grad(z, act) - _torch_grad(z, act)).max() < 1e-12
    other = {"relu": "silu", "gelu_tanh": "gelu_erf", "gelu_erf": "gelu_tanh", "silu": "gelu_tanh"}[act]  # control
    assert np.abs(chainref.activation_grad(z, other) - _torch_grad(z, act)).max() > 1e-4


_HARNESS = r"""
#include <cmath>
#include <cstdio>
#define fmaf(a, b, c) ((double)(a) * (double)(b) + (double)(c))
#define ex2_approx(x) exp2((double)(x))
#define rcp_approx(x) (1.0 / (double)(x))
#define __expf(x) exp((double)(x))
#define erff(x) erf((double)(x))
#define erfcf(x) erfc((double)(x))
#define float double
static double chain_dact(double z) {
  BODY
}
int main() {
  double z;
  while (std::scanf("%lf", &z) == 1) std::printf("%.17g\n", chain_dact(z));
  return 0;
}
"""


_HARNESS_F32 = r"""
#include <cmath>
#include <cstdio>
static float ex2_approx(float x) { return std::exp2(x); }
static float rcp_approx(float x) { return 1.f / x; }
static float host_expf(float x) { return std::exp(x); }
#define __expf host_expf
static float chain_dact(float z) {
  BODY
}
int main() {
  float z;
  while (std::scanf("%f", &z) == 1) std::printf("%.9g\n", chain_dact(z));
  return 0;
}
"""


def _run_body(body: str, z: np.ndarray, tmp_path, harness: str = _HARNESS) -> np.ndarray:
    """The rendered body of chain_dact compiled by g++ in ``harness``: _HARNESS (the CUDA intrinsics as their exact
    double functions) or _HARNESS_F32 (the kernel's f32 arithmetic, the MUFU ops as exact f32 functions)."""
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    tag = "32" if harness is _HARNESS_F32 else ""
    src, exe = tmp_path / f"dact{tag}.cc", tmp_path / f"dact{tag}"
    src.write_text(harness.replace("BODY", body))
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    r = subprocess.run([str(exe)], input="\n".join(repr(float(v)) for v in z), capture_output=True, text=True, check=True)
    return np.array([float(v) for v in r.stdout.split()])


@pytest.mark.parametrize("act", ACTS)
def test_rendered_derivative_is_torchs(act, tmp_path):
    """The C the kernel runs (ptxgen.emit.views.chain.dact_c_body; its constants are f32 literals, hence 1e-6) against
    torch.autograd; controls: the body of another activation, each derived constant off by 1%."""
    from ptxgen.emit.views.chain import dact_c_body

    z = Z[Z != 0.0]
    body = dact_c_body(Activation(act))
    want = _torch_grad(z, act)
    assert np.abs(_run_body(body, z, tmp_path) - want).max() < 1e-6
    other = {"relu": "silu", "gelu_tanh": "gelu_erf", "gelu_erf": "gelu_tanh", "silu": "relu"}[act]
    assert np.abs(_run_body(dact_c_body(Activation(other)), z, tmp_path) - want).max() > 1e-4  # tanh vs erf: 8.7e-4
    for c in sorted(set(re.findall(r"\d+\.\d{6,}", body))):
        bad = body.replace(c, repr(float(c) * 1.01))
        assert np.abs(_run_body(bad, z, tmp_path) - want).max() > 1e-4, c


@pytest.mark.parametrize("act", ["gelu_tanh", "gelu_erf", "silu"])
def test_rendered_derivative_keeps_its_relative_accuracy_in_f32(act, tmp_path):
    """In f32, as the kernel computes it: act'(z) within 1e-4 relative (1e-7 absolute) of torch's float64 derivative
    over [-12, 12] wherever it is a normal f32 (gelu's left tail included: z = -4.6 gives about -1.8e-5, where
    0.5 (1 + tanh u) computed as 1 - s loses all but a few bits). Control: gelu_tanh's 1 - s form misses it."""
    from ptxgen.emit.views.chain import dact_c_body

    z = np.linspace(-12.0, 12.0, 2401).astype(np.float32).astype(np.float64)
    want = _torch_grad(z, act)
    keep = np.abs(want) > 1e-30
    got = _run_body(dact_c_body(Activation(act)), z, tmp_path, _HARNESS_F32)
    err = np.abs(got - want) - 1e-4 * np.abs(want) - 1e-7
    assert err[keep].max() <= 0, (z[keep][err[keep].argmax()], got[keep][err[keep].argmax()], want[keep][err[keep].argmax()])
    if act == "gelu_tanh":  # the control: the same body with (1 + tanh u) / 2 as 1 - s everywhere
        body = dact_c_body(Activation(act))
        q_line = next(line for line in body.splitlines(keepends=True) if "const float q" in line)
        old = body.replace(q_line, "").replace("* s * q,", "* s * (1.f - s),").replace(", q);", ", 1.f - s);")
        assert "q" not in old.replace("sqrt", "")
        old = _run_body(old, z, tmp_path, _HARNESS_F32)
        assert (np.abs(old - want) - 1e-4 * np.abs(want) - 1e-7)[keep].max() > 0


# ---- L2: NVRTC + SASS -----------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(fuse="bias=col:bf16,aux,gelu"),
    dict(fuse="dgelu"),
    dict(fuse="bias=col:f32,aux,silu", epilogue="tma"),
    dict(fuse="dact=gelu_erf", out_dtype="f32"),
], ids=["aux", "dact", "aux-tma-store", "dact-f32"])
def test_aux_and_dact_kernels_compile_without_local_memory(kw):
    s = spec(**kw)
    c, rep = _compile(s)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    if "aux" in kw["fuse"]:
        assert re.search(r"st\.global\.(b32|u32|v2\.f32)", c.ptx)
    else:
        assert "ex2.approx" in c.ptx or "erf" in kw["fuse"]


@pytest.mark.slow
@pytest.mark.parametrize("kw", [
    dict(arch="sm_100a", fuse="bias=col,aux,gelu", bn=256),
    dict(arch="sm_100a", fuse="dsilu"),
], ids=["tcgen05-aux", "tcgen05-dact"])
def test_tcgen05_aux_and_dact_compile(kw):
    s = spec(**kw)
    c, rep = _compile(s)
    assert rep.ok and rep.local_bytes == 0, rep.problems


# ---- the door (a simulated device) -----------------------------------------------------------------
def test_door_marshals_aux_written_and_read(simulated):
    import ptxgen

    m, n, k = 100, 72, 64
    a, b = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1))
    out, z, bias = _Arr((m, n), strides=(n, 1)), _Arr((m, n), strides=(80, 1)), _Arr((n,))
    ptxgen.gemm(a, b, out, bias=bias, activation="gelu_tanh", aux=z)
    ptxgen.gemm(a, b, out, dact="gelu_tanh", aux=z)
    (fwd, bwd) = simulated
    assert fwd[0].endswith("_fbcbf16zgelut") and bwd[0].endswith("_fdgelut")
    assert fwd[3][-3:] == [bias.ptr, z.ptr, 80] and bwd[3][-3:] == [1.0, z.ptr, 80]


@pytest.mark.parametrize("kw, match", [
    (dict(aux="z"), "aux= is written with an activation"),
    (dict(dact="gelu_tanh"), "pass the saved pre-activation"),
    (dict(dact="gelu_tanh", activation="gelu_tanh", aux="z"), "two kernels"),
    (dict(dact="tanh", aux="z"), "dact"),
], ids=["aux-alone", "dact-without-aux", "both", "unknown"])
def test_door_refuses_what_does_not_fit(simulated, kw, match):
    import ptxgen
    from ptxgen.runtime.launch.arrays import ArgumentError

    m, n, k = 100, 72, 64
    a, b, out = _Arr((m, k), strides=(k, 1)), _Arr((n, k), strides=(k, 1)), _Arr((m, n), strides=(n, 1))
    if kw.get("aux") == "z":
        kw = {**kw, "aux": _Arr((m, n), strides=(n, 1))}
    with pytest.raises(ArgumentError, match=match):
        ptxgen.gemm(a, b, out, **kw)
    with pytest.raises(ArgumentError, match="even"):  # aux is read and written as column pairs
        ptxgen.gemm(a, b, out, activation="gelu_tanh", aux=_Arr((m, n), strides=(73, 1)))


# ---- on the GPU against float64 -------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("mnk", [(333, 264, 200), (1, 40, 72), (256, 520, 64)])
def test_aux_and_dact_match_float64(torch_cuda, act, mnk):
    import ptxgen

    torch = torch_cuda
    m, n, k = mnk
    g = torch.Generator(device="cuda").manual_seed(m * n + k)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g).bfloat16()
    bias = torch.randn(n, device="cuda", generator=g).bfloat16()
    z = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ptxgen.gemm(a, b, bias=bias, activation=act, aux=z)
    acc = a.double().cpu().numpy() @ b.double().cpu().numpy().T
    zref = chainref.round_to(acc + bias.double().cpu().numpy()[None, :], "bf16")
    _, yref, _ = chainref.chain(acc, bias=bias.double().cpu().numpy(), act=act)
    tol = 2 ** -7
    zz = z.double().cpu().numpy()
    assert np.abs(zz - zref).max() <= tol * max(1.0, np.abs(zref).max())  # every element written (no NaN left)
    assert np.abs(y.double().cpu().numpy() - yref).max() <= 2 * tol * max(1.0, np.abs(yref).max())
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    zk = (torch.randn(m, k, device="cuda", generator=g) * 3).bfloat16()  # the saved pre-activation of dy @ b's shape
    dx = ptxgen.gemm(dy, b.t(), dact=act, aux=zk)  # (dy @ b) x act'(zk): the backward step
    acc2 = dy.double().cpu().numpy() @ b.double().cpu().numpy()
    _, dref, _ = chainref.chain(acc2, dact=act, aux=zk.double().cpu().numpy())
    assert np.abs(dx.double().cpu().numpy() - dref).max() <= 4 * tol * max(1.0, np.abs(dref).max())
    want = torch.ops.aten.gelu_backward if act.startswith("gelu") else None
    if want is not None:  # torch's own backward of the same step, bf16
        t = want((dy.float() @ b.float()), zk.float(), approximate="tanh" if act == "gelu_tanh" else "none")
        assert (dx.float() - t).abs().max().item() <= 4 * tol * max(1.0, t.abs().max().item())
