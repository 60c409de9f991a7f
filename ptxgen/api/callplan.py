"""``ptxgen.api.plan`` (this module, ``ptxgen.api.callplan``): what a call will do, said without a GPU (the answer to "why is my call slow?").

>>> p = ptxgen.api.plan("gemm", a, b, device="h100")          # doctest: +SKIP
>>> p.path, p.kernel, p.why                                     # doctest: +SKIP
('hot', 'ptxgen_sm90a_bf16_...', 'tuned: ...')

``plan(op, *arrays, device=None, **kwargs)`` takes exactly the arguments of the op's own function (``ptxgen.gemm``,
``ptxgen.api.fused.gemm``, ``ptxgen.grouped_gemm``, ``ptxgen.scaled_grouped_gemm``, ``ptxgen.blockscaled_grouped_gemm``,
``ptxgen.api.fp8blocks.gemm``) and walks the door's own decisions, calling the functions the door calls (``select``'s
choosers, ``dispatch``'s packing rules, ``fused``'s chain checks, ``grouped.grouped_decision``, ``fp8blocks.chosen_spec``,
and the bindings that check every argument), with the arch and SM count of ``device``. Arrays are read through
``runtime.launch.arrays.read_array``, which reads only metadata (a torch tensor's attributes, ``__cuda_array_interface__``, the
DLPack capsule's shape and strides): no data is touched, nothing is compiled or launched. A torch tensor on the meta
device stands for a CUDA tensor of the same shape, strides and storage offset (each in an allocation of its own).

The result, a frozen :class:`CallPlan`: ``path`` is ``hot`` (a kernel reads the arrays as they are; repeat calls with
tensors of the same kind take the prepared launch), ``narrow`` (rows aligned to 8 or 4 bytes only: the cp.async kernel
copying that many bytes at a time), ``packed`` (the arrays named in ``packed`` are copied first, or the output computed
fresh and copied back: each reason said once with ``warnings.warn`` by the call) or ``refused`` (``why`` is the rule, the
exception the call would raise; ``error`` its class). ``device``: "h100" or "h200" (both sm_90a with 132 SMs), or None
for the GPU present (:class:`NoGPU` without one: a plan for no named device is not guessed).
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, replace

from ..derive.tile.spec import TileSpec
from ..isa.types import Batch, DMajor, SpecError
from ..runtime.launch.arrays import DL_CUDA, ArgumentError, ArrayInfo, DTypeError, read_array
from ..runtime.launch.gpu import NoGPU
from ..runtime.launch.launch import ProblemError
from .arrays.precision import split_infos

__all__ = ["CallPlan", "DEVICES", "OPS", "Path", "plan"]

# the chooser's devices: arch and SM count (both Hopper parts ptxgen runs on expose 132 SMs)
DEVICES = {"h100": ("sm_90a", 132), "h200": ("sm_90a", 132)}
# the name each device reports (its calibration and tuning table are looked up by it: runtime.choose.calibration)
DEVICE_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}
_REFUSALS = (ArgumentError, DTypeError, ProblemError, SpecError)


class Path(str, enum.Enum):
    HOT = "hot"
    NARROW = "narrow"
    PACKED = "packed"
    REFUSED = "refused"


@dataclass(frozen=True)
class Target:
    name: str
    arch: str
    sm_count: int


@dataclass(frozen=True)
class CallPlan:
    """What one call does: the path, the kernel (None when refused), why (the rule), the arrays packed first."""

    op: str
    path: Path
    why: str
    kernel: str | None = None
    spec: TileSpec | None = None
    packed: tuple[tuple[str, str], ...] = ()  # (argument, why) copied (a, b) or computed fresh and copied back (out)
    swapped: bool = False  # the swap-ab rule: launched as kernel(b, a, out.T)
    error: str | None = None  # a refusal's exception class (ArgumentError, DTypeError, ProblemError, SpecError)
    device: str = ""
    arch: str = ""
    sm_count: int = 0
    precision: str | None = None  # float32 inputs: "tf32", or "3xtf32" (api.arrays.precision: one GEMM over the split operands)

    def __str__(self) -> str:
        lines = [f"{self.op} on {self.device} ({self.arch}, {self.sm_count} SMs): {self.path.value}"]
        if self.kernel:
            lines.append(f"  kernel: {self.kernel}" + (" (swap-ab: kernel(b, a, out.T))" if self.swapped else ""))
        if self.precision:
            lines.append(f"  float32 precision: {self.precision}")
        lines += [f"  packed {name}: {why}" for name, why in self.packed]
        lines.append(f"  why: {self.why}" if self.error is None else f"  refused ({self.error}): {self.why}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"op": self.op, "path": self.path.value, "kernel": self.kernel, "why": self.why,
                "packed": [{"argument": n, "why": w} for n, w in self.packed], "swapped": self.swapped, "error": self.error,
                "device": self.device, "arch": self.arch, "sm_count": self.sm_count, "precision": self.precision,
                "spec": None if self.spec is None else self.spec.to_json()}


def _functions() -> dict:
    import ptxgen.grouped as grouped

    from . import dispatch, fp8blocks, fused

    from ..attention.launch import attention

    return {"gemm": dispatch.gemm, "fused": fused.gemm, "grouped_gemm": grouped.grouped_gemm,
            "scaled_grouped_gemm": grouped.scaled_grouped_gemm, "blockscaled_grouped_gemm": grouped.blockscaled_grouped_gemm,
            "fp8blocks.gemm": fp8blocks.gemm, "attention": attention}


OPS = ("gemm", "fused", "grouped_gemm", "scaled_grouped_gemm", "blockscaled_grouped_gemm", "fp8blocks.gemm", "attention")
_ALIASES = {"batched": "gemm", "grouped": "grouped_gemm", "scaled_grouped": "scaled_grouped_gemm",
            "blockscaled_grouped": "blockscaled_grouped_gemm", "bfp8": "fp8blocks.gemm", "fp8blocks": "fp8blocks.gemm"}


def target(device: str | None) -> Target:
    """The device a plan is made for: "h100", "h200", or None for the GPU present (NoGPU without one)."""
    if device is None:
        from .launch import streams

        try:
            dev = streams.require_gpu()
        except NoGPU as e:
            raise NoGPU(f"{e}; ptxgen.api.plan(..., device='h100' or 'h200') plans without a GPU") from None
        return Target(dev.name, dev.arch.value, dev.sm_count)
    key = str(device).lower()
    if key not in DEVICES:
        raise ArgumentError(f"device {device!r}: one of {', '.join(DEVICES)}, or None for the GPU present")
    return Target(key, *DEVICES[key])


def plan(op: str, *arrays, device: str | None = None, **kwargs) -> CallPlan:
    """What ``op(*arrays, **kwargs)`` would do on ``device`` (see the module). Bad usage (an unknown op, arguments the op
    does not take) raises TypeError/ArgumentError; a call the op would refuse gives ``path`` refused with the rule."""
    name = _ALIASES.get(op, op)
    fns = _functions()
    if name not in fns:
        raise ArgumentError(f"op {op!r}: one of {', '.join(OPS)} (or {', '.join(_ALIASES)})")
    t = target(device)
    args = inspect.signature(fns[name]).bind(*arrays, **kwargs).arguments  # TypeError: what the op would say
    args.pop("stream", None)
    from .select import PLAN_DEVICE

    token = PLAN_DEVICE.set(_stand_in(t))  # the chooser takes this device's calibration, as the door does on it
    try:
        return _PLANNERS[name](args, t)
    except _REFUSALS as e:
        return _made(name, t, Path.REFUSED, str(e), error=type(e).__name__)
    finally:
        PLAN_DEVICE.reset(token)


def _stand_in(t: Target):
    """What the chooser reads of the device a plan is made for (name and SM count; an ordinal of its own, below 0)."""
    from types import SimpleNamespace

    names = list(DEVICE_NAMES)
    index = -1 - names.index(t.name) if t.name in names else -1 - len(names)
    return SimpleNamespace(name=DEVICE_NAMES.get(t.name, t.name), sm_count=t.sm_count, index=index)


def _made(op: str, t: Target, path: Path, why: str, spec: TileSpec | None = None, **kw) -> CallPlan:
    return CallPlan(op=op, path=path, why=why, kernel=None if spec is None else spec.kernel_name, spec=spec, device=t.name,
                    arch=t.arch, sm_count=t.sm_count, **kw)


_META_BASE = 1 << 40  # each meta tensor's stand-in allocation: slot 1 + _NAMES.index(argument) of 2^40 B


def _read(args: dict, *names: str) -> list[ArrayInfo | None]:
    return [None if args.get(n) is None else _read_one(args[n], n) for n in names]


def _read_one(x, name: str) -> ArrayInfo:
    """read_array's metadata; a torch tensor on the meta device stands for a CUDA tensor of its shape, strides and
    storage offset in an allocation of its own (its data_ptr is the storage offset in bytes)."""
    info = read_array(x, name)
    if info.via == "torch" and getattr(getattr(x, "device", None), "type", None) == "meta":
        info = replace(info, device=(DL_CUDA, 0), ptr=info.ptr + (1 + _NAMES.index(name)) * _META_BASE)
    return info


_NAMES = ("a", "b", "out", "offs", "scale_a", "scale_b", "bias", "c", "residual", "scale", "amax")


# ------------------------------------------------------------------------------------------------
# ptxgen.gemm: 2-D (api.dispatch), batched (3-D), and the fused keywords (api.fused)
# ------------------------------------------------------------------------------------------------
def _plan_gemm(args: dict, t: Target) -> CallPlan:
    fused_kw = {k: args.get(k) for k in ("bias", "activation", "c", "residual")}
    if any(v is not None for v in fused_kw.values()) or args.get("alpha", 1.0) != 1.0:
        return _plan_fused({**args, "bias_axis": "col"}, t, op="gemm")
    ai, bi, oi = _read(args, "a", "b", "out")
    prec, ai2, bi2 = split_infos(ai, bi, oi, args["a"], args.get("precision"))
    return _precision(gemm_infos(ai2, bi2, oi, args.get("out_dtype"), t), prec, ai, ai2)


def _precision(p: CallPlan, prec: str | None, ai: ArrayInfo, split: ArrayInfo) -> CallPlan:
    """The plan of a call on float32 inputs: its precision, and for 3xTF32 what the door does first."""
    if prec is None or p.path is Path.REFUSED:
        return p
    if split is ai:
        return replace(p, precision=prec)
    why = (f"3xTF32: a and b split into tf32-exact big and small parts, one GEMM over K = {split.shape[-1]} "
           f"(3 x {ai.shape[-1]}, padded to a multiple of 4; api.arrays.precision); ")
    return replace(p, precision=prec, why=why + p.why)


def gemm_infos(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, t: Target,
               packed: tuple = ()) -> CallPlan:
    """ptxgen.gemm's slow path (api.dispatch._gemm_slow) for arrays already read, decided for ``t``."""
    from . import dispatch
    from .arrays import packing
    from .arrays.batched import bind_any
    from .select import choose_for_arrays, narrow_spec_for_arrays
    from .launch.swapab import transposed

    if ai.ndim == 3 or bi.ndim == 3:
        return _batched(ai, bi, oi, out_dtype, t, packed)
    packs = packing.pack_plan(ai, bi, oi)
    if packs and "out" not in packs:
        narrow = packing.narrow_copy_bytes(ai, bi, packs)
        if narrow is not None:
            dispatch._precheck(ai, bi, oi, out_dtype)
            try:
                spec, why = narrow_spec_for_arrays(ai, bi, oi, out_dtype, narrow[0], arch=t.arch)
            except (ArgumentError, DTypeError):
                pass  # no narrow kernel: the call packs
            else:
                bind_any(spec, ai, bi, oi, empty_k_ok=_zero_ok(ai, oi))
                if narrow[1]:
                    why += " (a data pointer lowered the copies: chosen per call, no prepared launch for this key)"
                return _made("gemm", t, Path.NARROW, why, spec, packed=packed)
    if packs:
        dispatch._precheck(ai, bi, oi, out_dtype)
        return _packed_gemm(ai, bi, oi, packs, out_dtype, t)
    try:
        spec, why, _ = choose_for_arrays(ai, bi, oi, out_dtype, arch=t.arch)
    except ArgumentError:
        mn = [i for i in (ai, bi) if i.library in packing.PACKABLE and i.ndim == 2 and packing.major_of(i) is not None
              and packing.major_of(i).value == "mn"]
        if not mn:
            raise
        dispatch._precheck(ai, bi, oi, out_dtype)
        return _packed_gemm(ai, bi, oi, {i.name: "the tensor cores read this type only K-major" for i in mn}, out_dtype, t)
    path = Path.PACKED if packed else Path.HOT
    if spec.d_major is DMajor.M:  # the swap-ab rule: kernel(b, a, out.T)
        dispatch._precheck(ai, bi, oi, out_dtype)
        bind_any(spec, bi, ai, None if oi is None else transposed(oi), empty_k_ok=_zero_ok(ai, oi))
        return _made("gemm", t, path, why, spec, packed=packed, swapped=True)
    bind_any(spec, ai, bi, oi, empty_k_ok=_zero_ok(ai, oi))
    return _made("gemm", t, path, why, spec, packed=packed)


