"""Binding arrays to a spec (pure: no GPU): dtypes, shapes, majorness, leading dimensions, alignment and
devices checked, M, N, K and the leading dimensions inferred; and allocating an output with the inputs'
library. Every refusal is an ArgumentError (or DTypeError / ProblemError) that names the argument, the
rule and the fix."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ...derive.tile.spec import TileSpec
from ...isa.types import DMajor, DType, Epilogue, Major
from ...runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from ...runtime.launch.launch import MAX_DIM, ROW_ALIGN_BYTES, Problem, ProblemError, check_problem

_ARRAY_DTYPE = {DType.TF32: "f32"}
_TORCH_NAMES = {"f16": "torch.float16", "bf16": "torch.bfloat16", "f32": "torch.float32", "e4m3": "torch.float8_e4m3fn",
                "e5m2": "torch.float8_e5m2", "s8": "torch.int8", "u8": "torch.uint8", "s32": "torch.int32"}


def _array_dtype(d: DType) -> str:
    return _ARRAY_DTYPE.get(d, d.value)


def _dtype_words(token: str) -> str:
    return f"{token} ({_TORCH_NAMES[token]})" if token in _TORCH_NAMES else token



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


def _leading_dim(info: ArrayInfo, major: Major, mn: str, spec_name: str, align: int = ROW_ALIGN_BYTES) -> int:
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
    if ld * info.itemsize % align:
        inner = "K" if major is Major.K else mn
        q = max(1, align // info.itemsize)
        why = "(TMA)" if align == ROW_ALIGN_BYTES else f"({spec_name} copies {align} bytes at a time)"
        raise ArgumentError(
            f"{name}: its rows start {ld} elements ({ld * info.itemsize} B) apart, but every row must start {align}-byte aligned "
            f"{why}: the leading dimension must be a multiple of {q} elements; allocate {inner} padded to a multiple of {q} "
            f"and pass a slice"
        )
    return ld


def _check_aligned(info: ArrayInfo, align: int = ROW_ALIGN_BYTES) -> None:
    if info.ptr % align:
        raise ArgumentError(f"{info.name}: its data at {info.ptr:#x} is not {align}-byte aligned (a view that starts mid-row?); "
                            "pass an aligned array or a copy")


def _check_devices(infos: list[ArrayInfo]) -> None:
    for info in infos:
        if info.on_cuda is False:
            raise ArgumentError(f"{info.name} is on {info.device_str}; ptxgen kernels read CUDA device memory "
                                f"(move it first, e.g. {info.name}.cuda() or cupy.asarray({info.name}))")
    known = {i.device[1] for i in infos if i.device is not None}
    if len(known) > 1:
        raise ArgumentError("the arrays are on different devices: " + ", ".join(f"{i.name} on {i.device_str}" for i in infos))


def _m_major_alloc_ld(spec: TileSpec, m: int) -> int:
    """ldd of an M-major D that ptxgen allocates: M (element alignment; the direct stores), or M rounded up to 16 bytes
    where the TMA store writes D through a tensor map (its row stride a multiple of 16 B)."""
    return _pad(m, spec.out_dtype.bytes) if spec.epilogue is Epilogue.TMA else max(m, 1)


def _m_major_ld(out: ArrayInfo, m: int, n: int, spec: TileSpec) -> int:
    """ldd of an M-major (column-major) ``out`` (spec --d-major m: element (i, j) at j x ldd + i, one store per element,
    so only the element's alignment is needed)."""
    s0, s1 = out.strides
    spec_name = spec.kernel_name
    if m > 1 and s0 != 1:
        raise ArgumentError(f"out must be M-major for {spec_name} (--d-major m: stride 1 along M, strides (1, ldd)); it has "
                            f"strides {out.strides}: pass the transposed view of a row-major N x M array (out = d.t())")
    ldd = s1 if n > 1 else _m_major_alloc_ld(spec, m)  # one column: its pitch is never used, any legal one serves
    if n > 1 and ldd < m:
        raise ArgumentError(f"out: columns {ldd} elements apart overlap its {m} rows (strides {out.strides})")
    if spec.epilogue is Epilogue.TMA:
        _check_aligned(out)  # the TMA store's tensor map: D 16-byte aligned (its row stride: check_problem)
    else:
        _check_aligned(out, out.itemsize)
    return ldd


@dataclass(frozen=True)
class Binding:
    """The problem that a call's arrays make, checked against a spec."""

    problem: Problem
    a: ArrayInfo
    b: ArrayInfo
    out: ArrayInfo | None


def span_bytes(info: ArrayInfo) -> int:
    """Bytes from the array's first element to one past its last (0 for an empty array)."""
    if any(s == 0 for s in info.shape):
        return 0
    return (sum((s - 1) * st for s, st in zip(info.shape, info.strides)) + 1) * info.itemsize


def overlaps(p: int, p_bytes: int, q: int, q_bytes: int) -> bool:
    return p_bytes > 0 and q_bytes > 0 and p < q + q_bytes and q < p + p_bytes


def check_no_alias(a: ArrayInfo, b: ArrayInfo, out: ArrayInfo) -> None:
    o = span_bytes(out)
    for x in (a, b):
        if overlaps(out.ptr, o, x.ptr, span_bytes(x)):
            raise ArgumentError(f"out overlaps {x.name} in memory ({out.ptr:#x}+{o} B and {x.ptr:#x}+{span_bytes(x)} B): "
                                f"the kernel would read {x.name} while writing out; pass a separate out (or out=None)")


def bind(spec: TileSpec, a: ArrayInfo, b: ArrayInfo, out: ArrayInfo | None, empty_k_ok: bool = False) -> Binding:
    """Check the arrays against ``spec`` and infer M, N, K and the leading dimensions (no GPU needed).

    ``empty_k_ok``: K = 0 is accepted (the caller fills out with zeros, as torch.matmul does) instead of
    raising ProblemError; the inputs' layouts are then not checked (nothing is read)."""
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
    if k == 0 and not empty_k_ok:
        raise ProblemError(f"{name} cannot run M={m} N={n} K=0: K=0 must be in 1..{MAX_DIM} (an empty reduction)")
    if k == 0:
        lda = ldb = 0
    else:
        for info in (a, b):
            _check_strides(info)
        align = spec.operand_row_align_bytes
        lda = _leading_dim(a, spec.a.major, "M", name, align)
        ldb = _leading_dim(b, spec.b.major, "N", name, align)
        _check_aligned(a, align)
        _check_aligned(b, align)
    out_want = spec.out_dtype.value
    osize = spec.out_dtype.bytes
    if out is None:
        if a.library not in ("torch", "cupy"):
            raise ArgumentError(f"pass out= (an M x N = {m} x {n} {out_want} device array): ptxgen allocates outputs only for "
                                f"torch tensors and CuPy arrays, and a is a {a.library} array")
        # M-major D: columns M elements apart, or (the TMA store's tensor map) rows of the user's D 16-byte aligned
        ldd = _pad(n, osize) if spec.d_major is DMajor.N else _m_major_alloc_ld(spec, m)
    else:
        _check_2d(out, "out: M x N, row-major")
        if out.shape != (m, n):
            raise ArgumentError(f"out has shape {out.shape}, but a ({m} x {k}) @ b.T ({k} x {n}) is {(m, n)}")
        if out.dtype != out_want:
            raise DTypeError(f"out has dtype {_dtype_words(out.dtype)}, but {name} writes {_dtype_words(out_want)}")
        _check_strides(out)
    if out is not None and spec.d_major is DMajor.M:
        ldd = _m_major_ld(out, m, n, spec)
    elif out is not None:
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
    if out is not None:
        check_no_alias(a, b, out)
    p = Problem(m, n, k, lda, ldb, ldd)
    if m and n and k:
        check_problem(spec, p)
    return Binding(p, a, b, out)


# ----------------------------------------------------------------------------------------------
# allocation
# ----------------------------------------------------------------------------------------------
def _allocate_out(like, library: str, m: int, n: int, ldd: int, dtype: str, device_index: int, batch: int | None = None,
                  m_major: bool = False):
    """An M x N array with rows ``ldd`` elements apart, from the inputs' library (a view when ldd > N); ``batch``:
    B x M x N, the batches M x ldd elements apart. ``m_major``: the transposed view of an N x ldd array (columns ``ldd``
    apart; --d-major m)."""
    if m_major:
        return _allocate_out(like, library, n, m, ldd, dtype, device_index).T
    lead = () if batch is None else (batch,)
    if library == "torch":
        torch = sys.modules["torch"]
        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "s32": torch.int32}[dtype]
        full = torch.empty(lead + (m, ldd), dtype=tdt, device=like.device)
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
            full = cupy.empty(lead + (m, ldd), dtype=cdt)
    return full if ldd == n else full[..., :n]

