"""The fused epilogue's prepared launch (CPU tier, simulated device and fake tensor-map encoder).

A repeat fused call writes only pointers (and alpha/beta where they changed) into the launch the first call prepared.
After every call, the bytes cuLaunchKernel reads (through the void** array) must equal what the slow path builds from
scratch for the same pointers and scalars (``runtime.launch.launch.gemm_args`` with the chain's ``extra``). Controls: an entry
that leaves one chain pointer stale, or keeps an old alpha, gives different bytes; a misaligned chain pointer is
declined (None: the slow path then says why).
"""

from __future__ import annotations

import copy
import ctypes
import itertools

import pytest

import ptxgen
from ptxgen import api
from ptxgen.api.launch.fusedlaunch import AUX_ROLES, FusedLaunch, hot_key
from ptxgen.runtime.launch.arrays import read_array
from ptxgen.runtime.launch.launch import gemm_args
from test_api import BF16, FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor

M, N, K = 300, 200, 264
_ptrs = itertools.count(0x7000_0000, 1 << 24)


class Ptr:
    """As much of a tensor as the hot call reads: its data pointer."""

    def __init__(self, ptr: int | None = None):
        self.ptr = next(_ptrs) if ptr is None else ptr

    def data_ptr(self) -> int:
        return self.ptr


def decode(address: int, params) -> list:
    """The parameters as cuLaunchKernel reads them (f32 as floats, tensor maps as bytes)."""
    arr = (ctypes.c_void_p * len(params)).from_address(address)
    kinds = {"ptr": ctypes.c_uint64, "wptr": ctypes.c_uint64, "f32": ctypes.c_float, "u64": ctypes.c_uint64}
    return [ctypes.string_at(arr[i], 128) if q.kind == "tensormap" else kinds.get(q.kind, ctypes.c_int32).from_address(arr[i]).value
            for i, q in enumerate(params)]


def expected(kernel, p, a, b, out, aux, scalars: dict) -> list:
    """What the slow path builds from scratch: gemm_args with every chain argument by name."""
    extra = dict(scalars)
    for x, (_, role) in zip(aux, AUX_ROLES):
        if x is not None:
            extra[role] = x.data_ptr()
    extra = {q.name: extra[q.name] for q in kernel.plan.abi.params if q.name in extra}
    values = gemm_args(kernel.plan, a.data_ptr(), b.data_ptr(), out.data_ptr(), p, encode=_fake_encode, extra=extra).read_back()
    return [v if isinstance(v, bytes) else v for v in values]


def prepared(sim, fields: dict, alpha=0.5, beta=2.0):
    """A fused kernel's prepared launch for M x N x K on the simulated device (the driver it has: ctypes or C)."""
    k = ptxgen.compile(**fields, arch="sm_90a")
    _fresh(k)
    ai, bi = read_array(kmajor(M, K), "a"), read_array(kmajor(N, K), "b")
    oi = read_array(FakeArray((M, N), "bfloat16", strides=(N + 8, 1)), "out")
    p = api.bind(k.spec, ai, bi, oi).problem
    names = {q.name for q in k.plan.abi.params}
    scalars = {"alpha": alpha, "beta": beta, "ldc": N + 8, "ldr": N + 16, "ldaux": N + 24}
    scalars = {name: v for name, v in scalars.items() if name in names}
    launch = k.prepare_launch(p, sim.device, (0, 0, 0), scalars, extra_roles=tuple(role for _, role in AUX_ROLES))
    index = {q.name: i for i, q in enumerate(k.plan.abi.params)}
    return k, p, scalars, FusedLaunch(launch, index, 3, "c=tma" in fields["fuse"], alpha, beta, None)


@pytest.fixture
def sim(monkeypatch):
    return SimulatedGPU(monkeypatch)


CHAIN = dict(BF16, fuse="c,bias=col:bf16,act=gelu_tanh,residual")
CHAIN_C_TMA = dict(BF16, epilogue="tma", fuse="c=tma,bias=col:f32,act=relu")


@pytest.mark.parametrize("fields", [CHAIN, CHAIN_C_TMA], ids=["c-bias-gelu-residual", "c-tma-bias-relu"])
def test_every_call_writes_the_slow_paths_bytes(sim, fields):
    k, p, scalars, e = prepared(sim, fields)
    a, b = Ptr(), Ptr()
    outs, cs, biases, residuals = [Ptr() for _ in range(2)], [Ptr() for _ in range(2)], [Ptr() for _ in range(2)], [Ptr() for _ in range(2)]
    calls = [(a, outs[0], cs[0], biases[0], residuals[0], 0.5, 2.0), (a, outs[1], cs[0], biases[1], residuals[0], 0.5, 2.0),
             (Ptr(), outs[1], cs[1], biases[1], residuals[1], 1.25, 2.0), (a, outs[0], cs[0], biases[0], residuals[1], 1.25, -1.0),
             (a, outs[0], cs[1], biases[0], residuals[0], 0.5, 2.0)]
    has_res = "residual" in fields["fuse"]
    for x, o, c, bias, res, alpha, beta in calls:
        aux = (c, bias, res if has_res else None, None, None)
        assert e.call(x, b, o, aux, alpha, beta, 0x55) is o
        got = decode(sim.launches[-1]["params"], k.plan.abi.params)
        assert got == expected(k, p, x, b, o, aux, dict(scalars, alpha=alpha, beta=beta))
        assert sim.launches[-1]["stream"] == 0x55
    assert len({launch["params"] for launch in sim.launches}) == 1  # one pre-packed block, patched in place


