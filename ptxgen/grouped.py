"""Grouped GEMM for mixture-of-experts layers, in the ``torch._grouped_mm`` layout: one persistent launch.

>>> out = ptxgen.grouped_gemm(a, b, offs)    # doctest: +SKIP

- ``a``: M_total x K, K-major (row-major), the groups' rows stacked along M;
- ``b``: G x N x K, K-major (each ``b[g]`` an N x K weight, as ``ptxgen.gemm`` and ``nn.functional.linear``
  take it; ``torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)`` is the same product);
- ``offs``: int32, G values on the same GPU, the cumulative row ends: group g owns rows offs[g-1]..offs[g]-1;
- ``out``: M_total x N row-major; rows of group g = ``a[rows of g] @ b[g].T``. Rows past offs[G-1] are not
  written (an allocated ``out`` leaves them uninitialised, as torch does).

Nothing on the host reads ``offs``, so a call can be captured in a CUDA graph and replayed with other values
in ``offs``. Offsets that decrease or pass M_total are clamped on the GPU (empty or shortened groups).
ptxgen.derive.roles.grouped derives the walk; docs/grouped.md explains the design and what has been measured.
"""

from __future__ import annotations

import threading

from .api.arrays import precision as fp32
from .api.launch import streams
from .api.arrays.binding import _dtype_words
from .api.arrays.groupedbind import b_is_n_major
from .api.groupedkernel import GroupedKernel
from .api.launch.groupedlaunch import torch_tensor_type
from .api.launch.hotkeys import fast_torch_key
from .api.arrays.groupedpack import pack_plan, packed_call, warn_once
from .api.kernel import compile
from .api.launch.streams import stream_handle
from .derive.tile.spec import TileSpec, make_spec
from .isa.types import DType, SpecError
from .runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from .runtime.launch.gpu import NoGPU

__all__ = ["GroupedKernel", "blockscaled_grouped_gemm", "blockscaled_grouped_spec", "compile_grouped", "grouped_gemm",
           "grouped_spec", "scaled_grouped_gemm", "small_groups"]

# The default grouped kernels: the tuned dense 4096^3 tile (bf16) and 8192^3 tile (FP8) of tuning/h200.json,
# made grouped. Output types: the input's for 16-bit inputs, bf16 for FP8.
# float32 arrays (tf32 kernels; f32 output through the direct stores): the plain default tile (api.select.default_spec's
# 128 x 256, 128 B of K per stage), not measured grouped.
_TILES = {2: dict(bm=128, bn=256, bk=64, stages=4), 1: dict(bm=128, bn=256, bk=128, stages=4),
          4: dict(bm=128, bn=256, bk=32, stages=4)}
# 16-bit inputs whose groups are small on average (M_total < SMALL_GROUP_ROWS x G, known on the host without reading
# offs): a 64 x 256 ping-pong tile, which wastes half as many rows per group tail and keeps two tiles in flight per CTA.
# The threshold is measured (docs/grouped.md, "Tile by mean rows per group"); FP8 keeps its one tile (not measured).
SMALL_GROUP_ROWS = 768
_F32 = fp32.F32  # [torch.float32], once torch is imported
_SMALL_TILE = dict(bm=64, bn=256, bk=64, stages=4, consumers="pingpong", raster_group=16)


def small_groups(m_total: int, groups: int) -> bool:
    """Whether ``groups`` groups over ``m_total`` rows are small on average (mean rows per group < SMALL_GROUP_ROWS):
    what grouped_gemm decides the 16-bit tile by. Host-side sizes only; ``offs`` is never read."""
    return groups > 0 and m_total < SMALL_GROUP_ROWS * groups
_GROUPED_DTYPES = ("f16", "bf16", "f32", "e4m3", "e5m2")  # array types; float32 arrays are read by tf32 kernels
_SPEC_DTYPE = {"f32": "tf32"}
_DEFAULT_OUT = {"f16": "f16", "bf16": "bf16", "f32": "f32", "e4m3": "bf16", "e5m2": "bf16"}
_FP8 = ("e4m3", "e5m2")


