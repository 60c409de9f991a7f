"""Binding of grouped GEMM arguments (``ptxgen.grouped_gemm``): the arrays' shapes, strides, alignment and devices
checked against a grouped spec, before any launch, into a :class:`GroupedBinding` (the problem and the arrays).
Split out of ``ptxgen.grouped``, which composes it with the compiled kernel and the public calls."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...derive.tile.spec import TileSpec
from ...isa.types import Grouping, Major
from ...runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from ...runtime.launch.grouped import GroupedProblem
from ...runtime.launch.launch import ROW_ALIGN_BYTES, ProblemError
from .binding import _array_dtype, _check_aligned, _check_devices, _dtype_words


class _KernelName:
    __slots__ = ("spec",)

    def __init__(self, spec: TileSpec):
        self.spec = spec

    def __format__(self, fmt: str) -> str:
        return format(self.spec.kernel_name, fmt)

    __str__ = __repr__ = lambda self: self.spec.kernel_name


@dataclass(frozen=True)
class GroupedBinding:
    problem: GroupedProblem
    a: ArrayInfo
    b: ArrayInfo
    offs: ArrayInfo
    out: ArrayInfo | None


def _k_major_rows(info: ArrayInfo, rows: int, cols: int, what: str) -> int:
    """The row stride (elements) of a K-major rows x cols view, checked."""
    s0, s1 = info.strides[-2], info.strides[-1]
    if cols > 1 and s1 != 1:
        raise ArgumentError(f"{info.name} must be K-major ({what}, stride 1 along K); it has strides {info.strides}: pass "
                            f"{info.name}.contiguous()")
    ld = s0 if rows > 1 else -(-cols // (ROW_ALIGN_BYTES // info.itemsize)) * (ROW_ALIGN_BYTES // info.itemsize)
    if rows > 1 and ld < cols:
        raise ArgumentError(f"{info.name}: rows {ld} elements apart overlap its {cols} columns (strides {info.strides})")
    if ld * info.itemsize % ROW_ALIGN_BYTES:
        q = ROW_ALIGN_BYTES // info.itemsize
        raise ArgumentError(f"{info.name}: its rows start {ld} elements ({ld * info.itemsize} B) apart, but every row must start "
                            f"16-byte aligned (TMA): K padded to a multiple of {q} elements (allocate it padded and pass a slice)")
    return ld


def bind_grouped(spec: TileSpec, a: ArrayInfo, b: ArrayInfo, offs: ArrayInfo, out: ArrayInfo | None) -> GroupedBinding:
    """Check the arrays against a grouped ``spec`` and infer M_total, N, K, G and the strides (no GPU needed)."""
    name = _KernelName(spec)  # formatted only in a message: kernel_name is slow to build
    if a.ndim != 2:
        raise ArgumentError(f"a must be 2-D (M_total x K, the groups' rows stacked); got shape {a.shape}")
    if b.ndim != 3:
        raise ArgumentError(f"b must be 3-D (G x N x K: one N x K weight per group); got shape {b.shape}")
    if offs.ndim != 1:
        raise ArgumentError(f"offs must be 1-D (G cumulative row ends); got shape {offs.shape}")
    for info in (a, b):
        want = _array_dtype(spec.operand_dtype(info.name))  # tf32 kernels read float32 arrays; B's type may differ (mixed FP8)
        if info.dtype != want:
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}, but {name} takes {_dtype_words(want)} "
                             f"{'A' if info.name == 'a' else 'B'}")
    if offs.dtype != "s32":
        raise DTypeError(f"offs has dtype {_dtype_words(offs.dtype)}; it must be {_dtype_words('s32')} (cumulative row ends)")
    (m, k), (g, n, kb) = a.shape, b.shape
    if k != kb:
        raise ArgumentError(f"a is {m} x {k} and b is {g} x {n} x {kb}: both must have K columns (b[g] is an N x K weight; "
                            "for torch._grouped_mm's G x K x N pass b.transpose(-2, -1))")
    if offs.shape[0] != g:
        raise ArgumentError(f"offs has {offs.shape[0]} values but b has {g} groups: one cumulative row end per group")
    if g and offs.shape[0] > 1 and offs.strides[0] != 1:
        raise ArgumentError(f"offs must be contiguous (stride 1); it has stride {offs.strides[0]}")
    if k == 0:
        raise ProblemError(f"{name} cannot run K=0 (an empty reduction)")
    for info in (a, b):
        if any(s <= 0 for s, size in zip(info.strides, info.shape) if size > 1):
            raise ArgumentError(f"{info.name} has strides {info.strides}: a broadcast or reversed view cannot be read by TMA; "
                                f"pass {info.name}.contiguous()")
    lda = _k_major_rows(a, m, k, "M_total x K")
    if spec.b.major is Major.MN:
        ldb, ldb_group = _n_major_b(b, g, n, k)
    else:
        ldb, ldb_group = _k_major_b(b, g, n, k)
    _check_aligned(a)
    _check_aligned(b)
    if offs.ptr % 4:
        raise ArgumentError(f"offs: its data at {offs.ptr:#x} is not 4-byte aligned")
    out_want, osize = spec.out_dtype.value, spec.out_dtype.bytes
    q = ROW_ALIGN_BYTES // osize
    if out is None:
        if a.library not in ("torch", "cupy"):
            raise ArgumentError(f"pass out= (an M_total x N = {m} x {n} {out_want} device array): ptxgen allocates outputs only "
                                f"for torch tensors and CuPy arrays, and a is a {a.library} array")
        ldd = max(q, -(-n // q) * q)
    else:
        if out.ndim != 2 or out.shape != (m, n):
            raise ArgumentError(f"out has shape {out.shape}, but the grouped product of a ({m} x {k}) and b ({g} x {n} x {k}) is {(m, n)}")
        if out.dtype != out_want:
            raise DTypeError(f"out has dtype {_dtype_words(out.dtype)}, but {name} writes {_dtype_words(out_want)}")
        if n > 1 and out.strides[1] != 1:
            raise ArgumentError(f"out must be row-major (stride 1 along N: strides (ldd, 1)); it has strides {out.strides}")
        ldd = out.strides[0] if m > 1 else max(q, -(-n // q) * q)
        if m > 1 and ldd < n:
            raise ArgumentError(f"out: rows {ldd} elements apart overlap its {n} columns")
        if ldd * osize % ROW_ALIGN_BYTES:
            raise ArgumentError(f"out: its rows start {ldd} elements ({ldd * osize} B) apart; the epilogue stores 16-byte vectors, "
                                f"so the row stride must be a multiple of {q} elements (allocate M x N' with N' a multiple of {q} "
                                "and pass out[:, :N])")
        _check_aligned(out)
    _check_devices([i for i in (a, b, offs, out) if i is not None])
    return GroupedBinding(GroupedProblem(m, n, k, g, lda, ldb, ldd, ldb_group), a, b, offs, out)


def _k_major_b(b: ArrayInfo, g: int, n: int, k: int) -> tuple[int, int]:
    """(ldb, 0) of a K-major G x N x K ``b``: its groups are one (G N) x K matrix, so they follow each other with no gap."""
    ldb = _k_major_rows(b, n, k, "each b[g] N x K")
    if g > 1 and b.strides[0] != n * ldb:
        raise ArgumentError(f"b's groups must follow each other with no gap (stride {n} x {ldb} = {n * ldb} elements between "
                            f"b[g] and b[g + 1], one (G N) x K matrix); it has strides {b.strides}: pass b.contiguous()")
    if n == 1 and g > 1:
        ldb = b.strides[0]
        if ldb * b.itemsize % ROW_ALIGN_BYTES:
            raise ArgumentError(f"b: its groups start {ldb} elements apart; with N = 1 they are the rows of B's view and must "
                                "start 16-byte aligned")
    return ldb, 0


def b_is_n_major(b: ArrayInfo) -> bool:
    """A G x N x K ``b`` whose stride along N is 1 and along K is not (stored G x K x N, as torch._grouped_mm's own
    G x K x N weights transposed): read N-major through one 3-D map over (N, K, G)."""
    if b.ndim != 3:
        return False
    _, n, k = b.shape
    return n > 1 and b.strides[1] == 1 and (k <= 1 or b.strides[2] != 1)


def _n_major_b(b: ArrayInfo, g: int, n: int, k: int) -> tuple[int, int]:
    """(ldb, ldb_group) of an N-major G x N x K ``b`` (stride 1 along N): ldb elements between its K rows of N, and any
    group stride that keeps the groups apart (the 3-D map's third dimension; no (G N) x K view is needed)."""
    s_g, s_n, s_k = b.strides
    if n > 1 and s_n != 1:
        raise ArgumentError(f"b must be N-major for this kernel (stride 1 along N: stored G x K x N); it has strides "
                            f"{b.strides}: pass b.transpose(-2, -1).contiguous().transpose(-2, -1), or use a K-major kernel")
    q = ROW_ALIGN_BYTES // b.itemsize
    ldb = s_k if k > 1 else max(q, -(-n // q) * q)
    if k > 1 and ldb < n:
        raise ArgumentError(f"b: its K rows are {ldb} elements apart, which overlaps its {n} columns (strides {b.strides})")
    if ldb * b.itemsize % ROW_ALIGN_BYTES:
        raise ArgumentError(f"b: its K rows start {ldb} elements ({ldb * b.itemsize} B) apart, but every row must start 16-byte "
                            f"aligned (TMA): N padded to a multiple of {q} elements (allocate it padded and pass a slice)")
    ldb_group = s_g if g > 1 else k * ldb
    if g > 1 and ldb_group < k * ldb:
        raise ArgumentError(f"b's groups are {ldb_group} elements apart, inside one group's K x ldb = {k} x {ldb}: "
                            "pass b.transpose(-2, -1).contiguous().transpose(-2, -1)")
    if ldb_group * b.itemsize % ROW_ALIGN_BYTES:
        raise ArgumentError(f"b's groups start {ldb_group * b.itemsize} B apart, not a multiple of 16 B (the 3-D tensor "
                            "map's group stride)")
    return ldb, ldb_group


SCALE_BLOCK = 128  # K (and N for B) per block scale (ptxgen.derive.scaled.blockfp8)


def bind_block_scales(spec: TileSpec, scales, p: GroupedProblem) -> tuple[GroupedProblem, tuple[int, int]]:
    """A block-scaled grouped kernel's scales (--fp8-blocks 1x128x128 with --grouped offs), checked; the problem with
    their strides. ``scale_a``: f32 M_total x ceil(K/128), outer-dim-major (strides (1, lds_a), lds_a >= M_total: the
    dense kernel's layout over the stacked rows); ``scale_b``: f32 G x ceil(K/128) x ceil(N/128) with strides
    (lds_b_group, 1, lds_b): each ``scale_b[g]`` is the dense kernel's (and torch._scaled_mm's) BlockWise128x128 array
    for ``b[g]``; ``s.transpose(1, 2)`` of a row-major G x ceil(N/128) x ceil(K/128) array (DeepGEMM's per-group sfb)."""
    if scales is None or scales[0] is None or scales[1] is None:
        raise ArgumentError(f"{_KernelName(spec)} multiplies by DeepSeek block scales: pass scale_a (M x ceil(K/128) f32) "
                            "and scale_b (G x ceil(K/128) x ceil(N/128) f32)")
    sa, sb = scales
    kb, nb = -(-p.k // SCALE_BLOCK), -(-p.n // SCALE_BLOCK)
    for info, want in ((sa, (p.m, kb)), (sb, (p.groups, kb, nb))):
        if info.dtype != "f32":
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}; block scales are {_dtype_words('f32')}")
        if tuple(info.shape) != want:
            raise ArgumentError(f"{info.name} has shape {info.shape}; it must be {want}")
        if info.ptr % 4:
            raise ArgumentError(f"{info.name}: its data at {info.ptr:#x} is not 4-byte aligned")
    lds_a = sa.strides[1] if kb > 1 else max(p.m, 1)
    if (p.m > 1 and sa.strides[0] != 1) or lds_a < p.m:
        raise ArgumentError(f"scale_a must be outer-dim-major (strides (1, ld) with ld >= {p.m}), as torch._scaled_mm takes "
                            f"it (s.t().contiguous().t()); it has strides {sa.strides}")
    lds_b = sb.strides[2] if nb > 1 else kb
    lds_b_group = sb.strides[0] if p.groups > 1 else nb * lds_b
    if (kb > 1 and sb.strides[1] != 1) or lds_b < kb or lds_b_group < nb * lds_b:
        raise ArgumentError(f"scale_b must have strides (lds_b_group, 1, lds_b) with lds_b >= {kb} and lds_b_group >= "
                            f"{nb} x lds_b (each scale_b[g] as the dense kernel takes it: s.transpose(1, 2) of a row-major "
                            f"G x {nb} x {kb} array); it has strides {sb.strides}")
    if max(lds_a * kb, lds_b_group * p.groups) >= 1 << 31:
        raise ArgumentError("the scale arrays' element offsets must fit in an int")
    _check_devices([sa, sb])
    return replace(p, lds_a=lds_a, lds_b=lds_b, lds_b_group=lds_b_group), (sa.ptr, sb.ptr)


def _scale_shapes(spec: TileSpec, p: GroupedProblem) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The values scale_a and scale_b hold: M and G x N (offs_rowwise: the stacked rows, a group's columns), or G x M
    and G x N (offs_k_rowwise: torch._scaled_grouped_mm's 2-D x 2-D, one scale per group and row, per group and column)."""
    if spec.grouped is Grouping.OFFS_K_ROWWISE:
        return (p.groups, p.m), (p.groups, p.n)
    return (p.m,), (p.groups, p.n)


def _bind_scales(spec: TileSpec, scales, p: GroupedProblem) -> tuple[int, int]:
    """(scale_a, scale_b) pointers, checked: f32, contiguous, holding the values :func:`_scale_shapes` says (that shape
    or flat); (0, 0) without scales."""
    if not spec.grouped.rowwise:
        if scales is not None:
            raise ArgumentError(f"{_KernelName(spec)} takes no scales (compile grouped='offs_rowwise' for FP8 row-wise scales, "
                                "or grouped='offs' with fp8_blocks='1x128x128' for block scales)")
        return 0, 0
    want_a, want_b = _scale_shapes(spec, p)
    if scales is None or scales[0] is None or scales[1] is None:
        raise ArgumentError(f"{_KernelName(spec)} multiplies by row-wise scales: pass scale_a ({' x '.join(map(str, want_a))} "
                            f"f32) and scale_b ({' x '.join(map(str, want_b))} f32)")
    sa, sb = scales
    for info, want in ((sa, want_a), (sb, want_b)):
        if info.dtype != "f32":
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}; it must be {_dtype_words('f32')}")
        flat = 1
        for x in info.shape:
            flat *= x
        need = 1
        for x in want:
            need *= x
        if tuple(info.shape) not in (want, (flat,)) or flat != need:
            raise ArgumentError(f"{info.name} has shape {info.shape}; it must hold {' x '.join(map(str, want))} values")
        dense = all(st == exp for st, exp, size in zip(reversed(info.strides), _dense_strides(info.shape), reversed(info.shape)) if size > 1)
        if not dense:
            raise ArgumentError(f"{info.name} must be contiguous (strides {info.strides}): pass {info.name}.contiguous()")
        if info.ptr % 4:
            raise ArgumentError(f"{info.name}: its data at {info.ptr:#x} is not 4-byte aligned")
    _check_devices([sa, sb])
    return sa.ptr, sb.ptr


def _dense_strides(shape) -> list[int]:
    """Row-major strides, innermost first."""
    out, acc = [], 1
    for size in reversed(shape):
        out.append(acc)
        acc *= size
    return out