def _zero_ok(ai: ArrayInfo, oi: ArrayInfo | None) -> bool:
    """K = 0 gives zeros where ptxgen can fill the output (kernel._prepare's rule)."""
    return (oi.library if oi is not None else ai.library) in ("torch", "cupy")


def _packed_gemm(ai, bi, oi, packs: dict, out_dtype, t: Target) -> CallPlan:
    """dispatch._gemm_packed: the packed K-major copies (rows padded to 16 B), then the call on them."""
    from .arrays.groupedpack import packed_info

    a2 = packed_info(ai) if "a" in packs else ai
    b2 = packed_info(bi) if "b" in packs else bi
    o2, dt = oi, out_dtype
    if "out" in packs:
        o2, dt = None, out_dtype or oi.dtype
    inner = gemm_infos(a2, b2, o2, dt, t, packed=tuple(packs.items()))
    return replace(inner, path=Path.PACKED) if inner.path is not Path.REFUSED else inner


def _batched(ai, bi, oi, out_dtype, t: Target, packed: tuple) -> CallPlan:
    """dispatch._gemm_batched: one launch of a batched kernel, operands it cannot read copied contiguous first."""
    from . import dispatch
    from .arrays.batched import batch_kind, bind_batched
    from .select import batched_spec_for_arrays

    kind = batch_kind(ai, bi)
    if kind is Batch.NONE:
        raise ArgumentError(f"a is {ai.shape} and b is {bi.shape}: batched ptxgen.gemm takes a B x M x K a with a B x N x K "
                            "(or a shared N x K) b")
    if oi is not None and (oi.ndim != 3 or oi.shape[0] != ai.shape[0]):
        raise ArgumentError(f"out has shape {oi.shape}, but a {ai.shape} @ b.T is B x M x N = "
                            f"{(ai.shape[0], ai.shape[1], bi.shape[-2])}")
    packs = dispatch._batched_pack_plan(ai, bi, oi, kind)
    if packs:
        def contiguous(info):
            return replace(info, strides=_dense(info.shape), ptr=(info.ptr | 0xFF) + 1)
        a2, b2 = (contiguous(i) if i.name in packs else i for i in (ai, bi))
        o2, dt = (None, out_dtype or oi.dtype) if "out" in packs else (oi, out_dtype)
        inner = _batched(a2, b2, o2, dt, t, tuple(packs.items()))
        return replace(inner, path=Path.PACKED) if inner.path is not Path.REFUSED else inner
    spec, why = batched_spec_for_arrays(ai, bi, oi, out_dtype, arch=t.arch)
    bind_batched(spec, ai, bi, oi, empty_k_ok=_zero_ok(ai, oi))
    return _made("gemm", t, Path.PACKED if packed else Path.HOT, why, spec, packed=packed)


