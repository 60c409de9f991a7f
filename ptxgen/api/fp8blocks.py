"""``ptxgen.api.fp8blocks.gemm``: FP8 GEMM with DeepSeek-style block scales on Hopper (ptxgen.derive.scaled.blockfp8).

On a GPU (not run as a doctest)::

    import ptxgen.api.fp8blocks
    out = ptxgen.api.fp8blocks.gemm(a, b, scale_a, scale_b)     # the same tensors torch._scaled_mm takes for the recipe

``a``: M x K e4m3, ``b``: N x K e4m3 (both K-major, as ``torch._scaled_mm(a, b.t(), ...)`` takes them);
``scale_a``: f32 M x ceil(K/128), outer-dim-major (``s.t().contiguous().t()``: strides (1, lds_a));
``scale_b``: f32 ceil(K/128) x ceil(N/128), the transpose of a row-major array (``s.t()``: strides (1, lds_b)), or torch's
own padded array of ceil(K/128) rounded up to a multiple of 4 rows (as torch and cuBLAS allocate it; the first
ceil(K/128) rows are read, as torch reads them).
D[m, n] = sum over 128-blocks kb of K of scale_a[m, kb] scale_b[kb, n / 128] (A B^T over the block), in bf16.

The 1x128 x 1x128 recipe (DeepGEMM's 1D1D, DeepSeek-V3's weight gradient; ``recipe='1x128x1x128'`` or inferred from
scale_b's shape as torch._scaled_mm infers it, ptxgen.api.arrays.fp8recipe): ``scale_b`` f32 ceil(K/128) x N, MN-major
(torch's ``y_scales.t()``: strides (ld, 1)), D[m, n] = C[m, n] + sum over kb of scale_a[m, kb] scale_b[kb, n] (A B^T
over the block); ``c`` (optional, f32 M x N) is added in f32 (out f32; ``out=c`` accumulates in place, D += A B^T).

Without ``spec``: scale_a by TMA where TMA can read it (16-byte aligned, K-block stride a multiple of 4 floats: M % 4 == 0
in torch's layout) and the output is bf16, f16 or f32, in the tile derive.scaled.bfp8tiles models fastest for the problem
(:func:`tma_scales_spec`'s 192 x 128 at large M); else :func:`default_spec` (any M). Few tiles: with stream-K
(:func:`chosen_spec`).
"""

from __future__ import annotations

import dataclasses
import sys

from ..derive.scaled.bfp8tiles import COLUMNS_TILES, few_tiles, pick_tile, tile_count
from ..derive.scaled.sfa_tma import SFA_LD_ALIGN_ELEMENTS
from ..derive.tile.spec import TileSpec, make_spec
from ..isa.tensormap import GLOBAL_ADDRESS_ALIGN as SFA_TMA_ALIGN_BYTES
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from ..runtime.launch.fastlaunch import launcher
from ..runtime.launch.launch import workspace_bytes
from ..derive.scaled.blockfp8 import BLOCKS_1D2D, COLUMNS_1D1D
from ..isa.types import DMajor, Epilogue, SpecError
from .launch import streams
from .arrays.binding import _TORCH_NAMES, _allocate_out, _m_major_alloc_ld, bind, span_bytes
from .launch.swapab import transposed
from .launch.fp8launch import Fp8Launch, Fp8Table, info_key
from .arrays.fp8recipe import a_in_blocks, c_extra, column_scales_ld, infer_recipe
from .fused import kernel_for
from .launch.launchplan import streamk_workspace, workspace_launches
from .launch.hotkeys import fast_torch_key, tensor_type

__all__ = ["gemm", "default_spec", "tma_scales_spec"]
BLOCK = 128


