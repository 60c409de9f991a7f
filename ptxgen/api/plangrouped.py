"""``ptxgen.api.plan`` (ptxgen.api.callplan) for the grouped doors: ``ptxgen.grouped_gemm`` (2-D ``a`` with ``offs``,
or the batched 3-D form) and the FP8 grouped products ``scaled_grouped_gemm`` and ``blockscaled_grouped_gemm``, each
walking the door's own decisions (``grouped.grouped_decision``, the spec the door takes, the bindings that check every
argument) without a GPU."""

from __future__ import annotations

from dataclasses import replace

from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from .arrays.precision import split_infos
from .planbase import CallPlan, Path, Target, _dense, _made, _precision, _read

# ------------------------------------------------------------------------------------------------
# grouped (ptxgen.grouped; the K-grouped form: ptxgen.kgrouped)
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
    from .arrays.packing import packed_info

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
        tile = f"{spec.bm} x {spec.bn}" + (f" in a {spec.cluster.value} cluster multicasting B" if spec.cluster.size > 1
                                           else " without a cluster (M within one tile row)")
        return _made(op, t, Path.HOT, "the K-grouped form (2-D a and b, offs along K) with row-wise scales "
                     "(torch._scaled_grouped_mm 2-D x 2-D): kgrouped_spec(rowwise=True), A and B K-major; "
                     f"{tile} (kgrouped.fp8_variant)", spec)
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


def _plan_blocks_k(args: dict, t: Target) -> CallPlan:
    """ptxgen.blockscaled_grouped_gemm_k: the K-grouped kernel with 1 x 128 scales on both operands (one tile)."""
    from ..kgrouped import decide

    ai, bi, fi, oi, sa, sb = _read(args, "a", "b", "offs", "out", "scale_a", "scale_b")
    spec = decide(ai, bi, fi, oi, args.get("out_dtype"), t.arch, (sa, sb), blocks=True)[0]
    return _made("blockscaled_grouped_gemm_k", t, Path.HOT, "the K-grouped form (2-D a and b, offs along K) with 1 x 128 "
                 "scales on both operands (DeepGEMM's k-grouped 1D1D): kgrouped_spec(blocks=True), A and B K-major, "
                 f"{spec.bm} x {spec.bn}, {spec.out_dtype.value} out; a group off the 128-blocks of K gets NaN", spec)