def _dense(shape) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(1, s)
    return tuple(reversed(out))


# ------------------------------------------------------------------------------------------------
# the fused epilogue (api.fused.gemm)
# ------------------------------------------------------------------------------------------------
def _plan_fused(args: dict, t: Target, op: str = "fused") -> CallPlan:
    ai, bi, oi = _read(args, "a", "b", "out")
    prec, ai2, bi2 = split_infos(ai, bi, oi, args["a"], args.get("precision"))
    return _precision(_plan_fused_infos(ai2, bi2, oi, args, t, op), prec, ai, ai2)


def _plan_fused_infos(ai, bi, oi, args: dict, t: Target, op: str) -> CallPlan:
    infos = dict(zip(("bias", "c", "residual", "scale", "amax"), _read(args, "bias", "c", "residual", "scale", "amax")))
    out_dtype = args.get("out_dtype")
    fp8 = (out_dtype or (oi.dtype if oi is not None else None)) == "e4m3" or infos["scale"] is not None
    if fp8 and infos["scale"] is None:
        raise ArgumentError("FP8 output (e4m3) needs scale= (f32: one element, or one per row)")
    if ai.ndim == 3:  # torch.baddbmm's form: fused.gemm launches once per batch (fusedany.per_batch)
        if fp8:
            raise ArgumentError("FP8 output (e4m3) with a B x M x K a: pass 2-D a (the per-row scale and amax are one batch's)")
        one = [_first_batch(x) for x in (ai, bi, oi, infos["c"], infos["residual"])]
        inner = _fused_infos(one[0], one[1], one[2], {**infos, "c": one[3], "residual": one[4]}, args, t, op, False)
        note = f"one fused launch per batch ({ai.shape[0]} launches: the batched kernels are derived without the chain); "
        return replace(inner, why=note + inner.why)
    return _fused_infos(ai, bi, oi, infos, args, t, op, fp8)


