"""K-grouped GEMM: ``torch._grouped_mm``'s 2-D x 2-D form, the weight gradient of an expert bank. One launch.

>>> out = ptxgen.grouped_gemm_k(a, b, offs)    # doctest: +SKIP

- ``a``: M x K_total, ``b``: N x K_total, each K-major (rows contiguous along K) or MN-major (``dy.t()``, ``x.t()``:
  columns contiguous, tokens the strided K dimension); bf16 or f16;
- ``offs``: int32, G values on the same GPU, the cumulative K ends: group g owns K indices offs[g-1]..offs[g]-1;
- ``out``: G x M x N, ``out[g] = a[:, K of g] @ b[:, K of g].T`` (``torch._grouped_mm(a, b.t(), offs=offs)``); an
  empty group's ``out[g]`` is zeros. ``out_dtype``: bf16/f16 (default the inputs') or f32.

Row-wise FP8 (``torch._scaled_grouped_mm``'s 2-D x 2-D form, ``--grouped offs_k_rowwise``):

>>> out = ptxgen.scaled_grouped_gemm(a, b, scale_a, scale_b, offs)    # doctest: +SKIP

with ``a`` (M x K_total) and ``b`` (N x K_total) e4m3/e5m2, both K-major (wgmma reads FP8 operands K-major only),
``scale_a`` of G M f32 (or G x M) and ``scale_b`` of G N (or G x N): ``out[g] = (a[:, K of g] @ b[:, K of g].T) *
scale_a[g M:(g+1) M, None] * scale_b[g N:(g+1) N]`` (``torch._scaled_grouped_mm(a, b.t(), scale_a, scale_b,
offs=offs)``), bf16 by default (``out_dtype`` bf16, f16 or f32).

1 x 128 block scales on both operands (DeepGEMM's k-grouped 1D1D weight gradient, ``--grouped offs_k --fp8-blocks
1x128x1x128``):

>>> out = ptxgen.blockscaled_grouped_gemm_k(a, b, scale_a, scale_b, offs)    # doctest: +SKIP

with e4m3 ``a`` (M x K_total) and ``b`` (N x K_total) K-major, ``scale_a`` f32 M x ceil(K_total/128) outer-dim-major
(strides (1, lds_a)) and ``scale_b`` f32 ceil(K_total/128) x N (strides (lds_b, 1)), the dense 1x128 x 1x128 recipe's
layouts over the stacked K axis: ``out[g] = sum over the 128-blocks kb of group g of scale_a[:, kb, None] x
scale_b[kb] x (a[:, kb] @ b[:, kb].T)``, f32 by default (bf16). ``c=out`` (f32 G x M x N) accumulates in place,
``out[g] += ...`` (DeepGEMM's weight-gradient accumulation; ``--fuse c``). Every group boundary must lie on a 128-block
(a group may end at K_total anywhere): a group that breaks this is not computed and its ``out[g]`` is NaN
(derive.roles.kgrouped ``kgrouped_blocks``).

Nothing on the host reads ``offs``, so a call can be captured in a CUDA graph. ptxgen.derive.roles.kgrouped derives the
kernel; a repeat call with torch tensors of the same shapes, strides, dtypes and device goes through the launch
prepared for them (``api.launch.groupedlaunch.GroupedLaunch``: pointers patched, one cuLaunchKernel).
"""

from __future__ import annotations

import threading
from dataclasses import replace

from .api.launch import streams
from .api.arrays.binding import _allocate_out, _dtype_words
from .api.arrays.groupedbind import _bind_scales
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

__all__ = ["grouped_gemm_k", "kgrouped_spec", "bind_kgrouped", "scaled_grouped_gemm_k", "blockscaled_grouped_gemm_k"]