def grouped_spec(dtype: str = "bf16", out_dtype: str | None = None, arch: str = "sm_90a", rowwise: bool = False,
                 small: bool = False, b_major: str = "k", b_dtype: str | None = None) -> TileSpec:
    """The spec :func:`grouped_gemm` uses for ``dtype`` inputs: a persistent 128 x 256 wgmma tile with the
    TMA-store epilogue, A and B K-major with the 128-byte swizzle, grouped over ``offs``; ``rowwise``: with
    torch._scaled_grouped_mm's row-wise scales (FP8 inputs; :func:`scaled_grouped_gemm`); ``small``: groups small on
    average (:func:`small_groups`), 16-bit inputs take the 64 x 256 ping-pong tile (FP8 ignores it); ``b_major`` "mn":
    B N-major (stored G x K x N), one 3-D tensor map over (N, K, G) (16-bit inputs; wgmma reads tf32 and FP8 K-major
    only). ``dtype`` and ``b_dtype`` are the arrays' types (float32: a tf32 kernel); ``b_dtype`` differs only between
    e4m3 and e5m2 (wgmma .e4m3/.e5m2 either way, derive.tile.rules_operand.MIXABLE)."""
    check_input_types(dtype, b_dtype or dtype)
    mixed = {} if b_dtype in (None, dtype) else {"b_dtype": b_dtype}
    out = out_dtype or _DEFAULT_OUT[dtype]
    if out not in ("f32", "f16", "bf16"):
        raise DTypeError(f"{dtype} inputs give f32, f16 or bf16 outputs, not {out}")
    nbytes = DType(dtype).bytes
    tile = _SMALL_TILE if small and nbytes == 2 else _TILES[nbytes]
    # an N-major B with its atoms adjacent along K: one 64 x 64 box per 64 columns of N (4 copies a stage at BN = 256)
    # instead of 32 boxes of 64 x 8 with the default order (issue 18; measured: runs/2026-12-01-gpu-tier-cost-model/order)
    order = {} if b_major == "k" else {"b_order": "k"}
    return make_spec(**tile, **order, **mixed, a="kmajor-sw128", b="kmajor-sw128" if b_major == "k" else "mnmajor-sw128",
                     dtype=_SPEC_DTYPE.get(dtype, dtype), acc="f32", out_dtype=out, arch=arch,
                     schedule="persistent", epilogue="tma" if out != "f32" else "direct",
                     grouped="offs_rowwise" if rowwise else "offs")


def check_input_types(a_dtype: str, b_dtype: str) -> None:
    """The grouped door's input types: one of _GROUPED_DTYPES for both, or e4m3 with e5m2 (either way); else DTypeError."""
    for d in (a_dtype, b_dtype):
        if d not in _GROUPED_DTYPES:
            raise DTypeError(f"grouped_gemm takes {', '.join(_dtype_words(t) for t in _GROUPED_DTYPES)} inputs, not {_dtype_words(d)}")
    if a_dtype != b_dtype and not (a_dtype in _FP8 and b_dtype in _FP8):
        raise DTypeError(f"a is {_dtype_words(a_dtype)} but b is {_dtype_words(b_dtype)}: both inputs have one type (or e4m3 "
                         "with e5m2, either way: wgmma .e4m3/.e5m2)")


def grouped_decision(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, spec_for) -> tuple[TileSpec | None, dict]:
    """What a grouped call does with arrays already read (no GPU): ``(spec, {})`` where a kernel reads them as they are, or
    ``(None, {argument: why})`` for the torch/CuPy arrays to pack first (``api.arrays.groupedpack``; the packed call decides the
    spec). ``spec_for(b_major)`` ("k" or "mn") gives the spec or raises SpecError (refused: ArgumentError for an N-major
    ``b`` of a type no kernel reads N-major and that is not packable; the SpecError itself otherwise)."""
    n_major = b_is_n_major(bi)
    n_major_ok = False
    if n_major:
        try:
            spec_for("mn")
            n_major_ok = True
        except SpecError:
            pass
    packs = pack_plan(ai, bi, oi, n_major_ok)
    if packs:
        return None, packs
    try:
        return spec_for("mn" if n_major else "k"), {}
    except SpecError as e:
        if n_major:
            raise ArgumentError(f"b is N-major (strides {bi.strides}), which no grouped {ai.dtype} kernel reads ({e}): "
                                "pass b.contiguous() (K-major)") from None
        raise