def _first_batch(info: ArrayInfo | None) -> ArrayInfo | None:
    """A 3-D array's first batch as fused.gemm's per-batch call reads it (2-D arrays are shared by every batch)."""
    if info is None or info.ndim != 3:
        return info
    return replace(info, shape=info.shape[1:], strides=info.strides[1:])


def _fused_infos(ai, bi, oi, infos: dict, args: dict, t: Target, op: str, fp8: bool) -> CallPlan:
    """fused.gemm's slow path for arrays already read: the epilogue's packed copies of c / residual / bias, then the
    operands' (narrow cp.async kernel, or packed copies), then the chain's spec and its checks."""
    from . import fused
    from .arrays import fusedany, packing
    from .arrays.binding import bind
    from .arrays.groupedpack import packed_info
    from .select import _gemm_spec

    m, n = ai.shape[0], bi.shape[0]
    out_dtype, spec = args.get("out_dtype"), args.get("spec")
    alpha, beta = args.get("alpha", 1.0), args.get("beta", 0.0)
    packed = []
    for name in ("c", "residual", "bias"):
        info = infos[name]
        if info is None or (name == "c" and beta == 0):
            continue
        why = fusedany.vector_problem(info) if name == "bias" else fusedany.matrix_problem(info, m, n)
        if why:
            packed.append((name, why))
            ld = n + n % 2
            infos[name] = replace(info, strides=(1,) if info.ndim == 1 else (ld, 1), ptr=(info.ptr | 0xFF) + 1)
    path, why_path = Path.HOT, ""
    if spec is None and ai.ndim == 2 and bi.ndim == 2:
        packs = packing.pack_plan(ai, bi, None if fp8 else oi)
        narrow = fusedany.narrow_spec(ai, bi, None if fp8 else oi, "bf16" if fp8 else out_dtype, packs, t.arch) if packs else None
        if narrow is not None:
            spec, path = narrow[0], Path.NARROW
            why_path = "operand rows start only 4 or 8 bytes aligned: the cp.async kernel with narrower copies; "
        elif packs:
            packed += list(packs.items())
            ai, bi = (packed_info(i) if i.name in packs else i for i in (ai, bi))
            oi = None if "out" in packs else oi
    chain = fused._chain(infos["bias"], args.get("bias_axis", "col"), args.get("activation"),
                         infos["c"] is not None and beta != 0, infos["residual"] is not None, infos["scale"],
                         args.get("scale_mode"), m, alpha, args.get("c_tma", False))
    if packed and path is Path.HOT:
        path = Path.PACKED
    if chain is None:
        spec = spec or _gemm_spec(ai, bi, oi, out_dtype, t.arch)[0]
        bind(spec, ai, bi, oi)
        return _made(op, t, path, why_path + "nothing to fuse: the plain kernel (ptxgen.api.fused without the dispatch cache)",
                     spec, packed=tuple(packed))
    why = why_path + ("the spec as given" if args.get("spec") is not None else "")
    if spec is None:
        try:
            spec, why = _gemm_spec(ai, bi, None if fp8 else oi, "bf16" if fp8 else out_dtype, t.arch)
        except ArgumentError:
            mn = [i for i in (ai, bi) if i.library in packing.PACKABLE and i.ndim == 2 and packing.major_of(i) is not None
                  and packing.major_of(i).value == "mn"]
            if not mn:
                raise
            packed += [(i.name, "the tensor cores read this type only K-major") for i in mn]
            ai, bi = (packed_info(i) if i in mn else i for i in (ai, bi))
            spec, why = _gemm_spec(ai, bi, None if fp8 else oi, "bf16" if fp8 else out_dtype, t.arch)
            path = Path.PACKED
    spec = fused.fused_spec(spec, chain, "e4m3" if fp8 else (out_dtype or spec.out_dtype.value),
                            args.get("fp8_tma_store", False))
    bind(spec, ai, bi, None if fp8 and oi is None else oi)
    aux = chain.aux_dtype(spec.out_dtype)
    for name in ("c", "residual"):  # another float type: a copy in the output's type (fusedany.converted)
        info = infos[name]
        why = None if info is None or (name == "c" and not chain.c) else fusedany.type_problem(info, aux.value)
        if why:
            packed.append((name, why))
            infos[name] = replace(info, dtype=aux.value, itemsize=aux.bytes)
            path = Path.PACKED if path is Path.HOT else path
    if chain.c:
        ldc = fused._matrix(infos["c"], "c", m, n, aux)
        if chain.c_tma and (infos["c"].ptr % 16 or ldc * aux.bytes % 16):
            raise ArgumentError(f"c through TMA: its base and row pitch ({ldc} x {aux.bytes} B) must be 16-byte aligned")
    if chain.bias is not None:
        fused._vector(infos["bias"], "bias", (n,) if chain.bias.value == "col" else (m,), (chain.bias_dtype.value,))
    if chain.residual:
        fused._matrix(infos["residual"], "residual", m, n, aux)
    if chain.fp8_scale is not None:
        length = 1 if chain.fp8_scale.value == "tensor" else m
        fused._vector(infos["scale"], "scale", (length,), ("f32",))
        if infos["amax"] is not None:
            fused._vector(infos["amax"], "amax", (length,), ("f32",))
    return _made(op, t, path, f"{why}; epilogue chain {chain.token} fused (docs/epilogue-chain.md)", spec,
                 packed=tuple(packed))


