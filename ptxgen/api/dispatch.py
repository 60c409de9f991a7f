"""``ptxgen.gemm``: the spec chosen for you, behind a per-process dispatch cache.

The first call with a dispatch key (each array's shape, strides, dtype and device, and ``out_dtype``) checks
everything, selects a spec (``select.choose_for_arrays``, once per key), compiles it (once per spec and
process, cached on disk) and prepares the launch (``launchplan.Launch``). Every later call with that key and
torch tensors reads the data pointers and launches: the hot path.

Arrays the kernels cannot read as they are (rows not 16-byte aligned, neither dimension contiguous,
broadcast views, a transposed view of a type the tensor cores read only K-major, an ``out`` that is not
row-major with aligned rows) are copied once into a packed K-major buffer (torch and CuPy; said once per
reason with ``warnings.warn``). Zero-size dimensions give an empty result without a launch, K = 0 zeros.

A kernel chosen by the swap-ab rule (an M-major D, ``api.launch.swapab``) is launched as ``kernel(b, a, out.T)``; its prepared
launch sits in a second hot table, ``_SWAPPED``, under the key of ``(b, a, out)``, and the hot path probes it with the
operands swapped.
"""

from __future__ import annotations

import threading

from ..derive.tile.spec import TileSpec
from ..isa.types import Batch, DMajor, Major
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from ..runtime.launch.launch import ROW_ALIGN_BYTES
from . import fused
from .arrays import accumulate as acc16
from .arrays import precision as fp32
from .launch import hotkeys, streams
from .arrays.batched import batch_kind, plane
from .arrays.batched import operand_problem as batched_operand_problem
from .arrays.binding import _check_2d, _check_devices, _dtype_words, check_no_alias
from .kernel import CompiledKernel, compile
from .arrays.packing import PACKABLE, major_of, narrow_copy_bytes, operand_problem, out_problem, pack_plan, packed_copy, warn_once
from .launch.hotkeys import info_key, tensor_type, torch_key
from .select import (_INPUT_ARRAY_DTYPES, ACC16, PROMOTE, accumulating_f16, batched_spec_for_arrays, check_operand_pair,
                     choose_for_arrays, narrow_spec_for_arrays, promoting)
from .launch.streams import stream_handle
from .launch.swapab import launch_swapped

_KERNELS: dict[TileSpec, CompiledKernel] = {}
_KERNELS_LOCK = threading.Lock()
_TORCH_ENTRIES = hotkeys.LaunchTable()  # (out_dtype, torch_key) -> Launch: the hot path
_HOT = hotkeys.hot_table(_TORCH_ENTRIES, gemm=True)  # its compiled hot call (None without the compiled launcher)
_BY_KEY: dict = {}  # (out_dtype, info_key) -> CompiledKernel: selection done once per key
_SWAPPED: dict = {}  # (out_dtype, torch_key(b, a, out)) -> swapab.SwappedLaunch: the swap-ab hot path
_TABLE_LIMIT = 4096
_F32 = fp32.F32  # [torch.float32], once torch is imported
_F16 = acc16.F16_DTYPE  # [torch.float16], once torch is imported


def _put(table: dict, key, value) -> None:
    """table[key] = value, the table emptied first once it holds _TABLE_LIMIT entries (a bound, not an LRU)."""
    if len(table) >= _TABLE_LIMIT:
        table.clear()
    table[key] = value


def _okey(out_dtype):
    """The output type's part of the dispatch keys: ``out_dtype``, or (``out_dtype``, "3xtf32") inside a 3xTF32 call
    (select.promoting), whose float32 kernels promote, or (``out_dtype``, "f16acc") inside an f16-accumulate call
    (select.accumulating_f16): never the compiled hot call's key, never a tf32 or f32-accumulate call's."""
    if PROMOTE.get():
        return (out_dtype, fp32.THREE)
    return (out_dtype, acc16.KEY) if ACC16.get() else out_dtype