def default_spec(out_dtype: str = "bf16", **kw) -> TileSpec:
    """128 x 192 tiles (a tile's columns span two 128-column scale blocks of B), one 128-block of K per stage,
    persistent, two consumer warpgroups; 16-bit and f32 outputs through the TMA-store epilogue with 4 stages (f32 since
    2026-12-02: 1.0-3.4% faster than the direct stores with 5 stages, runs/2026-12-02-stage-release-f32-store/run5), others direct with 5; the
    scales staged in shared memory by a producer warp (--fp8-scale-load auto = smem), so any M. On the H200 (2026-12-02,
    runs/2026-12-02-blockfp8-pingpong-loop/run5): 1118 / 1197 / 1052 TFLOP/s at 4096x7168x16384, 8192^3 and 2048x7168x4096 (docs/block-fp8.md)."""
    tma = out_dtype in ("bf16", "f16", "f32")
    fields = dict(bm=128, bn=192, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", out_dtype=out_dtype,
                  arch="sm_90a", stages=4 if tma else 5, epilogue="tma" if tma else "direct", schedule="persistent",
                  fp8_blocks="1x128x128")
    return make_spec(**{**fields, **kw})


def tma_scales_spec(out_dtype: str = "bf16", **kw) -> TileSpec:
    """192 x 128 tiles, three consumer warpgroups, scale_a by TMA with A (--fp8-scale-load tma; the scale warp keeps
    the B scales): what :func:`gemm` runs when TMA can read scale_a. On the H200 (2026-12-02, runs/2026-12-02-blockfp8-pingpong-loop/run5):
    1169 / 1242 / 1107 TFLOP/s at 4096x7168x16384, 8192^3 and 2048x7168x4096, 3.8-5.2% over :func:`default_spec` in the same
    run (whose scale warp loads the 192 rows' A scales too slowly at this tile: 842 / 903 / 943)."""
    return default_spec(out_dtype, **{**dict(bm=192, bn=128, fp8_scale_load="tma"), **kw})


def slabs_spec(out_dtype: str = "bf16", **kw) -> TileSpec:
    """256 x 128 tiles, two consumer warpgroups of two 64-row slabs each sharing one partial (--consumer-slabs 2,
    derive.scaled.bfp8slabs), 3 stages, scale_a by TMA: DeepGEMM's fastest configuration at 4096x7168x16384 on the H200
    (runs/2026-12-02-deepgemm-reference). L3 since 2026-12-02 (39 gpu tests and the sanitizers, runs/2026-12-02-prepared-launch-energy/run1), but no faster
than :func:`tma_scales_spec` there (1158 / 1139 / 958 against 1158 / 1217 / 1097 TFLOP/s), so no default picks it."""
    return default_spec(out_dtype, **{**dict(bm=256, bn=128, stages=3, fp8_scale_load="tma", consumer_slabs=2), **kw})


def columns_spec(out_dtype: str = "bf16", c: bool = False, **kw) -> TileSpec:
    """The 1x128 x 1x128 recipe's kernel (derive.scaled.bfp8cols): 192 x 128 tiles, three consumer warpgroups, persistent;
    the scales (BN column scales of B per stage too) copied by the producer's scale warp with cp.async
    (--fp8-scale-load cpasync), the column-scale pairs read inside the promotion; ``c``: the fused chain's C (``--fuse c``,
    D = C + A.B). On the H100 (2026-12-07, runs/2026-12-07-h100-scale-copies, f32 out against torch._scaled_mm with the
    same scales): 0.959 / 1.047 / 0.996 of torch at 4096x7168x16384, 8192^3 and 2048x7168x4096, where the 128 x 128 tile
    whose scale warp waits for its loads (the default until then) ran 0.786 / 0.788 / 0.855."""
    fields = dict(bm=192, bn=128, fp8_blocks=COLUMNS_1D1D, fp8_scale_load="cpasync", **({"fuse": "c"} if c else {}))
    return default_spec(out_dtype, **{**fields, **kw})


