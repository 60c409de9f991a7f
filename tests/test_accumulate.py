"""``accumulate=`` of ``ptxgen.gemm`` (api.arrays.accumulate), on a machine with no GPU: which kernel a float16 call gets
(``ptxgen.api.plan`` and the door itself on a simulated H100, ``test_api_plan``'s fixture), the refusals, torch's
``allow_fp16_accumulation`` followed, and the dispatch cache keeping the two modes apart. Controls: f32 where nothing asks
for f16, and a cache keyed without the mode handing the f32 kernel to an f16 call."""

from __future__ import annotations

import contextlib

import pytest
from test_api_plan import F32, CupyArray, door_spec, doors, plan  # noqa: F401 (doors: the fixture)

import ptxgen
from ptxgen.isa.types import DType, Epilogue

# (a, b) shapes: the tuned table's TMA-store pick, swap-AB's (an M-major D), the stream-K pick of 400 x 10000 x 6000, a
# split-K pick, a ping-pong one, an M-major A (the chooser's K-major kernel retyped), batched, and 8-byte rows (the narrow
# cp.async kernel)
CASES = {"tuned": ((4096, 4096), (4096, 4096)), "swap": ((16, 4096), (4096, 4096)),
         "streamk": ((400, 6000), (10000, 6000)), "splitk": ((128, 4096), (4096, 4096)),
         "pingpong": ((256, 1024), (256, 1024)), "a_t": ((2048, 1024), (2048, 1024)),
         "batched": ((4, 512, 1024), (4, 256, 1024)), "narrow": ((64, 12), (64, 12))}


def _arrays(case: str, dtype: str = "float16"):
    sa, sb = CASES[case]
    a = CupyArray(sa[::-1], dtype).t() if case == "a_t" else CupyArray(sa, dtype)
    return a, CupyArray(sb, dtype)


@contextlib.contextmanager
def _torch_flag(torch, value: bool):
    before = torch.backends.cuda.matmul.allow_fp16_accumulation
    torch.backends.cuda.matmul.allow_fp16_accumulation = value
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_fp16_accumulation = before


# ---- the kernel a call gets ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
def test_f16_accumulate_takes_the_same_tile_with_an_f16_accumulator(case):
    a, b = _arrays(case)
    f32, f16 = plan("gemm", a, b), plan("gemm", a, b, accumulate="f16")
    assert plan("gemm", a, b, accumulate="f32").spec == f32.spec  # control: None is f32 for arrays other than torch's
    assert f32.spec.acc is DType.F32 and f32.accumulator == "f32" and "accumulate" not in str(f32)
    assert f16.spec.acc is DType.F16 and f16.accumulator == "f16", f16
    assert f16.to_json()["accumulator"] == "f16" and "accumulate: f16" in str(f16) and "accumulate f16" in f16.why
    assert "_f16_f16_" in f16.kernel and "_f16_f32_" in f32.kernel  # the name's input and accumulator types
    s, t = f32.spec, f16.spec
    assert (t.bm, t.bn, t.bk, t.stages, t.schedule, t.cluster, t.consumers, t.d_major, t.a, t.b, t.batch, t.loader) == \
        (s.bm, s.bn, s.bk, s.stages, s.schedule, s.cluster, s.consumers, s.d_major, s.a, s.b, s.batch, s.loader)
    assert f16.swapped == f32.swapped and f16.path == f32.path
    assert t.epilogue is Epilogue.DIRECT and t.stream_k == 1 and t.split_k == 1  # derived for f32 accumulators only
    if s.epilogue is Epilogue.TMA:
        assert "the direct stores, not the TMA store" in f16.why
    if s.stream_k > 1:
        assert f"not stream-K over {s.stream_k} splits" in f16.why
    if s.split_k > 1:
        assert f"not split-K over {s.split_k} splits" in f16.why and t.schedule.value == "tile"