def test_control_a_stale_chain_pointer_or_scalar_shows(sim):
    k, p, scalars, e = prepared(sim, CHAIN)
    a, b, o = Ptr(), Ptr(), Ptr()
    aux1 = (Ptr(), Ptr(), Ptr(), None, None)
    e.call(a, b, o, aux1, 0.5, 2.0, 0)
    aux2 = (aux1[0], Ptr(), aux1[2], None, None)  # a new bias
    stale = copy.copy(e)  # an entry that forgets to re-point the bias slot
    stale._patched = tuple(i for i in e._patched if AUX_ROLES[i][1] != "BIAS")
    stale.launch = copy.copy(e.launch)
    stale.launch.extra_order = tuple(r for r in e.launch.extra_order if r != "BIAS")
    stale.call(a, b, o, aux2, 0.5, 2.0, 0)
    bytes_now = decode(sim.launches[-1]["params"], k.plan.abi.params)
    assert bytes_now != expected(k, p, a, b, o, aux2, dict(scalars, alpha=0.5, beta=2.0))
    e.call(a, b, o, aux2, 0.5, 2.0, 0)  # the real entry mends it
    assert decode(sim.launches[-1]["params"], k.plan.abi.params) == expected(k, p, a, b, o, aux2, dict(scalars, alpha=0.5, beta=2.0))
    stale.alpha = 0.75  # claims the block holds 0.75 while it holds 0.5: a call with 0.75 writes nothing
    stale.call(a, b, o, aux2, 0.75, 2.0, 0)
    assert decode(sim.launches[-1]["params"], k.plan.abi.params) != expected(k, p, a, b, o, aux2, dict(scalars, alpha=0.75, beta=2.0))


@pytest.mark.parametrize("fields", [CHAIN, CHAIN_C_TMA], ids=["c-bias-gelu-residual", "c-tma-bias-relu"])
def test_the_compiled_launcher_writes_the_same_bytes(sim, monkeypatch, fields):
    """Where the compiled launcher was built, run_all patches every chain pointer from C (test_launcher's CDriver
    records what cuLaunchKernel would be handed)."""
    pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")
    from test_launcher import _use_c

    k = ptxgen.compile(**fields, arch="sm_90a")
    driver = _use_c(monkeypatch, sim, k)
    k, p, scalars, e = prepared(sim, fields)
    assert e.launch._c is not None and e.launch.extra_order  # the C path, with the chain's pointers
    a, b = Ptr(), Ptr()
    has_res = "residual" in fields["fuse"]
    for i in range(4):
        o, aux = Ptr(), (Ptr(), Ptr(), Ptr() if has_res else None, None, None)
        assert e.call(a if i % 2 else Ptr(), b, o, aux, 0.5 + i, 2.0, 0x77) is o
        last = sim.launches[-1]
        assert last["via"] == "c" and last["stream"] == 0x77
        x = a if i % 2 else None
        got = decode(last["params"], k.plan.abi.params)
        if x is not None:
            assert got == expected(k, p, x, b, o, aux, dict(scalars, alpha=0.5 + i, beta=2.0))
    assert driver.codes == []


@pytest.mark.parametrize("role,offset", [(0, 2), (1, 4), (2, 2)], ids=["c-odd-pair", "bias-4B", "residual-odd-pair"])
def test_a_misaligned_chain_pointer_is_declined(sim, role, offset):
    k, p, scalars, e = prepared(sim, CHAIN)
    aux = [Ptr(), Ptr(), Ptr(), None, None]
    aux[role] = Ptr(next(_ptrs) + offset)
    before = len(sim.launches)
    assert e.call(Ptr(), Ptr(), Ptr(), tuple(aux), 0.5, 2.0, 0) is None
    assert len(sim.launches) == before  # nothing launched


def test_c_through_tma_needs_16_bytes(sim):
    k, p, scalars, e = prepared(sim, CHAIN_C_TMA)
    assert e.call(Ptr(), Ptr(), Ptr(), (Ptr(next(_ptrs) + 4), Ptr(), None, None, None), 0.5, 2.0, 0) is None
    assert e.call(Ptr(), Ptr(), Ptr(), (Ptr(), Ptr(), None, None, None), 0.5, 2.0, 0) is not None


