"""A prepared launch: everything a call with one dispatch key needs, built once by the slow path.

The dispatch key is what decides the kernel and its launch: each array's shape, strides, dtype and device
(and, for :func:`ptxgen.gemm`, the requested output type). Pointers are not in it: a :class:`Launch` checks
them per call (16-byte aligned, ``out`` not overlapping an input), writes them into its pre-packed
parameter block (re-encoding a tensor map only when its pointer changed, see ``runtime.launch.params``) and calls
``cuLaunchKernel`` once. No spec, no derivation, no JSON, no hashing, no synchronisation on that path.

Where the compiled launcher was built (``runtime.launch.fastlaunch.compiled_launcher``), a Launch holds one (``_c``)
and every launch goes through it (split-K's and stream-K's too: the calling stream's workspace is its last pointer,
remembered per stream in C after the stream's first call, see :func:`remember_workspace`); for torch tensors the
whole hot call (dispatch key, lookup, pointers, checks, launch) is one C call: ``CompiledKernel``'s call itself
(``hotkeys.KernelBase``) and ``ptxgen.gemm``'s ``hotkeys.hot_table``, each remembering its table's last hit and comparing
a call's metadata with it field by field before any key is built (``hotkeys.LaunchTable``; the dispatch keys are there
too: ptxgen.api.launch.hotkeys). Otherwise the Python path below runs.
"""

from __future__ import annotations

import sys
import threading

from ...derive.tile.abi import SFA_MAP
from ...derive.tile.kernel import KernelPlan
from ...runtime.launch.fastlaunch import RETRY_WITH_CONTEXT, compiled_launcher, error_name, launcher
from ...runtime.launch.gpu import CudaError
from ...runtime.launch.launch import C_MAP, Problem, c_map_args, check_workspace_launch, map_args, sfa_map_args, workspace_bytes
from ...runtime.launch.params import MapSlot, ParamBlock, PtrSlot, SlotGroup
from ..arrays.binding import overlaps

TORCH_OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "s32": "int32", "e4m3": "float8_e4m3fn"}


def build_params(plan: KernelPlan, p: Problem, encode, extra: dict | None = None) -> tuple[ParamBlock, dict]:
    """The parameter block for problem ``p`` with every integer written, and the pointer slot of A, B and D
    (tensor-map or raw-pointer parameters, or a group of both; a map is encoded by ``encode`` when its
    pointer is first set). ``extra``: the integers the problem does not hold (block FP8's lds_a and lds_b, which
    also shape scale_a's tensor map: its slot is ``SFA``, ptxgen.api.launch.fp8launch; the fused epilogue's alpha, beta, ldc
    and ldr, ptxgen.api.launch.fusedlaunch); any other pointer parameter gets a slot by its name (SFA, SFB, W, and the fused
    epilogue's C, BIAS, RES, SCALE, AMAX; C read through TMA: ``tmap_c`` joins C's slot)."""
    params = plan.abi.params
    block = ParamBlock(["ptr" if q.kind == "wptr" else q.kind for q in params])
    slots = {}
    for i, q in enumerate(params):
        if q.kind == "tensormap" and q.name == C_MAP:
            slots.setdefault("C", []).append(MapSlot(block, i, c_map_args(plan, 0, extra["ldc"], p), encode))
        elif q.kind == "tensormap" and q.name == SFA_MAP:
            if extra is None:  # block FP8 launches through ptxgen.api.fp8blocks only
                raise ValueError(f"{plan.abi.name}: scale_a's tensor map is built by ptxgen.api.fp8blocks.gemm, not this launch path")
            slots.setdefault("SFA", []).append(MapSlot(block, i, sfa_map_args(plan, 0, extra["lds_a"], p), encode))
        elif q.kind == "tensormap":
            operand = q.name[-1]  # tmap_a, tmap_b, tmap_d
            template = map_args(plan, operand, 0, p)
            slots.setdefault(operand.upper(), []).append(MapSlot(block, i, template, encode))
        elif q.kind in ("ptr", "wptr"):  # W: split-K's or stream-K's workspace, patched per stream; AMAX: the fused FP8 output's
            slots.setdefault(q.name, []).append(PtrSlot(block, i))
        else:
            block.set(i, extra[q.name] if extra and q.name in extra else p.value(q.name))
    missing = {"A", "B", "D"} - set(slots)
    if missing:
        raise ValueError(f"{plan.abi.name}: no parameter carries {', '.join(sorted(missing))}")
    return block, {name: group[0] if len(group) == 1 else SlotGroup(group) for name, group in slots.items()}


