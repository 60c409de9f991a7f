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

The result's types, the devices and the reading of the arrays are in ``api.planbase``; the grouped doors' planners in
``api.plangrouped``; the dense, fused, block-FP8 and attention planners here.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

from ..isa.types import Batch, DMajor, SpecError
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from ..runtime.launch.launch import ProblemError
from .arrays import accumulate
from .arrays.precision import split_infos
from .planbase import DEVICES, CallPlan, Path, Target, _dense, _made, _precision, _read, _stand_in, target
from .plangrouped import _plan_blocks_k, _plan_grouped, _plan_scaled

__all__ = ["CallPlan", "DEVICES", "OPS", "Path", "plan"]

_REFUSALS = (ArgumentError, DTypeError, ProblemError, SpecError)


def _functions() -> dict:
    import ptxgen.grouped as grouped
    import ptxgen.kgrouped as kgrouped

    from . import dispatch, fp8blocks, fused

    from ..attention.launch import attention
    from ..scaled import scaled_gemm

    return {"gemm": dispatch.gemm, "fused": fused.gemm, "grouped_gemm": grouped.grouped_gemm,
            "scaled_grouped_gemm": grouped.scaled_grouped_gemm, "blockscaled_grouped_gemm": grouped.blockscaled_grouped_gemm,
            "fp8blocks.gemm": fp8blocks.gemm, "attention": attention, "scaled_gemm": scaled_gemm,
            "blockscaled_grouped_gemm_k": kgrouped.blockscaled_grouped_gemm_k}


OPS = ("gemm", "fused", "grouped_gemm", "scaled_grouped_gemm", "blockscaled_grouped_gemm", "fp8blocks.gemm", "attention",
       "scaled_gemm", "blockscaled_grouped_gemm_k")
_ALIASES = {"batched": "gemm", "grouped": "grouped_gemm", "scaled_grouped": "scaled_grouped_gemm",
            "blockscaled_grouped": "blockscaled_grouped_gemm", "bfp8": "fp8blocks.gemm", "fp8blocks": "fp8blocks.gemm"}


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


# ------------------------------------------------------------------------------------------------
# ptxgen.gemm: 2-D (api.dispatch), batched (3-D), and the fused keywords (api.fused)
# ------------------------------------------------------------------------------------------------
def _plan_gemm(args: dict, t: Target) -> CallPlan:
    fused_kw = {k: args.get(k) for k in ("bias", "activation", "c", "residual", "aux", "dact")}
    if any(v is not None for v in fused_kw.values()) or args.get("alpha", 1.0) != 1.0:
        mode = accumulate.plan_mode(args.get("accumulate"), args["a"], _read(args, "a")[0])
        p = _plan_fused({**args, "bias_axis": "col"}, t, op="gemm")
        return replace(p, why=f"{p.why}; {accumulate.CHAIN_WHY}") if mode == accumulate.F16 and p.spec else p
    ai, bi, oi = _read(args, "a", "b", "out")
    mode = accumulate.plan_mode(args.get("accumulate"), args["a"], ai)
    prec, ai2, bi2 = split_infos(ai, bi, oi, args["a"], args.get("precision"))
    with _promoting(ai2 is not ai), _accumulating(mode):  # a 3xTF32 call's kernel promotes (api.select.promoting), an
        return _precision(gemm_infos(ai2, bi2, oi, args.get("out_dtype"), t), prec, ai, ai2)  # f16-accumulate one's acc is f16


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
    from .arrays.packing import packed_info

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


# ------------------------------------------------------------------------------------------------
# the fused epilogue (api.fused.gemm)
# ------------------------------------------------------------------------------------------------
def _plan_fused(args: dict, t: Target, op: str = "fused") -> CallPlan:
    ai, bi, oi = _read(args, "a", "b", "out")
    prec, ai2, bi2 = split_infos(ai, bi, oi, args["a"], args.get("precision"))
    with _promoting(ai2 is not ai):
        return _precision(_plan_fused_infos(ai2, bi2, oi, args, t, op), prec, ai, ai2)


def _accumulating(mode: str):
    from contextlib import nullcontext

    from .select import accumulating_f16

    return accumulating_f16() if mode == accumulate.F16 else nullcontext()


def _promoting(split: bool):
    from contextlib import nullcontext

    from .select import promoting

    return promoting() if split else nullcontext()


