"""The public Python API: compile a tile spec into a kernel and call it on device arrays.

>>> import ptxgen                                                      # doctest: +SKIP
>>> k = ptxgen.compile(ptxgen.make_spec(128, 128, 64, a="kmajor-sw128", b="kmajor-sw128",
...                                      dtype="bf16", out_dtype="bf16", arch="sm_90a"))
>>> out = k(a, b)           # a: M x K, b: N x K (torch, CuPy, JAX, ...): out = a @ b.T, M x N
>>> out = ptxgen.gemm(a, b) # the spec is chosen for you (the tuned table, as ``ptxgen bench``)

Conventions (as everywhere in ptxgen): A is logically M x K and B is N x K, D = A @ B^T is M x N row-major.
``a`` and ``b`` are passed in their logical shapes; their strides say their majorness: a K-major A is a
row-major M x K array (strides ``(lda, 1)``), an M-major A is the transposed view of a row-major K x M array
(``at.t()``: strides ``(1, lda)``). B likewise with N. Every row must start 16-byte aligned.

``compile`` needs no GPU (NVRTC); the module is loaded at the first call. Without a usable GPU, calling a
kernel (or :func:`gemm`) raises :class:`NoGPU` after the arguments have been checked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from .derive.kernel import KernelPlan, plan_kernel
from .derive.spec import TileSpec, make_spec
from .isa.types import Arch, DType, Major, SpecError
from .runtime.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from .runtime.gpu import Device, NoGPU, require_gpu
from .runtime.launch import MAX_DIM, ROW_ALIGN_BYTES, Problem, ProblemError, check_problem, gemm_args, launch_geometry

__all__ = ["ArgumentError", "CompiledKernel", "DTypeError", "LaunchConfig", "NoGPU", "ProblemError", "compile", "gemm",
           "gemm_spec", "make_spec", "stream_handle"]

# The array element type each spec input type reads (tf32 kernels read float32 storage).
_ARRAY_DTYPE = {DType.TF32: "f32"}
_TORCH_NAMES = {"f16": "torch.float16", "bf16": "torch.bfloat16", "f32": "torch.float32", "e4m3": "torch.float8_e4m3fn",
                "e5m2": "torch.float8_e5m2", "s8": "torch.int8", "u8": "torch.uint8", "s32": "torch.int32"}


def _array_dtype(d: DType) -> str:
    return _ARRAY_DTYPE.get(d, d.value)


def _dtype_words(token: str) -> str:
    return f"{token} ({_TORCH_NAMES[token]})" if token in _TORCH_NAMES else token


# ----------------------------------------------------------------------------------------------
# streams and contexts
# ----------------------------------------------------------------------------------------------
def stream_handle(stream=None, like=None) -> int:
    """A CUstream handle (int) from ``stream``: None (the array library's current stream for ``like``:
    ``torch.cuda.current_stream()``, ``cupy.cuda.get_current_stream()``; else 0, the legacy default stream),
    an int, a ``torch.cuda.Stream`` (``.cuda_stream``), a CuPy stream (``.ptr``), anything with
    ``__cuda_stream__`` (``(version, handle)``), or a cuda-bindings ``CUstream``."""
    if stream is None:
        return _current_stream(like)
    if isinstance(stream, bool):
        raise TypeError(f"stream must be a CUDA stream or a handle, not {stream!r}")
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        try:
            return int(value[1])
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"stream.__cuda_stream__ gave {value!r}, not (version, handle)") from None
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(
            f"stream must be None, an int handle, a torch.cuda.Stream, a CuPy stream or an object with __cuda_stream__; "
            f"got {type(stream).__module__}.{type(stream).__qualname__}"
        ) from None


def _current_stream(like) -> int:
    if like is None:
        return 0
    import sys

    lib = type(like).__module__.split(".")[0]
    try:
        if lib == "torch" and getattr(getattr(like, "device", None), "type", None) == "cuda":
            return int(sys.modules["torch"].cuda.current_stream(like.device).cuda_stream)
        if lib == "cupy" and "cupy" in sys.modules:
            return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
    except Exception:  # noqa: BLE001 - no usable CUDA in that library: the checks that follow say why
        return 0
    return 0


def _ensure_current(dev: Device) -> None:
    """Make the device's primary context current on this thread (a thread other than the one that first
    called require_gpu has none until torch, CuPy or we set it)."""
    from .runtime.gpu import _driver, check

    cu = _driver()
    cur = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is None or int(cur) != int(dev.context):
        check(cu.cuCtxSetCurrent(dev.context), "cuCtxSetCurrent")


def _same_stream(x: int, y: int) -> bool:
    legacy = (0, 1)
    return x == y or (x in legacy and y in legacy)


def _wait_for_producer(producer: int, ours: int) -> None:
    """__cuda_array_interface__ v3: work queued on the producer's stream must finish before we read."""
    from .runtime.gpu import _driver, check

    cu = _driver()
    ev = check(cu.cuEventCreate(0x2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
    try:
        check(cu.cuEventRecord(ev, producer), "cuEventRecord(producer stream)")
        check(cu.cuStreamWaitEvent(ours, ev, 0), "cuStreamWaitEvent")
    finally:
        check(cu.cuEventDestroy(ev), "cuEventDestroy")


def _pointer_device(ptr: int, name: str) -> int:
    """The device ordinal of a pointer, from the driver (for arrays that do not say)."""
    from .runtime.gpu import _driver

    cu = _driver()
    err, ordinal = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ArgumentError(f"{name}: its pointer {ptr:#x} is not device memory known to CUDA in this process")
    return int(ordinal)


# ----------------------------------------------------------------------------------------------
# binding arrays to a spec (pure: no GPU)
# ----------------------------------------------------------------------------------------------
def _pad(n: int, esize: int) -> int:
    q = ROW_ALIGN_BYTES // esize
    return max(q, -(-n // q) * q)


def _check_2d(info: ArrayInfo, what: str) -> None:
    if info.ndim != 2:
        raise ArgumentError(f"{info.name} must be a 2-D array ({what}); got shape {info.shape}")


def _check_strides(info: ArrayInfo) -> None:
    for size, stride in zip(info.shape, info.strides):
        if size > 1 and stride <= 0:
            raise ArgumentError(f"{info.name} has strides {info.strides} (elements): a {'broadcast' if stride == 0 else 'reversed'} "
                                f"view cannot be read by TMA; pass a copy ({info.name}.contiguous())")


def operand_major(info: ArrayInfo) -> Major:
    """The majorness of a logical MN x K operand from its strides; ArgumentError when neither dimension is
    contiguous."""
    rows, cols = info.shape
    s0, s1 = info.strides
    if cols <= 1 or s1 == 1:
        return Major.K
    if rows <= 1 or s0 == 1:
        return Major.MN
    raise ArgumentError(
        f"{info.name} has shape {info.shape} and strides {info.strides} (elements): neither dimension is contiguous; "
        f"pass {info.name}.contiguous() (K-major) or a transposed view of a contiguous array (MN-major)"
    )


def _leading_dim(info: ArrayInfo, major: Major, mn: str, spec_name: str) -> int:
    """The operand's leading dimension (elements between rows of its global layout) for the spec's majorness."""
    rows, cols = info.shape  # MN x K
    s0, s1 = info.strides
    name = info.name
    k_major_ok = cols <= 1 or s1 == 1
    mn_major_ok = rows <= 1 or s0 == 1
    if not (k_major_ok or mn_major_ok):
        operand_major(info)  # raises: neither dimension is contiguous
    if major is Major.K:
        if not k_major_ok:
            raise ArgumentError(
                f"{name} is {mn}-major (shape {info.shape}, strides {info.strides}: stride 1 along {mn}), but {spec_name} reads "
                f"{name.upper()} K-major (stride 1 along K, strides (ld{name}, 1)); pass {name}.contiguous() or compile a spec with "
                f"{name}='mnmajor-...'"
            )
        ld = s0 if rows > 1 else _pad(cols, info.itemsize)
        if rows > 1 and ld < cols:
            raise ArgumentError(f"{name}: rows {ld} elements apart overlap its {cols} columns (strides {info.strides})")
    else:
        if not mn_major_ok:
            raise ArgumentError(
                f"{name} is K-major (shape {info.shape}, strides {info.strides}: stride 1 along K), but {spec_name} reads "
                f"{name.upper()} {mn}-major (stride 1 along {mn}: the transposed view of a row-major K x {mn} array, strides (1, ld{name})); "
                f"pass {name}.t().contiguous().t() or compile a spec with {name}='kmajor-...'"
            )
        ld = s1 if cols > 1 else _pad(rows, info.itemsize)
        if cols > 1 and ld < rows:
            raise ArgumentError(f"{name}: columns {ld} elements apart overlap its {rows} rows (strides {info.strides})")
    if ld * info.itemsize % ROW_ALIGN_BYTES:
        inner = "K" if major is Major.K else mn
        q = ROW_ALIGN_BYTES // info.itemsize
        raise ArgumentError(
            f"{name}: its rows start {ld} elements ({ld * info.itemsize} B) apart, but every row must start 16-byte aligned "
            f"(TMA): the leading dimension must be a multiple of {q} elements; allocate {inner} padded to a multiple of {q} "
            f"and pass a slice"
        )
    return ld


def _check_aligned(info: ArrayInfo) -> None:
    if info.ptr % ROW_ALIGN_BYTES:
        raise ArgumentError(f"{info.name}: its data at {info.ptr:#x} is not 16-byte aligned (a view that starts mid-row?); "
                            "pass an aligned array or a copy")


def _check_devices(infos: list[ArrayInfo]) -> None:
    for info in infos:
        if info.on_cuda is False:
            raise ArgumentError(f"{info.name} is on {info.device_str}; ptxgen kernels read CUDA device memory "
                                f"(move it first, e.g. {info.name}.cuda() or cupy.asarray({info.name}))")
    known = {i.device[1] for i in infos if i.device is not None}
    if len(known) > 1:
        raise ArgumentError("the arrays are on different devices: " + ", ".join(f"{i.name} on {i.device_str}" for i in infos))


@dataclass(frozen=True)
class Binding:
    """The problem that a call's arrays make, checked against a spec."""

    problem: Problem
    a: ArrayInfo
    b: ArrayInfo
    out: ArrayInfo | None


def bind(spec: TileSpec, a: ArrayInfo, b: ArrayInfo, out: ArrayInfo | None) -> Binding:
    """Check the arrays against ``spec`` and infer M, N, K and the leading dimensions (no GPU needed)."""
    name = spec.kernel_name
    _check_2d(a, "A: M x K")
    _check_2d(b, "B: N x K; out = a @ b.T")
    want = _array_dtype(spec.dtype)
    for info in (a, b):
        if info.dtype != want:
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}, but {name} takes {spec.dtype.value} inputs: "
                             f"dtype {_dtype_words(want)}")
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb:
        raise ArgumentError(f"a is {m} x {k} and b is {n} x {kb}: both must have K columns (a is M x K, b is N x K, "
                            f"out = a @ b.T); for a @ w with w of shape K x N pass b=w.t()")
    if k == 0:
        raise ProblemError(f"{name} cannot run M={m} N={n} K=0: K=0 must be in 1..{MAX_DIM} (an empty reduction)")
    for info in (a, b):
        _check_strides(info)
    lda = _leading_dim(a, spec.a.major, "M", name)
    ldb = _leading_dim(b, spec.b.major, "N", name)
    _check_aligned(a)
    _check_aligned(b)
    out_want = spec.out_dtype.value
    osize = spec.out_dtype.bytes
    if out is None:
        if a.library not in ("torch", "cupy"):
            raise ArgumentError(f"pass out= (an M x N = {m} x {n} {out_want} device array): ptxgen allocates outputs only for "
                                f"torch tensors and CuPy arrays, and a is a {a.library} array")
        ldd = _pad(n, osize)
    else:
        _check_2d(out, "out: M x N, row-major")
        if out.shape != (m, n):
            raise ArgumentError(f"out has shape {out.shape}, but a ({m} x {k}) @ b.T ({k} x {n}) is {(m, n)}")
        if out.dtype != out_want:
            raise DTypeError(f"out has dtype {_dtype_words(out.dtype)}, but {name} writes {_dtype_words(out_want)}")
        _check_strides(out)
        if n > 1 and out.strides[1] != 1:
            raise ArgumentError(f"out must be row-major (stride 1 along N: strides (ldd, 1)); it has strides {out.strides}")
        ldd = out.strides[0] if m > 1 else _pad(n, osize)
        if m > 1 and ldd < n:
            raise ArgumentError(f"out: rows {ldd} elements apart overlap its {n} columns")
        if ldd * osize % ROW_ALIGN_BYTES:
            q = ROW_ALIGN_BYTES // osize
            raise ArgumentError(f"out: its rows start {ldd} elements ({ldd * osize} B) apart; the epilogue stores 16-byte vectors, "
                                f"so the row stride must be a multiple of {q} elements (allocate M x N' with N' a multiple of {q} "
                                f"and pass out[:, :N])")
        _check_aligned(out)
    _check_devices([i for i in (a, b, out) if i is not None])
    p = Problem(m, n, k, lda, ldb, ldd)
    if m and n:
        check_problem(spec, p)
    return Binding(p, a, b, out)


# ----------------------------------------------------------------------------------------------
# allocation
# ----------------------------------------------------------------------------------------------
def _allocate_out(like, library: str, m: int, n: int, ldd: int, dtype: str, device_index: int):
    """An M x N array with rows ``ldd`` elements apart, from the inputs' library (a view when ldd > N)."""
    import sys

    if library == "torch":
        torch = sys.modules["torch"]
        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "s32": torch.int32}[dtype]
        full = torch.empty((m, ldd), dtype=tdt, device=like.device)
    else:
        cupy = sys.modules["cupy"]
        cdt = {"f32": cupy.float32, "f16": cupy.float16, "s32": cupy.int32}.get(dtype)
        if cdt is None:
            try:
                import ml_dtypes

                cdt = ml_dtypes.bfloat16
            except ImportError:
                raise ArgumentError(f"pass out= : CuPy has no {dtype} dtype here (install ml_dtypes) to allocate the output") from None
        with cupy.cuda.Device(device_index):
            full = cupy.empty((m, ldd), dtype=cdt)
    return full if ldd == n else full[:, :n]


# ----------------------------------------------------------------------------------------------
# the kernel object
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    shared_bytes: int  # dynamic shared memory per block


class CompiledKernel:
    """A generated GEMM kernel, compiled (PTX and cubin) and ready to launch on device arrays.

    Attributes: ``spec``, ``plan``, ``name``, ``source`` (CUDA C++), ``ptx``, ``cubin``, ``log`` (NVRTC),
    ``abi`` (parameters in order, block, cluster, shared bytes), ``cache_hit`` / ``cache_path``.
    """

    _ARGS_CACHE = 32

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
        self._kernel = None
        self._lock = threading.Lock()
        self._args: OrderedDict = OrderedDict()

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

    def grid(self, m: int, n: int, sm_count: int | None = None) -> tuple[int, int, int]:
        """The grid for an M x N output. ``sm_count``: the device's multiprocessors (persistent kernels launch
        one CTA per SM); None asks the GPU (NoGPU without one)."""
        return self.plan.abi.grid(m, n, sm_count if sm_count is not None else require_gpu().sm_count)

    def launch_config(self, m: int, n: int, sm_count: int | None = None) -> LaunchConfig:
        return LaunchConfig(self.grid(m, n, sm_count), self.block, self.cluster, self.shared_bytes)

    def __repr__(self) -> str:
        return (f"<CompiledKernel {self.name}: {self.spec.arch.value}, {self.plan.abi.threads} threads, "
                f"{self.shared_bytes} B shared, {'persistent' if self.plan.abi.persistent else 'one CTA per tile'}>")

    # -- checks ----------------------------------------------------------------------------------
    def check(self, a, b, out=None) -> Problem:
        """The problem the arrays make, checked against the spec (no GPU needed; raises ArgumentError,
        DTypeError or ProblemError)."""
        return bind(self.spec, read_array(a, "a"), read_array(b, "b"), None if out is None else read_array(out, "out")).problem

    # -- launching -------------------------------------------------------------------------------
    def load(self):
        """Load the cubin into the device's primary context now (done lazily by the first call)."""
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    from .runtime.gpu import Kernel

                    dev = require_gpu()
                    self._require_arch(dev)
                    _ensure_current(dev)
                    self._kernel = Kernel(self.cubin, self.name, self.shared_bytes)
        return self._kernel

    def _require_arch(self, dev: Device) -> None:
        if dev.arch is not self.spec.arch:
            raise NoGPU(f"{self.name} is built for {self.spec.arch.value}, but the GPU ({dev.name}, compute capability "
                        f"{dev.cc[0]}.{dev.cc[1]}) runs {dev.arch.value} kernels: compile the spec with arch='{dev.arch.value}'")

    def _kernel_args(self, a_ptr: int, b_ptr: int, d_ptr: int, p: Problem):
        key = (a_ptr, b_ptr, d_ptr, p)
        args = self._args.get(key)
        if args is None:
            args = gemm_args(self.plan, a_ptr, b_ptr, d_ptr, p)  # tensor maps: the driver's encoder
            self._args[key] = args
            while len(self._args) > self._ARGS_CACHE:
                self._args.popitem(last=False)
        return args

    def __call__(self, a, b, out=None, *, stream=None):
        """``out = a @ b.T``: a is M x K, b is N x K, out is M x N row-major (allocated, with the inputs'
        library, when not given; its rows are then padded to 16 bytes, so it can be a view). Launches on
        ``stream`` (None: the inputs' library's current stream) and returns ``out`` without synchronizing."""
        handle = stream_handle(stream, a)
        ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
        oi = None if out is None else read_array(out, "out", handle)
        return self._launch(a, b, out, ai, bi, oi, handle, stream)

    def _launch(self, a, b, out, ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, handle: int, stream):
        binding = bind(self.spec, ai, bi, oi)
        p = binding.problem
        dev = require_gpu()
        self._require_arch(dev)
        for info in (ai, bi, oi):
            if info is None:
                continue
            ordinal = info.device[1] if info.device is not None else _pointer_device(info.ptr, info.name)
            if ordinal != dev.index:
                raise ArgumentError(f"{info.name} is on cuda:{ordinal}, but ptxgen launches on cuda:{dev.index} (the device "
                                    f"whose primary context it uses; choose it with CUDA_VISIBLE_DEVICES)")
        allocated = out is None
        if allocated:
            out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, self.spec.out_dtype.value, dev.index)
            oi = read_array(out, "out", handle)
        if p.m == 0 or p.n == 0:
            return out
        kernel = self.load()
        _ensure_current(dev)
        for info in (ai, bi, oi):
            if info.producer_stream is not None and not _same_stream(info.producer_stream, handle):
                _wait_for_producer(info.producer_stream, handle)
        args = self._kernel_args(ai.ptr, bi.ptr, oi.ptr, p)
        grid, block, _ = launch_geometry(self.plan, p, dev.sm_count, kernel)
        kernel.launch(grid, block, args, handle)
        if allocated and ai.library == "torch":
            _record_torch_stream(out, stream, handle)
        return out