@pytest.mark.parametrize("fuse", ["bias=col:bf16,aux,act=gelu_tanh", "dact=gelu_tanh"], ids=["aux-written", "aux-read"])
def test_the_aux_pointer_is_patched_and_checked(sim, fuse):
    """The pre-activation (AUX, after amax in AUX_ROLES): each call's pointer lands in its slot; one that breaks the
    column-pair alignment is declined (the slow path says why)."""
    k, p, scalars, e = prepared(sim, dict(BF16, fuse=fuse))
    assert "AUX" in e.launch.extra_order
    bias = Ptr() if "bias" in fuse else None
    for _ in range(2):
        a, o, z = Ptr(), Ptr(), Ptr()
        aux = (None, bias, None, None, None, z)
        _b = Ptr()
        assert e.call(a, _b, o, aux, 0.5, 2.0, 0) is o
        got = decode(sim.launches[-1]["params"], k.plan.abi.params)
        assert got == expected(k, p, a, _b, o, aux, dict(scalars, alpha=0.5, beta=2.0))
        assert got[[q.name for q in k.plan.abi.params].index("AUX")] == z.ptr
    before = len(sim.launches)
    assert e.call(Ptr(), Ptr(), Ptr(), (None, bias, None, None, None, Ptr(next(_ptrs) + 2)), 0.5, 2.0, 0) is None
    assert len(sim.launches) == before


def test_the_key_tells_options_and_layouts_apart():
    torch = pytest.importorskip("torch")
    a, b, bias = torch.zeros(4, 8), torch.zeros(6, 8), torch.zeros(6)
    opts = ("gelu_tanh", "col", None, None, False, False, True, True, None)
    k1 = hot_key(opts, a, b, None, (None, bias, None, None, None))
    assert k1 == hot_key(opts, a.clone(), b.clone(), None, (None, bias.clone(), None, None, None))  # pointers are not in it
    assert k1 != hot_key(("relu",) + opts[1:], a, b, None, (None, bias, None, None, None))
    assert k1 != hot_key(opts, a, b, None, (None, bias.to(torch.bfloat16), None, None, None))
    assert k1 != hot_key(opts, a, b, None, (None, torch.zeros(12)[::2], None, None, None))  # another stride
    assert k1 != hot_key(opts, a, b, None, (bias, None, None, None, None))  # the same tensor in another role


# ---------------------------------------------------------------------------------------------------------------------
# on the GPU: the hot path follows new pointers, alpha/beta and fresh outputs, and matches torch
# ---------------------------------------------------------------------------------------------------------------------
def _rel(torch, got, ref) -> float:
    return float(torch.linalg.norm(got.double() - ref) / max(float(torch.linalg.norm(ref)), 1e-30))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(512, 384, 256), (300, 200, 264)])
def test_gpu_fused_hot_path_follows_every_argument(torch_cuda, m, n, k):
    from ptxgen.api import fused

    torch = torch_cuda
    F = torch.nn.functional
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
    results = []
    for i in range(5):  # new a, bias, c, residual, out each call; alpha and beta change too
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        c = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        res = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        alpha, beta = 1.5 + 0.25 * i, 0.5 + 0.25 * i  # never 1 and 0: alpha = 1 / beta = 0 are other chains (keys)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        y1 = ptxgen.gemm(a, w, out, bias=bias, activation="gelu_tanh")
        y2 = ptxgen.gemm(a, w, c=c, alpha=alpha, beta=beta, bias=bias, activation="relu", residual=res)
        results.append((a, bias, c, res, alpha, beta, y1, y2))
        assert y1 is out
    torch.cuda.synchronize()
    for a, bias, c, res, alpha, beta, y1, y2 in results:
        acc = a.double() @ w.double().t()
        ref1 = F.gelu(acc + bias.double(), approximate="tanh")
        ref2 = torch.relu(alpha * acc + beta * c.double() + bias.double()) + res.double()
        assert _rel(torch, y1, ref1) < 1e-2 and _rel(torch, y2, ref2) < 1e-2
    mine = [key for key in fused._HOT if key[1][0] == (m, k)]
    assert len(mine) == 2  # one prepared launch per (options, layouts): every repeat took the hot path


@pytest.mark.gpu
def test_gpu_fused_fp8_output_hot_path(torch_cuda):
    torch = torch_cuda
    m, n, k = 256, 384, 512
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
    for _ in range(3):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        scale = torch.full((m,), 4.0, device="cuda")
        q, amax = ptxgen.api.fused.gemm(a, w, scale=scale, out_dtype="e4m3")
        torch.cuda.synchronize()
        y = a.double() @ w.double().t()
        assert torch.allclose(amax.double(), y.abs().amax(dim=1), rtol=2e-2, atol=1e-3)
        assert _rel(torch, q.double() / 4.0, y) < 0.08  # e4m3's 3 mantissa bits