def _cached_spec(key: tuple, make) -> TileSpec:
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = make()
    return spec


def compile_grouped(spec: TileSpec | dict | None = None, /, **fields) -> GroupedKernel:
    """Compile a grouped spec (``grouped='offs'``; NVRTC, no GPU needed) into a :class:`GroupedKernel`."""
    if spec is None:
        fields.setdefault("grouped", "offs")
    return GroupedKernel(compile(spec, **fields))


_KERNELS: dict[TileSpec, GroupedKernel] = {}
_KERNELS_LOCK = threading.Lock()


def _kernel_for(spec: TileSpec) -> GroupedKernel:
    kernel = _KERNELS.get(spec)
    if kernel is None:
        with _KERNELS_LOCK:
            kernel = _KERNELS.get(spec)
            if kernel is None:
                kernel = _KERNELS[spec] = compile_grouped(spec)
    return kernel


_SPECS: dict[tuple, TileSpec] = {}
_BY_TYPES: dict[tuple, GroupedKernel] = {}  # (input dtype, out dtype, ..., the device's arch) -> the kernel grouped_gemm uses
_FAST: dict = {}  # _fast_key -> GroupedLaunch: the torch hot path of every grouped door (emptied when full)
_FAST_ENTRIES = 256


def _fast_key(recipe, out_dtype, a, b, out, x, y, z=None):
    """The dispatch key of a grouped call on torch tensors (``x``, ``y``, ``z``: offs, or the scales and offs), read
    with hotkeys.fast_torch_key; None where an argument is not a torch tensor."""
    try:
        return (recipe, out_dtype, fast_torch_key(a, b, out), fast_torch_key(x, y, z))
    except (AttributeError, TypeError):
        return None


def _fast_call(fkey, a, b, offs, out, scale_a, scale_b, stream):
    """A repeat call: the launch prepared for these tensors' key, no other work; None where there is none or a pointer
    rule fails (the caller's slow path then runs)."""
    launch = _FAST.get(fkey) if fkey is not None else None
    return None if launch is None else launch.call_torch(a, b, offs, out, scale_a, scale_b, stream)


def _remember_fast(fkey, kernel: GroupedKernel, a, b, offs, out, scale_a, scale_b) -> None:
    """After a slow call on torch tensors: its prepared launch under ``fkey`` (an allocated ``out`` stays None)."""
    if fkey is None:
        return
    launch = kernel._torch_launches.get(kernel.dispatch_key(a, b, offs, out, scale_a, scale_b))
    if launch is not None:
        if len(_FAST) >= _FAST_ENTRIES:
            _FAST.clear()
        _FAST[fkey] = launch


_TORCH_KERNELS: dict[tuple, GroupedKernel] = {}  # (a's torch dtype, out_dtype, out's torch dtype) -> the same, hot