def _record_torch_stream(out, stream, handle: int) -> None:
    """An output we allocated on torch's current stream but wrote on another: tell the caching allocator."""
    import sys

    torch = sys.modules["torch"]
    if _same_stream(handle, int(torch.cuda.current_stream(out.device).cuda_stream)):
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
    options. ``cache``: True uses the on-disk cache (``ptxgen.runtime.cache``), a path uses that folder,
    False compiles afresh.
    """
    from .emit.render import render_kernel
    from .runtime.cache import compile_cached

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
        from .runtime.toolchain import compile_cuda

        compiled = compile_cuda(source, spec.kernel_name, spec.arch.value, tuple(options))
        return CompiledKernel(spec, plan, source, compiled)
    folder = None if cache is True else Path(cache)
    res = compile_cached(source, spec.kernel_name, spec.arch.value, tuple(options), folder)
    return CompiledKernel(spec, plan, source, res.compiled, res.hit, res.path)


# ----------------------------------------------------------------------------------------------
# gemm: the spec chosen for you
# ----------------------------------------------------------------------------------------------
_INPUT_ARRAY_DTYPES = {"f16": "f16", "bf16": "bf16", "f32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "s8": "s8", "u8": "u8"}
_DEFAULT_OUT = {"f16": "f16", "bf16": "bf16", "tf32": "f32", "e4m3": "bf16", "e5m2": "bf16", "s8": "s32", "u8": "s32"}
_TUNED_DTYPES = ("f16", "bf16", "e4m3")  # the types ptxgen.runtime.tune searches (A and B K-major)
_KERNELS: dict[TileSpec, CompiledKernel] = {}
_KERNELS_LOCK = threading.Lock()


def _with_out_dtype(spec: TileSpec, out_dtype: str) -> TileSpec:
    if spec.out_dtype.value == out_dtype:
        return spec
    return make_spec(**{**spec.to_json(), "out_dtype": out_dtype})


def default_spec(dtype: str, arch: str, a_major: Major, b_major: Major, out_dtype: str) -> TileSpec:
    """A general-purpose spec with the given majorness: 128 B of K per stage with the 128-byte swizzle,
    a persistent schedule, the largest of a few tiles that is legal."""
    d = DType(dtype)
    acc = "s32" if d.is_integer else "f32"
    bk = 128 // d.bytes

    def tokens(major: Major) -> list[str]:
        return ["kmajor-sw128"] if major is Major.K else ["mnmajor-sw128", "mnmajor-sw128b32"]

    errors = []
    for bm, bn, stages in ((128, 256, 4), (128, 128, 4), (128, 128, 2), (64, 128, 2)):
        for ta in tokens(a_major):
            for tb in tokens(b_major):
                try:
                    return make_spec(bm=bm, bn=bn, bk=bk, a=ta, b=tb, dtype=dtype, acc=acc, out_dtype=out_dtype, arch=arch,
                                     stages=stages, schedule="persistent")
                except SpecError as e:
                    errors.append(str(e))
    mn = [n for n, mj in (("a", a_major), ("b", b_major)) if mj is Major.MN]
    hint = f"; pass {' and '.join(f'{x}.contiguous()' for x in mn)} (K-major)" if mn else ""
    raise ArgumentError(f"no {dtype} kernel for {arch} reads A {a_major.value}-major and B {b_major.value}-major: "
                        f"{errors[-1] if errors else 'no legal tile'}{hint}")


def select_spec(dtype: str, arch: str, m: int, n: int, k: int, a_major: Major = Major.K, b_major: Major = Major.K,
                out_dtype: str | None = None) -> tuple[TileSpec, str]:
    """(spec, why) as :func:`gemm` picks it: the tuned table (``ptxgen.runtime.tune.choose_spec``) for K-major
    f16/bf16/e4m3, else :func:`default_spec` with the operands' majorness. ``dtype`` is the spec's input
    type (``tf32`` for float32 arrays); ``out_dtype`` defaults to the input type (f32 for tf32, bf16 for FP8,
    s32 for integers)."""
    if dtype not in _DEFAULT_OUT:
        raise DTypeError(f"no ptxgen kernel takes {dtype} inputs: one of {', '.join(_DEFAULT_OUT)}")
    out = out_dtype or _DEFAULT_OUT[dtype]
    legal = ("s32",) if DType(dtype).is_integer else ("f32", "f16", "bf16")
    if out not in legal:
        raise DTypeError(f"{dtype} inputs give {'/'.join(legal)} outputs, not {out}")
    if dtype in _TUNED_DTYPES and a_major is Major.K and b_major is Major.K:
        from .runtime.tune import choose_spec

        try:
            spec, why = choose_spec(dtype, arch, m, n, k)
            return _with_out_dtype(spec, out), why
        except (SpecError, IndexError, ValueError):
            pass
    mn = [f"{x} is {'M' if x == 'A' else 'N'}-major" for x, mj in (("A", a_major), ("B", b_major)) if mj is Major.MN]
    why = (f"default: {' and '.join(mn)} (the tuned table covers K-major A and B)" if mn
           else f"default: no tuned {dtype} kernels")
    return default_spec(dtype, arch, a_major, b_major, out), why


def gemm_spec(a, b, out=None, *, out_dtype: str | None = None, arch: str | None = None) -> tuple[TileSpec, str]:
    """(spec, why) that :func:`gemm` would use for these arrays (``arch`` None: the GPU's)."""
    ai, bi = read_array(a, "a"), read_array(b, "b")
    oi = None if out is None else read_array(out, "out")
    return _gemm_spec(ai, bi, oi, out_dtype, arch)


def _gemm_spec(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, arch: str | None) -> tuple[TileSpec, str]:
    _check_2d(ai, "A: M x K")
    _check_2d(bi, "B: N x K; out = a @ b.T")
    for info in (ai, bi):
        if info.dtype not in _INPUT_ARRAY_DTYPES:
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}; ptxgen kernels take "
                             + ", ".join(_dtype_words(t) for t in _INPUT_ARRAY_DTYPES))
    if ai.dtype != bi.dtype:
        raise DTypeError(f"a is {_dtype_words(ai.dtype)} but b is {_dtype_words(bi.dtype)}: both inputs have one type")
    if ai.shape[1] != bi.shape[1]:
        raise ArgumentError(f"a is {ai.shape[0]} x {ai.shape[1]} and b is {bi.shape[0]} x {bi.shape[1]}: both must have K "
                            "columns (out = a @ b.T)")
    if out_dtype is None and oi is not None:
        out_dtype = oi.dtype
    for info in (ai, bi):
        _check_strides(info)
    a_major, b_major = operand_major(ai), operand_major(bi)
    if arch is None:
        arch = require_gpu().arch.value
    (m, k), n = ai.shape, bi.shape[0]
    return select_spec(_INPUT_ARRAY_DTYPES[ai.dtype], arch, max(m, 1), max(n, 1), max(k, 1), a_major, b_major, out_dtype)