# ------------------------------------------------------------------------------------------------
# grouped (ptxgen.grouped) and block FP8 (api.fp8blocks)
# ------------------------------------------------------------------------------------------------
def _plan_grouped(args: dict, t: Target) -> CallPlan:
    ai, bi, fi, oi = _read(args, "a", "b", "offs", "out")
    if fi is not None and ai.ndim == 2 and bi.ndim == 2:  # the K-grouped form (ptxgen.kgrouped)
        from ..kgrouped import decide

        spec = decide(ai, bi, fi, oi, args.get("out_dtype"), t.arch)[0]
        return _made("grouped_gemm", t, Path.HOT, f"the K-grouped form (2-D a and b, offs along K): kgrouped_spec, A "
                     f"{spec.a.major.value}-major, B {spec.b.major.value}-major", spec)
    prec, ai2, bi2 = split_infos(ai, bi, None if ai.ndim == 3 and bi.ndim == 2 else oi, args["a"], args.get("precision"),
                                 grouped=True)
    return _precision(_plan_grouped_infos(ai2, bi2, fi, oi, args, t), prec, ai, ai2)


def _plan_grouped_infos(ai, bi, fi, oi, args: dict, t: Target) -> CallPlan:
    if fi is None:  # the batched form: a G x M x K, offs = M, 2M, ..., G M made on the device (torch tensors only)
        return _grouped_batched(ai, bi, oi, args.get("out_dtype"), t,
                                lambda a2, f2, o2, dt: _grouped_infos(a2, bi, f2, o2, dt, t, "the batched form; "))
    return _grouped_infos(ai, bi, fi, oi, args.get("out_dtype"), t)