# Split-K and stream-K workspaces (ptxgen.derive.store.streamk: int32 flags, then the f32 partial tiles of the last
# round's splits; ptxgen.derive.store.splitk: int32 tile counters in the same FLAG_REGION_BYTES, then every split's
# partial tile). The kernel needs the flags zero when it starts and leaves them zero when it ends: each stream-K flag
# belongs to one owner (a last-round tile, CTA rank, consumer warpgroup), which waits until it reads S - 1 (every split
# z > 0 has stored its slot and counted), then stores 0; each split-K counter is reset by the last of the S splits to
# count on it (its add returns S - 1); nothing adds to either after that in the launch (templates/mma_wgmma.cuh.j2
# streamk_open, splitk_open; tests/test_streamk_api.py replays the flag protocol against the plan, tests/test_splitk.py
# the counter protocol for every arrival order). So the flags are zeroed once,
# when a workspace is allocated (cuMemsetD32Async on the launch's stream, ahead of the kernel in stream order), and
# the partial slots need no initialization (every slot an owner reads was written in the same launch).
#
# One workspace per (device, stream), grown (never shrunk) to the largest launch seen; an outgrown one is kept for the
# process (a launch queued on it, or a CUDA graph that captured it, may still use it). Two launches on one stream are
# serialized by the stream, so they share it safely; calls on two streams never share one. A compiled launch remembers
# the workspace it was given per stream (remember_workspace: the same rules, checked in C per call, capture included)
# and keeps it after another launch outgrew it (still allocated, its flags zero between launches). Inside a CUDA graph
# capture
# every launch gets a fresh workspace from the graph's memory pool (torch tensors only) with the flag memset captured
# ahead of the kernel: graphs never share a workspace with eager calls or with one another, and each replay starts
# from zero flags whatever the previous replay did.
#
# A launch that starts but does not finish leaves flags non-zero. On CUDA that happens only with a sticky error (an
# illegal address, a trap, a device reset): the context is unusable after it, and so is every workspace in it. A
# launch the driver refuses (cuLaunchKernel returns an error) never ran and left the flags as they were: zero.
STREAMK_MIN_WORKSPACE_BYTES = 1 << 20
_STREAMK_WORKSPACES: dict = {}  # (device, stream) -> (address, bytes, owner)
_WORKSPACE_LOCK = threading.Lock()
_STREAMK_OUTGROWN: list = []
_STREAMK_CAPTURED: list = []  # capture workspaces on a stream other than torch's current one (kept: see streamk_workspace)


def allocate_device_bytes(nbytes: int, torch_like=None, device_index: int = 0) -> tuple[int, object]:
    """(address, owner) of ``nbytes`` of device memory on ``device_index``: torch memory where ``torch_like`` is a tensor
    (on its device; inside a graph capture: the graph's pool), else cuMemAlloc in that device's primary context."""
    if torch_like is not None:
        t = torch_like.new_empty((nbytes,), dtype=sys.modules["torch"].uint8)
        return t.data_ptr(), t
    from ...runtime.launch.gpu import Buffer
    from . import streams

    with streams.on_device(streams.device(device_index)):
        b = Buffer(nbytes)
    return b.address, b


