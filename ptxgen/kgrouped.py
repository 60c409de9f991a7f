"""K-grouped GEMM: ``torch._grouped_mm``'s 2-D x 2-D form, the weight gradient of an expert bank. One launch.

>>> out = ptxgen.grouped_gemm_k(a, b, offs)    # doctest: +SKIP

- ``a``: M x K_total, ``b``: N x K_total, each K-major (rows contiguous along K) or MN-major (``dy.t()``, ``x.t()``:
  columns contiguous, tokens the strided K dimension); bf16 or f16;
- ``offs``: int32, G values on the same GPU, the cumulative K ends: group g owns K indices offs[g-1]..offs[g]-1;
- ``out``: G x M x N, ``out[g] = a[:, K of g] @ b[:, K of g].T`` (``torch._grouped_mm(a, b.t(), offs=offs)``); an
  empty group's ``out[g]`` is zeros. ``out_dtype``: bf16/f16 (default the inputs') or f32.

Nothing on the host reads ``offs``, so a call can be captured in a CUDA graph. ptxgen.derive.roles.kgrouped derives the
kernel; a repeat call with torch tensors of the same shapes, strides, dtypes and device goes through the launch
prepared for them (``api.launch.groupedlaunch.GroupedLaunch``: pointers patched, one cuLaunchKernel).
"""

from __future__ import annotations

import threading

from .api.launch import streams
from .api.arrays.binding import _allocate_out, _dtype_words
from .api.launch.groupedlaunch import GroupedLaunch, torch_key, torch_tensor_type
from .api.kernel import CompiledKernel, _record_torch_stream, compile
from .api.launch.streams import stream_handle
from .derive.tile.spec import TileSpec, make_spec
from .isa.types import SpecError
from .runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from .runtime.launch.fastlaunch import launcher
from .runtime.launch.gpu import NoGPU
from .runtime.launch.grouped import GroupedProblem, build_grouped_params
from .runtime.launch.kgrouped import check_kgrouped_problem, kgrouped_geometry

__all__ = ["grouped_gemm_k", "kgrouped_spec", "bind_kgrouped"]

# 128 x 128 x 64, 4 stages: the tile of the M-grouped 16-bit kernels' K depth with a square output tile (every
# group's out[g] is M x N); MN-major operands are copied as one 64 x 64 box per 64 columns (order k, as the grouped
# N-major B). Not tuned.
_TILE = dict(bm=128, bn=128, bk=64, stages=4)
_IN = ("bf16", "f16")


def kgrouped_spec(dtype: str = "bf16", out_dtype: str | None = None, arch: str = "sm_90a", a_major: str = "mn",
                  b_major: str = "mn") -> TileSpec:
    """The spec :func:`grouped_gemm_k` uses: ``a_major``/``b_major`` "k" or "mn" (the operands' contiguous dimension)."""
    if dtype not in _IN:
        raise DTypeError(f"grouped_gemm_k takes {_dtype_words('bf16')} or {_dtype_words('f16')} inputs, not {_dtype_words(dtype)}")
    out = out_dtype or dtype
    if out not in ("bf16", "f16", "f32"):
        raise DTypeError(f"grouped_gemm_k gives bf16, f16 or f32 outputs, not {out}")

    def op(major: str) -> dict:
        return dict(layout=f"{major}major-sw128", order="k")

    a, b = op(a_major), op(b_major)
    return make_spec(**_TILE, a=a["layout"], b=b["layout"], a_order=a["order"], b_order=b["order"], dtype=dtype, acc="f32",
                     out_dtype=out, arch=arch, schedule="persistent", epilogue="direct", grouped="offs_k")


def _major(info: ArrayInfo, word: str) -> tuple[str, int]:
    """("k" or "mn", the stride between the operand's outer rows) of a 2-D operand; ArgumentError for other strides."""
    if info.ndim != 2:
        raise ArgumentError(f"{info.name} must be 2-D ({word} x K_total), not {info.ndim}-D")
    rows, k = info.shape
    s0, s1 = info.strides
    if k <= 1 or s1 == 1:
        return "k", s0 if rows > 1 else max(k, 1)
    if rows <= 1 or s0 == 1:
        return "mn", s1
    raise ArgumentError(f"{info.name} (strides {info.strides}) is neither K-major nor {word}-major: pass .contiguous()")


def bind_kgrouped(ai: ArrayInfo, bi: ArrayInfo, fi: ArrayInfo, oi: ArrayInfo | None):
    """(a major, b major, problem) of the arrays (no GPU); ArgumentError or DTypeError naming the rule."""
    if ai.dtype not in _IN or bi.dtype != ai.dtype:
        raise DTypeError(f"grouped_gemm_k takes a and b of one 16-bit type (bf16 or f16); got {_dtype_words(ai.dtype)} and "
                         f"{_dtype_words(bi.dtype)}")
    a_major, lda = _major(ai, "M")
    b_major, ldb = _major(bi, "N")
    (m, k), (n, kb) = ai.shape, bi.shape
    if k != kb:
        raise ArgumentError(f"a is {m} x {k} and b is {n} x {kb}: both must have K_total columns")
    if fi.ndim != 1 or fi.dtype != "s32":
        raise ArgumentError(f"offs must be 1-D int32 (the G cumulative K ends); got {fi.ndim}-D {fi.dtype}")
    g = fi.shape[0]
    ldd = n
    if oi is not None:
        if tuple(oi.shape) != (g, m, n):
            raise ArgumentError(f"out has shape {tuple(oi.shape)}, but the K-grouped product is {(g, m, n)}")
        sg, sm, sn = oi.strides
        if n > 1 and sn != 1 or (m > 1 and g > 1 and sg != m * sm):
            raise ArgumentError(f"out must hold each out[g] row-major, the groups M x ldd elements apart (strides (M ldd, ldd, "
                                f"1)); it has strides {oi.strides}")
        ldd = sm if m > 1 else max(n, 1)
    return a_major, b_major, GroupedProblem(m, n, k, g, max(lda, 1), max(ldb, 1), ldd)