def _arrays_key(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None) -> tuple:
    """The arrays' part of a selection key: shapes, strides, dtypes, devices (asked of the driver for arrays that do not
    say theirs: the device's arch decides the spec)."""
    key = info_key(ai, bi, oi)
    unknown = streams.unknown_device((ai, bi, oi))
    return key if unknown is None else (key, unknown)


def kernel_for(spec: TileSpec) -> CompiledKernel:
    """The compiled kernel for ``spec``, compiled once per process (and cached on disk)."""
    with _KERNELS_LOCK:
        kernel = _KERNELS.get(spec)
        if kernel is None:
            kernel = _KERNELS[spec] = compile(spec)
        return kernel


def gemm(a, b, out=None, *, out_dtype: str | None = None, stream=None, bias=None, activation=None, c=None, alpha: float = 1.0,
         beta: float = 0.0, residual=None, precision: str | None = None, aux=None, dact=None, accumulate: str | None = None):
    """``out = a @ b.T`` with a spec chosen for the arrays' type, shape and majorness on this GPU.

    a is M x K and b is N x K (torch tensors, CuPy arrays, anything with DLPack or __cuda_array_interface__).
    K-major f16/bf16/e4m3 operands use the tuned table (``ptxgen tune``, as ``ptxgen bench``); MN-major
    operands (transposed views) and other types (tf32 from float32, e5m2, s8, u8) use a default 128 x 256
    (or smaller) persistent tile with the operands' majorness. On Hopper only f16/bf16 can be MN-major; other
    torch/CuPy layouts are packed (see the module's docstring). ``out_dtype`` (f32, f16, bf16; s32 for
    integers) defaults to ``out``'s dtype, else the input type (f32 for float32 inputs, bf16 for FP8).
    ``a`` may be B x M x K with ``b`` B x N x K or shared (N x K), ``out`` B x M x N: one launch of a batched kernel
    (3-D tensor maps, the batch the outer dimension; api.arrays.batched, docs/batched.md). Returns without synchronizing; the first call with new shapes compiles and prepares.
    ``bias`` (N, f32/bf16/f16), ``activation`` (relu, gelu_tanh, gelu_erf, silu), ``c`` with ``alpha``/``beta`` and
    ``residual`` (M x N) fuse ``alpha acc + beta c + bias``, the activation and ``+ residual`` into the epilogue
    (``ptxgen.api.fused``; docs/epilogue-chain.md). ``aux`` (M x N, the output's type) with an ``activation``: the
    pre-activation ``a @ b.T + bias`` is written to it beside ``out`` (cuBLASLt's GELU_AUX); with ``dact`` (an
    activation's name) instead: ``out = (a @ b.T) x dact'(aux)``, the backward step (cuBLASLt's DGELU).
    ``precision`` (float32 inputs): "tf32", "3xtf32" (float32 accuracy from three tf32 products in one GEMM over 3 K), or
    None: torch's float32 matmul precision for torch tensors ("highest", torch's default: 3xtf32), tf32 for other arrays
    (``ptxgen.api.arrays.precision``).
    ``accumulate`` (float16 inputs): "f32", "f16" (an f16 accumulator: torch's ``allow_fp16_accumulation``), or None:
    torch's ``torch.backends.cuda.matmul.allow_fp16_accumulation`` for torch tensors, f32 for other arrays; "f16" with
    other input types is refused; calls with a fused epilogue keep f32 (``ptxgen.api.arrays.accumulate``).
    """
    if accumulate is not None:  # refused before anything is launched ("f16" with other inputs than float16)
        acc16.resolve(accumulate, a)
    if precision is not None or _F32[0] is None or getattr(a, "dtype", None) is _F32[0]:
        split = fp32.operands(a, b, out, precision, stream)  # from here on float32 operands are read as tf32
        if split[0] is not a:  # 3xTF32: the split operands, on the promoting kernel (select.promoting)
            with promoting():
                return gemm(*split, out, out_dtype=out_dtype, stream=stream, bias=bias, activation=activation, c=c,
                            alpha=alpha, beta=beta, residual=residual, precision=fp32.TF32, aux=aux, dact=dact)
    if (bias is not None or activation is not None or c is not None or residual is not None or alpha != 1.0
            or aux is not None or dact is not None):  # f32 accumulators whatever accumulate says (accumulate.CHAIN_WHY)
        return fused.gemm(a, b, out, bias=bias, activation=activation, c=c, alpha=alpha, beta=beta, residual=residual,
                          out_dtype=out_dtype, stream=stream, precision=fp32.TF32, aux=aux, dact=dact)
    if accumulate is not None or _F16[0] is None or getattr(a, "dtype", None) is _F16[0]:
        if acc16.wants_f16(accumulate, a) and not ACC16.get():  # the f16 kernels chosen inside accumulate in f16
            with accumulating_f16():
                return gemm(a, b, out, out_dtype=out_dtype, stream=stream, accumulate=accumulate)
    okey = _okey(out_dtype)
    if stream is None and _HOT is not None and okey is out_dtype:
        r = _HOT.call(out_dtype, a, b, out)
        if r is not None:
            return r
        if _SWAPPED:
            r = hotkeys.hot_gemm(_SWAPPED, out_dtype, b, a, out)
            if r is not None:
                return r
    T = tensor_type()
    if T is not None and isinstance(a, T) and isinstance(b, T) and (stream is None or out is not None):
        if out is None or isinstance(out, T):
            e = _TORCH_ENTRIES.get((okey, torch_key(a, b, out)))
            if e is not None:
                r = e.call_torch(a, b, out, None if stream is None else stream_handle(stream))
                if r is not None:
                    return r
            e = _SWAPPED.get((okey, torch_key(b, a, out))) if _SWAPPED else None
            if e is not None:
                r = e.call_torch(b, a, out, None if stream is None else stream_handle(stream))
                if r is not None:
                    return r
    return _gemm_slow(a, b, out, out_dtype, stream)