def columns_chosen(out_dtype: str, c: bool, m: int, n: int, k: int, sm_count: int) -> TileSpec:
    """The 1x128 x 1x128 recipe's kernel :func:`gemm` runs without a spec: :func:`columns_spec` in the tile of least
    modelled time for M x N x K (derive.scaled.bfp8tiles.COLUMNS_TILES: 192 x 128; 128 x 128, 64 x 128 or 64 x 64 where
    the rows are few and the tiles would leave SMs idle: on the H100 at 64 x 4096 x 7168 the 64 x 64 tile ran 2.0x torch
    where 128 x 128 ran 0.59). No stream-K: 128 x 192 with 4 splits ran 0.978 / 1.004 / 0.928 of torch at
    4096x7168x16384 / 8192³ / 2048x7168x4096 where 192 x 128 ran 0.955 / 1.070 / 1.001
    (runs/2026-12-07-h100-1d1d-door-stream-k)."""
    t = pick_tile(m, n, k, sm_count, 1, COLUMNS_TILES)
    return columns_spec(out_dtype, c=c, bm=t.bm, bn=t.bn, stages=t.stages)


TMA_SCALE_OUTPUTS = ("bf16", "f16", "f32")  # the TMA-store epilogue's outputs (tma_scales_spec's kernels)


FEW_TILES_STREAM_K = 8  # most splits of a launch whose tiles fill less than half the SMs (derive.store.streamk caps S by C / L)


def chosen_spec(out_dtype: str, scale_a: ArrayInfo, lds_a: int, m: int | None = None, n: int | None = None,
                sm_count: int = 132, k: int | None = None) -> TileSpec:
    """The kernel :func:`gemm` runs without a spec. Where TMA can read scale_a and the output is bf16, f16 or f32: scale_a
    by TMA in the tile of least modelled time for M x N x K (derive.scaled.bfp8tiles: 192 x 128, 128 x 128 or 64 x 128;
    without a problem :func:`tma_scales_spec`'s 192 x 128); else :func:`default_spec`. Where the M x N tiles fill at most
    half of ``sm_count`` SMs (small M: one round, most SMs idle), the kernel with stream-K (up to FEW_TILES_STREAM_K
    splits of each tile along K over the idle SMs; derive.store.streamk): its one-round cost with whole tiles is the slower
    tile, not the power cap of a full GPU (docs/block-fp8.md "Power-capped")."""
    tma = out_dtype in TMA_SCALE_OUTPUTS and sfa_tma_readable(scale_a, lds_a)
    if not tma:
        spec = default_spec(out_dtype)
    elif m is None or n is None:
        spec = tma_scales_spec(out_dtype)
    else:
        t = pick_tile(m, n, BLOCK if k is None else k, sm_count, FEW_TILES_STREAM_K)
        spec = default_spec(out_dtype, bm=t.bm, bn=t.bn, stages=t.stages, fp8_scale_load="tma")
    if m is not None and n is not None and few_tiles(tile_count(m, n, spec.bm, spec.bn), sm_count):
        return dataclasses.replace(spec, stream_k=FEW_TILES_STREAM_K)  # validated again (TileSpec.__post_init__)
    return spec


SCALE_B_ROW_PAD = 4  # torch/cuBLAS allocate a 128x128 block-scale array with ceil(K/128) rows padded to a multiple of 4