# 128 x 128 x 64, 4 stages: the tile of the M-grouped 16-bit kernels' K depth with a square output tile (every
# group's out[g] is M x N); MN-major operands are copied as one 64 x 64 box per 64 columns (order k, as the grouped
# N-major B). Not tuned.
_TILE = dict(bm=128, bn=128, bk=64, stages=4, epilogue="direct")
# The 16-bit K-grouped kernels tools/bench_grouped.py --kgrouped --variants times against torch._grouped_mm: name ->
# spec fields over _TILE. "tma": the TMA-store epilogue through the (N, M, G) map (derive.roles.kgrouped
# store_map_derivation), whose stores overlap the next tile's main loop; larger tiles store the same outputs with
# fewer loads of A and B per output; BM 192 and 256 take three and four consumer warpgroups. None is measured yet.
KGROUPED_VARIANTS = {
    "direct": {},
    "tma": dict(epilogue="tma"),
    "tma-s6": dict(epilogue="tma", stages=6),
    "tma-n256": dict(bn=256, epilogue="tma"),
    "tma-n256-s3": dict(bn=256, stages=3, epilogue="tma"),
    "tma-m192": dict(bm=192, epilogue="tma"),
    "tma-m256": dict(bm=256, stages=3, epilogue="tma"),
    "direct-n256": dict(bn=256),
    # ping-pong consumers (the M-grouped kernels' schedule): each warpgroup takes whole tiles in turn, so one's epilogue
    # runs while the other's main loop issues; both count every tile's K-tiles to keep the ring's phases
    "pp-tma": dict(consumers="pingpong", epilogue="tma"),
    "pp-tma-s5": dict(consumers="pingpong", stages=5, epilogue="tma"),
    "pp-tma-64x256": dict(bm=64, bn=256, consumers="pingpong", epilogue="tma"),
    "pp-direct": dict(consumers="pingpong"),
    # 2x1 clusters: two CTAs on neighbouring tiles along M of one group, each loading half of their shared B K-tile and
    # multicasting it (derive.roles.kgrouped._cluster_derivation): B's traffic through L2 halves
    "tma-n256-c2": dict(bn=256, epilogue="tma", cluster="2x1"),
    "pp-tma-s5-c2": dict(consumers="pingpong", stages=5, epilogue="tma", cluster="2x1"),
}
# What grouped_gemm_k runs (16-bit inputs): 128 x 256 with the TMA store, the fastest over the four measured cases on the
# H100 (runs/2026-12-06-h100-carry-kgrouped run 2: 1.055-1.060x torch._grouped_mm at 8 experts x 4096 x 14336 with 8192 and
# 16384 tokens and 8 x 28672 x 4096 with 16384, the MoE step's two weight gradients, where the earlier default pp-tma-s5
# ran 0.843-1.046; 1.230 at 128 x 2048 x 1536 / 32768, pp-tma-s5 1.234, in runs/2026-12-06-h100-doors-one-launch run 2)
DEFAULT_VARIANT = "tma-n256"
# FP8 (row-wise scales): the same output tile with 128 B of K per stage, as every FP8 tile of tuning/h200.json. Not tuned.
_TILE_FP8 = dict(bm=128, bn=128, bk=128, stages=4, epilogue="direct")
# 1 x 128 block scales (blockscaled_grouped_gemm_k): the row-wise tile with the 1D1D promotion and the scale warp
# (cooperative consumers, direct stores: the rules of derive.tile.rules._validate_k_grouped_blocks). Not tuned, never run.
_TILE_1D1D = dict(bm=128, bn=128, bk=128, stages=4, epilogue="direct", fp8_blocks="1x128x1x128")
# The row-wise FP8 K-grouped kernels tools/bench_grouped.py --kgrouped-fp8 --variants times against
# torch._scaled_grouped_mm: name -> spec fields over _TILE_FP8 (cooperative consumers; the row and column scales multiply
# the accumulator before either epilogue, so the TMA store through the (N, M, G) map takes them as it takes the 16-bit
# kernels' outputs). 16 B of K per row of a stage here is 128 FP8 elements: half the stages of the 16-bit tiles fit.
KGROUPED_FP8_VARIANTS = {
    "direct": {},
    "tma": dict(epilogue="tma"),
    "tma-s6": dict(epilogue="tma", stages=6),
    "tma-n256": dict(bn=256, epilogue="tma"),
    "tma-n256-s3": dict(bn=256, stages=3, epilogue="tma"),
    "direct-n256": dict(bn=256),
    # ping-pong consumers (as the 16-bit kernel's pp-tma): one warpgroup's epilogue, scales and TMA stores run while the
    # other's main loop issues; the warpgroup whose tile it is zeroes its K tail alone (2026-12-07: L1, L2, L3 on the
    # H100; no faster than tma there: the note at DEFAULT_FP8_VARIANT)
    "pp-tma": dict(consumers="pingpong", epilogue="tma"),
    "pp-tma-s5": dict(consumers="pingpong", stages=5, epilogue="tma"),
    # 2x1 clusters multicasting B (as the 16-bit table's): at 8 x 7168 x 2048 / 65536 tokens on the H100 tma-n256 had run
    # 0.80 of torch, bound by L2 (ncu: 17.0 GB through L2 against torch's 12.7; runs/2026-12-07-h100-kgrouped-fp8-long-l2);
    # with the cluster 12.95 GB and 1.42 (runs/2026-12-07-h100-kgrouped-cluster)
    "tma-c2": dict(epilogue="tma", cluster="2x1"),
    "tma-n256-c2": dict(bn=256, epilogue="tma", cluster="2x1"),
    "tma-n256-s3-c2": dict(bn=256, stages=3, epilogue="tma", cluster="2x1"),
    "pp-tma-c2": dict(consumers="pingpong", epilogue="tma", cluster="2x1"),
}
# What scaled_grouped_gemm_k runs: the TMA store, with 128 x 256 tiles where the output is 16-bit (128 x 256 with an
# f32 output spills). Measured on the H100 against torch._scaled_grouped_mm (`bench_grouped.py --kgrouped-fp8` and
# `--cases ...`, runs/2026-12-07-h100-rowwise-scale-loads runs 2 and 3), once the epilogue loads each row's scale_a and
# each column pair's scale_b once (it had loaded both for every accumulator element, and its multiplies waited on those
# loads: ncu, run 1): tma-n256 / tma 1.038 / 0.816 at 8 experts x 4096 x 14336 / 8192 tokens (1024 a group), 1.272 /
# 1.005 at 16 x 4096 x 4096 / 16384, 1.215 / 0.983 at 32 x 2048 x 7168 / 16384 (512 a group), 3.104 / 2.535 at 64 x
# 2048 x 1536 / 8192 (128 a group), 3.158 / 2.674 at 128 x 2048 x 1536 / 32768, 0.872 / 0.665 at 8 x 7168 x 2048 / 65536;
# the ping-pong form pp-tma 0.851 at the first. Before that change 128 x 256 won only from 1024 tokens a group
# (runs/2026-12-07-h100-scale-copies run 3), and the ping-pong forms were within 1% of tma, so no default takes them.
# The 2x1 cluster multicasting B (tma-n256-c2; runs/2026-12-07-h100-kgrouped-cluster run 1, same process, alternating
# rounds) against tma-n256: 1.423 / 0.798 of torch at 8 x 7168 x 2048 / 65536 (L2 bytes 12.95 GB / 17.18), 1.382 /
# 1.011 at 8 x 4096 x 14336 / 8192, 1.634 / 1.231 at 16 x 4096 x 4096 / 16384, 3.280 / 3.162 at 128 x 2048 x 1536 /
# 32768: the wide pick for 16-bit outputs since. Run 2: with one tile row (M <= 128) the cluster's second CTA only
# repeats its neighbour's tile: tma-n256-c2 / tma-n256 0.961 / 1.113 at 8 x 128 x 14336 / 8192, 3.374 / 3.381 at M = 384,
# 1.366 / 1.215 at M = 640, 3.429 / 2.801 at M = 1152, so the cluster from two tile rows on; f32 outputs, tma-c2 against
# tma (ours against ours, identical outputs): 1.326, 1.202, 1.156 times as fast at the first three cases above.
DEFAULT_FP8_VARIANT = "tma-c2"
FP8_WIDE_VARIANT = "tma-n256-c2"
CLUSTER_MIN_TILE_ROWS = 2  # fewer tile rows of M: the same tile without its cluster (the variant's name less "-c2")
_IN = ("bf16", "f16")
_FP8 = ("e4m3", "e5m2")


