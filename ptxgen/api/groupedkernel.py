"""The compiled grouped kernel (:class:`GroupedKernel`, what ``ptxgen.compile_grouped`` returns): a call's launch
prepared once per dispatch key and replayed with new pointers. ``ptxgen.grouped`` (the doors ``grouped_gemm``,
``scaled_grouped_gemm``, ``blockscaled_grouped_gemm``) decides the spec and keeps one kernel per spec."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..isa.types import Grouping
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, read_array
from ..runtime.launch.fastlaunch import launcher
from ..runtime.launch.grouped import GroupedProblem, build_grouped_params, check_grouped_problem, grouped_geometry
from .arrays.binding import _allocate_out
from .arrays.groupedbind import _bind_scales, bind_block_scales, bind_grouped
from .kernel import CompiledKernel, _record_torch_stream
from .launch import streams
from .launch.groupedlaunch import GroupedLaunch, torch_key, torch_tensor_type
from .launch.streams import stream_handle

class GroupedKernel:
    """A compiled grouped kernel (``spec.grouped`` is ``offs``): ``kernel(a, b, offs, out=None, *, stream=None)``.

    Attributes as :class:`ptxgen.CompiledKernel`: ``spec``, ``plan``, ``source``, ``ptx``, ``cubin``, ``name``.

    A call's launch is prepared once per dispatch key (shapes, strides, dtypes, devices; never the pointers):
    ``_launches`` keyed by the arrays' ArrayInfo, ``_torch_launches`` by torch tensors' attributes, so a repeat
    call with torch tensors reads no DLPack, binds nothing and only writes pointers and launches."""

    _CACHE = 64

    def __init__(self, compiled: CompiledKernel):
        if compiled.spec.grouped is Grouping.NONE:
            raise ArgumentError(f"{compiled.name} is not a grouped kernel: compile a spec with grouped='offs'")
        self.compiled = compiled
        self.spec, self.plan, self.name = compiled.spec, compiled.plan, compiled.name
        self.source, self.ptx, self.cubin = compiled.source, compiled.ptx, compiled.cubin
        self._lock = threading.Lock()
        self._launches: OrderedDict = OrderedDict()
        self._torch_launches: dict = {}

    def __repr__(self) -> str:
        return f"<GroupedKernel {self.name}>"

    def check(self, a, b, offs, out=None) -> GroupedProblem:
        """The problem the arrays make (no GPU needed; ArgumentError, DTypeError or ProblemError)."""
        bd = bind_grouped(self.spec, read_array(a, "a"), read_array(b, "b"), read_array(offs, "offs"),
                          None if out is None else read_array(out, "out"))
        if bd.problem.m and bd.problem.n and bd.problem.groups:
            check_grouped_problem(self.plan, bd.problem)
        return bd.problem

    def __call__(self, a, b, offs, out=None, *, scale_a=None, scale_b=None, stream=None):
        """``scale_a`` (M f32) and ``scale_b`` (G x N f32): for a kernel with row-wise scales (grouped='offs_rowwise'),
        as torch._scaled_grouped_mm takes them; a block-scaled kernel (fp8_blocks='1x128x128') takes the DeepSeek block
        scales (:func:`blockscaled_grouped_gemm`); the others take none."""
        if self._torch_launches and type(a) is torch_tensor_type():
            r = self._hot_torch(a, b, offs, out, scale_a, scale_b, stream)
            if r is not None:
                return r
        handle = stream_handle(stream, a)
        infos = (read_array(a, "a", handle), read_array(b, "b", handle), read_array(offs, "offs", handle),
                 None if out is None else read_array(out, "out", handle))
        scales = None
        if scale_a is not None or scale_b is not None:
            scales = (read_array(scale_a, "scale_a", handle) if scale_a is not None else None,
                      read_array(scale_b, "scale_b", handle) if scale_b is not None else None)
        return self._launch(a, out, infos, handle, stream, scales, torch_args=(a, b, offs, out, scale_a, scale_b))

    def _hot_torch(self, a, b, offs, out, scale_a, scale_b, stream):
        """The call through a launch prepared for these torch tensors' key; None where there is none (or a pointer
        rule fails): the caller takes the slow path."""
        try:
            hot = self._torch_launches.get(self.dispatch_key(a, b, offs, out, scale_a, scale_b))
        except (AttributeError, TypeError):  # not torch tensors after all
            return None
        return None if hot is None else hot.call_torch(a, b, offs, out, scale_a, scale_b, stream)

    @staticmethod
    def dispatch_key(a, b, offs, out, scale_a=None, scale_b=None) -> tuple:
        """The dispatch key of torch tensors (out and the scales may be None)."""
        return (torch_key(a), torch_key(b), torch_key(offs), torch_key(out), torch_key(scale_a), torch_key(scale_b))

    def _launch(self, a, out, infos, handle: int, stream, scales=None, torch_args=None):
        """Bind (every check on the arrays), then the launch prepared for this dispatch key: the first call for it
        also checks the device and the problem, loads the kernel and builds the parameter block."""
        ai, bi, fi, oi = infos
        p = bind_grouped(self.spec, ai, bi, fi, oi).problem
        if self.spec.fp8_blocks.value != "none":
            p, scale_ptrs = bind_block_scales(self.spec, scales, p)
        else:
            scale_ptrs = _bind_scales(self.spec, scales, p)
        dev = streams.call_device((ai, bi, fi, oi, *(scales or ())))  # the arrays' device: its module, context, stream
        allocated = out is None
        if allocated:
            self.compiled._require_arch(dev)
            out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, self.spec.out_dtype.value, dev.index)
            oi = read_array(out, "out", handle)
        if p.m == 0 or p.n == 0 or p.groups == 0:
            return out
        waits = [i.producer_stream for i in (ai, bi, fi, oi)
                 if i.producer_stream is not None and not streams.same_stream(i.producer_stream, handle)]
        if waits:
            with streams.on_device(dev):  # the event lives in the streams' context
                for producer in waits:
                    streams.wait_for_producer(producer, handle)
        known = all(i.device is not None for i in (ai, bi, fi, oi))  # else each pointer's device is asked per call
        key = (_info_key(ai), _info_key(bi), _info_key(fi), None if allocated else _info_key(oi), p,
               tuple(_info_key(s) for s in scales) if scales else None)
        with self._lock:
            launch = self._launches.get(key) if known else None
            if launch is None:
                launch = self._prepare(dev, (ai, bi, fi, oi), p, launcher())
                if known:
                    self._launches[key] = launch
                    while len(self._launches) > self._CACHE:
                        self._launches.popitem(last=False)
            else:
                self._launches.move_to_end(key)
        ptrs = (ai.ptr, bi.ptr, fi.ptr, oi.ptr, *scale_ptrs) if launch.scaled else (ai.ptr, bi.ptr, fi.ptr, oi.ptr)
        launch.run(ptrs, handle)
        if (torch_args is not None and known and len(self._torch_launches) < self._CACHE
                and all(i.library == "torch" for i in (ai, bi, fi, *(scales or ())))
                and (allocated or oi.library == "torch")):
            launch.enable_torch()
            self._torch_launches[self.dispatch_key(*torch_args)] = launch
        if allocated and ai.library == "torch":
            _record_torch_stream(out, stream, handle)
        return out

    def _prepare(self, dev, infos, p: GroupedProblem, drv) -> GroupedLaunch:
        """The launch for one problem on ``dev`` (the arrays' device, checked by the caller; the pointers are written
        per call)."""
        self.compiled._require_arch(dev)
        check_grouped_problem(self.plan, p)
        kernel = self.compiled.load(dev)
        block, slots = build_grouped_params(self.plan, p, drv.encode)
        grid, blk, smem = grouped_geometry(self.plan, p, dev.sm_count)
        return GroupedLaunch(block, slots, (int(kernel.func), *grid, *blk, smem), drv, dev, p, self.spec.out_dtype.value,
                             self.name)


def _info_key(i: ArrayInfo) -> tuple:
    return (i.library, i.shape, i.strides, i.dtype, i.device)
