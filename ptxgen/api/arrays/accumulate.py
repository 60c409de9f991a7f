"""Float16 inputs: accumulate in f32 (the default) or in f16, as torch's ``allow_fp16_accumulation`` asks.

PyTorch's ``torch.backends.cuda.matmul.allow_fp16_accumulation`` (default False) makes its float16 GEMMs accumulate in
f16 (cuBLAS ``CUBLAS_COMPUTE_16F``): faster where the accumulator's registers or bandwidth limit, and less accurate
(each addition rounds to 11 significant bits: a relative error up to about K x 2^-11 in the worst case). ptxgen's
wgmma and tcgen05 kernels take an f16 accumulator for f16 inputs (``isa.types.LEGAL_ACC``; ``--acc f16``).

Which accumulator a ``ptxgen.gemm`` call uses (``accumulate=``):

- ``"f32"``: f32 (for any input type; integer inputs accumulate in s32 whatever is asked);
- ``"f16"``: f16 for float16 inputs; other input types are refused (ArgumentError): wgmma and tcgen05 accumulate bf16
  and tf32 only in f32, and torch's flag governs only float16 GEMMs;
- ``None``: for float16 torch tensors, torch's flag (read on every call, so a call after it flips takes the other
  kernel: the dispatch keys carry the mode, ``api.dispatch._okey``); f32 for other arrays and other input types.

The kernel is the chooser's pick with an f16 accumulator (half the accumulator registers, so the tile fits) and what the
rules derive only for f32 accumulators taken out (:func:`f16_spec`): the TMA-store epilogue becomes the direct stores,
stream-K and split-K (their partial sums are f32) the whole kernel. A fused epilogue chain (bias, activation, c,
residual) works on f32 accumulators (``derive.store.fusion.check_chain``): those calls keep f32, and
``ptxgen.api.plan`` says so. The grouped doors take no ``accumulate`` (f32).
"""

from __future__ import annotations

import sys

from ...derive.tile.spec import TileSpec, make_spec
from ...isa.types import Epilogue, SpecError
from ...runtime.launch.arrays import ArgumentError, read_array

F32 = "f32"
F16 = "f16"
MODES = (F32, F16)
KEY = "f16acc"  # the dispatch keys' mark of an f16-accumulate call (api.dispatch._okey)
F16_DTYPE = [None]  # torch.float16 once torch is imported: the door's test for "a float16 tensor, maybe torch's flag"
_FLAG = [None]  # torch's flag getter (a bool), set with F16_DTYPE
_F16_WORDS = ("float16", "f16", "half")
WHY = "accumulate f16 (an f16 accumulator, CUBLAS_COMPUTE_16F's mode)"
CHAIN_WHY = ("accumulates in f32: the fused epilogue chain works on f32 accumulators (derive.store.fusion.check_chain), "
             "so accumulate f16 is not applied")


def check(accumulate) -> None:
    if accumulate is not None and accumulate not in MODES:
        raise ArgumentError(f"accumulate {accumulate!r}: one of {', '.join(map(repr, MODES))}, or None (float16 torch "
                            "tensors: torch.backends.cuda.matmul.allow_fp16_accumulation; other arrays: f32)")


def torch_flag(torch) -> bool:
    """torch's ``allow_fp16_accumulation`` (the C getter, about 20 ns, where torch has it; False where torch predates it)."""
    getter = getattr(torch._C, "_get_cublas_allow_fp16_accumulation", None)
    if getter is not None:
        return bool(getter())
    return bool(getattr(torch.backends.cuda.matmul, "allow_fp16_accumulation", False))


def note_torch() -> None:
    if F16_DTYPE[0] is None and "torch" in sys.modules:
        torch = sys.modules["torch"]
        _FLAG[0] = lambda: torch_flag(torch)
        if getattr(torch._C, "_get_cublas_allow_fp16_accumulation", None) is not None:
            _FLAG[0] = torch._C._get_cublas_allow_fp16_accumulation
        F16_DTYPE[0] = torch.float16


def _is_f16(dtype) -> bool:
    return str(dtype).removeprefix("torch.") in _F16_WORDS


def _refuse(dtype) -> None:
    raise ArgumentError(f"accumulate='f16' takes float16 inputs; a is {str(dtype).removeprefix('torch.') or 'untyped'} "
                        "(wgmma and tcgen05 accumulate bf16 and tf32 only in f32; FP8 and integer calls keep their "
                        "accumulators): pass accumulate='f32' or None")


def resolve(accumulate, a, dtype=None) -> str:
    """The accumulator of a call with ``a`` (see the module); ``dtype`` overrides ``a.dtype`` (an ArrayInfo's word)."""
    check(accumulate)
    dtype = getattr(a, "dtype", "") if dtype is None else dtype
    if accumulate == F16 and not str(dtype):  # no dtype attribute (DLPack or __cuda_array_interface__ only)
        dtype = read_array(a, "a").dtype
    if not _is_f16(dtype):
        if accumulate == F16:
            _refuse(dtype)
        return F32
    if accumulate is not None:
        return accumulate
    torch = sys.modules.get("torch")
    return F16 if torch is not None and isinstance(a, torch.Tensor) and torch_flag(torch) else F32


def wants_f16(accumulate, a) -> bool:
    """The door's test: whether this call accumulates in f16 (a float16 torch tensor with accumulate None: torch's flag
    through its getter, read once per call)."""
    if accumulate is None and F16_DTYPE[0] is not None and getattr(a, "dtype", None) is F16_DTYPE[0]:
        return _FLAG[0]()
    note_torch()
    return resolve(accumulate, a) == F16


def plan_mode(accumulate, a, info) -> str:
    """For ``ptxgen.api.plan``: the accumulator as the door picks it for ``a`` read as ``info``; metadata standing for
    a torch tensor (``ptxgen plan``) follows torch's flag where torch is importable (its default, False, elsewhere)."""
    mode = resolve(accumulate, a, info.dtype)
    if accumulate is None and info.dtype == "f16" and info.library == "torch" and mode == F32:
        torch = sys.modules.get("torch")
        if torch is not None and not isinstance(a, torch.Tensor) and torch_flag(torch):
            return F16
    return mode


def f16_spec(spec: TileSpec) -> tuple[TileSpec, str]:
    """(spec with an f16 accumulator, why): what the rules derive only for f32 accumulators taken out (stream-K and
    split-K: the whole kernel; the TMA-store epilogue: the direct stores). Where the rules refuse it even so, ``spec``
    as it is (f32) and the rule."""
    fields = {**spec.to_json(), "acc": F16}
    notes = []
    if spec.stream_k > 1:
        fields["stream_k"] = 1
        notes.append(f"the whole kernel, not stream-K over {spec.stream_k} splits (stream-K's partial tiles are f32 "
                     "accumulators: derive.tile.rules)")
    if spec.split_k > 1:
        fields["split_k"] = 1
        notes.append(f"the whole K, not split-K over {spec.split_k} splits (its workspace holds f32 partial sums)")
    if spec.epilogue is Epilogue.TMA:
        fields["epilogue"] = Epilogue.DIRECT.value
        notes.append("the direct stores, not the TMA store (it packs f32 accumulators)")
    try:
        out = make_spec(**fields)
    except SpecError as e:
        return spec, f"accumulates in f32: accumulate f16 is refused for this kernel ({e})"
    return out, WHY + "".join(f"; {n}" for n in notes)