def grouped_gemm(a, b, offs=None, out=None, *, out_dtype: str | None = None, stream=None, precision: str | None = None):
    """The grouped product in ``torch._grouped_mm``'s layout (see the module): rows of group g of ``out`` are
    ``a[offs[g-1]:offs[g]] @ b[g].T``. f16/bf16 (and unscaled e4m3/e5m2) inputs, K-major; ``out_dtype`` defaults
    to ``out``'s, else the input type (bf16 for FP8). One persistent launch on ``stream`` (None: the inputs'
    library's current stream); returns ``out`` without synchronizing. Raises NoGPU without a usable GPU.

    A 3-D ``a`` with a 2-D ``b`` and ``offs``: the N-grouped form (:func:`_n_grouped`). A 2-D ``a`` (M x K_total) with a
    2-D ``b`` (N x K_total) and ``offs`` of cumulative K ends: the K-grouped form, out G x M x N
    (:func:`ptxgen.kgrouped.grouped_gemm_k`).

    ``offs=None`` with a 3-D ``a`` (torch tensors): the batched form, ``out[g] = a[g] @ b[g].T`` for a of G x M x K,
    b of G x N x K and out of G x M x N, as the same kernel over the G x M rows of ``a`` with offs = M, 2M, ..., GM
    (made on the device once per G, M and device, never read on the host).

    ``precision`` (float32 inputs): as ``ptxgen.gemm``'s (``api.arrays.precision``): "tf32", "3xtf32", or None (torch's float32
    matmul precision for torch tensors, tf32 for other arrays)."""
    if precision is not None or _F32[0] is None or getattr(a, "dtype", None) is _F32[0]:
        n_form = len(getattr(a, "shape", ())) == 3 and len(getattr(b, "shape", ())) == 2
        a, b = fp32.operands(a, b, None if n_form else out, precision, stream, grouped=True)  # from here on float32 is read as tf32
    if offs is None:
        return _batched(a, b, out, out_dtype, stream)
    if len(getattr(a, "shape", ())) == 3 and len(getattr(b, "shape", ())) == 2:
        return _n_grouped(a, b, offs, out, out_dtype, stream)
    if _ndim(a) == 2 and _ndim(b) == 2:  # groups along K (ptxgen.kgrouped)
        from .kgrouped import grouped_gemm_k

        return grouped_gemm_k(a, b, offs, out, out_dtype=out_dtype, stream=stream)
    fkey = _fast_key(None, out_dtype, a, b, out, offs, offs) if type(a) is torch_tensor_type() else None
    r = _fast_call(fkey, a, b, offs, out, None, None, stream)
    if r is not None:
        return r
    tkey = None
    if type(a) is torch_tensor_type():  # a repeat call with torch tensors: the launch prepared for their key
        bshape = getattr(b, "shape", ())
        small = small_groups(a.shape[0], bshape[0]) if len(a.shape) == 2 and len(bshape) == 3 else False
        bstride = b.stride() if len(bshape) == 3 else ()
        n_major = len(bshape) == 3 and bshape[1] > 1 and bstride[1] == 1 and (bshape[2] <= 1 or bstride[2] != 1)
        tkey = (a.dtype, getattr(b, "dtype", None), out_dtype, None if out is None else getattr(out, "dtype", None), small,
                n_major)
        kernel = _TORCH_KERNELS.get(tkey)
        if kernel is not None:
            r = kernel._hot_torch(a, b, offs, out, None, None, stream)
            if r is not None:
                return r
    handle = stream_handle(stream, a)
    ai, bi, fi = read_array(a, "a", handle), read_array(b, "b", handle), read_array(offs, "offs", handle)
    oi = None if out is None else read_array(out, "out", handle)
    check_input_types(ai.dtype, bi.dtype)
    if out_dtype is None and oi is not None:
        out_dtype = oi.dtype
    small = small_groups(ai.shape[0], bi.shape[0]) if ai.ndim == 2 and bi.ndim == 3 else False
    arch = streams.call_device((ai, bi, fi, oi)).arch.value  # the arrays' device: a machine may hold other GPUs
    try:
        spec, packs = grouped_decision(ai, bi, oi, lambda b_major: _cached_spec(
            (ai.dtype, bi.dtype, out_dtype, small, b_major, arch),
            lambda: grouped_spec(ai.dtype, out_dtype, arch, small=small, b_major=b_major, b_dtype=bi.dtype)))
    except SpecError as e:
        raise NoGPU(f"no grouped kernel for this GPU: {e}") from None
    if packs:
        return packed_call(grouped_gemm, dict(a=a, b=b, offs=offs, out=out), dict(a=ai, b=bi, out=oi), packs,
                           dict(out_dtype=out_dtype, stream=stream, precision=fp32.TF32), "grouped_gemm")
    kernel = _kernel_for(spec)
    r = kernel._launch(a, out, (ai, bi, fi, oi), handle, stream, torch_args=(a, b, offs, out, None, None))
    if tkey is not None and kernel._torch_launches:
        _TORCH_KERNELS[tkey] = kernel
    _remember_fast(fkey, kernel, a, b, offs, out, None, None)
    return r


