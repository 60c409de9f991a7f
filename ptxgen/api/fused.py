"""The GEMM with a fused epilogue chain (ptxgen.derive.store.fusion): ``ptxgen.gemm(..., bias=, activation=, c=, alpha=,
beta=, residual=)`` comes here, and ``ptxgen.api.fused.gemm`` takes the rest (row bias, FP8 output, a given spec).

On a GPU (not run as a doctest)::

    import ptxgen
    y = ptxgen.gemm(x, w, bias=b, activation="gelu_tanh")                 # gelu(x @ w.T + b), one kernel
    y = ptxgen.gemm(x, w, c=y0, alpha=0.5, beta=1.0, residual=r)          # 0.5 x @ w.T + y0 + r
    q, amax = ptxgen.api.fused.gemm(x, w, scale=s, out_dtype="e4m3")      # FP8 out: q = e4m3(y x s), amax of |y|
    y = ptxgen.gemm(x, w, bias=b, activation="gelu_tanh", aux=z)          # and z = x @ w.T + b written beside y
    dz = ptxgen.gemm(dy, w.t(), dact="gelu_tanh", aux=z)                  # dz = (dy @ w) x gelu'(z), the backward step

The chain runs in a fixed order: alpha x acc, + beta x C, + bias, activation, + residual, output (docs/epilogue-chain.md).
``a`` is M x K, ``b`` N x K (as :func:`ptxgen.gemm`); ``c`` and ``residual`` are M x N row-major in the output's
type (bf16 with FP8 output), rows 8-byte aligned; ``bias`` is a contiguous vector of f32, bf16 or f16, N long
(``bias_axis="col"``, like nn.Linear's bias) or M long (``"row"``). FP8 output (``out_dtype="e4m3"``) needs
``scale`` (f32, 1 element: per tensor, or M: per row); ``amax`` (f32, same length) is raised with atomicMax and
must hold zeros (or a running max) before the call; without it one is allocated. Then the call returns
``(out, amax)``. ``aux`` (M x N, the output's type, row-major with an even row stride) is the pre-activation: with an
``activation`` the kernel writes ``a @ b.T + bias`` (after C and the bias, before the activation) to it beside ``out``
(``--fuse ...,aux``); with ``dact`` (an activation's name, no ``activation``) it reads it:
``out = (alpha x a @ b.T + ...) x dact'(aux)`` (``--fuse dact=...``).
"""

from __future__ import annotations

import sys
import threading

from ..derive.store.chainspec import ChainSpec
from ..derive.tile.spec import TileSpec, make_spec
from ..isa.epiops import Activation, BiasAxis, ScaleMode
from ..isa.types import DType, Epilogue, Major
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from .arrays import precision as fp32
from .launch import streams
from .arrays.binding import _allocate_out, bind, span_bytes
from .arrays.fusedany import converted, narrow_spec, pack_operands, per_batch, readable_aux, type_problem
from .launch.fusedlaunch import AUX_ROLES, FusedLaunch, FusedTable, hot_key
from .launch.launchplan import workspace_launches
from .arrays.packing import PACKABLE, major_of, pack_plan
from .kernel import CompiledKernel, compile
from .launch.hotkeys import tensor_type
from .select import PROMOTE, _gemm_spec, promoting, spec_or_direct_store

_KERNELS: dict[TileSpec, CompiledKernel] = {}
_LOCK = threading.Lock()
_HOT = FusedTable()  # hot_key -> FusedLaunch: the hot path of torch tensors
_F32 = fp32.F32  # [torch.float32], once torch is imported


def kernel_for(spec: TileSpec) -> CompiledKernel:
    """The compiled fused kernel for ``spec``, once per process (and cached on disk)."""
    with _LOCK:
        k = _KERNELS.get(spec)
        if k is None:
            k = _KERNELS[spec] = compile(spec)
        return k


__all__ = ["gemm", "fused_spec"]


