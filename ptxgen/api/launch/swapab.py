"""Swap-AB launches for :func:`ptxgen.gemm` (``runtime.choose``'s swap-ab rule; docs/performance.md).

For ``out = a @ b.T`` with few rows of ``a`` against large weights ``b``, the chosen kernel computes
``D' = b @ a.T`` (its A is ``b``, its B is ``a``; the weights' N rows take the MMA's M) and stores D' M-major
(``--d-major m``, ``derive.store.output``): D' is N x M with element (i, j) at ``j x ldd + i``, which is exactly the
row-major M x N ``out`` with ``ldd`` its row pitch. So the kernel is called as ``kernel(b, a, out.T)``; ``out.T``
has the same data pointer as ``out``. With the TMA-store epilogue (``runtime.choose.rules.SWAP_TMA_STORE``) D's tensor map is encoded
over ``out`` itself: inner dimension the kernel's M (``out``'s N columns), rows ``ldd`` apart; an ``out`` ptxgen allocates
then has rows padded to 16 bytes (a view of its first N columns).

The hot path: :class:`SwappedLaunch` wraps the kernel's prepared launch for ``(b, a, out.T)`` and is entered in
ptxgen.gemm's swapped table under the dispatch key of ``(b, a, out)``; ``hot_gemm(table, out_dtype, b, a, out)``
(the compiled launcher) then patches ``b`` as A, ``a`` as B and ``out``'s pointer as D and launches, and allocates
a missing ``out`` through :meth:`SwappedLaunch._allocate_torch` (row-major M x N).
"""

from __future__ import annotations

import dataclasses

from ...runtime.launch.arrays import ArrayInfo
from . import streams
from ..arrays.binding import _allocate_out, _m_major_alloc_ld
from ..kernel import CompiledKernel, _record_torch_stream
from .launchplan import Launch
from .hotkeys import torch_key


class SwappedLaunch:
    """A swap-AB entry of the hot tables: ``inner`` is the kernel's Launch for ``(b, a, out.T)``."""

    def __init__(self, inner: Launch):
        self.inner = inner
        self._c = inner._c  # the compiled launcher: hot_gemm launches through it with (b, a, out)

    def _allocate_torch(self, like):
        """A fresh row-major M x N ``out`` (the inner launch allocates its N x M M-major view; this is its transpose)."""
        return self.inner._allocate_torch(like).t()

    def call_torch(self, b, a, out, stream):
        """The Python hot path, arguments in the swapped order: ``out = a @ b.T``; None where a pointer rule declines."""
        if out is None:
            out = self._allocate_torch(b)
        return self.inner.call_torch(b, a, out, stream)  # only out's data pointer is read: out.T's


def transposed(info: ArrayInfo) -> ArrayInfo:
    """The ArrayInfo of ``out.T`` (same pointer; shape and strides reversed)."""
    return dataclasses.replace(info, shape=info.shape[::-1], strides=info.strides[::-1])


def launch_swapped(kernel: CompiledKernel, a, b, out, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, handle: int,
                   stream) -> tuple[object, SwappedLaunch | None]:
    """``out = a @ b.T`` through ``kernel`` (an M-major D) called as ``kernel(b, a, out.T)``: (out, the hot-table entry for
    torch tensors, or None). Allocates ``out`` (row-major M x N) for torch and CuPy inputs when it is None."""
    m, n = ai.shape[0], bi.shape[0]
    allocated = out is None and ai.library in ("torch", "cupy")
    if allocated:
        dev = streams.call_ordinal((ai, bi))
        # rows n elements apart; 16-byte aligned rows where the TMA store writes D through a tensor map (a view of them)
        out = _allocate_out(a, ai.library, m, n, _m_major_alloc_ld(kernel.spec, n), kernel.spec.out_dtype.value, dev)
        from ...runtime.launch.arrays import read_array

        oi = read_array(out, "out", handle)
    out_t = None if out is None else out.T
    kernel._launch(b, a, out_t, bi, ai, None if oi is None else transposed(oi), handle, stream)
    if out is None:  # not reached: kernel._launch refuses a missing out for other libraries
        return None, None
    if allocated and ai.library == "torch":
        _record_torch_stream(out, stream, handle)
    entry = None
    if ai.via == "torch" and bi.via == "torch" and oi.via == "torch":
        inner = kernel._torch_entries.get(torch_key(b, a, out_t))
        entry = SwappedLaunch(inner) if inner is not None else None
    return out, entry