def _ndim(x) -> int:
    """Dimensions of an array of any library (``shape`` where it has one, else what read_array reads)."""
    shape = getattr(x, "shape", None)
    return len(shape) if shape is not None else read_array(x, "array").ndim


def _n_grouped(a, b, offs, out, out_dtype, stream, scales=None):
    """The N-grouped form (``torch._grouped_mm``'s 3-D ``a`` x 2-D ``b``): ``a`` G x M x K, ``b`` N_total x K with the
    groups' weight rows stacked along N (``offs``: their cumulative ends), ``out`` M x N_total with the columns of group
    g = ``a[g] @ b[cols of g].T`` (``torch._grouped_mm(a, b.t(), offs=offs)``). It is the M-grouped product with the
    operands swapped, ``out.T = grouped_gemm(b, a, offs)``: one launch of the same kernel, ``offs`` never read on the
    host. So ``out`` is M-major: the transposed view of an N_total x M row-major array (strides (1, ldd)), and an
    ``out`` passed in must be one. Columns past offs[-1] are not written.

    ``scales`` (scale_a, scale_b), FP8 ``a`` and ``b`` (torch._scaled_grouped_mm's 3-D x 2-D form): scale_a holds G x M
    f32 (one per group and row of ``a``), scale_b N_total (one per column of ``out``), and ``out[:, cols of g] =
    (a[g] @ b[cols of g].T) * scale_a[g][:, None] * scale_b[cols of g]``: in the swapped product scale_b is the row
    scale of the stacked rows and scale_a the (group, column) scale, the M-grouped row-wise kernel's own layout."""
    (g, m, k), (n_total, kb) = a.shape, b.shape
    if k != kb:
        raise ArgumentError(f"a is {g} x {m} x {k} and b is {n_total} x {kb}: both must have K columns (the N-grouped form: "
                            "a G x M x K, b N_total x K)")
    if len(offs.shape) != 1 or offs.shape[0] != g:
        raise ArgumentError(f"offs must hold G = {g} cumulative column ends (one per batch of a); got shape {tuple(offs.shape)}")
    out_t = None
    if out is not None:
        oi = read_array(out, "out")  # element strides, whatever the library
        if tuple(oi.shape) != (m, n_total):
            raise ArgumentError(f"out has shape {tuple(oi.shape)}, but the N-grouped product is {m} x {n_total}")
        if m > 1 and oi.strides[0] != 1:
            raise ArgumentError(f"out must be M-major for the N-grouped form (strides (1, ldd): the transposed view of an "
                                f"N_total x ldd row-major array); it has strides {oi.strides}")
        out_t = out.T
    if scales is not None:
        sa, sb = scales
        for name, x, want in (("scale_a", sa, (g, m)), ("scale_b", sb, (n_total,))):
            shape = tuple(getattr(x, "shape", ()))
            if shape not in (want, (want[0] * (want[1] if len(want) > 1 else 1),)):
                raise ArgumentError(f"{name} has shape {shape}; the N-grouped form (a {g} x {m} x {k}, b {n_total} x {kb}) "
                                    f"takes {name} of {' x '.join(map(str, want))} f32 values")
        return scaled_grouped_gemm(b, a, sb, sa.reshape(g, m), offs, out_t, out_dtype=out_dtype, stream=stream).T
    return grouped_gemm(b, a, offs, out_t, out_dtype=out_dtype, stream=stream, precision=fp32.TF32).T


_BATCH_OFFS: dict[tuple, object] = {}


def batch_offs(g: int, m: int, device):
    """int32 offs = M, 2M, ..., G M on ``device`` (torch), made once per (G, M, device) and kept: the batched form's
    groups, and with G = 1 a dense problem's one group (``ptxgen.scaled.scaled_gemm``)."""
    import sys

    key = (g, m, device)
    offs = _BATCH_OFFS.get(key)
    if offs is None:
        torch = sys.modules["torch"]
        offs = torch.arange(m, g * m + 1, m, dtype=torch.int32, device=device) if m else \
            torch.zeros(g, dtype=torch.int32, device=device)
        torch.cuda.current_stream(device).synchronize()  # once: the kernel may run on another stream
        _BATCH_OFFS[key] = offs
    return offs