def _chain(bias: ArrayInfo | None, bias_axis: str, activation, c: bool, residual: bool, scale: ArrayInfo | None,
           scale_mode: str | None, m: int, alpha: float, c_tma: bool = False, aux: bool = False, dact=None,
           rowscale: bool = False) -> ChainSpec | None:
    if bias is not None and bias.dtype not in ("f32", "bf16", "f16"):
        raise DTypeError(f"bias has dtype {bias.dtype}; a fused bias is f32, bf16 or f16")
    mode = None
    if scale is not None:
        mode = ScaleMode.parse(scale_mode) if scale_mode else (ScaleMode.TENSOR if scale.shape in ((1,), ()) else ScaleMode.ROW)
    try:
        act = Activation.parse(activation or "none")
        dact_ = Activation.parse(dact or "none")
        axis = BiasAxis.parse(bias_axis)
    except ValueError as e:
        raise ArgumentError(f"activation and dact one of {', '.join(a.value for a in Activation)}; bias_axis col or row ({e})") from None
    _aux_rules(aux, act, dact_, dact, mode)
    ch = ChainSpec(alpha=True, c=c, bias=None if bias is None else axis,
                   bias_dtype=DType(bias.dtype) if bias is not None else DType.BF16, activation=act, residual=residual,
                   fp8_scale=mode, c_tma=c_tma, aux=aux and dact_ is Activation.NONE, dact=dact_, rowscale=rowscale)
    if ch.token == "alpha" and alpha == 1.0:
        return None
    return ch


def _aux_rules(aux: bool, act: Activation, dact: Activation, dact_name, mode) -> None:
    """The pre-activation's rules (derive.store.fusion.check_aux), said in the door's words."""
    if dact_name is not None and dact is Activation.NONE:
        raise ArgumentError(f"dact={dact_name!r}: the derivative of relu, gelu_tanh, gelu_erf or silu")
    if dact is not Activation.NONE and act is not Activation.NONE:
        raise ArgumentError("dact= (the backward step, out = (a @ b.T) x act'(aux)) and activation= are two kernels: "
                            "pass one of them")
    if dact is not Activation.NONE and not aux:
        raise ArgumentError("dact= multiplies by act'(z) at each element: pass the saved pre-activation z as aux=")
    if aux and dact is Activation.NONE and act is Activation.NONE:
        raise ArgumentError("aux= is written with an activation (the pre-activation z) or read with dact=: pass one")
    if aux and mode is not None:
        raise ArgumentError("aux= with FP8 output: the pre-activation is stored in a 16-bit or f32 output's type")


def fused_spec(spec, chain: ChainSpec, out_dtype: str, fp8_tma_store: bool = False):
    """``spec`` (as :func:`ptxgen.api.gemm_spec` picks it) with the chain: a split-k pick keeps its split (the last split
    to arrive runs the chain once, on the whole sum: derive.store.splitk), a stream-K pick runs its tiles whole; FP8
    output takes the direct epilogue unless ``fp8_tma_store`` (then a TMA-store ``spec`` keeps its epilogue, or the
    SpecError says why it cannot)."""
    fields = {**spec.to_json(), "fuse": chain.token, "out_dtype": out_dtype, "stream_k": 1}
    if out_dtype == DType.E4M3.value and fields.get("epilogue") == Epilogue.TMA.value:
        if fp8_tma_store:
            return make_spec(**fields)
        fields["epilogue"] = Epilogue.DIRECT.value
    return spec_or_direct_store(fields)


def _prepare(kernel: CompiledKernel, dev, p, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo, extra: dict, chain: ChainSpec,
             alpha: float, beta: float) -> FusedLaunch:
    """The prepared launch of a checked fused call (the slow path's problem ``p`` and the chain's ``extra`` scalars)."""
    scalars = {name: value for name, value in extra.items() if name in ("alpha", "beta", "ldc", "ldr", "ldaux")}
    spans = (span_bytes(ai), span_bytes(bi), span_bytes(oi))
    launch = kernel.prepare_launch(p, dev, spans, scalars, extra_roles=tuple(role for _, role in AUX_ROLES))
    index = {q.name: i for i, q in enumerate(kernel.plan.abi.params)}
    pair_mask = 2 * chain.aux_dtype(kernel.spec.out_dtype).bytes - 1
    amax_len = None if chain.fp8_scale is None else (1 if chain.fp8_scale is ScaleMode.TENSOR else p.m)
    return FusedLaunch(launch, index, pair_mask, chain.c_tma, float(alpha), float(beta), amax_len, kernel.name)