def kernel_for(spec: TileSpec) -> CompiledKernel:
    """The compiled kernel for ``spec``, compiled once per process (and cached on disk)."""
    with _KERNELS_LOCK:
        kernel = _KERNELS.get(spec)
        if kernel is None:
            kernel = _KERNELS[spec] = compile(spec)
        return kernel


def gemm(a, b, out=None, *, out_dtype: str | None = None, stream=None):
    """``out = a @ b.T`` with a spec chosen for the arrays' type, shape and majorness on this GPU.

    a is M x K and b is N x K (torch tensors, CuPy arrays, anything with DLPack or __cuda_array_interface__).
    K-major f16/bf16/e4m3 operands use the tuned table (``ptxgen tune``, as ``ptxgen bench``); MN-major
    operands (transposed views) and other types (tf32 from float32, e5m2, s8, u8) use a default 128 x 256
    (or smaller) persistent tile with the operands' majorness. On Hopper only f16/bf16 can be MN-major.
    ``out_dtype`` (f32, f16, bf16; s32 for integers) defaults to ``out``'s dtype, else the input type
    (f32 for float32 inputs, bf16 for FP8). Kernels are compiled once per spec and process.
    """
    handle = stream_handle(stream, a)
    ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
    oi = None if out is None else read_array(out, "out", handle)
    spec, _ = _gemm_spec(ai, bi, oi, out_dtype, None)
    return kernel_for(spec)._launch(a, b, out, ai, bi, oi, handle, stream)