def test_the_picks_cover_the_forms_taken_out():
    """The cases above reach the TMA-store epilogue, stream-K and swap-AB picks (else the test above proves less)."""
    picks = {case: plan("gemm", *_arrays(case)).spec for case in CASES}
    assert picks["tuned"].epilogue is Epilogue.TMA and picks["streamk"].stream_k > 1 and picks["swap"].d_major.value == "m"
    assert picks["splitk"].split_k > 1 and picks["pingpong"].consumers.value == "pingpong"
    assert plan("gemm", *_arrays("narrow")).path.value == "narrow" and picks["batched"].batch.value != "none"


def test_the_door_runs_the_plans_kernel(doors):
    for case in ("tuned", "swap", "streamk", "splitk", "narrow"):
        a, b = _arrays(case)
        for mode in ("f16", "f32"):
            assert door_spec(ptxgen.gemm, a, b, accumulate=mode) == plan("gemm", a, b, accumulate=mode).spec


@pytest.mark.parametrize("dtype", ["bfloat16", F32, "float8_e4m3fn"])
def test_f16_with_other_input_types_is_refused_and_f32_is_what_they_do(dtype):
    a, b = CupyArray((256, 512), dtype), CupyArray((128, 512), dtype)
    p = plan("gemm", a, b, accumulate="f16")
    assert p.path.value == "refused" and p.error == "ArgumentError", p
    assert "accumulate='f16' takes float16 inputs" in p.why and "only in f32" in p.why
    assert plan("gemm", a, b, accumulate="f32").spec == plan("gemm", a, b).spec  # ignored: their own accumulator


def test_the_door_refuses_before_anything_runs(doors):
    a, b = CupyArray((256, 512), "bfloat16"), CupyArray((128, 512), "bfloat16")
    with pytest.raises(ptxgen.ArgumentError, match="takes float16 inputs"):
        ptxgen.gemm(a, b, accumulate="f16")
    with pytest.raises(ptxgen.ArgumentError, match="accumulate 'f64': one of 'f32', 'f16'"):
        ptxgen.gemm(*_arrays("tuned"), accumulate="f64")


def test_a_fused_chain_keeps_f32_and_says_why():
    a, b = _arrays("tuned")
    bias = CupyArray((4096,), "float16")
    p = plan("gemm", a, b, bias=bias, activation="relu", accumulate="f16")
    assert p.spec.acc is DType.F32 and p.spec.fuse is not None and "works on f32 accumulators" in p.why, p
    assert "works on f32 accumulators" not in plan("gemm", a, b, bias=bias, activation="relu").why  # control


# ---- torch's flag ----------------------------------------------------------------------------------------------------
def test_torch_flag_is_followed_for_torch_tensors():
    torch = pytest.importorskip("torch")
    a, b = torch.empty(4096, 4096, dtype=torch.float16, device="meta"), torch.empty(4096, 4096, dtype=torch.float16, device="meta")
    with _torch_flag(torch, False):
        off = plan("gemm", a, b)
        asked = plan("gemm", a, b, accumulate="f16")
    with _torch_flag(torch, True):
        on = plan("gemm", a, b)
        kept = plan("gemm", a, b, accumulate="f32")
        bf = plan("gemm", a.to(torch.bfloat16), b.to(torch.bfloat16))  # torch's flag governs float16 GEMMs only
        cai = plan("gemm", *_arrays("tuned"))  # not a torch tensor: f32
    assert off.accumulator == "f32" and kept.spec == off.spec and cai.accumulator == "f32"
    assert on.accumulator == "f16" and on.spec == asked.spec and bf.accumulator == "f32"


def test_torch_flag_read_where_torch_lacks_it():
    from types import SimpleNamespace

    from ptxgen.api.arrays import accumulate

    old = SimpleNamespace(_C=SimpleNamespace(), backends=SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace())))
    new = SimpleNamespace(_C=SimpleNamespace(), backends=SimpleNamespace(cuda=SimpleNamespace(
        matmul=SimpleNamespace(allow_fp16_accumulation=True))))
    assert accumulate.torch_flag(old) is False and accumulate.torch_flag(new) is True


