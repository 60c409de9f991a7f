"""The kernel object: :func:`compile` a spec into a :class:`CompiledKernel`, callable on device arrays."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..derive.tile.kernel import KernelPlan, plan_kernel
from ..derive.tile.spec import TileSpec, make_spec
from ..isa.types import DMajor
from ..runtime.launch.arrays import ArrayInfo, read_array
from ..runtime.launch.fastlaunch import compiled_module, launcher
from ..runtime.launch.gpu import Device, NoGPU
from ..runtime.launch.launch import Problem, launch_geometry
from .launch import hotkeys, streams
from .arrays.batched import bind_any
from .arrays.binding import _allocate_out, span_bytes
from .launch.launchplan import Launch
from .launch.hotkeys import info_key, tensor_type, torch_key
from .launch.streams import stream_handle


# ----------------------------------------------------------------------------------------------
# the kernel object
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    shared_bytes: int  # dynamic shared memory per block


class CompiledKernel(hotkeys.KernelBase):
    """A generated GEMM kernel, compiled (PTX and cubin) and ready to launch on device arrays.

    Attributes: ``spec``, ``plan``, ``name``, ``source`` (CUDA C++), ``ptx``, ``cubin``, ``log`` (NVRTC),
    ``abi`` (parameters in order, block, cluster, shared bytes), ``cache_hit`` / ``cache_path``.

    Calling it (``k(a, b, out)``, see :meth:`_call_py`): where the compiled launcher was built, the call goes
    straight into C (``_launcher.KernelBase``), which serves torch tensors of a key seen before and hands
    anything else to :meth:`_call_py`; without it, ``__call__`` is :meth:`_call_py`.
    """

    _ENTRIES = 512  # prepared launches kept per kernel (one per dispatch key); the table is emptied when full

    def __init__(self, spec: TileSpec, plan: KernelPlan, source: str, compiled, cache_hit: bool = False,
                 cache_path: Path | None = None):
        self.spec = spec
        self.plan = plan
        self.source = source
        self.name = spec.kernel_name
        self.ptx: str = compiled.ptx
        self.cubin: bytes = compiled.cubin
        self.log: str = compiled.log
        self.cache_hit = cache_hit
        self.cache_path = cache_path
        self._modules: dict = {}  # device ordinal -> gpu.Kernel, per context
        self._lock = threading.Lock()
        self._torch_entries = hotkeys.LaunchTable()  # torch_key -> Launch: the hot path
        self._entries: dict = {}  # info_key -> Launch: arrays of any library
        if hotkeys.KernelBase is not object and compiled_module() is not None:
            self._set_hot_table(self._torch_entries)  # the compiled call serves this table

    # -- the ABI ---------------------------------------------------------------------------------
    @property
    def abi(self):
        return self.plan.abi

    @property
    def params(self):
        """The kernel's parameters in order (``Param(name, kind, doc)``: kinds tensormap, ptr, i32)."""
        return self.plan.abi.params

    @property
    def block(self) -> tuple[int, int, int]:
        return self.plan.abi.block

    @property
    def cluster(self) -> tuple[int, int, int]:
        return self.plan.abi.cluster

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory per block."""
        return self.plan.abi.dynamic_smem_bytes

    @property
    def arch(self) -> str:
        return self.spec.arch.value

    def grid(self, m: int, n: int, sm_count: int | None = None, batch: int = 1) -> tuple[int, int, int]:
        """The grid for an M x N output (``batch`` of them for a batched kernel). ``sm_count``: the device's
        multiprocessors (persistent kernels launch one CTA per SM); None asks the current GPU (NoGPU without one)."""
        return self.plan.abi.grid(m, n, sm_count if sm_count is not None else streams.device().sm_count, batch)

    def launch_config(self, m: int, n: int, sm_count: int | None = None, batch: int = 1) -> LaunchConfig:
        return LaunchConfig(self.grid(m, n, sm_count, batch), self.block, self.cluster, self.shared_bytes)

    def __repr__(self) -> str:
        return (f"<CompiledKernel {self.name}: {self.spec.arch.value}, {self.plan.abi.threads} threads, "
                f"{self.shared_bytes} B shared, {'persistent' if self.plan.abi.persistent else 'one CTA per tile'}>")

    # -- checks ----------------------------------------------------------------------------------
    def check(self, a, b, out=None) -> Problem:
        """The problem the arrays make, checked against the spec (no GPU needed; raises ArgumentError,
        DTypeError or ProblemError)."""
        return bind_any(self.spec, read_array(a, "a"), read_array(b, "b"), None if out is None else read_array(out, "out")).problem

    # -- launching -------------------------------------------------------------------------------
    def load(self, device: Device | int | None = None):
        """Load the cubin into a device's primary context now (done lazily by the first call on that device); the
        module of that device (a ``runtime.launch.gpu.Kernel``). ``device``: a Device, an ordinal, or None (the device whose
        context is current on this thread, else cuda:0). One module per device: calls on cuda:1 launch cuda:1's."""
        return self._module(device)

    def _module(self, device: Device | int | None = None):
        """The kernel loaded into ``device``'s primary context."""
        dev = device if isinstance(device, Device) else streams.device(device)
        mod = self._modules.get(dev.index)
        if mod is None:
            with self._lock:
                mod = self._modules.get(dev.index)
                if mod is None:
                    from ..runtime.launch import gpu

                    self._require_arch(dev)
                    with streams.on_device(dev):
                        mod = self._modules[dev.index] = gpu.Kernel(self.cubin, self.name, self.shared_bytes)
        return mod

    def _require_arch(self, dev: Device) -> None:
        if dev.arch is not self.spec.arch:
            raise NoGPU(f"{self.name} is built for {self.spec.arch.value}, but the GPU ({dev.name}, compute capability "
                        f"{dev.cc[0]}.{dev.cc[1]}) runs {dev.arch.value} kernels: compile the spec with arch='{dev.arch.value}'")

    def _call_py(self, a, b, out=None, *, stream=None):
        """``k(a, b, out)``: ``out = a @ b.T``: a is M x K, b is N x K, out is M x N row-major (allocated, with the
        inputs' library, when not given; its rows are then padded to 16 bytes, so it can be a view). Launches on
        ``stream`` (None: the inputs' library's current stream) and returns ``out`` without synchronizing.

        Torch tensors seen before with the same shapes, strides, dtypes and devices take the hot path: their
        pointers go into the launch prepared by the first call, and cuLaunchKernel is called once (where the
        compiled launcher was built, the whole call runs in C before this method: ``_launcher.KernelBase``,
        which checks the tensors' metadata against the last hit field by field, else looks the key up)."""
        T = tensor_type()
        if T is not None and isinstance(a, T) and isinstance(b, T) and (stream is None or out is not None):
            if out is None or isinstance(out, T):
                e = self._torch_entries.get(torch_key(a, b, out))
                if e is not None:
                    r = e.call_torch(a, b, out, None if stream is None else stream_handle(stream))
                    if r is not None:
                        return r
        handle = stream_handle(stream, a)
        ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
        oi = None if out is None else read_array(out, "out", handle)
        return self._launch(a, b, out, ai, bi, oi, handle, stream)

    if hotkeys.KernelBase is object:  # no compiled launcher: calling the kernel is the Python method
        __call__ = _call_py

    def _launch(self, a, b, out, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, handle: int, stream):
        """The slow path: check everything, prepare (or find) the launch for these arrays' key, run it."""
        key = info_key(ai, bi, oi)
        unknown = streams.unknown_device((ai, bi, oi))
        if unknown is not None:  # arrays that do not say their device: the driver's answer goes into the key
            key = (key, unknown)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._prepare(ai, bi, oi)
            self._remember(self._entries, key, entry)
            if ai.via == "torch" and bi.via == "torch" and (oi is None or oi.via == "torch"):
                self._remember(self._torch_entries, torch_key(a, b, out), entry)
        if not entry.pointers_ok(ai.ptr, bi.ptr, oi.ptr if oi is not None else 0):
            bind_any(self.spec, ai, bi, oi, empty_k_ok=entry.zero_fill)  # raises: says which pointer and why
        allocated = out is None
        if allocated:
            p = entry.problem
            out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, self.spec.out_dtype.value, entry.device_index,
                                p.batch if entry.batched else None, m_major=self.spec.d_major is DMajor.M)
            oi = read_array(out, "out", handle)
        if entry.empty:
            if entry.zero_fill:
                _zero(out, ai.library if allocated else oi.library)
            return out
        waits = [i.producer_stream for i in (ai, bi, oi)
                 if i.producer_stream is not None and not streams.same_stream(i.producer_stream, handle)]
        if waits:
            with streams.on_device(streams.device(entry.device_index)):  # the event lives in the streams' context
                for producer in waits:
                    streams.wait_for_producer(producer, handle)
        entry.run(ai.ptr, bi.ptr, oi.ptr, handle, a if ai.library == "torch" else None)  # split-K, stream-K: torch workspace
        if allocated and ai.library == "torch":
            _record_torch_stream(out, stream, handle)
        return out

    def _remember(self, table: dict, key, entry) -> None:
        if len(table) >= self._ENTRIES:
            table.clear()
        table[key] = entry

    def _prepare(self, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None) -> Launch:
        """Bind the arrays (every check), then the launch for their key: kernel loaded, grid, parameter block."""
        zero_ok = (oi.library if oi is not None else ai.library) in ("torch", "cupy")
        p = bind_any(self.spec, ai, bi, oi, empty_k_ok=zero_ok).problem
        dev = streams.call_device((ai, bi, oi))  # the arrays' device: its module, its context, its stream
        self._require_arch(dev)
        spans = (span_bytes(ai), span_bytes(bi), span_bytes(oi) if oi is not None else 0)
        return self.prepare_launch(p, dev, spans)

    def prepare_launch(self, p: Problem, dev: Device, spans: tuple[int, int, int], extra: dict | None = None,
                       out_dtype: str | None = None, extra_roles: tuple = ()) -> Launch:
        """The prepared launch of problem ``p`` (bound and checked by the caller) on ``dev``: the kernel loaded, the
        grid, the parameter block with every integer written (``extra``: the fused epilogue's scalars) and a slot per
        pointer. ``spans``: the bytes A, B and D span (0: unknown); ``out_dtype``: the type of an output allocated per
        call (default: the spec's); ``extra_roles``: the pointer slots ``Launch.run_all`` patches after A, B and D."""
        out_alloc = (out_dtype or self.spec.out_dtype.value, p.ldd, self.spec.d_major is DMajor.M)
        common = dict(plan=self.plan, problem=p, device_index=dev.index, spans=spans, out_alloc=out_alloc,
                      ensure_context=lambda: streams.context_switch(dev))
        if p.m == 0 or p.n == 0 or p.k == 0 or p.batch == 0:
            return Launch(**common, func=0, grid=(0, 0, 0), block_dim=(0, 0, 0), smem=0, driver=None, encode=None,
                          zero_fill=p.k == 0 and p.m > 0 and p.n > 0 and p.batch > 0)
        kernel = self._module(dev)
        with streams.on_device(dev):
            grid, block, smem = launch_geometry(self.plan, p, dev.sm_count, kernel)
        driver = launcher()
        return Launch(**common, func=int(kernel.func), grid=grid, block_dim=block, smem=smem, driver=driver,
                      encode=driver.encode,
                      sm_count=dev.sm_count, extra=extra, extra_roles=extra_roles)


