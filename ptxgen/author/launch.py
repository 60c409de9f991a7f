"""Launching a user's kernel through the project's launch pieces.

Per dispatch key (each array's shape, strides, dtype; the scalar values are written per call) a
:class:`PreparedLaunch` holds the pre-packed parameter block (ptxgen.runtime.launch.params.ParamBlock), one MapSlot
per tensor map (re-encoded only when its pointer changes) and one PtrSlot per pointer; a call checks the arrays,
points the slots and calls cuLaunchKernel once on the stream (``launch_checked``, as ptxgen's GEMM launches do).
Nothing is allocated or synchronised on that path (what a CUDA-graph capture on the caller's stream needs; not yet
tested under capture). A runtime of one's own (attention's) builds a PreparedLaunch per key itself and calls
:meth:`PreparedLaunch.launch` with a handle from ``BuiltKernel.load``.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace

from ..isa.types import Arch, DType
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, read_array
from ..runtime.launch.params import MapSlot, ParamBlock, PtrSlot
from ..runtime.launch.tensormap import TensorMapArgs, tensormap_args

TMA_GLOBAL_ALIGN = 16
MAX_MAP_RANK = 5  # cuTensorMapEncodeTiled: tensorRank 1..5
GLOBAL_DIM_LIMIT = 1 << 32
GLOBAL_STRIDE_LIMIT = 1 << 40
L2_PROMOTION_CODES = {0: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion (cuTensorMapEncodeTiled)


def _check_dtype(info: ArrayInfo, plan) -> None:
    op = plan.operand
    if info.dtype != op.dtype.value and not (op.dtype is DType.TF32 and info.dtype == "f32"):
        raise ArgumentError(f"{info.name}: operand {op.name} is {op.dtype.value}, the array is {info.dtype}")


def map_geometry(info: ArrayInfo, plan) -> tuple[tuple[int, int], int]:
    """(dims inner first, row stride in elements) of a 2-D row-major array holding ``plan``'s operand: its global
    tensor has the operand's contiguous dimension innermost (K for K-major, M/N for MN-major)."""
    op = plan.operand
    if info.ndim != 2:
        raise ArgumentError(f"{info.name}: operand {op.name}'s tensor map needs a 2-D array, got shape {info.shape}")
    _check_dtype(info, plan)
    rows, cols = info.shape
    if info.strides[1] != 1 and cols > 1:
        raise ArgumentError(f"{info.name}: the contiguous ({'K' if op.major.value == 'k' else 'M/N'}) dimension must have stride 1, "
                            f"strides are {info.strides}")
    ld = info.strides[0] if rows > 1 else cols
    return (cols, rows), max(ld, cols)


def strided_map(info: ArrayInfo, plan, address: int = 0) -> TensorMapArgs:
    """The tensor map of ``plan``'s operand over an N-d array (3 to 5 dimensions, the last contiguous), e.g. a
    (batch, heads, seqlen, head dim) view with any strides: rank N, dimensions and byte strides innermost first, the
    operand's box over the two inner dimensions and 1 along each outer one (a tile never crosses a head), the data
    type, swizzle, L2 promotion and zero fill of ``plan.tma``. ArgumentError names a rule the encoder would refuse
    (the strides of dimensions of extent 1 are passed as they are: nothing is read through them)."""
    op, tma = plan.operand, plan.tma
    if not 3 <= info.ndim <= MAX_MAP_RANK:
        raise ArgumentError(f"{info.name}: an N-d tensor map takes 3 to {MAX_MAP_RANK} dimensions, got shape {info.shape}")
    _check_dtype(info, plan)
    if info.strides[-1] != 1 and info.shape[-1] > 1:
        raise ArgumentError(f"{info.name}: the last dimension must be contiguous (stride 1), strides are {info.strides}")
    es = tma.element_bytes
    dims = tuple(reversed(info.shape))
    strides = tuple(s * es for s in reversed(info.strides[:-1]))
    problems = [f"dimension {i} = {d} is not in 1..2^32" for i, d in enumerate(dims) if not 1 <= d <= GLOBAL_DIM_LIMIT]
    problems += [f"the stride of dimension {i + 1} = {s} B is not a positive multiple of {TMA_GLOBAL_ALIGN} B below 2^40"
                 for i, s in enumerate(strides) if dims[i + 1] > 1 and (s % TMA_GLOBAL_ALIGN or not 0 < s < GLOBAL_STRIDE_LIMIT)]
    if problems:
        raise ArgumentError(f"{info.name}: cuTensorMapEncodeTiled would refuse operand {op.name}'s map: " + "; ".join(problems))
    rank = len(dims)
    return TensorMapArgs(data_type=tma.data_type.value, element_bytes=es, rank=rank, global_address=address, global_dims=dims,
                         global_strides=strides, box=tuple(tma.box) + (1,) * (rank - 2), element_strides=(1,) * rank,
                         interleave=int(tma.interleave), swizzle=tma.swizzle.value, l2_promotion=int(tma.l2_promotion),
                         oob_fill=int(tma.oob_fill))