def _zero_flags(driver, address: int, stream: int, ensure_context=None) -> None:
    from ...derive.store.streamk import FLAG_REGION_BYTES

    args = (address, 0, FLAG_REGION_BYTES // 4, stream)
    rc = driver.memset_d32_async(*args)
    if rc in RETRY_WITH_CONTEXT and ensure_context is not None:
        rc = _retried(driver.memset_d32_async, ensure_context, args)
    if rc:
        raise CudaError(f"cuMemsetD32Async (stream-K flags) failed: {error_name(rc)} ({rc})")


def streamk_workspace(driver, device_index: int, stream: int, nbytes: int, torch_like=None,
                      ensure_context=None) -> tuple[int, object]:
    """(address, keep) of a stream-K (or split-K) workspace of at least ``nbytes`` for a launch on ``stream`` with its
    flags zero in the stream's order (see the comment above); ``keep``: an owner the caller holds until the launch is
    queued (a capture's workspace), else None."""
    rc, status = driver.capture_status(stream)
    if rc in RETRY_WITH_CONTEXT and ensure_context is not None:
        rc, status = _retried(driver.capture_status, ensure_context, (stream,))
    if rc:
        raise CudaError(f"cuStreamIsCapturing failed: {error_name(rc)} ({rc})")
    if status:  # capturing (or a capture invalidated: the launch that follows fails as the driver says)
        if torch_like is None:
            from ...runtime.launch.arrays import ArgumentError

            raise ArgumentError("a stream-K or split-K kernel inside a CUDA graph capture takes torch tensors (its workspace "
                                "comes from the graph's memory pool); pass torch tensors, or capture a kernel compiled with "
                                "stream_k=1 and split_k=1")
        address, owner = allocate_device_bytes(nbytes, torch_like, device_index)
        _zero_flags(driver, address, stream, ensure_context)
        if _torch_current_stream(device_index) != stream:  # torch frees a block in its allocation stream's order: keep it where that is not ours
            _STREAMK_CAPTURED.append(owner)
            return address, None
        return address, owner
    key = (device_index, stream)
    w = _STREAMK_WORKSPACES.get(key)
    if w is None or w[1] < nbytes:
        with _WORKSPACE_LOCK:
            w = _STREAMK_WORKSPACES.get(key)
            if w is None or w[1] < nbytes:
                size = max(STREAMK_MIN_WORKSPACE_BYTES, 1 << (nbytes - 1).bit_length())
                address, owner = allocate_device_bytes(size, torch_like, device_index)
                if address % 128:
                    raise CudaError(f"the stream-K workspace at {address:#x} is not 128-byte aligned")
                _zero_flags(driver, address, stream, ensure_context)
                if w is not None:
                    _STREAMK_OUTGROWN.append(w)
                w = _STREAMK_WORKSPACES[key] = (address, size, owner)
    return w[0], None


def workspace_launches(plan: KernelPlan, kernel, pointers: tuple[int, int, int], p: Problem, dev, stream: int, like=None,
                       extra: dict | None = None, get_workspace=None) -> tuple[list, object]:
    """(gemm_launches, keep) of a slow-path launch on ``stream`` (a, b and d at ``pointers``): a split-K or stream-K
    kernel gets the calling stream's workspace (``get_workspace``, :func:`streamk_workspace` unless given; ``keep``: a
    capture's owner, held until the launch is queued), others none."""
    from ...runtime.launch.launch import gemm_launches
    from . import streams

    w, keep = 0, None
    if plan.split is not None or plan.stream_k is not None:
        w, keep = (get_workspace or streamk_workspace)(launcher(), dev.index, stream, workspace_bytes(plan, p, dev.sm_count),
                                                       like, lambda: streams.context_switch(dev))
    return gemm_launches(plan, kernel, *pointers, w, p, dev.sm_count, extra=extra), keep


def remember_workspace(c, device_index: int, stream: int, address: int) -> None:
    """Hand the compiled launcher ``c`` the workspace of (device, stream) that a launch on ``stream`` just used, where it
    is the stream's own (a capture's is not): the launcher's calls on that stream take it from there without coming
    back here."""
    own = _STREAMK_WORKSPACES.get((device_index, stream))
    if own is not None and own[0] == address:
        c.remember_workspace(stream, address)


def _torch_current_stream(device_index: int) -> int:
    from .streams import torch_stream_reader

    return int(torch_stream_reader(sys.modules["torch"])(device_index))


def _retried(call, ensure_context, args):
    """``call(*args)`` once more with the launch's device context current (``ensure_context``: streams.context_switch),
    the thread's previous context current again afterwards."""
    restore = ensure_context()
    try:
        return call(*args)
    finally:
        if restore is not None:
            restore()


def launch_checked(launch, ensure_context, args) -> None:
    """``launch(*args)`` (the driver's cuLaunchKernel); a thread without the device's primary context current (none, or
    another device's) sets it (``ensure_context``), tries once more and switches back (the compiled launcher does the
    same: _launcher_driver.c). A thread whose current context is the device's never switches."""
    rc = launch(*args)
    if rc in RETRY_WITH_CONTEXT:
        rc = _retried(launch, ensure_context, args)
    if rc:
        raise CudaError(f"cuLaunchKernel failed: {error_name(rc)} ({rc})")


class Launch:
    """One prepared launch (see the module's docstring). ``run`` is the hot path; ``call_torch`` reads torch
    tensors directly (``data_ptr()``: no DLPack, no interface dicts). Split-K and stream-K: one launch, its W the calling
    stream's workspace."""

    def __init__(self, *, plan: KernelPlan, problem: Problem, func: int, grid, block_dim, smem: int, driver, encode,
                 ensure_context, device_index: int, spans: tuple[int, int, int], out_alloc=None, zero_fill=False,
                 sm_count: int = 132, extra: dict | None = None, extra_roles: tuple = ()):
        self.problem = problem
        self.m, self.n, self.k = problem.m, problem.n, problem.k
        self.empty = problem.m == 0 or problem.n == 0 or problem.k == 0 or problem.batch == 0
        self.batched = plan.spec.batch.value != "none"
        self.batch = problem.batch
        self.zero_fill = zero_fill  # K = 0: out is zeros, as torch.matmul gives
        self.device_index = device_index
        self.span_a, self.span_b, self.span_o = spans
        # pointer alignment the kernel needs: A and B (TMA 16 B, or the cp.async copy size), D 16 B
        self.in_mask = plan.spec.operand_row_align_bytes - 1
        # D: 16 B for the row-major epilogue's vector stores; M-major D (derive.store.output) stores single elements
        # (an M-major D through the TMA store: 16 B, the tensor map's global address)
        self.out_mask = 15 if plan.direct is None or plan.direct.vector_pair or plan.store is not None else plan.spec.out_dtype.bytes - 1
        self.out_alloc = out_alloc  # (torch dtype name, ldd, M-major) for an output allocated per call
        self._ensure_context = ensure_context
        self._launch = driver.launch if driver is not None else None
        self._driver = driver
        self.func = func
        self.gx, self.gy, self.gz = grid
        self.bx, self.by, self.bz = block_dim
        self.smem = smem
        self._lock = threading.RLock()  # run_all points the chain slots, then calls run under it too
        self._torch_dtype = None
        self._stream = None
        self.split = plan.split is not None
        self.streamk = plan.stream_k is not None
        self._c = None  # the compiled launcher, where built
        if self.empty:
            self.params, self.slots, self.extra_slots, self.extra_order = None, (), {}, ()
            return
        self.block, slots = build_params(plan, problem, encode, extra)
        self.slots = (slots["A"], slots["B"], slots["D"])
        self.extra_slots = {name: slot for name, slot in slots.items() if name not in ("A", "B", "D", "W")}
        # the pointers run_all patches after A, B and D, in this order (a fused chain's: fusedlaunch.AUX_ROLES)
        self.extra_order = tuple(role for role in extra_roles if role in self.extra_slots)
        self.params = self.block.address
        # the compiled launcher's operands (run_all's order): A, B, D, the extra ones, then the workspace, if any
        operands = self.slots + tuple(self.extra_slots[role] for role in self.extra_order)
        if self.split or self.streamk:  # the W slot takes the calling stream's workspace (streamk_workspace), patched per call
            check_workspace_launch(plan, grid, 0, sm_count)
            self.sw = slots["W"]
            self.workspace_bytes = workspace_bytes(plan, problem, sm_count)
            operands = (*operands, self.sw)
        self._ws = "stream_k" if self.split or self.streamk else None
        self._c = compiled_launcher(driver, func=func, grid=grid, block=block_dim, smem=smem, params=self.block,
                                    operands=operands, ensure_context=ensure_context, device_index=device_index,
                                    spans=spans, masks=(self.in_mask, self.out_mask), workspace=self._ws)
        if self._c is not None:
            torch = sys.modules.get("torch")
            if torch is not None:
                from .streams import torch_stream_reader

                self._c.stream_reader = torch_stream_reader(torch)

    # -- the hot path ------------------------------------------------------------------------------------
    def run(self, pa: int, pb: int, pd: int, stream: int, like=None) -> None:
        """Point the block at these arrays and launch on ``stream``. ``like``: a torch tensor of the call (stream-K's
        workspace is then torch memory; None: cuMemAlloc)."""
        c = self._c
        if c is not None:
            if self._ws is None:
                c.run(pa, pb, pd, stream)
            elif not c.run_cached(pa, pb, pd, stream):  # the stream's workspace not remembered yet (or a capture)
                self._run_workspace((pa, pb, pd), stream, like)
            return
        if self._ws is not None:
            return self._run_streamk(pa, pb, pd, stream, like)
        sa, sb, sd = self.slots
        with self._lock:
            if sa.ptr != pa:
                sa.point(pa)
            if sb.ptr != pb:
                sb.point(pb)
            if sd.ptr != pd:
                sd.point(pd)
            launch_checked(self._launch, self._ensure_context,
                           (self.func, self.gx, self.gy, self.gz, self.bx, self.by, self.bz, self.smem, stream, self.params, None))

    def run_all(self, pointers: tuple, stream: int, like=None) -> None:
        """``run`` with the pointers of ``extra_order`` after A, B and D (``pointers``: all of them, in that order)."""
        c = self._c
        if c is not None:
            if self._ws is None:
                c.run_all(*pointers, stream)
            elif not c.run_cached(*pointers, stream):
                self._run_workspace(pointers, stream, like)
            return
        with self._lock:
            for role, ptr in zip(self.extra_order, pointers[3:]):
                slot = self.extra_slots[role]
                if slot.ptr != ptr:
                    slot.point(ptr)
            self.run(*pointers[:3], stream, like)

    def _run_workspace(self, pointers: tuple, stream: int, like) -> None:
        """The compiled launch with the calling stream's workspace got here (the stream's first call, or a graph
        capture's, whose workspace is its own): run_all with W last; the stream's own workspace is remembered by the
        launcher for the calls after (``remember_workspace``), a capture's never."""
        with self._lock:
            w, keep = self._workspace(stream, like)
            self._c.run_all(*pointers, w, stream)
            remember_workspace(self._c, self.device_index, stream, w)
        del keep  # a capture's workspace: released once the launch is queued (torch frees it in stream order)

    def _workspace(self, stream: int, like) -> tuple[int, object]:
        """(address, keep) of the workspace for a launch on ``stream`` (:func:`streamk_workspace`, ``keep`` a capture's
        owner, held until the launch is queued)."""
        return streamk_workspace(self._driver, self.device_index, stream, self.workspace_bytes, like,
                                 self._ensure_context)

    def _launch_checked(self, args) -> None:
        launch_checked(self._launch, self._ensure_context, args)

    def _run_streamk(self, pa: int, pb: int, pd: int, stream: int, like) -> None:
        sa, sb, sd = self.slots
        with self._lock:
            w, keep = self._workspace(stream, like)
            for slot, ptr in ((sa, pa), (sb, pb), (sd, pd), (self.sw, w)):
                if slot.ptr != ptr:
                    slot.point(ptr)
            self._launch_checked((self.func, self.gx, self.gy, self.gz, self.bx, self.by, self.bz, self.smem, stream,
                                  self.params, None))
        del keep  # a capture's workspace: released once the launch is queued (torch frees it in stream order)

    def call_torch(self, a, b, out, stream):
        """``out = a @ b.T`` for torch tensors of this entry's key; None when a pointer rules the hot path out
        (unaligned, or ``out`` overlapping an input): the caller then takes the slow path, which says why."""
        pa, pb = a.data_ptr(), b.data_ptr()
        if out is None:
            out = self._allocate_torch(a)
            po = out.data_ptr()
        else:
            po = out.data_ptr()
            so = self.span_o
            if (so and ((self.span_a and po < pa + self.span_a and pa < po + so)
                        or (self.span_b and po < pb + self.span_b and pb < po + so))):
                return None
        if ((pa | pb) & self.in_mask) or (po & self.out_mask):
            return None
        if self.empty:
            if self.zero_fill:
                out.zero_()
            return out
        if stream is None:
            stream = self._torch_stream(self.device_index)
        self.run(pa, pb, po, stream, a)  # split-K, stream-K: a torch workspace (a graph's pool when capturing)
        return out

    def _allocate_torch(self, a):
        dt = self._torch_dtype
        if dt is None:
            torch = sys.modules["torch"]
            dt = self._torch_dtype = getattr(torch, TORCH_OUT_DTYPES[self.out_alloc[0]])
            from .streams import torch_stream_reader

            self._stream = torch_stream_reader(torch)
        ldd = self.out_alloc[1]
        if len(self.out_alloc) > 2 and self.out_alloc[2]:  # M-major D: the transposed view of N x ldd
            full = a.new_empty((self.n, ldd), dtype=dt)
            return (full if ldd == self.m else full[:, : self.m]).t()
        if self.batched:
            full = a.new_empty((self.batch, self.m, ldd), dtype=dt)
            return full if ldd == self.n else full[:, :, : self.n]
        full = a.new_empty((self.m, ldd), dtype=dt)
        return full if ldd == self.n else full[:, : self.n]

    def _torch_stream(self, index: int) -> int:
        read = self._stream
        if read is None:
            from .streams import torch_stream_reader

            read = self._stream = torch_stream_reader(sys.modules["torch"])
        return read(index)

    def pointers_ok(self, pa: int, pb: int, po: int) -> bool:
        """The per-call pointer rules of the hot path (aligned, out apart from the inputs)."""
        if ((pa | pb) & self.in_mask) or (po & self.out_mask):
            return False
        return not (overlaps(po, self.span_o, pa, self.span_a) or overlaps(po, self.span_o, pb, self.span_b))
