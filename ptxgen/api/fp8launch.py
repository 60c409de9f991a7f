"""``ptxgen.api.fp8blocks.gemm``'s prepared launches: what a block-FP8 call with one dispatch key needs, built once by
the slow path (``fp8blocks._gemm_slow``) and reused (s9: the slow path took 680-1240 us of host time a call, torch's
blockwise ``_scaled_mm`` 22-35; runs/2026-12-02-s9-probe/call5).

The dispatch key is every array's shape, strides, dtype and device (``a``, ``b``, ``scale_a``, ``scale_b``, ``out`` or
its absence), the requested output type and the spec asked for (None: ``chosen_spec``'s pick, which depends only on the
key and scale_a's alignment, checked per call). Pointers are not in it: a :class:`Fp8Launch` checks them per call (A,
B, D 16-byte aligned; scale_a 16 bytes with its tensor map, else 4; scale_b 4; ``out`` apart from A and B), points the
argument block at them (a tensor map re-encoded only when its pointer changed, the last few kept) and launches once.
A pointer that breaks a rule sends the call down the slow path, which says what is wrong. A stream-K kernel's
workspace is its stream's (launchplan.streamk_workspace, per call: a graph capture gets its own). Empty problems are
not prepared.

Two tables lead to the same launches: one keyed by torch tensors' own attributes (no array-interface reading: the
hot path), one by :class:`ArrayInfo` (any array library; the arrays are still read per call).
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from dataclasses import replace

from ..derive.abi import SFA_MAP
from ..derive.kernel import KernelPlan
from ..runtime.fastlaunch import RETRY_WITH_CONTEXT, error_name
from ..runtime.gpu import CudaError, KernelArgs
from ..runtime.launch import Problem, map_args, sfa_map_args
from .binding import overlaps

MAP_CACHE = 8  # encoded maps kept per tensor-map argument (a caller alternating between buffers re-encodes nothing)
TABLE_ENTRIES = 64  # prepared launches kept per table (cleared when full: a changing shape stream rebuilds)


def torch_key(tensors) -> tuple:
    """The dispatch key's arrays part for torch tensors (None for an absent ``out``)."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.get_device()) for t in tensors)


def info_key(infos) -> tuple:
    return tuple(None if i is None else (i.shape, i.strides, i.dtype, i.device, i.library) for i in infos)


class _Slot:
    """One argument that carries a pointer: raw (``template`` None) or a tensor map encoded from ``template``."""

    def __init__(self, args: KernelArgs, index: int, role: str, template=None, encode=None):
        self.value, self.role, self.template, self.encode = args.values[index], role, template, encode
        self.ptr = None
        self._maps: OrderedDict = OrderedDict()

    def point(self, ptr: int) -> None:
        if self.template is None:
            self.value.value = ptr
        else:
            data = self._maps.get(ptr)
            if data is None:
                data = self._maps[ptr] = self.encode(replace(self.template, global_address=ptr))
                if len(self._maps) > MAP_CACHE:
                    self._maps.popitem(last=False)
            ctypes.memmove(self.value.address, data, len(data))
        self.ptr = ptr


class Fp8Launch:
    """One prepared block-FP8 launch: ``kernel`` loaded, its grid and block, the argument block with every integer
    written and a slot per pointer argument (``args``: the first call's, pointing at ``ptrs``). ``driver``: the ctypes driver (fastlaunch.launcher) to launch through
    (``kernel.func``); None: ``kernel.launch`` (the simulated kernels of the CPU tests)."""

    def __init__(self, *, plan: KernelPlan, problem: Problem, kernel, grid, block, args: KernelArgs, extra: dict, encode,
                 driver, ensure_context, device_index: int, spans: tuple[int, int, int], out_alloc, ptrs: dict,
                 workspace=None):
        self.kernel, self.grid, self.block, self.args = kernel, grid, block, args
        self.driver, self.ensure_context, self.device_index = driver, ensure_context, device_index
        self.span_a, self.span_b, self.span_o = spans
        self.out_alloc = out_alloc  # (m, n, ldd, out dtype) for a call without ``out``
        self.sfa_mask = 15 if plan.sfa_tma is not None else 3
        self._lock = threading.Lock()
        self.slots = []
        for i, q in enumerate(plan.abi.params):
            if q.kind == "tensormap" and q.name == SFA_MAP:
                self.slots.append(_Slot(args, i, "SFA", sfa_map_args(plan, 0, extra["lds_a"], problem), encode))
            elif q.kind == "tensormap":
                operand = q.name[-1]
                self.slots.append(_Slot(args, i, operand.upper(), map_args(plan, operand, 0, problem), encode))
            elif q.kind == "ptr" or (q.kind == "wptr" and q.name == "W"):
                self.slots.append(_Slot(args, i, q.name))
        roles = {s.role for s in self.slots}
        assert roles == {"A", "B", "D", "SFA", "SFB"} | ({"W"} if plan.stream_k is not None else set()), roles
        self.workspace = workspace  # stream-K: (stream, torch tensor or None) -> (address, keep) of the stream's workspace
        for s in self.slots:  # ``args`` holds the first call's arguments: its pointers' maps are already in place
            s.ptr = ptrs[s.role]

    def pointers_ok(self, pa: int, pb: int, po: int, psa: int, psb: int) -> bool:
        if (pa | pb | po) & 15 or psa & self.sfa_mask or psb & 3:
            return False
        return not (overlaps(po, self.span_o, pa, self.span_a) or overlaps(po, self.span_o, pb, self.span_b))

    def run(self, ptrs: dict, stream: int, like=None) -> None:
        """Point every slot at ``ptrs`` (role -> address; checked by the caller) and launch on ``stream``; a stream-K
        kernel's W at ``stream``'s workspace (torch memory where ``like`` is a torch tensor)."""
        keep = None
        with self._lock:
            if self.workspace is not None:
                ptrs["W"], keep = self.workspace(stream, like)
            for s in self.slots:
                p = ptrs[s.role]
                if s.ptr != p:
                    s.point(p)
            if self.driver is None:
                self.kernel.launch(self.grid, self.block, self.args, stream)
            else:
                self._launch(stream)
        del keep  # a graph capture's workspace: released once the launch is queued

    def _launch(self, stream: int) -> None:
        launch = (int(self.kernel.func), *self.grid, *self.block, self.kernel.dynamic_smem, stream, self.args.address, None)
        rc = self.driver.launch(*launch)
        if rc in RETRY_WITH_CONTEXT:  # a thread without the primary context current: set it, once
            self.ensure_context()
            rc = self.driver.launch(*launch)
        if rc:
            raise CudaError(f"cuLaunchKernel failed: {error_name(rc)} ({rc})")


class Fp8Table(dict):
    """Prepared launches by key, cleared when full."""

    def remember(self, key, entry: Fp8Launch) -> None:
        if len(self) >= TABLE_ENTRIES:
            self.clear()
        self[key] = entry