def _gemm_slow(a, b, out, out_dtype, stream):
    handle = stream_handle(stream, a)
    ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
    oi = None if out is None else read_array(out, "out", handle)
    if ai.ndim == 3 or bi.ndim == 3:
        return _gemm_batched(a, b, out, ai, bi, oi, out_dtype, stream, handle)
    packed = pack_plan(ai, bi, oi)
    if packed and "out" not in packed:
        narrow = narrow_copy_bytes(ai, bi, packed)
        if narrow is not None:
            result = _gemm_narrow(a, b, out, ai, bi, oi, narrow, out_dtype, handle, stream)
            if result is not None:
                return result
    if packed:
        _precheck(ai, bi, oi, out_dtype)  # what is wrong anyway is said before any copy is launched
        return _gemm_packed(a, b, out, ai, bi, oi, packed, out_dtype, stream)
    key = (_okey(out_dtype), _arrays_key(ai, bi, oi))
    kernel = _BY_KEY.get(key)
    if kernel is None:
        try:
            spec, _, _ = choose_for_arrays(ai, bi, oi, out_dtype)
        except ArgumentError:
            mn = [i for i in (ai, bi) if i.library in PACKABLE and i.ndim == 2 and major_of(i) is Major.MN]
            if not mn:
                raise
            _precheck(ai, bi, oi, out_dtype)  # then the refusal was the majorness (default_spec)
            # a transposed view of a type the tensor cores read only K-major: pack it K-major
            why = "the tensor cores read this type only K-major"
            return _gemm_packed(a, b, out, ai, bi, oi, {i.name: why for i in mn}, out_dtype, stream)
        kernel = kernel_for(spec)
        _put(_BY_KEY, key, kernel)
    if kernel.spec.d_major is DMajor.M:  # only the swap-ab rule picks an M-major D: kernel(b, a, out.T)
        _precheck(ai, bi, oi, out_dtype)  # out's shape and type said in the caller's terms, not the swapped kernel's
        result, entry = launch_swapped(kernel, a, b, out, ai, bi, oi, handle, stream)
        if entry is not None:
            _put(_SWAPPED, (_okey(out_dtype), torch_key(b, a, out)), entry)
        return result
    return _launch_and_remember(kernel, a, b, out, ai, bi, oi, handle, stream, out_dtype)