def _batched(a, b, out, out_dtype, stream, scales=None):
    """The 3-D x 3-D form through the grouped kernel: a (G, M, K) -> (G M, K) rows, offs = M, 2M, ..., G M. ``scales``:
    (scale_a of G x M, scale_b of G x N) for :func:`scaled_grouped_gemm` (scale_a read as G M values)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(a, torch.Tensor):
        raise ArgumentError("offs=None (the batched form, a of G x M x K) takes torch tensors; for other arrays pass a as "
                            "(G M) x K rows and offs = M, 2M, ..., G M (int32 on the device)")
    if a.dim() != 3 or b.dim() != 3:
        raise ArgumentError(f"offs=None is the batched form: a must be G x M x K and b G x N x K; got {tuple(a.shape)} and "
                            f"{tuple(b.shape)} (pass offs for a 2-D a)")
    g, m, k = a.shape
    if b.shape[0] != g:
        raise ArgumentError(f"a has {g} batches but b has {b.shape[0]}")
    if (k > 1 and a.stride(2) != 1) or (g > 1 and m > 1 and a.stride(0) != m * a.stride(1)):
        warn_once("a", f"its batches are not one (G M) x K matrix of K-major rows (strides {tuple(a.stride())})",
                  "computing with a contiguous copy", "grouped_gemm")
        a = a.contiguous()  # the rows of a[g] one after another: (G M) x K, read as the grouped kernel's a
    a2 = a.reshape(g * m, k)
    offs = batch_offs(g, m, a.device)
    n = b.shape[1]
    if scales is None:
        def run(o):
            return grouped_gemm(a2, b, offs, o, out_dtype=out_dtype, stream=stream, precision=fp32.TF32)
    else:
        sa, sb = scales
        if tuple(sa.shape) != (g, m):
            raise ArgumentError(f"scale_a has shape {tuple(sa.shape)}; with a of {g} x {m} x {k} it must be {(g, m)}")
        sa2 = sa.reshape(g * m)

        def run(o):
            return scaled_grouped_gemm(a2, b, sa2, sb, offs, o, out_dtype=out_dtype, stream=stream)
    if out is None:
        flat = run(None)
        return flat.view(g, m, n) if g * m else flat.reshape(g, m, n)
    if tuple(out.shape) != (g, m, n):
        raise ArgumentError(f"out has shape {tuple(out.shape)}, but the batched product is {(g, m, n)}")
    if g > 1 and m > 1 and out.stride(0) != m * out.stride(1):
        warn_once("out", f"its batches do not follow each other with no gap (strides {tuple(out.stride())})",
                  "computing into a contiguous output and copying it into out", "grouped_gemm")
        out.copy_(_batched(a, b, None, out_dtype or read_array(out, "out").dtype, stream, scales))
        return out
    run(out.as_strided((g * m, n), (out.stride(1), out.stride(2))))  # the batches' rows, one after another
    return out


def scaled_grouped_gemm(a, b, scale_a, scale_b, offs=None, out=None, *, out_dtype: str | None = None, stream=None):
    """FP8 (e4m3/e5m2) grouped product with row-wise scales, as ``torch._scaled_grouped_mm(a, b.transpose(-2, -1),
    scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16)``: rows of group g of ``out`` are
    ``(a[rows] @ b[g].T) * scale_a[rows, None] * scale_b[g]``; scale_a holds M_total f32 values, scale_b G x N.
    ``out_dtype`` defaults to ``out``'s, else bf16. Otherwise as :func:`grouped_gemm`. ``offs=None`` with a 3-D ``a``
    (torch tensors): the batched form, a of G x M x K with scale_a of G x M (as torch._scaled_grouped_mm's 3-D x 3-D).

    The training forms: a 2-D ``a`` (M x K_total) with a 2-D ``b`` (N x K_total), both K-major, and ``offs`` of
    cumulative K ends: the K-grouped form (``--grouped offs_k_rowwise``, :func:`ptxgen.kgrouped.scaled_grouped_gemm_k`),
    out G x M x N, scale_a of G M values, scale_b of G N. A 3-D ``a`` (G x M x K) with a 2-D ``b`` (N_total x K) and
    ``offs`` of cumulative column ends: the N-grouped form (:func:`_n_grouped`), scale_a G x M, scale_b N_total, out
    M x N_total (M-major)."""
    if offs is None:
        return _batched(a, b, out, out_dtype, stream, scales=(scale_a, scale_b))
    if _ndim(a) == 2 and _ndim(b) == 2:  # groups along K (ptxgen.kgrouped)
        from .kgrouped import scaled_grouped_gemm_k

        return scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out, out_dtype=out_dtype, stream=stream)
    if len(getattr(a, "shape", ())) == 3 and len(getattr(b, "shape", ())) == 2:
        return _n_grouped(a, b, offs, out, out_dtype, stream, scales=(scale_a, scale_b))
    def check(ai, bi):
        for info in (ai, bi):
            if info.dtype not in _FP8:
                raise DTypeError(f"scaled_grouped_gemm takes FP8 inputs ({_dtype_words('e4m3')} or {_dtype_words('e5m2')}, "
                                 f"e4m3 with e5m2 either way), not {_dtype_words(info.dtype)} {info.name}; use grouped_gemm")

    return _scaled_grouped("rowwise", check, scaled_spec_for, "no grouped kernel for this GPU", a, b, scale_a, scale_b, offs,
                           out, out_dtype, stream)


def scaled_spec_for(dtype: str, b_dtype: str, out_dtype: str | None, arch: str, b_major: str) -> TileSpec:
    """The spec :func:`scaled_grouped_gemm` uses (SpecError where none reads B ``b_major``)."""
    return grouped_spec(dtype, out_dtype, arch, rowwise=True, b_major=b_major, b_dtype=b_dtype)


def blocks_spec_for(dtype: str, b_dtype: str, out_dtype: str | None, arch: str, b_major: str) -> TileSpec:
    """The spec :func:`blockscaled_grouped_gemm` uses (SpecError where none reads B ``b_major``)."""
    spec = blockscaled_grouped_spec(out_dtype, arch)
    if b_major != "k":
        return make_spec(**{**spec.to_json(), "b": "mnmajor-sw128"})  # refused by derive.scaled.blockfp8: the rule's own words
    return spec


def _scaled_grouped(recipe: str, check, spec_for, no_kernel: str, a, b, scale_a, scale_b, offs, out, out_dtype, stream,
                    default_out: str | None = None):
    """The call path the scaled grouped products share: the torch hot path, reading the arguments, ``check(ai, bi)``
    (the recipe's input types), and one kernel per (input dtypes, out dtype, ``recipe``) from ``spec_for(dtype, b_dtype,
    out_dtype, arch, b_major)``; ``default_out`` replaces an out dtype given neither by ``out_dtype`` nor by ``out``.
    Arrays no kernel reads as they are (torch/CuPy) are packed first (``api.arrays.groupedpack``)."""
    fkey = _fast_key(recipe, out_dtype, a, b, out, scale_a, scale_b, offs) if type(a) is torch_tensor_type() else None
    r = _fast_call(fkey, a, b, offs, out, scale_a, scale_b, stream)
    if r is not None:
        return r
    tkey = None
    if type(a) is torch_tensor_type():
        tkey = (a.dtype, getattr(b, "dtype", None), out_dtype, None if out is None else getattr(out, "dtype", None), recipe)
        kernel = _TORCH_KERNELS.get(tkey)
        if kernel is not None:
            r = kernel._hot_torch(a, b, offs, out, scale_a, scale_b, stream)
            if r is not None:
                return r
    handle = stream_handle(stream, a)
    ai, bi, fi = read_array(a, "a", handle), read_array(b, "b", handle), read_array(offs, "offs", handle)
    oi = None if out is None else read_array(out, "out", handle)
    scales = (read_array(scale_a, "scale_a", handle), read_array(scale_b, "scale_b", handle))
    check(ai, bi)
    if out_dtype is None and oi is not None:
        out_dtype = oi.dtype
    out_dtype = out_dtype or default_out
    arch = streams.call_device((ai, bi, fi, oi, *scales)).arch.value
    try:
        spec, packs = grouped_decision(ai, bi, oi, lambda b_major: _cached_spec(
            (ai.dtype, bi.dtype, out_dtype, recipe, b_major, arch),
            lambda: spec_for(ai.dtype, bi.dtype, out_dtype, arch, b_major)))
    except SpecError as e:
        raise NoGPU(f"{no_kernel}: {e}") from None
    if packs:
        fn = scaled_grouped_gemm if recipe == "rowwise" else blockscaled_grouped_gemm
        return packed_call(fn, dict(a=a, b=b, scale_a=scale_a, scale_b=scale_b, offs=offs, out=out), dict(a=ai, b=bi, out=oi),
                           packs, dict(out_dtype=out_dtype, stream=stream), fn.__name__)
    key = (ai.dtype, bi.dtype, out_dtype, recipe, arch)
    kernel = _BY_TYPES.get(key)
    if kernel is None:
        kernel = _BY_TYPES[key] = _kernel_for(spec)
    r = kernel._launch(a, out, (ai, bi, fi, oi), handle, stream, scales, torch_args=(a, b, offs, out, scale_a, scale_b))
    if tkey is not None and kernel._torch_launches:
        _TORCH_KERNELS[tkey] = kernel
    _remember_fast(fkey, kernel, a, b, offs, out, scale_a, scale_b)
    return r


def blockscaled_grouped_spec(out_dtype: str = "bf16", arch: str = "sm_90a") -> TileSpec:
    """The spec :func:`blockscaled_grouped_gemm` uses: the dense block-FP8 kernel's tile (``ptxgen.api.fp8blocks.
    default_spec``: 128 x 192 x 128, 4 stages, TMA-store epilogue for 16-bit outputs) made grouped over ``offs``."""
    from .api.fp8blocks import default_spec

    return default_spec(out_dtype, arch=arch, grouped="offs")


def blockscaled_grouped_gemm(a, b, scale_a, scale_b, offs, out=None, *, out_dtype: str | None = None, stream=None):
    """FP8 (e4m3) grouped product with DeepSeek block scales (the MoE recipe; docs/grouped.md "Block-scaled FP8"):
    ``a`` M_total x K with the groups' rows stacked (``offs`` as in :func:`grouped_gemm`), ``b`` G x N x K, K-major;
    ``scale_a`` f32 M_total x ceil(K/128), outer-dim-major (strides (1, lds_a)), one scale per row per 128 of K over the
    stacked rows; ``scale_b`` f32 G x ceil(K/128) x ceil(N/128) with strides (lds_b_group, 1, lds_b): ``scale_b[g]`` is
    the array ``ptxgen.api.fp8blocks.gemm`` and ``torch._scaled_mm`` (BlockWise128x128) take for ``b[g]``. Rows of group g
    of ``out`` are ``fp8blocks.gemm(a[rows], b[g], scale_a[rows], scale_b[g])``: partial sums promoted to f32 every 128
    of K. ``out_dtype`` defaults to ``out``'s, else bf16. One persistent launch; nothing on the host reads ``offs``."""
    def check(ai, bi):
        for info in (ai, bi):
            if info.dtype != "e4m3":
                raise DTypeError(f"blockscaled_grouped_gemm takes {_dtype_words('e4m3')} a and b (the DeepSeek recipe; "
                                 "derive.scaled.blockfp8: block-scaled FP8 takes e4m3 A and B), "
                                 f"not {_dtype_words(info.dtype)} {info.name}")

    return _scaled_grouped("blocks", check, blocks_spec_for,
                           "no block-scaled grouped kernel for this GPU", a, b, scale_a, scale_b, offs, out, out_dtype,
                           stream, default_out="bf16")