def _grouped_infos(ai, bi, fi, oi, out_dtype, t: Target, note: str = "") -> CallPlan:
    """grouped_gemm's slow path for arrays already read."""
    import ptxgen.grouped as grouped

    grouped.check_input_types(ai.dtype, bi.dtype)
    if out_dtype is None and oi is not None:
        out_dtype = oi.dtype
    small = grouped.small_groups(ai.shape[0], bi.shape[0]) if ai.ndim == 2 and bi.ndim == 3 else False

    def spec_for(b_major):
        return grouped.grouped_spec(ai.dtype, out_dtype, t.arch, small=small, b_major=b_major, b_dtype=bi.dtype)

    why = f"grouped_spec: groups under {grouped.SMALL_GROUP_ROWS} rows on average" if small else "grouped_spec"
    return _grouped_call("grouped_gemm", ai, bi, fi, oi, spec_for, None, t, note + why)


def _grouped_call(op, ai, bi, fi, oi, spec_for, scales, t: Target, why: str, packed: tuple = ()) -> CallPlan:
    """grouped.grouped_decision, then (packed arrays replaced by their copies) the binding and the problem's checks."""
    import ptxgen.grouped as grouped

    from ..derive.tile.kernel import plan_kernel
    from ..runtime.launch.grouped import check_grouped_problem
    from .arrays.groupedbind import _bind_scales, bind_block_scales, bind_grouped
    from .arrays.groupedpack import packed_info

    spec, packs = grouped.grouped_decision(ai, bi, oi, spec_for)
    if packs:
        a2 = packed_info(ai) if "a" in packs else ai
        b2 = packed_info(bi) if "b" in packs else bi
        o2 = None if "out" in packs else oi
        return _grouped_call(op, a2, b2, fi, o2, spec_for, scales, t, why, tuple(packs.items()))
    p = bind_grouped(spec, ai, bi, fi, oi).problem
    if spec.fp8_blocks.value != "none":
        p, _ = bind_block_scales(spec, scales, p)
    else:
        _bind_scales(spec, scales, p)
    if p.m and p.n and p.groups:
        check_grouped_problem(plan_kernel(spec), p)
    why += f"; {spec.bm} x {spec.bn} x {spec.bk} tiles, {spec.dtype.value} x {spec.b_dtype.value} -> {spec.out_dtype.value}"
    return _made(op, t, Path.PACKED if packed else Path.HOT, why, spec, packed=packed)