# ------------------------------------------------------------------------------------------------
# any tensor: packed copies of what the kernels cannot read as it is
# ------------------------------------------------------------------------------------------------
def _gemm_narrow(a, b, out, ai, bi, oi, narrow: tuple[int, bool], out_dtype, handle, stream):
    """Rows (or data) aligned to 4 or 8 bytes only: a cp.async kernel copying that many bytes at a time, no packed
    copy. None where no such kernel fits (the caller packs)."""
    copy_bytes, by_pointer = narrow
    key = (_okey(out_dtype), _arrays_key(ai, bi, oi), copy_bytes)
    kernel = _BY_KEY.get(key)
    if kernel is None:
        _precheck(ai, bi, oi, out_dtype)
        try:
            spec, _ = narrow_spec_for_arrays(ai, bi, oi, out_dtype, copy_bytes)
        except (ArgumentError, DTypeError):
            return None
        kernel = kernel_for(spec)
        _put(_BY_KEY, key, kernel)
    if by_pointer:  # only a pointer decided the kernel: the key is that of aligned calls, which keep the TMA kernel's entry
        return kernel._launch(a, b, out, ai, bi, oi, handle, stream)
    # the rows' pitch (in the key) decided the kernel: later calls take the hot path
    return _launch_and_remember(kernel, a, b, out, ai, bi, oi, handle, stream, out_dtype)


def _precheck(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None) -> None:
    """The checks that do not depend on layout (shapes, dtypes, out's shape and dtype, devices, aliasing),
    before a packed copy is launched: an argument that is wrong anyway is refused with nothing launched."""
    check_operand_pair(ai, bi)
    (m, k), n = ai.shape, bi.shape[0]
    want = out_dtype or (oi.dtype if oi is not None else None)
    if want is not None:
        _check_out_dtype(ai.dtype, want)
    if oi is not None:
        _check_2d(oi, "out: M x N, row-major")
        if oi.shape != (m, n):
            raise ArgumentError(f"out has shape {oi.shape}, but a ({m} x {k}) @ b.T ({k} x {n}) is {(m, n)}")
        check_no_alias(ai, bi, oi)
    _check_devices([i for i in (ai, bi, oi) if i is not None])


def _check_out_dtype(in_dtype: str, out: str) -> None:
    spec_in = _INPUT_ARRAY_DTYPES[in_dtype]
    legal = ("s32",) if spec_in in ("s8", "u8") else ("f32", "f16", "bf16")
    if out not in legal:
        raise DTypeError(f"{spec_in} inputs give {'/'.join(legal)} outputs, not {_dtype_words(out)}")


def _gemm_packed(a, b, out, ai, bi, oi, plan: dict, out_dtype, stream):
    if "a" in plan:
        warn_once("a", plan["a"], "computing with a packed K-major copy")
        a = packed_copy(a, ai)
    if "b" in plan:
        warn_once("b", plan["b"], "computing with a packed K-major copy")
        b = packed_copy(b, bi)
    if "out" not in plan:
        return gemm(a, b, out, out_dtype=out_dtype, stream=stream, precision="tf32")
    warn_once("out", plan["out"], "computing into a packed output and copying it into out")
    check_no_alias(ai, bi, oi)
    result = gemm(a, b, None, out_dtype=out_dtype or oi.dtype, stream=stream, precision="tf32")
    if oi.library == "torch":
        out.copy_(result)
    else:
        out[...] = result
    return out