def decide(ai: ArrayInfo, bi: ArrayInfo, fi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, arch: str):
    """(spec, problem, out dtype) of a call on arrays already read, every rule checked but the device (no GPU; what
    ``ptxgen.api.plan`` reports): ArgumentError, DTypeError, SpecError or ProblemError naming the rule."""
    a_major, b_major, p = bind_kgrouped(ai, bi, fi, oi)
    out_dtype = out_dtype or (oi.dtype if oi is not None else ai.dtype)
    spec = kgrouped_spec(ai.dtype, out_dtype, arch, a_major, b_major)
    if p.groups and p.m and p.n and p.k:
        check_kgrouped_problem(_plan_of(spec), p)
    return spec, p, out_dtype


_PLANS: dict = {}


def _plan_of(spec: TileSpec):
    plan = _PLANS.get(spec)
    if plan is None:
        from .derive.tile.kernel import plan_kernel

        plan = _PLANS[spec] = plan_kernel(spec)
    return plan


class _KLaunch(GroupedLaunch):
    """A prepared K-grouped launch: the grouped one, allocating G x M x N."""

    def __init__(self, *args, groups: int):
        super().__init__(*args)
        self.groups = groups

    def _allocate(self, a):
        return a.new_empty((self.groups, self.m, self.n), dtype=self._torch_dtype)


_KERNELS: dict[TileSpec, CompiledKernel] = {}
_PREPARED: dict = {}  # (torch keys, out dtype) -> _KLaunch: the torch hot path
_LOCK = threading.Lock()
_ENTRIES = 256


def _kernel(spec: TileSpec) -> CompiledKernel:
    with _LOCK:
        kernel = _KERNELS.get(spec)
        if kernel is None:
            kernel = _KERNELS[spec] = compile(spec)
    return kernel


def grouped_gemm_k(a, b, offs, out=None, *, out_dtype: str | None = None, stream=None):
    """out[g] = a[:, offs[g-1]:offs[g]] @ b[:, offs[g-1]:offs[g]].T for g < G: one launch (see the module)."""
    key = None
    if type(a) is torch_tensor_type():
        try:
            key = (torch_key(a), torch_key(b), torch_key(offs), torch_key(out), out_dtype)
        except (AttributeError, TypeError):
            key = None
        launch = _PREPARED.get(key) if key is not None else None
        if launch is not None:
            r = launch.call_torch(a, b, offs, out, None, None, stream)
            if r is not None:
                return r
    handle = stream_handle(stream, a)
    ai, bi, fi = read_array(a, "a", handle), read_array(b, "b", handle), read_array(offs, "offs", handle)
    oi = None if out is None else read_array(out, "out", handle)
    dev = streams.call_device((ai, bi, fi, oi))
    try:
        spec, p, out_dtype = decide(ai, bi, fi, oi, out_dtype, dev.arch.value)
    except SpecError as e:
        raise NoGPU(f"no K-grouped kernel for this GPU: {e}") from None
    kernel = _kernel(spec)
    allocated = out is None
    if allocated:
        kernel._require_arch(dev)
        out = _allocate_out(a, ai.library, p.groups * p.m, p.n, p.ldd, out_dtype, dev.index).reshape(p.groups, p.m, p.n)
        oi = read_array(out, "out", handle)
    if p.groups == 0 or p.m == 0 or p.n == 0:
        return out
    if p.k == 0:  # no K at all: every group is empty (a tensor map needs K >= 1)
        out[...] = 0
        return out
    for info in (ai, bi, fi, oi):
        producer = info.producer_stream
        if producer is not None and not streams.same_stream(producer, handle):
            with streams.on_device(dev):
                streams.wait_for_producer(producer, handle)
    launch = _prepare(kernel, dev, p)
    launch.run((ai.ptr, bi.ptr, fi.ptr, oi.ptr), handle)
    if key is not None and all(i.library == "torch" for i in (ai, bi, fi, oi)) and all(
            i.device is not None for i in (ai, bi, fi, oi)):
        launch.enable_torch()
        if len(_PREPARED) >= _ENTRIES:
            _PREPARED.clear()
        _PREPARED[key] = launch
    if allocated and ai.library == "torch":
        _record_torch_stream(out, stream, handle)
    return out


def _prepare(kernel: CompiledKernel, dev, p: GroupedProblem) -> _KLaunch:
    """The launch for problem ``p`` on ``dev`` (its checks made by :func:`decide`): the kernel load, the parameter block,
    the grid."""
    kernel._require_arch(dev)
    drv = launcher()
    func = kernel.load(dev)
    block, slots = build_grouped_params(kernel.plan, p, drv.encode)
    grid, blk, smem = kgrouped_geometry(kernel.plan, p, dev.sm_count)
    return _KLaunch(block, slots, (int(func.func), *grid, *blk, smem), drv, dev, p, kernel.spec.out_dtype.value, kernel.name,
                    groups=p.groups)