def map_args(info: ArrayInfo, param) -> TensorMapArgs:
    """The encoder's arguments (address 0, filled in per call) of a tensormap Param's map over the array ``info``
    (its operand plan's, with the Param's L2 promotion when it names one)."""
    plan = param.operand
    if info.ndim == 2:
        dims, ld = map_geometry(info, plan)
        args = tensormap_args(plan.tma, 0, dims, ld)
    else:
        args = strided_map(info, plan)
    if param.l2_promotion_bytes is not None:
        args = replace(args, l2_promotion=L2_PROMOTION_CODES[param.l2_promotion_bytes])
    return args


def read_arguments(params, args) -> list:
    """Each array argument read (shape, strides, dtype, pointer; an ArrayInfo), None for a scalar or a left-out
    optional pointer; the count checked. No device check: ``Binder.bind`` adds those for BuiltKernel's calls."""
    if len(args) != len(params):
        raise ArgumentError(f"the kernel takes {len(params)} arguments ({', '.join(p.name for p in params)}), got {len(args)}")
    return [read_array(a, p.name) if p.kind in ("tensormap", "ptr") and a is not None else None for p, a in zip(params, args)]


class PreparedLaunch:
    """One dispatch key's pre-packed parameter block: a tensor-map slot per ``tensormap`` Param (encoded again only
    when its pointer changes, the last few pointers' maps kept), a pointer slot per ``ptr`` Param, the scalars.

    ``PreparedLaunch(params, infos, encode, driver)`` from read arrays; :meth:`of` from the arguments themselves.
    ``driver``: the project's launcher (None) or anything with its ``encode`` (cuTensorMapEncodeTiled) and ``launch``
    (cuLaunchKernel), e.g. a fake in tests; ``encode`` alone overrides the encoder. Per call:
    :meth:`point` each array's pointer, :meth:`set` a scalar, then :meth:`launch`."""

    def __init__(self, params, infos: list, encode=None, driver=None):
        if encode is None:
            driver = driver or _launcher()
            encode = driver.encode
        self._driver = driver
        self.params = tuple(params)
        self.block = ParamBlock([p.kind for p in self.params])
        self.slots: list = []
        for i, (p, info) in enumerate(zip(self.params, infos)):
            if p.kind == "tensormap":
                if info is None:
                    raise ArgumentError(f"{p.name}: a tensor map needs its array to be prepared")
                self.slots.append(MapSlot(self.block, i, map_args(info, p), encode))
            elif p.kind == "ptr":
                self.slots.append(PtrSlot(self.block, i))
            else:
                self.slots.append(None)

    @classmethod
    def of(cls, params, args, encode=None, driver=None) -> "PreparedLaunch":
        """Prepared for these arguments' key: the maps' geometry from the arrays, the scalars written; the pointers
        are written by the first :meth:`point` (so the maps are encoded then)."""
        prep = cls(params, read_arguments(params, args), encode, driver)
        for i, (p, a) in enumerate(zip(prep.params, args)):
            if prep.slots[i] is None:
                prep.set(i, a)
        return prep

    def point(self, index: int, ptr: int | None) -> None:
        """Parameter ``index`` (a tensor map or pointer) now addresses ``ptr`` (None: a null pointer, for an optional
        one); a map is re-encoded only when its pointer changed."""
        slot = self.slots[index]
        ptr = 0 if ptr is None else ptr
        if slot.ptr != ptr:
            slot.point(ptr)

    def set(self, index: int, value) -> None:
        """Scalar parameter ``index`` takes ``value`` (packed as its kind)."""
        self.block.set(index, value)

    @property
    def address(self) -> int:
        """The ``void**`` kernelParams cuLaunchKernel reads."""
        return self.block.address

    def launch(self, func: int, grid, block, smem: int, stream: int, driver=None) -> int:
        """One cuLaunchKernel of ``func`` (``BuiltKernel.load``) with this block on ``stream``; the CUresult (0: launched).
        ``driver``: the one given at construction, else the project's launcher, or one with its ``launch`` signature."""
        if driver is None:
            driver = self._driver = self._driver or _launcher()
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        return driver.launch(func, gx, gy, gz, bx, by, bz, smem, stream, self.block.address, None)

    @staticmethod
    def check(rc: int, kernel_name: str) -> None:
        """Raise CudaError naming the driver's error when ``rc`` (a :meth:`launch` result) is not 0."""
        if rc:
            from ..runtime.launch.fastlaunch import error_name
            from ..runtime.launch.gpu import CudaError

            raise CudaError(f"cuLaunchKernel({kernel_name}) failed: {error_name(rc)} ({rc})")