def _gemm_batched(a, b, out, ai, bi, oi, out_dtype, stream, handle):
    """a B x M x K with b B x N x K or a shared N x K: one launch of a batched kernel (3-D tensor maps, the batch the
    outer index of the tile walk; api.arrays.batched). Operands it cannot read as they are (a plane the 2-D path would pack,
    or batches that overlap or interleave with the rows) are packed into contiguous copies first (torch/CuPy)."""
    kind = batch_kind(ai, bi)
    if kind is Batch.NONE:  # a 2-D a with a 3-D b
        raise ArgumentError(f"a is {ai.shape} and b is {bi.shape}: batched ptxgen.gemm takes a B x M x K a with a B x N x K "
                            "(or a shared N x K) b")
    batch = ai.shape[0]
    if oi is not None and (oi.ndim != 3 or oi.shape[0] != batch):
        raise ArgumentError(f"out has shape {oi.shape}, but a {ai.shape} @ b.T is B x M x N = "
                            f"{(batch, ai.shape[1], bi.shape[-2])}")
    packed = _batched_pack_plan(ai, bi, oi, kind)
    if packed:
        return _gemm_batched_packed(a, b, out, ai, bi, oi, packed, out_dtype, stream)
    key = (_okey(out_dtype), _arrays_key(ai, bi, oi))
    kernel = _BY_KEY.get(key)
    if kernel is None:
        try:
            spec, _ = batched_spec_for_arrays(ai, bi, oi, out_dtype)
        except ArgumentError:  # a transposed view of a type the tensor cores read only K-major: pack it K-major
            mn = {i.name: "the tensor cores read this type only K-major" for i in (ai, bi)
                  if i.library in PACKABLE and major_of(plane(i) if i.ndim == 3 else i) is Major.MN}
            if not mn:
                raise
            return _gemm_batched_packed(a, b, out, ai, bi, oi, mn, out_dtype, stream)
        kernel = kernel_for(spec)
        _put(_BY_KEY, key, kernel)
    return _launch_and_remember(kernel, a, b, out, ai, bi, oi, handle, stream, out_dtype)


def _batched_pack_plan(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, kind: Batch) -> dict:
    """{argument name: why} for the torch/CuPy operands of a batched call that need a contiguous copy."""
    plan = {}
    if ai.dtype != bi.dtype or ai.ndim != 3 or ai.shape[-1] != bi.shape[-1]:
        return plan  # the checks that follow say what is wrong
    for info, batched in ((ai, True), (bi, kind is Batch.AB)):
        if info.library not in PACKABLE:
            continue
        why = operand_problem(plane(info) if info.ndim == 3 else info) or batched_operand_problem(info, batched)
        if why:
            plan[info.name] = why
    if oi is not None and oi.library in PACKABLE and oi.ndim == 3:
        why = out_problem(plane(oi), ai.shape[1], bi.shape[-2])
        if why is None and oi.shape[0] > 1 and 0 not in oi.shape:
            s0 = oi.strides[0]
            if s0 < (oi.shape[1] - 1) * oi.strides[1] + oi.shape[2] or s0 * oi.itemsize % ROW_ALIGN_BYTES:
                why = f"its batches start {s0 * oi.itemsize} B apart (overlapping, or not a multiple of 16 B)"
        if why:
            plan["out"] = why
    return plan


def _gemm_batched_packed(a, b, out, ai, bi, oi, plan: dict, out_dtype, stream):
    if "a" in plan:  # K-major, rows padded to 16 bytes, batches one after another (packing.packed_copy)
        warn_once("a", plan["a"], "computing with a packed copy")
        a = packed_copy(a, ai)
    if "b" in plan:
        warn_once("b", plan["b"], "computing with a packed copy")
        b = packed_copy(b, bi)
    if "out" not in plan:
        return gemm(a, b, out, out_dtype=out_dtype, stream=stream, precision="tf32")
    warn_once("out", plan["out"], "computing into a contiguous output and copying it into out")
    result = gemm(a, b, None, out_dtype=out_dtype or oi.dtype, stream=stream, precision="tf32")
    if oi.library == "torch":
        out.copy_(result)
    else:
        out[...] = result
    return out


def _launch_and_remember(kernel, a, b, out, ai, bi, oi, handle, stream, out_dtype):
    """Launch through ``kernel``'s slow path; for torch tensors, remember its prepared launch in the hot table
    (``hot_gemm``'s), keyed by the output type and the tensors' dispatch key."""
    result = kernel._launch(a, b, out, ai, bi, oi, handle, stream)
    if ai.via == "torch" and bi.via == "torch" and (oi is None or oi.via == "torch"):
        tkey = torch_key(a, b, out)
        entry = kernel._torch_entries.get(tkey)
        if entry is not None:
            _put(_TORCH_ENTRIES, (_okey(out_dtype), tkey), entry)
    return result