def kgrouped_spec(dtype: str = "bf16", out_dtype: str | None = None, arch: str = "sm_90a", a_major: str = "mn",
                  b_major: str = "mn", rowwise: bool = False, b_dtype: str | None = None,
                  variant: str | None = None, blocks: bool = False, accumulate: bool = False) -> TileSpec:
    """The spec :func:`grouped_gemm_k` uses: ``a_major``/``b_major`` "k" or "mn" (the operands' contiguous dimension);
    ``rowwise``: FP8 inputs with torch._scaled_grouped_mm's 2-D x 2-D scales (:func:`scaled_grouped_gemm_k`; K-major
    operands, ``b_dtype`` e4m3 or e5m2 when it differs from ``dtype``), bf16 out by default. ``variant``: a name of
    KGROUPED_VARIANTS (16-bit inputs; default DEFAULT_VARIANT) or of KGROUPED_FP8_VARIANTS (``rowwise``; default
    DEFAULT_FP8_VARIANT). ``blocks``: e4m3 inputs with 1 x 128 scales on both (:func:`blockscaled_grouped_gemm_k`; one
    tile, no variant), f32 out by default; ``accumulate``: out += the product (``--fuse c``, f32 out)."""
    if blocks:
        return _blocks_spec(dtype, out_dtype, arch, a_major, b_major, b_dtype, variant, accumulate)
    name = "scaled_grouped_gemm (K-grouped)" if rowwise else "grouped_gemm_k"
    table, default = (KGROUPED_FP8_VARIANTS, DEFAULT_FP8_VARIANT) if rowwise else (KGROUPED_VARIANTS, DEFAULT_VARIANT)
    if variant is not None and variant not in table:
        raise ArgumentError(f"variant {variant!r}: the {'row-wise FP8' if rowwise else '16-bit'} K-grouped form takes one "
                            f"of {', '.join(table)}")
    tile = {**(_TILE_FP8 if rowwise else _TILE), **table[variant or default]}
    legal = _FP8 if rowwise else _IN
    for d in (dtype, b_dtype or dtype):
        if d not in legal:
            raise DTypeError(f"{name} takes {' or '.join(_dtype_words(x) for x in legal)} inputs, not {_dtype_words(d)}")
    out = out_dtype or ("bf16" if rowwise else dtype)
    if out not in ("bf16", "f16", "f32"):
        raise DTypeError(f"{name} gives bf16, f16 or f32 outputs, not {out}")
    mixed = {} if b_dtype in (None, dtype) else {"b_dtype": b_dtype}
    return make_spec(**tile, **mixed, a=f"{a_major}major-sw128", b=f"{b_major}major-sw128",
                     a_order="k", b_order="k", dtype=dtype, acc="f32", out_dtype=out, arch=arch, schedule="persistent",
                     grouped="offs_k_rowwise" if rowwise else "offs_k")