def test_the_door_follows_the_flag_call_by_call(doors, monkeypatch):
    """Float16 torch tensors: each call reads torch's flag before the hot tables are probed."""
    torch = pytest.importorskip("torch")
    from ptxgen.api import dispatch
    from ptxgen.api.select import ACC16

    seen = []
    monkeypatch.setattr(dispatch, "_gemm_slow", lambda *args: seen.append(ACC16.get()))
    a, b = torch.zeros(64, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16)
    with _torch_flag(torch, True):
        ptxgen.gemm(a, b)
        ptxgen.gemm(a, b, accumulate="f32")
    with _torch_flag(torch, False):
        ptxgen.gemm(a, b)
        ptxgen.gemm(a, b, accumulate="f16")
    ptxgen.gemm(a.to(torch.bfloat16), b.to(torch.bfloat16))
    assert seen == [True, False, False, True, False]
    assert ACC16.get() is False  # the context ends with the call


# ---- the dispatch cache ----------------------------------------------------------------------------------------------
def _fake_kernels(monkeypatch, selected: list):
    from types import SimpleNamespace

    from ptxgen.api import dispatch

    def kernel_for(spec):
        selected.append(spec)
        return SimpleNamespace(spec=spec, _launch=lambda *args: spec)

    monkeypatch.setattr(dispatch, "kernel_for", kernel_for)


@pytest.mark.parametrize("case", ["tuned", "narrow", "batched"])
def test_the_cache_keeps_the_modes_apart(doors, monkeypatch, case):
    selected = []
    _fake_kernels(monkeypatch, selected)
    a, b = _arrays(case)
    first = ptxgen.gemm(a, b)
    flipped = ptxgen.gemm(a, b, accumulate="f16")
    again = ptxgen.gemm(a, b), ptxgen.gemm(a, b, accumulate="f16")
    assert first.acc is DType.F32 and flipped.acc is DType.F16 and again == (first, flipped)
    assert len(selected) == 2  # one selection per mode, then the cache


def test_control_a_cache_keyed_without_the_mode_reuses_the_f32_kernel(doors, monkeypatch):
    from ptxgen.api import dispatch

    selected = []
    _fake_kernels(monkeypatch, selected)
    monkeypatch.setattr(dispatch, "_okey", lambda out_dtype: out_dtype)
    a, b = _arrays("tuned")
    assert ptxgen.gemm(a, b).acc is DType.F32
    assert ptxgen.gemm(a, b, accumulate="f16").acc is DType.F32 and len(selected) == 1


def test_dispatch_keys_carry_the_mode():
    from ptxgen.api import dispatch
    from ptxgen.api.select import accumulating_f16

    assert dispatch._okey("f16") == "f16" and dispatch._okey(None) is None
    with accumulating_f16():
        assert dispatch._okey("f16") == ("f16", "f16acc") and dispatch._okey(None) == (None, "f16acc")
    assert dispatch._okey("f16") == "f16"


# ---- L2: the f16-accumulate kernels compile -------------------------------------------------------------------------
@pytest.mark.parametrize("case, out_dtype", [(c, None) for c in CASES] + [(c, "f32") for c in ("tuned", "swap", "streamk")])
def test_f16_accumulate_kernels_compile_without_local_memory(case, out_dtype):
    """NVRTC for sm_90a: the wgmma with an f16 D, the SASS gate passes, no local memory or stack (f16 outputs, and f32
    ones: the GPU tests' accumulator read without the output's rounding)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = plan("gemm", *_arrays(case), accumulate="f16", out_dtype=out_dtype).spec
    assert s.acc is DType.F16 and s.out_dtype.value == (out_dtype or "f16")
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.stack_bytes == 0, rep.problems
    assert f"wgmma.mma_async.sync.aligned.m64n{s.bn}k16.f16.f16.f16" in c.ptx