def padded_scale_rows(kb: int) -> int:
    """The rows torch and cuBLAS give a BlockWise128x128 scale array for ceil(K/128) = ``kb`` blocks: ``kb`` rounded up to
    a multiple of 4 (torch's test_scaled_matmul_cuda.py, _pad_128x128_scales: "scale: [L4, ceil_div({M,N}, 128)] and
    K/L/L4-major in memory")."""
    return -(-kb // SCALE_B_ROW_PAD) * SCALE_B_ROW_PAD


def _scales(info: ArrayInfo, what: str, rows: int, cols: int, padded_rows: int | None = None) -> int:
    """Check a column-major (strides (1, ld)) f32 rows x cols array; returns ld. ``padded_rows``: the array may also have
    that many rows (torch's padded 128x128 scales), of which the first ``rows`` are read."""
    if info.dtype != "f32":
        raise DTypeError(f"{what} has dtype {info.dtype}; block scales are float32")
    if info.shape != (rows, cols) and (padded_rows is None or info.shape != (padded_rows, cols)):
        also = f" or torch's padded {(padded_rows, cols)}" if padded_rows not in (None, rows) else ""
        raise ArgumentError(f"{what} has shape {info.shape}; it must be {(rows, cols)}{also}")
    ld = info.strides[1] if cols > 1 else rows
    if rows > 1 and info.strides[0] != 1 or ld < rows:
        raise ArgumentError(f"{what} must be outer-dim-major (strides (1, ld) with ld >= {rows}), as torch._scaled_mm takes "
                            f"it; it has strides {info.strides}")
    if info.ptr % 4:
        raise ArgumentError(f"{what} must be 4-byte aligned")
    return ld


def sfa_tma_readable(info: ArrayInfo, lds_a: int) -> bool:
    return info.ptr % SFA_TMA_ALIGN_BYTES == 0 and lds_a % SFA_LD_ALIGN_ELEMENTS == 0


def tma_lds_a(info: ArrayInfo, lds_a: int, name: str) -> int:
    """--fp8-scale-load tma (derive.scaled.sfa_tma): TMA reads scale_a only from a 16-byte aligned address with rows lds_a x 4 B
    a multiple of 16 B (M % 4 == 0 in torch's layout, lds_a = M); anything else is refused, never loaded wrong. With a
    single K block torch's ld is M too (any row stride reads the same one row)."""
    if not sfa_tma_readable(info, lds_a):
        raise ArgumentError(f"{name} loads scale_a by TMA (--fp8-scale-load tma): scale_a must be {SFA_TMA_ALIGN_BYTES}-byte "
                            f"aligned with its K-block stride a multiple of {SFA_LD_ALIGN_ELEMENTS} floats (M % 4 == 0 in "
                            f"torch's layout); it is at {info.ptr:#x} with stride {lds_a}. Use fp8_scale_load='smem' (any M)")
    return lds_a


_FROM_TORCH = {name: words for words, name in _TORCH_NAMES.items()}  # "torch.float32" -> "f32"


def _out_words(out) -> str:
    """The dtype of a given ``out`` (out_dtype unset): as the other doors, the output is what ``out`` holds."""
    return _FROM_TORCH.get(str(getattr(out, "dtype", ""))) or read_array(out, "out").dtype


def gemm(a, b, scale_a, scale_b, out=None, *, out_dtype: str | None = None, spec: TileSpec | None = None, stream=None,
         c=None, recipe: str | None = None):
    """``out = D`` of the block-scaled recipe (module docstring); returns ``out`` (allocated when None) without
    synchronizing. ``out_dtype``: ``out``'s dtype where out is given, f32 with ``c``, else bf16. ``recipe``: '1x128x128'
    or '1x128x1x128' (None: inferred from scale_b, ptxgen.api.arrays.fp8recipe). ``c``: f32 M x N added to the product (the 1x128 x 1x128 recipe; out
    may be c). A call whose arrays match an earlier call's shapes, strides, dtypes and devices reuses its prepared
    launch (ptxgen.api.launch.fp8launch); the first such call checks, compiles and prepares."""
    out_dtype = out_dtype or ("f32" if c is not None else "bf16" if out is None else _out_words(out))
    if stream is None:
        T = tensor_type()
        if (T is not None and isinstance(a, T) and isinstance(b, T) and isinstance(scale_a, T) and isinstance(scale_b, T)
                and (out is None or isinstance(out, T)) and (c is None or isinstance(c, T))):
            r = _hot_torch(a, b, scale_a, scale_b, out, out_dtype, spec, c, recipe)
            if r is not None:
                return r
    return _gemm_slow(a, b, scale_a, scale_b, out, out_dtype, spec, stream, c, recipe)


_BY_TORCH = Fp8Table()  # (out_dtype, spec, scale_a TMA-aligned, torch_key) -> Fp8Launch
_BY_INFO = Fp8Table()  # (out_dtype, spec, scale_a TMA-aligned, info_key) -> Fp8Launch
_TORCH_STREAM = []  # torch's current-stream reader, once


def _key(out_dtype: str, spec, sfa_ptr: int, arrays: tuple, recipe: str | None = None) -> tuple:
    """Without a spec the pick depends on scale_a's alignment too (chosen_spec): that bit is in the key."""
    return (out_dtype, spec, recipe, sfa_ptr % SFA_TMA_ALIGN_BYTES == 0 if spec is None else None, arrays)


def torch_arrays_key(a, b, scale_a, scale_b, out, c=None) -> tuple:
    """The dispatch key's arrays part for torch tensors (hotkeys.fast_torch_key: one C call per pair or triple)."""
    return fast_torch_key(a, b, out), fast_torch_key(scale_a, scale_b, c)


def _hot_torch(a, b, scale_a, scale_b, out, out_dtype, spec, c=None, recipe=None):
    psa = scale_a.data_ptr()
    e = _BY_TORCH.get(_key(out_dtype, spec, psa, torch_arrays_key(a, b, scale_a, scale_b, out, c), recipe))
    if e is None:
        return None
    if out is None:
        m, n, ldd, dt = e.out_alloc
        out = _allocate_out(a, "torch", m, n, ldd, dt, e.device_index)
    pa, pb, pd, psb = a.data_ptr(), b.data_ptr(), out.data_ptr(), scale_b.data_ptr()
    pc = None if c is None else c.data_ptr()
    if e.swapped:  # the 128x128 x 1x128 recipe: the kernel's A is b, its scale_a is scale_b (_gemm_2d1d)
        pa, pb, psa, psb = pb, pa, psb, psa
    if not e.pointers_ok(pa, pb, pd, psa, psb) or not e.c_ok(pc, pd):
        return None  # the slow path says what is wrong
    if not _TORCH_STREAM:
        _TORCH_STREAM.append(streams.torch_stream_reader(sys.modules["torch"]))
    stream = _TORCH_STREAM[0](e.device_index)
    # the compiled launcher: every pointer and the launch in one C call (stream-K: the stream's remembered workspace);
    # a call with C (the 1x128 x 1x128 recipe's D = C + A.B) takes the Python launch
    if e._c is None or not e._c.run_cached(pa, pb, pd, psa, psb, stream):
        e.run({"A": pa, "B": pb, "D": pd, "SFA": psa, "SFB": psb, **({"C": pc} if c is not None else {})}, stream, a)
    return out


def _recipe_spec(spec, chosen: bool, rec: str, ci, out_dtype: str, p, sm_count: int):
    """The 1x128 x 1x128 recipe's kernel (columns_chosen for problem ``p`` without a spec), or the asked spec checked
    against the recipe and c; None: the 1D2D recipe's own pick (chosen_spec)."""
    with_c = spec is not None and spec.fuse is not None and spec.fuse.c
    if chosen:
        if ci is not None and rec != COLUMNS_1D1D:
            raise ArgumentError("c (D = C + A.B) is taken by the 1x128 x 1x128 recipe; these scales are 1x128 x 128x128")
        return columns_chosen(out_dtype, ci is not None, p.m, p.n, p.k, sm_count) if rec == COLUMNS_1D1D else None
    if spec.fp8_blocks.value != rec:
        raise ArgumentError(f"{spec.kernel_name} is built for --fp8-blocks {spec.fp8_blocks.value}; the scales are {rec}")
    if with_c != (ci is not None):
        raise ArgumentError(f"{spec.kernel_name} {'reads' if with_c else 'has no'} c (--fuse c); "
                            f"{'pass c' if with_c else 'build it with --fuse c to add c'}")
    return spec


def _gemm_slow(a, b, scale_a, scale_b, out, out_dtype, spec, stream, c=None, recipe=None):
    handle = streams.stream_handle(stream, a)
    ai, bi = read_array(a, "a", handle), read_array(b, "b", handle)
    oi = None if out is None else read_array(out, "out", handle)
    sa, sb = read_array(scale_a, "scale_a", handle), read_array(scale_b, "scale_b", handle)
    ci = None if c is None else read_array(c, "c", handle)
    key = _key(out_dtype, spec, sa.ptr, (info_key((ai, bi, sa, sb, oi, ci)), streams.unknown_device((ai, bi, oi, sa, sb, ci))),
               recipe)
    if ai.ndim == 2 and a_in_blocks(recipe, sa, ai.shape[0], ai.shape[1], padded_scale_rows(-(-ai.shape[1] // BLOCK))):
        return _gemm_2d1d(a, b, scale_a, scale_b, out, out_dtype, spec, handle, (ai, bi, oi, sa, sb, ci), key)
    e = _BY_INFO.get(key)
    if e is not None:
        r = _run_prepared(e, a, ai, bi, sa, sb, out, oi, handle, ci)
        if r is not None:
            return r
    asked = spec
    chosen = spec is None
    spec = spec or default_spec(out_dtype)
    if spec.fp8_blocks.value == "none":
        raise ArgumentError(f"{spec.kernel_name} is not a block-scaled FP8 kernel (--fp8-blocks 1x128x128 or 1x128x1x128)")
    p = bind(spec, ai, bi, oi).problem
    kb, nb = -(-p.k // BLOCK), -(-p.n // BLOCK)
    rec = infer_recipe(recipe, sb, p.k, p.n, padded_scale_rows(kb), with_c=ci is not None)
    dev = streams.call_device((ai, bi, oi, sa, sb, ci))  # every array on one device: its module, context, SM count
    picked = _recipe_spec(asked, chosen, rec, ci, out_dtype, p, dev.sm_count)
    lds_b = (column_scales_ld(sb, p.k, p.n) if rec == COLUMNS_1D1D else
             _scales(sb, "scale_b", kb, nb, padded_scale_rows(kb)))
    extra = {"SFA": sa.ptr, "SFB": sb.ptr, "lds_a": _scales(sa, "scale_a", p.m, kb), "lds_b": lds_b}
    if picked is not None:
        spec = picked
        p = bind(spec, ai, bi, oi).problem
    elif chosen:
        spec = chosen_spec(out_dtype, sa, extra["lds_a"], p.m, p.n, dev.sm_count, k=p.k)
        p = bind(spec, ai, bi, oi).problem
    extra.update(c_extra(ci, oi, p.m, p.n, spec.out_dtype.value))
    if oi is None:
        out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, spec.out_dtype.value, dev.index)
        oi = read_array(out, "out", handle)
    e = _launch_new(spec, p, (ai, bi, oi, sa, sb, ci), extra, dev, handle, a)
    if e is not None:
        _remember(e, key, (out_dtype, asked, recipe), (a, b, scale_a, scale_b, out, c), key[4][0][4] is not None)
    return out


def _launch_new(spec, p, infos, extra, dev, handle, like):
    """Compile (or take) ``spec``'s kernel, launch it on the kernel's arrays ``infos`` (A, B, D, SFA, SFB, C), and return
    the prepared launch for the next calls with the same key (None: an empty K or a split launch)."""
    ai, bi, oi, sa, sb, ci = infos
    kernel = kernel_for(spec)
    if kernel.plan.sfa_tma is not None:  # --fp8-scale-load tma: scale_a through a tensor map (refused before any launch)
        extra["lds_a"] = tma_lds_a(sa, extra["lds_a"], spec.kernel_name)
    if not (p.m and p.n):
        return None
    k = kernel.load(dev)
    with streams.on_device(dev):
        launches, keep = workspace_launches(kernel.plan, k, (ai.ptr, bi.ptr, oi.ptr), p, dev, handle,  # (stream-K:
                                            like if ai.library == "torch" else None, extra, streamk_workspace)  # its stream's)
        for kern, grid, block, args in launches:
            kern.launch(grid, block, args, handle)
    del keep  # a graph capture's workspace: released once the launch is queued
    if not p.k or len(launches) != 1:
        return None
    return _prepared(kernel.plan, p, launches[0][:3], extra, dev, (ai, bi, oi, sa, sb), ci)


def _remember(e: Fp8Launch, key, head: tuple, arrays: tuple, out_given: bool) -> None:
    """Enter a prepared launch under the call's info key and, for torch tensors, its torch key (``head``: out_dtype, the
    spec asked for, the recipe asked for; ``arrays``: the call's a, b, scale_a, scale_b, out, c)."""
    _BY_INFO.remember(key, e)
    T = tensor_type()
    if T is not None and all(isinstance(x, T) for x in arrays if x is not None):
        out_dtype, asked, recipe = head
        a, b, scale_a, scale_b, out, c = arrays
        given = out if out_given else None  # the key of a call without out has no out
        _BY_TORCH.remember(_key(out_dtype, asked, scale_a.data_ptr(), torch_arrays_key(a, b, scale_a, scale_b, given, c),
                                recipe), e)


def _gemm_2d1d(a, b, scale_a, scale_b, out, out_dtype, spec, handle, infos, key):
    """The 128x128 x 1x128 recipe (torch's BlockWise128x128 scale_a, BlockWise1x128 scale_b): ``D^T = B A^T`` is the
    1x128x128 recipe with the roles swapped (B's 1 x 128 rows are the kernel's A scales, A's 128 x 128 blocks its B
    scales), stored M-major (``--d-major m``) into the row-major ``out``, as swap-AB stores D (api.launch.swapab)."""
    ai, bi, oi, sa, sb, ci = infos
    m, n, k, lds_sa, lds_sb = check_2d1d(ai, bi, oi, sa, sb, ci)
    e = _BY_INFO.get(key)
    if e is not None and out is None:
        out = _allocate_out(a, ai.library, *e.out_alloc, e.device_index)
        oi = read_array(out, "out", handle)
    if e is not None and _run_prepared(e, b, bi, ai, transposed(sb), sa, out, transposed(oi), handle) is not None:
        return out
    dev = streams.call_device((ai, bi, oi, sa, sb))
    kspec = _swapped_spec(spec, out_dtype, transposed(sb), lds_sb, n, m, k, dev.sm_count, _rows_16b(oi, m, n))
    if oi is None:
        out = _allocate_out(a, ai.library, m, n, _m_major_alloc_ld(kspec, n), kspec.out_dtype.value, dev.index)
        oi = read_array(out, "out", handle)
    kinfos = (bi, ai, transposed(oi), transposed(sb), sa, None)
    p = bind(kspec, *kinfos[:3]).problem
    extra = {"SFA": sb.ptr, "SFB": sa.ptr, "lds_a": lds_sb, "lds_b": lds_sa}
    e = _launch_new(kspec, p, kinfos, extra, dev, handle, a)
    if e is not None:
        e.swapped, e.out_alloc = True, (m, n, oi.strides[0] if m > 1 else _m_major_alloc_ld(kspec, n), kspec.out_dtype.value)
        _remember(e, key, key[:3], (a, b, scale_a, scale_b, out, None), key[4][0][4] is not None)
    return out


def check_2d1d(ai, bi, oi, sa, sb, ci) -> tuple[int, int, int, int, int]:
    """M, N, K of a 128x128 x 1x128 call and its scales' pitches (lds of scale_a's 128 x 128 blocks, the kernel's scale_b;
    of scale_b's 1 x 128 rows, the kernel's scale_a), checked in the caller's terms (the swapped kernel's own checks
    would name B as A); what the door and ``ptxgen.api.plan`` both check."""
    if ci is not None:
        raise ArgumentError("c (D = C + A.B) is taken by the 1x128 x 1x128 recipe; these scales are 128x128 x 1x128")
    if ai.ndim != 2 or bi.ndim != 2 or ai.shape[1] != bi.shape[1]:
        raise ArgumentError(f"a (M x K) and b (N x K) must share K; they have shapes {ai.shape} and {bi.shape}")
    m, n, k = ai.shape[0], bi.shape[0], ai.shape[1]
    if oi is not None and oi.shape != (m, n):
        raise ArgumentError(f"out has shape {oi.shape}, but a @ b.T is {(m, n)}")
    kb = -(-k // BLOCK)
    lds_sa = _scales(sa, "scale_a", kb, -(-m // BLOCK), padded_scale_rows(kb))
    return m, n, k, lds_sa, column_scales_ld(sb, k, n)


def _rows_16b(oi: ArrayInfo | None, m: int, n: int) -> bool:
    """out's rows start 16-byte aligned (what the M-major TMA store's tensor map needs); an out ptxgen allocates has them."""
    return oi is None or oi.ptr % 16 == 0 and (oi.strides[0] if m > 1 else n) * oi.itemsize % 16 == 0


def _swapped_spec(spec, out_dtype: str, ksa: ArrayInfo, lds: int, km: int, kn: int, k: int, sm_count: int,
                  rows_16b: bool = True) -> TileSpec:
    """The 128x128 x 1x128 recipe's kernel for the swapped problem (km = N rows of B, kn = M): the spec asked for (a 1x128x128
    kernel with an M-major D), else chosen_spec's pick for it with D M-major: the direct stores for a 32-bit D (the
    M-major TMA store transposes 16-bit outputs only) or an out whose rows do not start 16-byte aligned (``rows_16b``
    False), and as many stages as shared memory holds beside the staging."""
    if spec is not None:
        if spec.fp8_blocks.value != BLOCKS_1D2D or spec.d_major is not DMajor.M:
            raise ArgumentError(f"{spec.kernel_name}: the 128x128 x 1x128 recipe runs a 1x128x128 kernel with an M-major D "
                                "(--fp8-blocks 1x128x128 --d-major m) on (b, a)")
        return spec
    picked = chosen_spec(out_dtype, ksa, lds, km, kn, sm_count, k=k)
    fields = {"d_major": DMajor.M}
    if picked.out_dtype.bytes != 2 or not rows_16b:
        fields["epilogue"] = Epilogue.DIRECT
    for stages in range(picked.stages, 1, -1):
        try:
            return dataclasses.replace(picked, stages=stages, **fields)
        except SpecError:
            continue
    raise ArgumentError(f"no M-major form of {picked.kernel_name} fits shared memory")  # not reached for the picks


def _prepared(plan, p, launch, extra, dev, infos, ci=None) -> Fp8Launch:
    """The launch just made ((kernel, grid, block)), kept for calls with the same key (ptxgen.api.launch.fp8launch)."""
    from ..runtime.launch import tensormap

    kern, grid, block = launch
    ai, bi, oi, sa, sb = infos
    sk = None
    if plan.stream_k is not None:  # each call takes its stream's workspace (launchplan.streamk_workspace)
        nbytes = workspace_bytes(plan, p, dev.sm_count)
        drv = launcher()
        sk = lambda stream, like: streamk_workspace(drv, dev.index, stream, nbytes, like,  # noqa: E731
                                                    lambda: streams.context_switch(dev))
    return Fp8Launch(plan=plan, problem=p, kernel=kern, grid=grid, block=block, extra=extra,
                     encode=tensormap.encode, driver=launcher() if hasattr(kern, "func") else None,
                     ensure_context=lambda: streams.context_switch(dev), device_index=dev.index,
                     spans=(span_bytes(ai), span_bytes(bi), span_bytes(oi)),
                     out_alloc=(p.m, p.n, p.ldd, plan.spec.out_dtype.value), workspace=sk,
                     span_c=None if ci is None else span_bytes(ci), c_is_out_layout=ci is not None and ci.strides == oi.strides)


def _run_prepared(e: Fp8Launch, a, ai, bi, sa, sb, out, oi, handle, ci=None):
    """A prepared launch for arrays already read (any library); None where a pointer rules it out."""
    if oi is None:
        m, n, ldd, dt = e.out_alloc
        out = _allocate_out(a, ai.library, m, n, ldd, dt, e.device_index)
        oi = read_array(out, "out", handle)
    pc = None if ci is None else ci.ptr
    if not e.pointers_ok(ai.ptr, bi.ptr, oi.ptr, sa.ptr, sb.ptr) or not e.c_ok(pc, oi.ptr):
        return None
    e.run({"A": ai.ptr, "B": bi.ptr, "D": oi.ptr, "SFA": sa.ptr, "SFB": sb.ptr, **({"C": pc} if ci is not None else {})},
          handle, a if ai.library == "torch" else None)
    return out