def _blocks_spec(dtype: str, out_dtype: str | None, arch: str, a_major: str, b_major: str, b_dtype: str | None,
                 variant: str | None, accumulate: bool = False) -> TileSpec:
    name = "blockscaled_grouped_gemm_k"
    if variant is not None:
        raise ArgumentError(f"{name} has one kernel: no variant ({variant!r})")
    for d in (dtype, b_dtype or dtype):
        if d != "e4m3":
            raise DTypeError(f"{name} takes {_dtype_words('e4m3')} a and b (the 1x128 x 1x128 recipe's), not {_dtype_words(d)}")
    out = out_dtype or "f32"
    if out not in ("bf16", "f32") or (accumulate and out != "f32"):
        raise DTypeError(f"{name} gives f32 or bf16 outputs (f32 where it accumulates into c), not {out}")
    return make_spec(**_TILE_1D1D, a=f"{a_major}major-sw128", b=f"{b_major}major-sw128", a_order="k", b_order="k",
                     dtype="e4m3", acc="f32", out_dtype=out, arch=arch, schedule="persistent", grouped="offs_k",
                     **({"fuse": "c"} if accumulate else {}))


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


def bind_kgrouped(ai: ArrayInfo, bi: ArrayInfo, fi: ArrayInfo, oi: ArrayInfo | None, rowwise: bool = False):
    """(a major, b major, problem) of the arrays (no GPU); ArgumentError or DTypeError naming the rule. ``rowwise``: FP8
    a and b (e4m3/e5m2, either with either), both K-major."""
    if rowwise:
        if ai.dtype not in _FP8 or bi.dtype not in _FP8:
            raise DTypeError(f"scaled_grouped_gemm takes FP8 a and b ({_dtype_words('e4m3')} or {_dtype_words('e5m2')}); got "
                             f"{_dtype_words(ai.dtype)} and {_dtype_words(bi.dtype)}")
    elif ai.dtype not in _IN or bi.dtype != ai.dtype:
        raise DTypeError(f"grouped_gemm_k takes a and b of one 16-bit type (bf16 or f16); got {_dtype_words(ai.dtype)} and "
                         f"{_dtype_words(bi.dtype)}" + (" (FP8: ptxgen.scaled_grouped_gemm, with row-wise scales)"
                                                        if ai.dtype in _FP8 and bi.dtype in _FP8 else ""))
    a_major, lda = _major(ai, "M")
    b_major, ldb = _major(bi, "N")
    for info, major, word in ((ai, a_major, "M"), (bi, b_major, "N")):
        if rowwise and major != "k":
            raise ArgumentError(f"{info.name} is {word}-major (strides {info.strides}), but wgmma reads FP8 operands K-major "
                                f"only (no transpose for .e4m3/.e5m2; PTX ISA 'wgmma.mma_async'): pass {info.name} with its "
                                f"rows contiguous along K ({info.name}.contiguous() of the {word} x K_total array; torch's "
                                "2-D x 2-D form takes a and b.t() of such arrays)")
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
        # out[g] starts g M ldd elements in: with one row a group, the group stride is the row pitch
        ldd = sm if m > 1 else sg if g > 1 else max(n, 1)
        if m == 1 and g > 1 and sg < n:
            raise ArgumentError(f"out's groups of one row start {sg} elements apart and overlap its {n} columns")
    return a_major, b_major, GroupedProblem(m, n, k, g, max(lda, 1), max(ldb, 1), ldd)