def _grouped_batched(ai, bi, oi, out_dtype, t: Target, finish) -> CallPlan:
    """grouped._batched: a (G, M, K) read as (G M) x K rows; a and out copied contiguous where their batches have gaps;
    ``finish(a2, offs, out2, out_dtype)`` plans the 2-D call."""
    if ai.library != "torch":
        raise ArgumentError("offs=None (the batched form, a of G x M x K) takes torch tensors; for other arrays pass a as "
                            "(G M) x K rows and offs = M, 2M, ..., G M (int32 on the device)")
    if ai.ndim != 3 or bi.ndim != 3:
        raise ArgumentError(f"offs=None is the batched form: a must be G x M x K and b G x N x K; got {ai.shape} and {bi.shape}")
    g, m, k = ai.shape
    if bi.shape[0] != g:
        raise ArgumentError(f"a has {g} batches but b has {bi.shape[0]}")
    packed = []
    if (k > 1 and ai.strides[2] != 1) or (g > 1 and m > 1 and ai.strides[0] != m * ai.strides[1]):
        packed.append(("a", f"its batches are not one (G M) x K matrix of K-major rows (strides {ai.strides})"))
        ai = replace(ai, strides=_dense(ai.shape))
    a2 = replace(ai, shape=(g * m, k), strides=(ai.strides[1] if m > 1 else k, ai.strides[2]))
    offs = ArrayInfo("offs", (ai.ptr | 0xFF) + 1, (g,), (1,), "s32", 4, ai.device, ai.library, ai.via)
    o2 = None
    if oi is not None:
        if oi.shape != (g, m, bi.shape[1]):
            raise ArgumentError(f"out has shape {oi.shape}, but the batched product is {(g, m, bi.shape[1])}")
        if g > 1 and m > 1 and oi.strides[0] != m * oi.strides[1]:
            packed.append(("out", f"its batches do not follow each other with no gap (strides {oi.strides})"))
            out_dtype = out_dtype or oi.dtype
        else:
            o2 = replace(oi, shape=(g * m, oi.shape[2]), strides=oi.strides[1:])
    r = finish(a2, offs, o2, out_dtype)
    if packed and r.path is not Path.REFUSED:
        r = replace(r, path=Path.PACKED, packed=tuple(packed) + r.packed)
    return r


def _plan_scaled(args: dict, t: Target, op: str) -> CallPlan:
    ai, bi, fi, oi, sa, sb = _read(args, "a", "b", "offs", "out", "scale_a", "scale_b")
    rowwise = op == "scaled_grouped_gemm"
    for info in (ai, bi):
        if (info.dtype not in ("e4m3", "e5m2")) if rowwise else info.dtype != "e4m3":
            what = "FP8 (e4m3, e5m2)" if rowwise else "e4m3 (derive.scaled.blockfp8: block-scaled FP8 takes e4m3 A and B)"
            raise DTypeError(f"{op} takes {what} inputs, not {info.dtype} {info.name}")
    if rowwise and fi is not None and ai.ndim == 2 and bi.ndim == 2:  # the K-grouped form (ptxgen.kgrouped, offs_k_rowwise)
        from ..kgrouped import decide

        spec = decide(ai, bi, fi, oi, args.get("out_dtype"), t.arch, (sa, sb))[0]
        return _made(op, t, Path.HOT, "the K-grouped form (2-D a and b, offs along K) with row-wise scales "
                     "(torch._scaled_grouped_mm 2-D x 2-D): kgrouped_spec(rowwise=True), A and B K-major", spec)
    if rowwise and fi is not None and ai.ndim == 3 and bi.ndim == 2:  # the N-grouped form: the M-grouped one, swapped
        g, m = ai.shape[0], ai.shape[1]
        if sa.shape not in ((g, m), (g * m,)) or (g * m > 1 and sa.strides[-1] != 1) or (sa.ndim == 2 and g > 1 and sa.strides[0] != m):
            raise ArgumentError(f"scale_a has shape {sa.shape} (strides {sa.strides}); the N-grouped form takes G x M = "
                                f"{g} x {m} contiguous f32 values")
        sa2 = replace(sa, shape=(g, m), strides=(m, 1))
        ot = None if oi is None else replace(oi, shape=tuple(reversed(oi.shape)), strides=tuple(reversed(oi.strides)))
        return _scaled_infos(op, bi, ai, fi, ot, sb, sa2, args.get("out_dtype"), t,
                             "the N-grouped form (3-D a, 2-D b): the M-grouped product with a and b swapped, out M-major; ")
    if fi is None and rowwise:  # the batched form: scale_a of G x M read as G M values (torch tensors)
        g, m = ai.shape[0], ai.shape[1] if ai.ndim == 3 else 0
        if sa.shape != (g, m):
            raise ArgumentError(f"scale_a has shape {sa.shape}; with a of {ai.shape} it must be {(g, m)}")
        sa2 = replace(sa, shape=(g * m,), strides=(1,))
        return _grouped_batched(ai, bi, oi, args.get("out_dtype"), t,
                                lambda a2, f2, o2, dt: _scaled_infos(op, a2, bi, f2, o2, sa2, sb, dt, t, "the batched form; "))
    return _scaled_infos(op, ai, bi, fi, oi, sa, sb, args.get("out_dtype"), t)


def _scaled_infos(op, ai, bi, fi, oi, sa, sb, out_dtype, t: Target, note: str = "") -> CallPlan:
    import ptxgen.grouped as grouped

    rowwise = op == "scaled_grouped_gemm"
    out_dtype = out_dtype or (oi.dtype if oi is not None else None) or (None if rowwise else "bf16")
    make = grouped.scaled_spec_for if rowwise else grouped.blocks_spec_for

    def spec_for(b_major):
        return make(ai.dtype, bi.dtype, out_dtype, t.arch, b_major)

    return _grouped_call(op, ai, bi, fi, oi, spec_for, (sa, sb), t,
                         note + ("row-wise scales (torch._scaled_grouped_mm)" if rowwise else "DeepSeek block scales, grouped"))