def _launcher():
    from ..runtime.launch.fastlaunch import launcher

    return launcher()


def _key(params, infos, args) -> tuple:
    return tuple((i.shape, i.strides, i.dtype, i.device) if i is not None else (p.kind, a is None) for p, i, a in zip(params, infos, args))


class Binder:
    def __init__(self, name: str, params, arch: Arch, cubin: bytes, block, shared_bytes: int):
        self.name, self.params, self.arch, self.cubin = name, tuple(params), arch, cubin
        self.block_dim, self.smem = tuple(block), shared_bytes
        self._kernels: dict = {}
        self._prepared: dict = {}
        self._hot: dict = {}
        self._lock = threading.Lock()

    def bind(self, args) -> list:
        """Each argument read and checked against its Param (no GPU needed): ArrayInfo, or None for a scalar."""
        if len(args) != len(self.params):
            raise ArgumentError(f"{self.name} takes {len(self.params)} arguments ({', '.join(p.name for p in self.params)}), "
                                f"got {len(args)}")
        infos = []
        for p, a in zip(self.params, args):
            if p.kind in ("tensormap", "ptr") and not (a is None and p.optional):
                info = read_array(a, p.name)
                if p.kind == "ptr" and info.dtype != p.dtype:
                    raise ArgumentError(f"{p.name}: the kernel reads {p.dtype}, the array is {info.dtype}")
                if info.ptr % TMA_GLOBAL_ALIGN:
                    raise ArgumentError(f"{p.name}: its address {info.ptr:#x} is not {TMA_GLOBAL_ALIGN}-byte aligned")
                if info.on_cuda is False:
                    raise ArgumentError(f"{p.name} is on {info.device_str}; the kernel reads device memory")
                infos.append(info)
            elif p.kind in ("tensormap", "ptr"):
                infos.append(None)
            else:
                if isinstance(a, bool) or not isinstance(a, (int, float)) or (p.kind != "f32" and not isinstance(a, int)):
                    raise ArgumentError(f"{p.name} is a {p.kind} scalar, got {a!r}")
                infos.append(None)
        return infos

    def prepare(self, args) -> PreparedLaunch:
        """The prepared launch of these arguments' key (built on first use: raises ArgumentError or ProblemError for
        an array the kernel cannot take, with no GPU needed)."""
        return self._prepared_for(self.bind(args), args)

    def _prepared_for(self, infos: list, args) -> PreparedLaunch:
        from ..runtime.launch.fastlaunch import launcher

        key = _key(self.params, infos, args)
        with self._lock:
            prep = self._prepared.get(key)
            if prep is None:
                prep = self._prepared[key] = PreparedLaunch(self.params, infos, lambda a: launcher().encode(a))
        return prep

    def _load(self, device_index: int | None = None):
        with self._lock:
            found = self._kernels.get(device_index)
            if found is None:
                found = self._kernels[device_index] = self._load_locked(device_index)
            return found

    def _load_locked(self, device_index: int | None):
        from ..api.launch import streams
        from ..runtime.launch import gpu
        from ..runtime.launch.gpu import NoGPU

        dev = streams.require_gpu(device_index)
        if dev.arch is not self.arch:
            raise NoGPU(f"{self.name} is built for {self.arch.value}; the GPU ({dev.name}) runs {dev.arch.value} kernels")
        streams.ensure_current(dev)
        return gpu.Kernel(self.cubin, self.name, self.smem), dev

    def function(self, device_index: int | None = None) -> int:
        return int(self._load(device_index)[0].func)

    def launch(self, args, grid, stream=None):
        """One launch of the kernel with ``args`` on ``stream`` (None: the arrays' library's current stream on their
        device). Torch tensors take the hot path: a call whose arrays have the shapes, strides, dtypes and device of an
        earlier call's (and scalars of the same types) reuses that call's checked, prepared and loaded launch, and only
        reads the pointers (each checked for 16-byte alignment), writes the scalars and calls cuLaunchKernel."""
        key = torch_call_key(args)
        hot = self._hot.get(key) if key is not None else None
        if hot is not None:
            hot.run(self._lock, hot.torch_pointers(args), args, grid, stream)
            return
        infos = self.bind(args)
        hot = self._hot_launch(infos, args)
        if key is not None:
            with self._lock:
                if len(self._hot) >= HOT_KEYS:
                    self._hot.clear()
                self._hot[key] = hot
        hot.run(self._lock, [0 if infos[i] is None else infos[i].ptr for i in hot.pointers], args, grid, stream)

    def _hot_launch(self, infos: list, args) -> "HotLaunch":
        """For arguments read and checked by :meth:`bind`: every tensor-map rule checked (before any GPU work), the
        launch prepared, the kernel loaded on the arrays' device."""
        from ..api.launch import streams
        from ..api.launch.launchplan import launch_checked
        from ..runtime.launch.fastlaunch import launcher

        prep = self._prepared_for(infos, args)
        ordinal = streams.call_ordinal(infos)
        kernel, dev = self._load(ordinal)
        pointers = tuple(i for i, p in enumerate(self.params) if p.kind in ("tensormap", "ptr"))
        scalars = tuple(i for i, p in enumerate(self.params) if p.kind not in ("tensormap", "ptr"))
        first = next((args[i] for i in pointers if args[i] is not None), None)
        return HotLaunch(prep=prep, func=int(kernel.func), block_dim=self.block_dim, smem=self.smem,
                         pointers=pointers, scalars=scalars, driver=launcher(), launch_checked=launch_checked,
                         ensure_context=lambda: streams.ensure_current(dev), stream_of=_stream_reader(first, ordinal))