def fp8_variant(out_dtype: str, m: int | None = None) -> str:
    """The row-wise FP8 K-grouped kernel for a call: FP8_WIDE_VARIANT for a 16-bit output, else DEFAULT_FP8_VARIANT
    (the measurements at DEFAULT_FP8_VARIANT); without their 2x1 cluster where the ``m`` rows are fewer than
    CLUSTER_MIN_TILE_ROWS tile rows."""
    v = FP8_WIDE_VARIANT if out_dtype in ("bf16", "f16") else DEFAULT_FP8_VARIANT
    if m is not None and -(-m // _TILE_FP8["bm"]) < CLUSTER_MIN_TILE_ROWS:
        return v.removesuffix("-c2")
    return v


def decide(ai: ArrayInfo, bi: ArrayInfo, fi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, arch: str,
           scales: tuple[ArrayInfo, ArrayInfo] | None = None, variant: str | None = None, blocks: bool = False,
           accumulate: bool = False):
    """(spec, problem, out dtype) of a call on arrays already read, every rule checked but the device (no GPU; what
    ``ptxgen.api.plan`` reports): ArgumentError, DTypeError, SpecError or ProblemError naming the rule. ``scales``
    (scale_a, scale_b): the row-wise FP8 form (offs_k_rowwise), or with ``blocks`` the 1 x 128 block scales
    (:func:`blockscaled_grouped_gemm_k`; ``accumulate``: into out), scales checked too. ``variant``: kgrouped_spec's."""
    rowwise = scales is not None and not blocks
    a_major, b_major, p = bind_kgrouped(ai, bi, fi, oi, scales is not None)
    out_dtype = out_dtype or (oi.dtype if oi is not None else "f32" if blocks else "bf16" if rowwise else ai.dtype)
    if rowwise and variant is None:
        variant = fp8_variant(out_dtype, p.m)
    spec = kgrouped_spec(ai.dtype, out_dtype, arch, a_major, b_major, rowwise, bi.dtype, variant, blocks, accumulate)
    if oi is None:  # the out it allocates: rows padded to 16 bytes (the epilogue's vectors), as torch's N of any size
        per = 16 // spec.out_dtype.bytes
        p = replace(p, ldd=max(-(-p.n // per) * per, 1))
    if rowwise:
        _bind_scales(spec, scales, p)
    if blocks:
        p = _bind_block_scales(scales, p)
    if p.groups and p.m and p.n and p.k:
        check_kgrouped_problem(_plan_of(spec), p)
    return spec, p, out_dtype


def _bind_block_scales(scales: tuple[ArrayInfo, ArrayInfo], p: GroupedProblem) -> GroupedProblem:
    """The problem with the 1 x 128 scales' strides: scale_a f32 M x ceil(K/128) outer-dim-major (lds_a), scale_b f32
    ceil(K/128) x N MN-major (lds_b), as the dense 1x128 x 1x128 door takes them (ptxgen.api.fp8blocks); one device."""
    from .api.arrays.fp8recipe import column_scales_ld
    from .api.fp8blocks import _scales

    sa, sb = scales
    kb = -(-p.k // 128)
    return replace(p, lds_a=_scales(sa, "scale_a", p.m, max(kb, 1)), lds_b=column_scales_ld(sb, max(p.k, 1), p.n))


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
        return a.new_empty((self.groups, self.m, self.ldd), dtype=self._torch_dtype)[:, :, :self.n]


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
    return _call(a, b, offs, out, out_dtype, stream)


def grouped_gemm_k_variant(a, b, offs, out=None, *, variant: str, out_dtype: str | None = None, stream=None):
    """:func:`grouped_gemm_k` through the kernel of ``variant`` (a name of KGROUPED_VARIANTS): what
    tools/bench_grouped.py --variants and the variants' GPU tests run."""
    return _call(a, b, offs, out, out_dtype, stream, variant=variant)


def scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out=None, *, out_dtype: str | None = None, stream=None):
    """out[g] = (a[:, K of g] @ b[:, K of g].T) * scale_a[g M + row] * scale_b[g N + column] for g < G, FP8 a and b
    K-major (torch._scaled_grouped_mm's 2-D x 2-D form; see the module): one launch."""
    if scale_a is None or scale_b is None:
        raise ArgumentError("the K-grouped row-wise FP8 form multiplies by scale_a (G M f32) and scale_b (G N f32): pass both")
    return _call(a, b, offs, out, out_dtype, stream, (scale_a, scale_b))


def blockscaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out=None, *, c=None, out_dtype: str | None = None,
                               stream=None):
    """out[g] = sum over group g's 128-blocks kb of scale_a[:, kb, None] x scale_b[kb] x (a[:, kb] @ b[:, kb].T), e4m3 a
    and b K-major, 1 x 128 scales on both (DeepGEMM's k-grouped 1D1D; see the module): one launch; f32 out by default.
    ``c``: f32 G x M x N accumulated in place (out is c: ``c[g] += ...``). A group whose K range does not start and end
    on 128-blocks (or end at K_total) gets NaN."""
    if scale_a is None or scale_b is None:
        raise ArgumentError("the K-grouped 1D1D form multiplies by scale_a (M x ceil(K/128) f32) and scale_b "
                            "(ceil(K/128) x N f32): pass both")
    if c is not None:
        if out is not None and out is not c:
            raise ArgumentError("the K-grouped 1D1D form accumulates into c in place: pass out=c, or leave out out")
        return _call(a, b, offs, c, out_dtype, stream, (scale_a, scale_b), blocks=True, accumulate=True)
    return _call(a, b, offs, out, out_dtype, stream, (scale_a, scale_b), blocks=True)


def scaled_grouped_gemm_k_variant(a, b, scale_a, scale_b, offs, out=None, *, variant: str, out_dtype: str | None = None,
                                  stream=None):
    """:func:`scaled_grouped_gemm_k` through the kernel of ``variant`` (a name of KGROUPED_FP8_VARIANTS): what
    tools/bench_grouped.py --kgrouped-fp8 --variants and the variants' GPU tests run."""
    return _call(a, b, offs, out, out_dtype, stream, (scale_a, scale_b), variant=variant)


def _call(a, b, offs, out, out_dtype, stream, scales=None, variant=None, blocks=False, accumulate=False):
    sa, sb = scales if scales is not None else (None, None)
    key = None
    if type(a) is torch_tensor_type():
        try:
            key = (torch_key(a), torch_key(b), torch_key(offs), torch_key(out), out_dtype, torch_key(sa), torch_key(sb),
                   variant, blocks, accumulate)
        except (AttributeError, TypeError):
            key = None
        launch = _PREPARED.get(key) if key is not None else None
        if launch is not None:
            r = launch.call_torch(a, b, offs, out, sa, sb, stream)
            if r is not None:
                return r
    handle = stream_handle(stream, a)
    ai, bi, fi = read_array(a, "a", handle), read_array(b, "b", handle), read_array(offs, "offs", handle)
    oi = None if out is None else read_array(out, "out", handle)
    si = None if scales is None else (read_array(sa, "scale_a", handle), read_array(sb, "scale_b", handle))
    dev = streams.call_device((ai, bi, fi, oi, *(si or ())))
    try:
        spec, p, out_dtype = decide(ai, bi, fi, oi, out_dtype, dev.arch.value, si, variant, blocks, accumulate)
    except SpecError as e:
        raise NoGPU(f"no K-grouped kernel for this GPU: {e}") from None
    kernel = _kernel(spec)
    allocated = out is None
    if allocated:
        kernel._require_arch(dev)
        out = _allocate_out(a, ai.library, p.m, p.n, p.ldd, out_dtype, dev.index, batch=p.groups)
        oi = read_array(out, "out", handle)
    if p.groups == 0 or p.m == 0 or p.n == 0:
        return out
    if p.k == 0:  # no K at all: every group is empty (a tensor map needs K >= 1); accumulating, out keeps c
        if not accumulate:
            out[...] = 0
        return out
    infos = (ai, bi, fi, oi, *(si or ()))
    for info in infos:
        producer = info.producer_stream
        if producer is not None and not streams.same_stream(producer, handle):
            with streams.on_device(dev):
                streams.wait_for_producer(producer, handle)
    launch = _prepare(kernel, dev, p)
    launch.run((ai.ptr, bi.ptr, fi.ptr, oi.ptr) + (() if si is None else (si[0].ptr, si[1].ptr)), handle)
    if key is not None and all(i.library == "torch" for i in infos) and all(i.device is not None for i in infos):
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
    grid, blk, smem = kgrouped_geometry(kernel.plan, p, dev.sm_count, func)
    return _KLaunch(block, slots, (int(func.func), *grid, *blk, smem), drv, dev, p, kernel.spec.out_dtype.value, kernel.name,
                    groups=p.groups)