def _plan_fused_infos(ai, bi, oi, args: dict, t: Target, op: str) -> CallPlan:
    infos = dict(zip(("bias", "c", "residual", "scale", "amax", "aux", "scale_a", "scale_b"),
                     _read(args, "bias", "c", "residual", "scale", "amax", "aux", "scale_a", "scale_b")))
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
    from .arrays.packing import packed_info
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
                         args.get("scale_mode"), m, alpha, args.get("c_tma", False), infos["aux"] is not None,
                         args.get("dact"), infos["scale_a"] is not None or infos["scale_b"] is not None)
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
        problem = None if info is None or (name == "c" and not chain.c) else fusedany.type_problem(info, aux.value)
        if problem:
            packed.append((name, problem))
            infos[name] = replace(info, dtype=aux.value, itemsize=aux.bytes)
            path = Path.PACKED if path is Path.HOT else path
    fused.check_chain_arrays(chain, infos, m, n, aux)
    return _made(op, t, path, f"{why}; epilogue chain {chain.token} fused (docs/epilogue-chain.md)", spec,
                 packed=tuple(packed))


# ------------------------------------------------------------------------------------------------
# block FP8 (api.fp8blocks)
# ------------------------------------------------------------------------------------------------
def _plan_fp8blocks(args: dict, t: Target) -> CallPlan:
    """fp8blocks.gemm's slow path: bind, the scales' checks, chosen_spec for the device's SMs, scale_a by TMA's rule."""
    from ..derive.tile.kernel import plan_kernel
    from . import fp8blocks as fb
    from .arrays.binding import bind

    from .arrays.fp8recipe import a_in_blocks, c_extra, column_scales_ld, infer_recipe

    ai, bi, oi, sa, sb, ci = _read(args, "a", "b", "out", "scale_a", "scale_b", "c")
    out_dtype = args.get("out_dtype") or ("f32" if ci is not None else "bf16" if oi is None else oi.dtype)
    spec = args.get("spec")
    if ai.ndim == 2 and a_in_blocks(args.get("recipe"), sa, ai.shape[0], ai.shape[1],
                                    fb.padded_scale_rows(-(-ai.shape[1] // fb.BLOCK))):
        return _plan_fp8blocks_2d1d(ai, bi, oi, sa, sb, ci, out_dtype, spec, t)
    chosen = spec is None
    asked = spec
    spec = spec or fb.default_spec(out_dtype)
    if spec.fp8_blocks.value == "none":
        raise ArgumentError(f"{spec.kernel_name} is not a block-scaled FP8 kernel (--fp8-blocks 1x128x128 or 1x128x1x128)")
    p = bind(spec, ai, bi, oi).problem
    kb, nb = -(-p.k // fb.BLOCK), -(-p.n // fb.BLOCK)
    lds_a = fb._scales(sa, "scale_a", p.m, kb)
    rec = infer_recipe(args.get("recipe"), sb, p.k, p.n, fb.padded_scale_rows(kb), with_c=ci is not None)
    picked = fb._recipe_spec(asked, chosen, rec, ci, out_dtype, p, t.sm_count)
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
            why = ("columns_chosen: scale_b is ceil(K/128) x N (the 1x128 x 1x128 recipe, DeepGEMM's 1D1D), the tile "
                   "derive.scaled.bfp8tiles models fastest"
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


def _plan_fp8blocks_2d1d(ai, bi, oi, sa, sb, ci, out_dtype: str, spec, t: Target) -> CallPlan:
    """The 128x128 x 1x128 recipe as fp8blocks.gemm decides it: the 1x128x128 kernel on (b, a) with an M-major D."""
    from . import fp8blocks as fb
    from .arrays.binding import bind
    from .launch.swapab import transposed

    m, n, k, _, lds = fb.check_2d1d(ai, bi, oi, sa, sb, ci)
    kspec = fb._swapped_spec(spec, out_dtype, transposed(sb), lds, n, m, k, t.sm_count, fb._rows_16b(oi, m, n))
    if oi is not None:
        bind(kspec, bi, ai, transposed(oi))
    why = ("128x128 x 1x128 scales: the 1x128x128 kernel on (b, a) (b's 1 x 128 rows as its scale_a, a's 128 x 128 "
           "blocks as its scale_b), D^T written M-major into the row-major out")
    return _made("fp8blocks.gemm", t, Path.HOT, why, kspec)


def _plan_attention(args: dict, t: Target) -> CallPlan:
    """ptxgen.attention: its argument checks (torch tensors: meta tensors stand for CUDA ones), then the kernel it
    builds; the Hopper kernel only (the tcgen05 form is built and gated, never run: refused where the device is 10.x)."""
    from ..attention.args import check_arguments
    from ..attention.launch import cells_ok, choose_spec

    if t.arch != "sm_90a":
        raise ArgumentError(f"ptxgen.attention runs on sm_90a (Hopper); its {t.arch} form is compiled and gated only "
                            "(docs/attention.md)")
    p = check_arguments(args["q"], args["k"], args["v"], args.get("out"), args.get("scale"), ("cuda", "meta"))
    out = args.get("out")
    # as the call decides: an out= whose rows do not start on 16 bytes takes the direct O store
    spec = choose_spec(p, bool(args.get("causal", False)), args.get("schedule"),
                       o_staging=None if out is None or cells_ok(out) else False)
    walk = (f", one CTA per SM walking the tiles with {spec.q_buffers} Q buffer{'s' * (spec.q_buffers > 1)}"
            + (", O staged in the Q buffer" if spec.o_staging else "")
            + (", the next tile's first S issued with this tile's last P·V" if spec.carry else "")) if spec.persistent else ""
    why = (f"B {p.batch}, H {p.heads} (K/V heads {p.kv_heads}), S {p.seqlen_q} x {p.seqlen_k}, head dim {p.head_dim}: "
           f"{spec.bm} query rows and {spec.bn} keys a block, the {spec.schedule} schedule{walk}; a repeat call with the "
           "same shapes, strides and dtypes takes the prepared launch")
    return replace(_made("attention", t, Path.HOT, why), kernel=spec.kernel_name)


def _plan_scaled_gemm(args: dict, t: Target) -> CallPlan:
    """ptxgen.scaled_gemm (ptxgen.scaled): the dense fused kernel with ``rowscale[,bias=col:...]`` where
    ``scaled.dense_takes`` the call, else the grouped row-wise kernel with one group (and the bias as a second kernel)."""
    from .. import scaled
    from .plangrouped import _scaled_infos

    a, b, bias = args["a"], args["b"], args.get("bias")
    ai, bi, sa, sb, bi_ = _read(args, "a", "b", "scale_a", "scale_b", "bias")
    if ai.ndim != 2 or bi.ndim != 2 or ai.shape[1] != bi.shape[1]:
        raise ArgumentError(f"a must be M x K and b N x K (a @ b.T); got {ai.shape} and {bi.shape}")
    m, n = ai.shape[0], bi.shape[0]
    scaled.check_scale_shapes(m, n, sa.shape, sb.shape)
    out_dtype = scaled._out_token(args.get("out_dtype"))
    if not scaled.dense_takes(a, b):
        b3 = replace(bi, shape=(1, *bi.shape), strides=(n * bi.strides[0], *bi.strides))
        offs = replace(sa, name="offs", dtype="s32", shape=(1,), strides=(1,))
        sb2 = replace(sb, shape=(1, n), strides=(n, 1))
        r = _scaled_infos("scaled_grouped_gemm", ai, b3, offs, None, replace(sa, shape=(m,), strides=(1,)), sb2, out_dtype,
                          t, f"a is {ai.dtype}, b {bi.dtype}: ptxgen.gemm's chooser takes one input type, the grouped "
                          "row-wise kernel with one group of M rows takes the mix" + ("; the bias by a second kernel; "
                                                                                      if bias is not None else "; "))
        return replace(r, op="scaled_gemm")
    if bias is not None and bi_.dtype not in ("f32", "bf16", "f16"):  # scaled_gemm casts it to f32: a stand-in of that type
        import sys

        bias = sys.modules["torch"].empty(n, dtype=sys.modules["torch"].float32, device="meta")
    return _plan_fused({"a": a, "b": b, "bias": bias, "scale_a": args["scale_a"], "scale_b": args["scale_b"],
                        "out_dtype": out_dtype}, t, op="scaled_gemm")


_PLANNERS = {"scaled_gemm": _plan_scaled_gemm, "attention": _plan_attention, "gemm": _plan_gemm, "fused": _plan_fused, "grouped_gemm": _plan_grouped,
             "scaled_grouped_gemm": lambda a, t: _plan_scaled(a, t, "scaled_grouped_gemm"),
             "blockscaled_grouped_gemm": lambda a, t: _plan_scaled(a, t, "blockscaled_grouped_gemm"),
             "fp8blocks.gemm": _plan_fp8blocks, "blockscaled_grouped_gemm_k": _plan_blocks_k}