def _zero(out, library: str) -> None:
    """K = 0: the product of an M x 0 and a 0 x N matrix is zeros (as torch.matmul gives)."""
    if library == "torch":
        out.zero_()
    else:
        out.fill(0)


def _record_torch_stream(out, stream, handle: int) -> None:
    """An output we allocated on torch's current stream but wrote on another: tell the caching allocator."""
    torch = sys.modules["torch"]
    if streams.same_stream(handle, int(torch.cuda.current_stream(out.device).cuda_stream)):
        return
    s = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(handle, device=out.device)
    out.record_stream(s)


# ----------------------------------------------------------------------------------------------
# compile
# ----------------------------------------------------------------------------------------------
def compile(spec: TileSpec | dict | None = None, /, *, options: tuple[str, ...] = (), cache: bool | str | Path = True,
            **fields) -> CompiledKernel:
    """Render and compile a spec with NVRTC (no GPU needed): a :class:`CompiledKernel`.

    ``spec``: a TileSpec, a spec dict (``TileSpec.to_json()``), or None with the spec's fields as keywords
    (``compile(bm=128, bn=128, bk=64, a="kmajor-sw128", ...)``, as :func:`make_spec`). ``options``: extra NVRTC
    options. ``cache``: True uses the on-disk cache (``ptxgen.runtime.compile.cache``), a path uses that folder,
    False compiles afresh.
    """
    from ..emit.render import render_kernel
    from ..runtime.compile.cache import compile_cached

    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise TypeError(f"options is a tuple of NVRTC option strings, e.g. ('-lineinfo',), not {options!r}")
    if spec is None:
        spec = make_spec(**fields)
    elif fields:
        raise TypeError(f"pass a spec or its fields, not both (got {', '.join(sorted(fields))} as well)")
    elif isinstance(spec, dict):
        spec = TileSpec.from_json(spec)
    elif not isinstance(spec, TileSpec):
        raise TypeError(f"compile takes a TileSpec (ptxgen.make_spec(...)), a spec dict or keyword fields; got {type(spec).__name__}")
    plan = plan_kernel(spec)
    source = render_kernel(plan)
    if cache is False:
        from ..runtime.compile.toolchain import compile_cuda

        compiled = compile_cuda(source, spec.kernel_name, spec.arch.value, tuple(options))
        return CompiledKernel(spec, plan, source, compiled)
    folder = None if cache is True else Path(cache)
    res = compile_cached(source, spec.kernel_name, spec.arch.value, tuple(options), folder)
    return CompiledKernel(spec, plan, source, res.compiled, res.hit, res.path)

