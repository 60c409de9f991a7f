"""Batched GEMM arrays: ``a`` B x M x K with ``b`` B x N x K (or one N x K ``b`` shared by every batch), ``out``
B x M x N, run as ONE launch of a batched kernel (``spec.batch``: 3-D tensor maps with the batch as the outer
dimension, the batch the outer index of the tile walk; ptxgen.derive.operands.tma, docs/batched.md).

Binding checks each batch's plane exactly as a 2-D call's arrays are checked (``binding.bind``: dtypes, majorness,
leading dimensions, alignment, devices), then the batch dimension: equal batch counts, batch strides that keep the
batches apart and 16-byte aligned (``runtime.launch.launch.problem_errors``), ``out`` not overlapping an input anywhere.
"""

from __future__ import annotations

from dataclasses import replace

from ...derive.tile.spec import TileSpec
from ...isa.types import Batch
from ...runtime.launch.arrays import ArgumentError, ArrayInfo
from ...runtime.launch.launch import Problem, check_problem, global_shape
from .binding import Binding, _pad, bind, check_no_alias

_BATCH = "a B x M x K a with a B x N x K (or a shared N x K) b; out = a @ b.transpose(-1, -2), B x M x N"


def plane(info: ArrayInfo) -> ArrayInfo:
    """Batch 0 of a 3-D array as a 2-D ArrayInfo (same pointer, same name): what every batch looks like."""
    return replace(info, shape=info.shape[1:], strides=info.strides[1:])


def batch_kind(a: ArrayInfo, b: ArrayInfo) -> Batch:
    """How ``a`` and ``b`` are batched: Batch.A (``b`` shared: 2-D, or 3-D with batch stride 0), Batch.AB, or NONE
    (both 2-D). ArgumentError for a 2-D ``a`` with a 3-D ``b`` or arrays of other ranks."""
    if a.ndim == 2 and b.ndim == 2:
        return Batch.NONE
    if a.ndim != 3 or b.ndim not in (2, 3):
        raise ArgumentError(f"batched ptxgen.gemm takes {_BATCH}; got a of shape {a.shape} and b of shape {b.shape}")
    if b.ndim == 3 and b.shape[0] != a.shape[0] and b.shape[0] != 1:
        raise ArgumentError(f"a has {a.shape[0]} batches but b has {b.shape[0]}: pass {a.shape[0]} (or one shared N x K b)")
    if b.ndim == 2 or b.shape[0] == 1 or b.strides[0] == 0:
        return Batch.A
    return Batch.AB


def shared_b(b: ArrayInfo) -> ArrayInfo:
    """A shared ``b`` as the 2-D N x K array every batch reads (a 3-D ``b`` of one batch, or broadcast along it)."""
    return plane(b) if b.ndim == 3 else b


def _batch_stride(info: ArrayInfo, spec: TileSpec, name: str, p: Problem) -> int:
    """Elements between batches of operand ``name``; for one batch, the tight value (the map needs one that does
    not overlap, and never steps past batch 0)."""
    rows, ld = global_shape(spec, name, p)
    return info.strides[0] if info.shape[0] > 1 else rows * ld


def bind_batched(spec: TileSpec, a: ArrayInfo, b: ArrayInfo, out: ArrayInfo | None, empty_k_ok: bool = False) -> Binding:
    """Check batched arrays against a batched ``spec`` and infer the problem (M, N, K, leading dimensions, the batch
    count and the batch strides of A, B and D). ``out`` None: D is allocated B x M x ldd (ldd_batch = M x ldd)."""
    kind = batch_kind(a, b)
    if kind is Batch.NONE:
        raise ArgumentError(f"{spec.kernel_name} is a batched kernel: it takes {_BATCH}; got 2-D a and b")
    if kind is Batch.AB and spec.batch is Batch.A:
        raise ArgumentError(f"{spec.kernel_name} reads one N x K b shared by every batch (batch 'a'); b has {b.shape[0]} "
                            "batches: compile the spec with batch='ab'")
    batch = a.shape[0]
    b2 = shared_b(b) if spec.batch is Batch.A else plane(b)
    if out is not None:
        if out.ndim != 3 or out.shape[0] != batch:
            raise ArgumentError(f"out has shape {out.shape}, but a {a.shape} @ b.T is {(batch, a.shape[1], b2.shape[0])} "
                                "(B x M x N)")
    bound = bind(spec, plane(a), b2, None if out is None else plane(out), empty_k_ok)
    p = bound.problem
    if batch == 0 or 0 in (p.m, p.n, p.k):
        return Binding(replace(p, batch=batch), a, b, out)
    lda_batch = _batch_stride(a, spec, "a", p)
    ldb_batch = _batch_stride(b, spec, "b", p) if spec.batch is Batch.AB else 0
    if out is None:
        ldd_batch = p.m * p.ldd
    else:
        if out.shape[0] > 1 and out.strides[0] <= 0:
            raise ArgumentError(f"out has batch stride {out.strides[0]}: every batch needs its own M x N; pass a contiguous out")
        ldd_batch = out.strides[0] if batch > 1 else p.m * p.ldd
        check_no_alias(a, b, out)
    q = replace(p, batch=batch, lda_batch=lda_batch, ldb_batch=ldb_batch, ldd_batch=ldd_batch)
    check_problem(spec, q)
    return Binding(q, a, b, out)


def bind_any(spec: TileSpec, a: ArrayInfo, b: ArrayInfo, out: ArrayInfo | None, empty_k_ok: bool = False) -> Binding:
    """:func:`bind_batched` for a batched spec, ``binding.bind`` otherwise."""
    if spec.batch is Batch.NONE:
        return bind(spec, a, b, out, empty_k_ok)
    return bind_batched(spec, a, b, out, empty_k_ok)


def operand_problem(info: ArrayInfo, batched_operand: bool) -> str | None:
    """Why a batched kernel cannot read this 3-D operand as it is, beyond what its planes say (None: it can):
    batches that overlap or interleave with the rows (the 3-D map keeps its dimensions ordered by stride)."""
    if not batched_operand or info.ndim != 3 or info.shape[0] <= 1 or 0 in info.shape:
        return None
    rows, cols = info.shape[1:]
    s0, s1, s2 = info.strides
    if s0 <= 0:
        return "a broadcast or reversed batch dimension"
    k_major = cols <= 1 or s2 == 1
    ld_span = (rows * s1 if rows > 1 else _pad(cols, info.itemsize)) if k_major else (cols * s2 if cols > 1 else _pad(rows, info.itemsize))
    if s0 < ld_span:
        return f"its batches are {s0} elements apart, inside one batch's {ld_span}"
    if s0 * info.itemsize % 16:
        return f"its batches start {s0 * info.itemsize} B apart, not a multiple of 16 B"
    return None