HOT_KEYS = 64  # dispatch keys one kernel remembers (a 65th clears them: a workload of many shapes re-prepares)


def torch_call_key(args) -> tuple | None:
    """The hot key of a call whose arrays are all torch tensors (None entries allowed): each tensor's shape, strides,
    dtype and device, each other argument's type; None when an argument is an array of another library (those take
    the checked path every call)."""
    tensor = sys.modules.get("torch")
    if tensor is None:
        return None
    tensor = tensor.Tensor
    key = []
    for a in args:
        if isinstance(a, tensor):
            key.append((a.shape, a.stride(), a.dtype, a.is_cuda, a.get_device()))
        elif a is None or isinstance(a, (int, float)):
            key.append(type(a))
        else:
            return None
    return tuple(key)


def _stream_reader(first, ordinal: int):
    """``() -> CUstream`` of a call with no stream given: torch's current stream on the arrays' device, read per
    call (the caller may switch streams between calls); 0 (the legacy default stream) with no array."""
    from ..api.launch import streams

    torch = sys.modules.get("torch")
    if first is None or torch is None or not isinstance(first, torch.Tensor):
        return lambda: streams.stream_handle(None, first)
    raw = streams.torch_stream_reader(torch)
    return lambda: raw(ordinal)


@dataclass(frozen=True)
class HotLaunch:
    """A checked, prepared and loaded launch of one dispatch key: per call the pointers (``pointers``: parameter
    indices) are read and pointed, the scalars (``scalars``) written, and cuLaunchKernel called once (through
    ``launch_checked``, which makes the device's context current and retries where the thread has another)."""

    prep: PreparedLaunch
    func: int
    block_dim: tuple
    smem: int
    pointers: tuple
    scalars: tuple
    driver: object
    launch_checked: object
    ensure_context: object
    stream_of: object

    def torch_pointers(self, args) -> list[int]:
        """The pointer arguments' addresses (torch tensors, or None: 0), each checked for 16-byte alignment."""
        ptrs = []
        for i in self.pointers:
            a = args[i]
            ptr = 0 if a is None else a.data_ptr()
            if ptr % TMA_GLOBAL_ALIGN:
                raise ArgumentError(f"{self.prep.params[i].name}: its address {ptr:#x} is not {TMA_GLOBAL_ALIGN}-byte aligned")
            ptrs.append(ptr)
        return ptrs

    def run(self, lock, ptrs: list[int], args, grid, stream) -> None:
        """Point the pointer parameters at ``ptrs``, write the scalars of ``args``, launch on ``stream`` (None: the
        arrays' current stream)."""
        from ..api.launch import streams

        handle = self.stream_of() if stream is None else streams.stream_handle(stream)
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = self.block_dim
        prep = self.prep
        with lock:
            for i, ptr in zip(self.pointers, ptrs):
                prep.point(i, ptr)
            for i in self.scalars:
                prep.set(i, args[i])
            self.launch_checked(self.driver.launch, self.ensure_context,
                                (self.func, gx, gy, gz, bx, by, bz, self.smem, handle, prep.block.address, None))