def _plan_fp8blocks(args: dict, t: Target) -> CallPlan:
    """fp8blocks.gemm's slow path: bind, the scales' checks, chosen_spec for the device's SMs, scale_a by TMA's rule."""
    from ..derive.tile.kernel import plan_kernel
    from . import fp8blocks as fb
    from .arrays.binding import bind

    from .arrays.fp8recipe import c_extra, column_scales_ld, infer_recipe

    ai, bi, oi, sa, sb, ci = _read(args, "a", "b", "out", "scale_a", "scale_b", "c")
    out_dtype = args.get("out_dtype") or ("f32" if ci is not None else "bf16")
    spec = args.get("spec")
    chosen = spec is None
    asked = spec
    spec = spec or fb.default_spec(out_dtype)
    if spec.fp8_blocks.value == "none":
        raise ArgumentError(f"{spec.kernel_name} is not a block-scaled FP8 kernel (--fp8-blocks 1x128x128 or 1x128x1x128)")
    p = bind(spec, ai, bi, oi).problem
    kb, nb = -(-p.k // fb.BLOCK), -(-p.n // fb.BLOCK)
    lds_a = fb._scales(sa, "scale_a", p.m, kb)
    rec = infer_recipe(args.get("recipe"), sb, p.k, p.n, fb.padded_scale_rows(kb), with_c=ci is not None)
    picked = fb._recipe_spec(asked, chosen, rec, ci, out_dtype)
    if rec == fb.COLUMNS_1D1D:
        column_scales_ld(sb, p.k, p.n)
    else:
        fb._scales(sb, "scale_b", kb, nb, fb.padded_scale_rows(kb))
    why = "the spec as given"
    if picked is not None:
        spec = picked
        bind(spec, ai, bi, oi)
        c_extra(ci, oi, p.m, p.n, spec.out_dtype.value)
        if chosen:
            why = ("columns_spec: scale_b is ceil(K/128) x N (the 1x128 x 1x128 recipe, DeepGEMM's 1D1D)"
                   + ("; c added in f32 (--fuse c)" if ci is not None else ""))
    elif chosen:
        spec = fb.chosen_spec(out_dtype, sa, lds_a, p.m, p.n, t.sm_count, k=p.k)
        bind(spec, ai, bi, oi)
        why = ("scale_a by TMA, the tile derive.scaled.bfp8tiles models fastest" if spec.scale_load.value == "tma"
               else "default_spec: the scale warp stages scale_a (TMA cannot read it, or the output is FP8)")
        if spec.stream_k > 1:
            why += f"; stream-K over {spec.stream_k} splits (the tiles fill at most half of {t.sm_count} SMs)"
    if plan_kernel(spec).sfa_tma is not None:
        fb.tma_lds_a(sa, lds_a, spec.kernel_name)
    return _made("fp8blocks.gemm", t, Path.HOT, why, spec)


def _plan_attention(args: dict, t: Target) -> CallPlan:
    """ptxgen.attention: its argument checks (torch tensors: meta tensors stand for CUDA ones), then the kernel it
    builds; the Hopper kernel only (the tcgen05 form is built and gated, never run: refused where the device is 10.x)."""
    from ..attention.args import check_arguments
    from ..attention.launch import choose_spec

    if t.arch != "sm_90a":
        raise ArgumentError(f"ptxgen.attention runs on sm_90a (Hopper); its {t.arch} form is compiled and gated only "
                            "(docs/attention.md)")
    p = check_arguments(args["q"], args["k"], args["v"], args.get("out"), args.get("scale"), ("cuda", "meta"))
    spec = choose_spec(p, bool(args.get("causal", False)), args.get("schedule"))
    why = (f"B {p.batch}, H {p.heads} (K/V heads {p.kv_heads}), S {p.seqlen_q} x {p.seqlen_k}, head dim {p.head_dim}: "
           f"{spec.bm} query rows and {spec.bn} keys a block, the {spec.schedule} schedule; a repeat call with the same "
           "shapes, strides and dtypes takes the prepared launch")
    return replace(_made("attention", t, Path.HOT, why), kernel=spec.kernel_name)


_PLANNERS = {"attention": _plan_attention, "gemm": _plan_gemm, "fused": _plan_fused, "grouped_gemm": _plan_grouped,
             "scaled_grouped_gemm": lambda a, t: _plan_scaled(a, t, "scaled_grouped_gemm"),
             "blockscaled_grouped_gemm": lambda a, t: _plan_scaled(a, t, "blockscaled_grouped_gemm"),
             "fp8blocks.gemm": _plan_fp8blocks}