def _matrix(info: ArrayInfo, what: str, m: int, n: int, dtype: DType) -> int:
    if info.shape != (m, n):
        raise ArgumentError(f"{what} has shape {info.shape}, the output is {(m, n)}")
    if info.dtype != dtype.value:
        raise DTypeError(f"{what} has dtype {info.dtype}; with this output it must be {dtype.value}")
    if n > 1 and info.strides[1] != 1:
        raise ArgumentError(f"{what} must be row-major (stride 1 along N); it has strides {info.strides}")
    ld = info.strides[0] if m > 1 else n + n % 2
    if ld % 2 or info.ptr % (2 * dtype.bytes):
        raise ArgumentError(f"{what}: the epilogue reads column pairs, so its row stride ({ld}) must be even and its base "
                            f"{2 * dtype.bytes}-byte aligned")
    return ld


def _vector(info: ArrayInfo, what: str, lengths: tuple[int, ...], dtypes: tuple[str, ...], align: int = 8) -> None:
    size = 1
    for d in info.shape:
        size *= d
    if info.ndim > 1 and size != max(info.shape) or size not in lengths:
        raise ArgumentError(f"{what} has shape {info.shape}; it must be a vector of {' or '.join(map(str, lengths))} elements")
    if info.dtype not in dtypes:
        raise DTypeError(f"{what} has dtype {info.dtype}; it must be {' or '.join(dtypes)}")
    if size > 1 and info.strides[-1] != 1 and info.ndim == 1:
        raise ArgumentError(f"{what} must be contiguous")
    if info.ptr % align:
        raise ArgumentError(f"{what} must start {align}-byte aligned")


def rowscale_checks(infos: dict, m: int, n: int) -> None:
    """rowscale's vectors (``--fuse rowscale``): scale_a M f32 values 4 bytes apart, scale_b N, 8-byte aligned (column
    pairs); any shape of that many elements (M x 1, 1 x N)."""
    for name, length, align in (("scale_a", m, 4), ("scale_b", n, 8)):
        info = infos[name]
        if info is None:
            raise ArgumentError("row-wise scaling takes both scale_a (M) and scale_b (N)")
        _vector(info, name, (length,), ("f32",), align=align)
        if length > 1 and max(info.strides[d] for d in range(info.ndim) if info.shape[d] > 1) != 1:
            raise ArgumentError(f"{name} must be contiguous (its elements 4 bytes apart); it has strides {info.strides}")


