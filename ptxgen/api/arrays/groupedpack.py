"""Grouped GEMM arrays no grouped kernel reads as they are, and their packed copies (``ptxgen.grouped_gemm`` and the
scaled grouped calls; the plain path's rule, ``api.dispatch``, extended to the grouped door).

The grouped kernels read ``a`` (M_total x K) K-major through one tensor map over the stacked rows, ``b`` (G x N x K)
K-major as one (G N) x K matrix (or N-major through a 3-D map, 16-bit types only: wgmma reads tf32 and FP8 K-major
only), rows 16-byte aligned (TMA), and write ``out`` row-major with 16-byte aligned rows. A torch tensor or CuPy array
outside those rules (an M-major ``a``, a transposed tf32 or FP8 ``b``, rows not 16-byte aligned, ``b``'s groups with gaps
between them or broadcast, an ``out`` of another stride) is copied once into a packed K-major buffer (rows padded to 16
bytes) or computed into a fresh ``out`` and copied back, said once per reason with ``warnings.warn``. Other libraries'
arrays are refused by the binding (``api.arrays.groupedbind``), as the plain path refuses them.

:func:`pack_plan` decides (no GPU, ArrayInfo only: ``ptxgen.api.plan`` calls it too); ``packing.packed_info`` is the
ArrayInfo a packed copy will have; :func:`packed_copy` makes it.
"""

from __future__ import annotations

from typing import Callable

from ...runtime.launch.arrays import ArgumentError, ArrayInfo
from ...runtime.launch.launch import ROW_ALIGN_BYTES
from .groupedbind import _k_major_b, _k_major_rows, _n_major_b, b_is_n_major
from .packing import PACKABLE, copy_into, out_problem, packed_copy, warn_once

GROUPED_ADVICE = "pass K-major arrays with 16-byte aligned rows, b's groups one after another, to avoid the copy"


def _problem(check: Callable[[], object]) -> str | None:
    """The message of the ArgumentError ``check`` raises, None where it passes."""
    try:
        check()
    except ArgumentError as e:
        return str(e)
    return None


def _aligned(info: ArrayInfo) -> str | None:
    return None if info.ptr % ROW_ALIGN_BYTES == 0 else "its data does not start 16-byte aligned"


def a_problem(ai: ArrayInfo) -> str | None:
    """Why no grouped kernel reads this M_total x K ``a`` as it is (None: one does, or it is not ours to judge)."""
    if ai.ndim != 2 or 0 in ai.shape:
        return None
    m, k = ai.shape
    if k > 1 and ai.strides[1] != 1:
        return ("it is not K-major (grouped kernels read A K-major: the groups' rows are stacked along M, one M_total x K "
                "tensor map)")
    if m > 1 and ai.strides[0] <= 0:
        return "a broadcast view (stride 0)"
    return _problem(lambda: _k_major_rows(ai, m, k, "M_total x K")) or _aligned(ai)


def b_problem(bi: ArrayInfo, n_major_ok: bool) -> str | None:
    """Why no grouped kernel reads this G x N x K ``b`` as it is; ``n_major_ok``: a kernel of its type reads B N-major."""
    if bi.ndim != 3 or 0 in bi.shape:
        return None
    g, n, k = bi.shape
    if any(size > 1 and stride <= 0 for size, stride in zip(bi.shape, bi.strides)):
        return "a broadcast or reversed view"
    if b_is_n_major(bi):
        if not n_major_ok:
            return "it is N-major, and wgmma reads this type only K-major"
        return _problem(lambda: _n_major_b(bi, g, n, k)) or _aligned(bi)
    if k > 1 and bi.strides[2] != 1:
        return "neither N nor K is contiguous"
    return _problem(lambda: _k_major_b(bi, g, n, k)) or _aligned(bi)


def pack_plan(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, n_major_ok: bool) -> dict[str, str]:
    """{argument name: why} for the torch/CuPy arrays of a grouped call that need a packed copy (``a``, ``b``) or a fresh
    output copied back (``out``). Shapes and types that are wrong anyway are left to the binding's checks."""
    plan = {}
    if ai.ndim != 2 or bi.ndim != 3 or ai.shape[1] != bi.shape[2]:
        return plan
    for name, info, why in (("a", ai, a_problem), ("b", bi, lambda i: b_problem(i, n_major_ok))):
        if info.library in PACKABLE:
            w = why(info)
            if w:
                plan[name] = w
    if oi is not None and oi.library in PACKABLE:
        w = out_problem(oi, ai.shape[0], bi.shape[1])
        if w:
            plan["out"] = w
    return plan


def packed_call(fn, args: dict, infos: dict, packs: dict, kwargs: dict, op: str):
    """``fn(**args, **kwargs)`` with the operands named in ``packs`` replaced by packed copies, and an ``out`` named there
    computed fresh and copied into (each reason said once)."""
    for name in ("a", "b"):
        if name in packs:
            warn_once(name, packs[name], "computing with a packed K-major copy", op, GROUPED_ADVICE)
            args[name] = packed_copy(args[name], infos[name])
    if "out" not in packs:
        return fn(**args, **kwargs)
    warn_once("out", packs["out"], "computing into a fresh output and copying it into out", op, GROUPED_ADVICE)
    out, oi = args["out"], infos["out"]
    result = fn(**{**args, "out": None}, **{**kwargs, "out_dtype": kwargs.get("out_dtype") or oi.dtype})
    copy_into(out, oi, result)
    return out
