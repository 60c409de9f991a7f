"""``ptxgen.api.fp8blocks.gemm``'s prepared launches: what a block-FP8 call with one dispatch key needs, built once by
the slow path (``fp8blocks._gemm_slow``) and reused (measured 2026-12-02: the slow path took 680-1240 us of host time a call, torch's
blockwise ``_scaled_mm`` 22-35; runs/2026-12-02-prepared-launch-energy/run5).

The dispatch key is every array's shape, strides, dtype and device (``a``, ``b``, ``scale_a``, ``scale_b``, ``out`` or
its absence), the requested output type and the spec asked for (None: ``chosen_spec``'s pick, which depends only on the
key and scale_a's alignment, which the key holds too). Pointers are not in it: a :class:`Fp8Launch` checks them per call
(A, B, D 16-byte aligned; scale_a 16 bytes with its tensor map, else 4; scale_b 4; ``out`` apart from A and B), points
its parameter block at them (launchplan.build_params' slots: a tensor map re-encoded only for a pointer not among its
last few, runtime.launch.params.MapSlot) and launches once. A pointer that breaks a rule sends the call down the slow path,
which says what is wrong. A stream-K kernel's workspace is its stream's (launchplan.streamk_workspace; a graph capture
gets its own), one more pointer of the compiled launch, remembered per stream after the stream's first call (checked
in C per call, capture included: launchplan.remember_workspace). Empty problems are not prepared.

Two tables lead to the same launches: one keyed by torch tensors' own attributes (no array-interface reading: the
hot path), one by :class:`ArrayInfo` (any array library; the arrays are still read per call).
"""

from __future__ import annotations

import threading

from ...derive.tile.kernel import KernelPlan
from ...runtime.launch.fastlaunch import compiled_launcher
from ...runtime.launch.launch import Problem
from ..arrays.binding import overlaps
from .launchplan import build_params, launch_checked, remember_workspace

C_ORDER = ("A", "B", "D", "SFA", "SFB")  # the compiled launcher's operands, in run_all's order
TABLE_ENTRIES = 64  # prepared launches kept per table (cleared when full: a changing shape stream rebuilds)


def torch_key(tensors) -> tuple:
    """The dispatch key's arrays part for torch tensors (None for an absent ``out``)."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.get_device()) for t in tensors)


def info_key(infos) -> tuple:
    return tuple(None if i is None else (i.shape, i.strides, i.dtype, i.device, i.library) for i in infos)


class Fp8Launch:
    """One prepared block-FP8 launch: ``kernel`` loaded, its grid and block, the parameter block with every integer
    written (``extra``: lds_a, lds_b) and a slot per pointer (A, B, D, SFA, SFB and stream-K's W). ``driver``: the
    ctypes driver (fastlaunch.launcher) to launch through (``kernel.func``); None: ``kernel.launch`` with the block (the
    simulated kernels of the CPU tests)."""

    def __init__(self, *, plan: KernelPlan, problem: Problem, kernel, grid, block, extra: dict, encode, driver,
                 ensure_context, device_index: int, spans: tuple[int, int, int], out_alloc, workspace=None,
                 span_c: int | None = None, c_is_out_layout: bool = False):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.driver, self.ensure_context, self.device_index = driver, ensure_context, device_index
        self.span_a, self.span_b, self.span_o = spans
        self.out_alloc = out_alloc  # (m, n, ldd, out dtype) for a call without ``out``
        self.swapped = False  # the 128x128 x 1x128 recipe: the kernel runs on (b, a, out.T), scale_b as its scale_a
        self.sfa_mask = 15 if plan.sfa_tma is not None else 3
        self._lock = threading.Lock()
        # the integers: lds_a, lds_b and, with the fused chain's C (the 1x128 x 1x128 recipe's D = C + A.B), alpha, beta, ldc
        self.params, self.slots = build_params(plan, problem, encode, {k: v for k, v in extra.items()
                                                                       if k in ("lds_a", "lds_b", "alpha", "beta", "ldc")})
        self.span_c = span_c  # C's extent in bytes (None: the kernel reads no C)
        self.c_may_be_out = c_is_out_layout  # C and out have one layout (the key's strides): out may be C itself
        assert set(self.slots) == ({"A", "B", "D", "SFA", "SFB"} | ({"W"} if plan.stream_k is not None else set())
                                   | ({"C"} if span_c is not None else set())), set(self.slots)
        self.workspace = workspace  # stream-K: (stream, torch tensor or None) -> (address, keep) of the stream's workspace
        # the compiled launcher (A, B, D, SFA, SFB patched and the launch made in one C call; stream-K: W last, the
        # stream's remembered workspace), where built
        self._c = None
        if driver is not None and span_c is None:  # a kernel reading C launches from Python
            order = C_ORDER + (("W",) if workspace is not None else ())
            self._c = compiled_launcher(driver, func=int(kernel.func), grid=grid, block=block, smem=kernel.dynamic_smem,
                                        params=self.params, operands=tuple(self.slots[r] for r in order),
                                        ensure_context=ensure_context, device_index=device_index, spans=spans,
                                        workspace=None if workspace is None else "stream_k")

    def pointers_ok(self, pa: int, pb: int, po: int, psa: int, psb: int) -> bool:
        if (pa | pb | po) & 15 or psa & self.sfa_mask or psb & 3:
            return False
        return not (overlaps(po, self.span_o, pa, self.span_a) or overlaps(po, self.span_o, pb, self.span_b))

    def c_ok(self, pc: int | None, po: int) -> bool:
        """C given exactly when the kernel reads it, 4-byte aligned, and either out itself or apart from it."""
        if (pc is None) != (self.span_c is None):
            return False
        return pc is None or not pc & 3 and (pc == po and self.c_may_be_out or not overlaps(po, self.span_o, pc, self.span_c))

    def run(self, ptrs: dict, stream: int, like=None) -> None:
        """Point every slot at ``ptrs`` (role -> address; checked by the caller) and launch on ``stream``; a stream-K
        kernel's W at ``stream``'s workspace (torch memory where ``like`` is a torch tensor)."""
        c = self._c
        if c is not None:
            args = (ptrs["A"], ptrs["B"], ptrs["D"], ptrs["SFA"], ptrs["SFB"])
            if not c.run_cached(*args, stream):  # stream-K: the stream's workspace not remembered yet (or a capture)
                self._run_workspace(args, stream, like)
            return
        keep = None
        with self._lock:
            if self.workspace is not None:
                ptrs["W"], keep = self.workspace(stream, like)
            for name, slot in self.slots.items():
                p = ptrs[name]
                if slot.ptr != p:
                    slot.point(p)
            if self.driver is None:
                self.kernel.launch(self.grid, self.block, self.params, stream)
            else:
                launch_checked(self.driver.launch, self.ensure_context, (int(self.kernel.func), *self.grid, *self.block,
                                                                        self.kernel.dynamic_smem, stream, self.params.address, None))
        del keep  # a graph capture's workspace: released once the launch is queued

    def _run_workspace(self, args: tuple, stream: int, like) -> None:
        """The compiled launch with the stream's workspace got here (launchplan.Launch._run_workspace's rules)."""
        with self._lock:
            w, keep = self.workspace(stream, like)
            self._c.run_all(*args, w, stream)
            remember_workspace(self._c, self.device_index, stream, w)
        del keep  # a graph capture's workspace: released once the launch is queued


class Fp8Table(dict):
    """Prepared launches by key, cleared when full."""

    def remember(self, key, entry: Fp8Launch) -> None:
        if len(self) >= TABLE_ENTRIES:
            self.clear()
        self[key] = entry