def gemm(a, b, out=None, *, bias=None, activation=None, c=None, alpha: float = 1.0, beta: float = 0.0, residual=None,
         bias_axis: str = "col", out_dtype: str | None = None, scale=None, scale_mode: str | None = None, amax=None,
         stream=None, spec=None, c_tma: bool = False, fp8_tma_store: bool = False, precision: str | None = None, aux=None,
         dact: str | None = None, scale_a=None, scale_b=None):
    """``out = epilogue(a @ b.T)``; see the module docstring. Without any fused step the plain kernel runs.
    ``spec``: a TileSpec (without ``fuse``) to use instead of the one :func:`ptxgen.api.gemm_spec` picks.
    ``c_tma``: read C through TMA (``--fuse c=tma``; a TMA-store ``spec`` with a 16-bit output; C's base and row
    pitch 16-byte aligned). ``fp8_tma_store``: FP8 output through a TMA-store ``spec`` (sm_90a, BN a multiple of 128)
    instead of the direct stores. ``precision`` (float32 inputs): as ``ptxgen.gemm``'s (``api.arrays.precision``); 3xtf32
    runs the one GEMM over the split operands, the chain applied once to its result. ``aux``, ``dact``: the
    pre-activation, written (with ``activation``) or read (with ``dact``); see the module docstring. ``scale_a``,
    ``scale_b``: row-wise FP8 dequantization (``--fuse rowscale``, first in the chain): f32 vectors of M and N elements
    (contiguous; ``scale_b`` 8-byte aligned), ``acc x scale_a[r] x scale_b[n]`` (``ptxgen.scaled_gemm``)."""
    if precision is not None or _F32[0] is None or getattr(a, "dtype", None) is _F32[0]:
        split = fp32.operands(a, b, out, precision, stream)  # from here on float32 operands are read as tf32
        if split[0] is not a:  # 3xTF32: the split operands, on the promoting kernel (select.promoting)
            with promoting():
                return gemm(*split, out, bias=bias, activation=activation, c=c, alpha=alpha, beta=beta, residual=residual,
                            bias_axis=bias_axis, out_dtype=out_dtype, scale=scale, scale_mode=scale_mode, amax=amax,
                            stream=stream, spec=spec, c_tma=c_tma, fp8_tma_store=fp8_tma_store, precision=fp32.TF32,
                            aux=aux, dact=dact, scale_a=scale_a, scale_b=scale_b)
    # PROMOTE: a 3xTF32 call's kernels promote, so its prepared launches are not a tf32 call's
    options = (activation, bias_axis, out_dtype, scale_mode, c_tma, fp8_tma_store, alpha == 1.0, beta != 0, spec, dact,
               PROMOTE.get())  # (scale_a / scale_b: their metadata is in the key)
    aux = (c, bias, residual, scale, amax, aux, scale_a, scale_b)  # in fusedlaunch.AUX_ROLES' order
    if _HOT and (stream is None or out is not None):
        T = tensor_type()
        if T is not None and _all_torch(T, a, b, out, aux):
            e = _HOT.get(hot_key(options, a, b, out, aux))
            if e is not None:
                r = e.call(a, b, out, aux, float(alpha), float(beta), None if stream is None else streams.stream_handle(stream))
                if r is not None:
                    return r
    return _gemm_slow(a, b, out, aux, options, alpha, beta, bias_axis, activation, out_dtype, scale_mode, stream, spec,
                      c_tma, fp8_tma_store, dact)


def _all_torch(T, a, b, out, aux) -> bool:
    if not (isinstance(a, T) and isinstance(b, T)) or (out is not None and not isinstance(out, T)):
        return False
    for x in aux:
        if x is not None and not isinstance(x, T):
            return False
    return True


def check_chain_arrays(chain, infos: dict, m: int, n: int, aux_dt) -> dict[str, int]:
    """Each array of the chain checked against its role (shape, type, alignment) in the order the call reads them, and
    their row pitches (``ldc``, ``ldaux``, ``ldr``). ``amax`` only where given (the call allocates a missing one).
    ``ptxgen plan`` (api.callplan) runs the same checks."""
    lds: dict[str, int] = {}
    if chain.c:
        lds["ldc"] = _matrix(infos["c"], "c", m, n, aux_dt)
        if chain.c_tma and (infos["c"].ptr % 16 or lds["ldc"] * aux_dt.bytes % 16):
            raise ArgumentError(f"c through TMA: its base ({infos['c'].ptr:#x}) and row pitch ({lds['ldc']} x {aux_dt.bytes} B) "
                                "must be 16-byte aligned")
    if chain.rowscale:
        rowscale_checks(infos, m, n)
    if chain.bias is not None:
        _vector(infos["bias"], "bias", (n,) if chain.bias is BiasAxis.COL else (m,), (chain.bias_dtype.value,))
    if chain.aux or chain.dact is not Activation.NONE:  # written in the output's type: no converted copy for a written aux
        lds["ldaux"] = _matrix(infos["aux"], "aux", m, n, aux_dt)
    if chain.residual:
        lds["ldr"] = _matrix(infos["residual"], "residual", m, n, aux_dt)
    if chain.fp8_scale is not None:
        _vector(infos["scale"], "scale", (_scale_length(chain, m),), ("f32",))
        if infos["amax"] is not None:
            _vector(infos["amax"], "amax", (_scale_length(chain, m),), ("f32",))
    return lds


def _scale_length(chain, m: int) -> int:
    return 1 if chain.fp8_scale is ScaleMode.TENSOR else m


