"""``ptxgen.api.fp8blocks.gemm``'s prepared launches: what a block-FP8 call with one dispatch key needs, built once by
the slow path (``fp8blocks._gemm_slow``) and reused (measured 2026-12-02: the slow path took 680-1240 us of host time a call, torch's
blockwise ``_scaled_mm`` 22-35; runs/2026-12-02-prepared-launch-energy/run5).

The dispatch key is every array's shape, strides, dtype and device (``a``, ``b``, ``scale_a``, ``scale_b``, ``out`` or
its absence), the requested output type and the spec asked for (None: ``chosen_spec``'s pick, which depends only on the
key and scale_a's alignment, which the key holds too). Pointers are not in it: a :class:`Fp8Launch` checks them per call
(A, B, D 16-byte aligned; scale_a 16 bytes with its tensor map, else 4; scale_b 4; ``out`` apart from A and B), points
its parameter block at them (launchplan.build_params' slots: a tensor map re-encoded only for a pointer not among its
last few, runtime.launch.params.MapSlot) and launches once. A pointer that breaks a rule sends the call down the slow path,
which says what is wrong. A stream-K kernel's workspace is its stream's (launchplan.streamk_workspace, per call: a graph
capture gets its own). Empty problems are not prepared.

Two tables lead to the same launches: one keyed by torch tensors' own attributes (no array-interface reading: the
hot path), one by :class:`ArrayInfo` (any array library; the arrays are still read per call).
"""

from __future__ import annotations

import threading

from ...derive.tile.kernel import KernelPlan
from ...runtime.launch.fastlaunch import compiled_launcher
from ...runtime.launch.launch import Problem
from ..arrays.binding import overlaps
from .launchplan import build_params, launch_checked

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
                 ensure_context, device_index: int, spans: tuple[int, int, int], out_alloc, workspace=None):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.driver, self.ensure_context, self.device_index = driver, ensure_context, device_index
        self.span_a, self.span_b, self.span_o = spans
        self.out_alloc = out_alloc  # (m, n, ldd, out dtype) for a call without ``out``
        self.sfa_mask = 15 if plan.sfa_tma is not None else 3
        self._lock = threading.Lock()
        self.params, self.slots = build_params(plan, problem, encode, {"lds_a": extra["lds_a"], "lds_b": extra["lds_b"]})
        assert set(self.slots) == {"A", "B", "D", "SFA", "SFB"} | ({"W"} if plan.stream_k is not None else set()), set(self.slots)
        self.workspace = workspace  # stream-K: (stream, torch tensor or None) -> (address, keep) of the stream's workspace
        self._c = None  # the compiled launcher (A, B, D, SFA, SFB patched and the launch made in one C call), where built
        if workspace is None and driver is not None:
            self._c = compiled_launcher(driver, func=int(kernel.func), grid=grid, block=block, smem=kernel.dynamic_smem,
                                        params=self.params, operands=tuple(self.slots[r] for r in C_ORDER),
                                        ensure_context=ensure_context, device_index=device_index, spans=spans)

    def pointers_ok(self, pa: int, pb: int, po: int, psa: int, psb: int) -> bool:
        if (pa | pb | po) & 15 or psa & self.sfa_mask or psb & 3:
            return False
        return not (overlaps(po, self.span_o, pa, self.span_a) or overlaps(po, self.span_o, pb, self.span_b))

    def run(self, ptrs: dict, stream: int, like=None) -> None:
        """Point every slot at ``ptrs`` (role -> address; checked by the caller) and launch on ``stream``; a stream-K
        kernel's W at ``stream``'s workspace (torch memory where ``like`` is a torch tensor)."""
        c = self._c
        if c is not None:
            c.run_all(ptrs["A"], ptrs["B"], ptrs["D"], ptrs["SFA"], ptrs["SFB"], stream)
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


class Fp8Table(dict):
    """Prepared launches by key, cleared when full."""

    def remember(self, key, entry: Fp8Launch) -> None:
        if len(self) >= TABLE_ENTRIES:
            self.clear()
        self[key] = entry
