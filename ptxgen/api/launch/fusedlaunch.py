"""The fused epilogue's prepared launches: ``ptxgen.gemm(a, b, out, bias=, activation=, c=, residual=, ...)`` on the
hot path.

The first call with a dispatch key runs ``fused.gemm``'s slow path (the chooser, the chain, the spec, every argument
check, the compile) and leaves a :class:`FusedLaunch` here. The key is what decides the kernel and its parameter block:
the call's options (activation, bias axis, output type, FP8 scale mode, C through TMA, whether alpha is 1 and beta 0)
and the shape, strides, dtype and device of every tensor (``a``, ``b``, ``out``, ``c``, ``bias``, ``residual``,
``scale``, ``amax``, ``aux``, rowscale's ``scale_a`` and ``scale_b``; None for an absent one). Pointers and the values of alpha and beta are not in it: a repeat call
reads the pointers, checks each against the rule its slot has (the plain launch's for A, B and D; C and the residual on
column pairs, vectors 8 bytes, C through TMA 16), writes those that changed into the parameter block, alpha and beta
where they changed, and launches once through the plain kernel's :class:`launchplan.Launch` (the compiled launcher
where it was built). A pointer that breaks a rule sends the call down the slow path, which says what is wrong.
"""

from __future__ import annotations

import sys
import threading

from .launchplan import Launch

# the auxiliary tensors of a fused call, in the order the hot path takes them, with their parameter-block slot
from .hotkeys import torch_key
AUX_ROLES = (("c", "C"), ("bias", "BIAS"), ("residual", "RES"), ("scale", "SCALE"), ("amax", "AMAX"), ("aux", "AUX"),
             ("scale_a", "SCALE_A"), ("scale_b", "SCALE_B"))
AMAX_AT = 4  # amax's place in AUX_ROLES (allocated per call when the caller passes none)
VECTOR_ALIGN_MASK = 7  # bias, scale, amax and rowscale's scale_b start 8-byte aligned (fused._vector)
F32_ALIGN_MASK = 3  # rowscale's scale_a: read one f32 at a time
TMA_ALIGN_MASK = 15  # C read through TMA: a 16-byte aligned base
TABLE_ENTRIES = 256  # prepared launches kept (the table is emptied when full: a changing shape stream rebuilds)


def meta(x) -> tuple | None:
    """What of one torch tensor (or None) decides a launch: shape, strides, dtype, device."""
    return None if x is None else (x.shape, x.stride(), x.dtype, x.get_device())


def hot_key(options: tuple, a, b, out, aux: tuple) -> tuple:
    """The dispatch key of a fused call on torch tensors (``aux``: the tensors of AUX_ROLES, or None each)."""
    return (options, torch_key(a, b, out), *(meta(x) for x in aux))


class FusedLaunch:
    """One prepared fused launch. ``launch``: the plain kernel's prepared launch of the fused spec, built with the
    chain's scalars (``Launch(extra=...)``), whose block carries the chain's pointer slots too. ``pair_mask``: the
    alignment mask of C's, the residual's and the pre-activation's (aux) pointers (column pairs); ``c_tma``: C is read through TMA.
    ``amax_len``: FP8 output: the amax vector's length (allocated as zeros per call when the caller passes none);
    None: a 16-bit or f32 output."""

    def __init__(self, launch: Launch, param_index: dict, pair_mask: int, c_tma: bool, alpha: float, beta: float,
                 amax_len: int | None, name: str = ""):
        self.launch, self.name = launch, name  # name: the kernel's
        slots = launch.extra_slots
        self.aux_slots = tuple(slots.get(role) for _, role in AUX_ROLES)
        self._patched = tuple(i for i, (_, role) in enumerate(AUX_ROLES) if role in launch.extra_order)  # run_all's
        masks = {"C": TMA_ALIGN_MASK if c_tma else pair_mask, "RES": pair_mask, "AUX": pair_mask, "SCALE_A": F32_ALIGN_MASK}
        self.aux_masks = tuple(masks.get(role, VECTOR_ALIGN_MASK) for _, role in AUX_ROLES)
        self._alpha_at, self._beta_at = param_index.get("alpha"), param_index.get("beta")
        self.alpha, self.beta = alpha, beta  # the values the block holds
        self.amax_len = amax_len
        self._lock = threading.Lock()

    def call(self, a, b, out, aux: tuple, alpha: float, beta: float, stream):
        """The hot call for torch tensors of this launch's key: ``out`` (with FP8 output ``(out, amax)``), or None
        when a pointer rules it out (the slow path then says why)."""
        e = self.launch
        pa, pb = a.data_ptr(), b.data_ptr()
        allocated = out is None
        if allocated:
            if (pa | pb) & e.in_mask:
                return None
            out = e._allocate_torch(a)
        po = out.data_ptr()
        if not e.pointers_ok(pa, pb, po):
            return None
        amax = aux[AMAX_AT]
        if self.amax_len is not None and amax is None:
            torch = sys.modules["torch"]
            amax = torch.zeros(self.amax_len, dtype=torch.float32, device=a.device)
            aux = aux[:AMAX_AT] + (amax,) + aux[AMAX_AT + 1:]
        ptrs = [pa, pb, po]
        masks = self.aux_masks
        for i in self._patched:
            p = aux[i].data_ptr()
            if p & masks[i]:
                return None
            ptrs.append(p)
        if stream is None:
            stream = e._torch_stream(e.device_index)
        with self._lock:  # the scalars, then the pointers and the launch, under one lock
            if alpha != self.alpha:
                e.block.set(self._alpha_at, alpha)
                self.alpha = alpha
            if self._beta_at is not None and beta != self.beta:
                e.block.set(self._beta_at, beta)
                self.beta = beta
            e.run_all(ptrs, stream, a)
        return (out, amax) if self.amax_len is not None else out


class FusedTable(dict):
    """Prepared fused launches by :func:`hot_key`, emptied when full."""

    def remember(self, key, entry: FusedLaunch) -> None:
        if len(self) >= TABLE_ENTRIES:
            self.clear()
        self[key] = entry