def _chain_args(chain, spec, infos, a, ai, amax, m, n, alpha, beta, handle):
    """The chain's kernel arguments (pointers and pitches, each array checked against its role), and amax (allocated
    here, zeros, when an FP8 output's caller passed none)."""
    lds = check_chain_arrays(chain, infos, m, n, chain.aux_dtype(spec.out_dtype))
    extra = {"alpha": float(alpha)}
    if chain.c:
        extra.update(beta=float(beta), C=infos["c"].ptr, ldc=lds["ldc"])
    if chain.rowscale:
        extra.update(SCALE_A=infos["scale_a"].ptr, SCALE_B=infos["scale_b"].ptr)
    if chain.bias is not None:
        extra["BIAS"] = infos["bias"].ptr
    if "ldaux" in lds:
        extra.update(AUX=infos["aux"].ptr, ldaux=lds["ldaux"])
    if chain.residual:
        extra.update(RES=infos["residual"].ptr, ldr=lds["ldr"])
    if chain.fp8_scale is not None:
        if amax is None:
            length = _scale_length(chain, m)
            if ai.library != "torch":
                raise ArgumentError(f"pass amax= (f32, {length} zeros)")
            amax = sys.modules["torch"].zeros(length, dtype=sys.modules["torch"].float32, device=a.device)
            infos["amax"] = read_array(amax, "amax", handle)
        extra.update(SCALE=infos["scale"].ptr, AMAX=infos["amax"].ptr)
    return extra, amax


def _gemm_slow(a, b, out, aux, options, alpha, beta, bias_axis, activation, out_dtype, scale_mode, stream, spec, c_tma,
               fp8_tma_store, dact):
    """The first call of a dispatch key (or any call with arrays other than torch tensors): every check, the chooser,
    the chain's spec, the compile; for torch tensors, the prepared launch the next calls take (fusedlaunch)."""
    c, bias, residual, scale, amax, pre, scale_a, scale_b = aux
    handle = streams.stream_handle(stream, a)
    ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
    oi = None if out is None else read_array(out, "out", handle)
    infos = {n: None if x is None else read_array(x, n, handle) for n, x in
             (("bias", bias), ("c", c), ("residual", residual), ("scale", scale), ("amax", amax), ("aux", pre),
                                                                        ("scale_a", scale_a), ("scale_b", scale_b))}
    fp8 = (out_dtype or (oi.dtype if oi is not None else None)) == "e4m3" or scale is not None
    if fp8 and scale is None:
        raise ArgumentError("FP8 output (e4m3) needs scale= (f32: one element, or one per row)")
    again = dict(bias=bias, activation=activation, c=c, alpha=alpha, beta=beta, residual=residual, bias_axis=bias_axis,
                 out_dtype=out_dtype, scale=scale, scale_mode=scale_mode, amax=amax, stream=stream, spec=spec, c_tma=c_tma,
                 fp8_tma_store=fp8_tma_store, precision=fp32.TF32, aux=pre, dact=dact, scale_a=scale_a, scale_b=scale_b)
    if (scale_a is None) != (scale_b is None):
        raise ArgumentError("row-wise scaling takes both scale_a (M) and scale_b (N)")
    if ai.ndim == 3:  # torch.baddbmm's form: one fused launch per batch (fusedany.per_batch)
        if scale_a is not None:
            raise ArgumentError("scale_a/scale_b with a B x M x K a: pass 2-D a (the row scales are one batch's)")
        if pre is not None:
            raise ArgumentError("aux= with a B x M x K a: pass 2-D a (rows flattened) and an M x N aux")
        if fp8:
            raise ArgumentError("FP8 output (e4m3) with a B x M x K a: pass 2-D a (the per-row scale and amax are one batch's)")
        return per_batch(lambda x, y, o, cc, rr: gemm(x, y, o, **{**again, "c": cc, "residual": rr}), a, b, out, ai, bi, c, residual)
    m, n = ai.shape[0], bi.shape[0] if bi.ndim == 2 else -1
    fixed = {name: readable_aux(name, x, infos[name], m, n) for name, x in (("c", c if beta != 0 else None),
             ("residual", residual), ("bias", bias)) if x is not None}
    if any(fixed[name] is not again[name] for name in fixed):  # a packed copy the epilogue can read (fusedany)
        return gemm(a, b, out, **{**again, **fixed})
    remember = True
    if spec is None and ai.ndim == 2 and bi.ndim == 2:
        plan = pack_plan(ai, bi, None if fp8 else oi)
        narrow = narrow_spec(ai, bi, None if fp8 else oi, "bf16" if fp8 else out_dtype, plan) if plan else None
        if plan and narrow is None:
            return pack_operands(lambda x, y, o: gemm(x, y, o, **again), a, b, out, ai, bi, oi, plan)
        if narrow is not None:  # a pointer alone lowered the alignment: aligned calls of this key keep their entry
            spec, remember = narrow[0], not narrow[1]
    # beta = 0 ignores C, as torch.addmm does (C is not read, so NaNs in it do not propagate)
    chain = _chain(infos["bias"], bias_axis, activation, c is not None and beta != 0, residual is not None, infos["scale"],
                   scale_mode, m, alpha, c_tma, pre is not None, dact, scale_a is not None)
    if chain is None:  # nothing to fuse: the plain kernel (ptxgen.gemm's choice, without its dispatch cache)
        if spec is None:
            spec, _ = _gemm_spec(ai, bi, oi, out_dtype, None)
        return kernel_for(spec)._launch(a, b, out, ai, bi, oi, handle, stream)
    if spec is None:
        try:
            spec, _ = _gemm_spec(ai, bi, None if fp8 else oi, "bf16" if fp8 else out_dtype, None)
        except ArgumentError:
            mn = {i.name: "the tensor cores read this type only K-major" for i in (ai, bi)
                  if i.library in PACKABLE and i.ndim == 2 and major_of(i) is Major.MN}
            if not mn:
                raise
            return pack_operands(lambda x, y, o: gemm(x, y, o, **again), a, b, out, ai, bi, oi, mn)
    spec = fused_spec(spec, chain, "e4m3" if fp8 else (out_dtype or spec.out_dtype.value), fp8_tma_store)
    want = chain.aux_dtype(spec.out_dtype).value
    other = {name: converted(name, x, infos[name], want) for name, x in (("c", c if chain.c else None), ("residual", residual),
             ("aux", pre if chain.dact is not Activation.NONE else None)) if x is not None and type_problem(infos[name], want)}
    if other:  # c or residual of another type: a copy in the output's type, as torch.addmm reads it
        return gemm(a, b, out, **{**again, **other})
    kernel = kernel_for(spec)
    dev = streams.call_device((ai, bi, oi, *infos.values()))  # every tensor of the call on one device: its module, context
    allocated = out is None
    if allocated and fp8:
        if ai.library != "torch":
            raise ArgumentError("pass out= (an M x N e4m3 array): ptxgen allocates FP8 outputs only for torch tensors")
        torch = sys.modules["torch"]
        ldd = -(-n // 16) * 16
        full = torch.empty((m, ldd), dtype=torch.float8_e4m3fn, device=a.device)
        out = full if ldd == n else full[:, :n]
        oi = read_array(out, "out", handle)
    binding = bind(spec, ai, bi, oi)
    p = binding.problem
    if oi is None:
        out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, spec.out_dtype.value, dev.index)
        oi = read_array(out, "out", handle)
    extra, amax = _chain_args(chain, spec, infos, a, ai, amax, m, n, alpha, beta, handle)
    if p.m and p.n and ai.via == "torch" and all(i is None or i.via == "torch" for i in (oi, *infos.values())):
        e = _prepare(kernel, dev, p, ai, bi, oi, extra, chain, alpha, beta)
        if remember:
            _HOT.remember(hot_key(options, a, b, None if allocated else out, aux), e)
        r = e.call(a, b, out, (c, bias, residual, scale, amax, pre, scale_a, scale_b), float(alpha), float(beta),
                   None if stream is None else handle)
        if r is not None:
            return r
    if p.m and p.n:
        k = kernel.load(dev)
        with streams.on_device(dev):  # (split-K: the calling stream's workspace)
            launches, keep = workspace_launches(kernel.plan, k, (ai.ptr, bi.ptr, oi.ptr), p, dev, handle,
                                                a if ai.library == "torch" else None, extra)
            for kern, grid, block, args in launches:
                kern.launch(grid, block, args, handle)
        del keep  # a graph capture's workspace: released once the launch is queued
    return (out, amax) if chain.fp8_scale is not None else out
