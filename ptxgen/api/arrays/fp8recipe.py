"""Which block-FP8 recipe a ``ptxgen.api.fp8blocks.gemm`` call asks for, from ``scale_b``'s shape and strides as
``torch._scaled_mm`` infers its recipes (torch._inductor.utils.infer_scale_swizzle; test_scaled_matmul_cuda.py's
blockwise tests), and the arguments of the 1x128 x 1x128 recipe (DeepGEMM's 1D1D): scale_b and the accumulated ``c``.

For ``b`` (N x K, passed to torch as ``b.t()``) torch takes:

* BlockWise128x128 (``1x128x128``): scale_b ``(ceil(K/128), ceil(N/128))`` or padded ``(round_up(ceil(K/128), 4),
  ceil(N/128))``, strides ``(1, ld)`` (``s.t()`` of a row-major ceil(N/128) x L4 array);
* BlockWise1x128 (``1x128x1x128``): scale_b ``(ceil(K/128), N)``, strides ``(ld, 1)`` with ld >= N (``y_scales.t()`` of
  an outer-dim-major N x ceil(K/128) array: element (kb, n) at kb x ld + n).

The recipe follows from the shape (torch._inductor.utils.infer_scale_swizzle reads shapes only); where both shapes are
one (N = 1) the two recipes compute the same product and 1x128x128 is taken (1x128x1x128 with ``c``, which only it
adds). The strides are then checked.

For ``a`` (M x K) torch takes BlockWise1x128 (scale_a ``(M, ceil(K/128))``, strides ``(1, ld)``: every recipe above) or
BlockWise128x128 with a BlockWise1x128 ``b`` (``128x128x1x128``): scale_a ``(ceil(K/128), ceil(M/128))`` or padded
``(round_up(ceil(K/128), 4), ceil(M/128))``, strides ``(1, ld)`` (test_scaled_matmul_cuda.py: ``x_scales.t()`` of the
padded row-major ceil(M/128) x L4 array). That recipe is the 1x128x128 one with the operands' roles swapped:
``D^T = B A^T`` where B's 1 x 128 rows are the kernel's A scales and A's 128 x 128 blocks its B scales
(:func:`a_in_blocks` tells it from scale_a's shape; ``ptxgen.api.fp8blocks`` launches it).
"""

from __future__ import annotations

from ...derive.scaled.blockfp8 import BLOCKS_1D2D, COLUMNS_1D1D
from ...runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError
from .binding import overlaps, span_bytes

BLOCKS_2D1D = "128x128x1x128"  # A in 128 x 128 blocks, B in 1 x 128 rows: the 1D2D kernel on (b, a), D written M-major
RECIPES = (BLOCKS_1D2D, COLUMNS_1D1D, BLOCKS_2D1D)
BLOCK = 128


def infer_recipe(recipe: str | None, sb: ArrayInfo, k: int, n: int, padded_rows: int, with_c: bool = False) -> str:
    """``recipe`` as asked (checked against the recipes), or the one scale_b's shape says, as torch infers it from the
    shape alone (module docstring); the caller's checks then say what is wrong with the strides, in its recipe's words."""
    if recipe is not None:
        if recipe not in RECIPES:
            raise ArgumentError(f"recipe={recipe!r}: block FP8 takes {RECIPES[0]!r} (B in 128 x 128 blocks), "
                                f"{RECIPES[1]!r} (B in 1 x 128 rows, DeepGEMM's 1D1D) or {RECIPES[2]!r} (A in 128 x 128 "
                                "blocks, B in 1 x 128 rows)")
        return recipe
    kb, nb = -(-k // BLOCK), -(-n // BLOCK)
    if sb.shape == (kb, n) and (with_c or sb.shape not in ((kb, nb), (padded_rows, nb))):
        return COLUMNS_1D1D
    return BLOCKS_1D2D


def a_in_blocks(recipe: str | None, sa: ArrayInfo, m: int, k: int, padded_rows: int) -> bool:
    """Whether scale_a asks for the 128x128 x 1x128 recipe: ``recipe`` says so, or (None) scale_a has torch's
    BlockWise128x128 shape for A and not its BlockWise1x128 one (M x ceil(K/128)); where the two shapes are one (M = 4
    with K <= 128, say) A's 1 x 128 rows are taken, as for every other recipe."""
    if recipe is not None:
        return recipe == BLOCKS_2D1D
    kb, mb = -(-k // BLOCK), -(-m // BLOCK)
    return sa.shape != (m, kb) and sa.shape in ((kb, mb), (padded_rows, mb))


def column_scales_ld(sb: ArrayInfo, k: int, n: int) -> int:
    """Check scale_b of the 1x128 x 1x128 recipe (f32 ceil(K/128) x N, strides (ld, 1), ld >= N); returns ld (lds_b)."""
    kb = -(-k // BLOCK)
    if sb.dtype != "f32":
        raise DTypeError(f"scale_b has dtype {sb.dtype}; block scales are float32")
    if sb.shape != (kb, n):
        raise ArgumentError(f"scale_b has shape {sb.shape}; the 1x128 x 1x128 recipe takes ({kb}, {n}) (ceil(K/128) x N, "
                            "torch's BlockWise1x128 scale_b: y_scales.t() of an outer-dim-major N x ceil(K/128) array)")
    ld = sb.strides[0] if kb > 1 else n
    if n > 1 and sb.strides[1] != 1 or ld < n:
        raise ArgumentError(f"scale_b must be MN-major for the 1x128 x 1x128 recipe (strides (ld, 1) with ld >= {n}, as "
                            f"torch._scaled_mm takes it); it has strides {sb.strides}")
    if sb.ptr % 4:
        raise ArgumentError("scale_b must be 4-byte aligned")
    return ld


def c_extra(ci: ArrayInfo | None, oi: ArrayInfo | None, m: int, n: int, out_dtype: str) -> dict:
    """The fused chain's arguments for D = C + A.B (``--fuse c``, beta = 1): C f32 M x N with unit column stride;
    out f32; out is c itself or apart from it. {} without c."""
    if ci is None:
        return {}
    if out_dtype != "f32":
        raise ArgumentError(f"c accumulates into an f32 output (D = C + A.B, DeepGEMM's 1D1D); out_dtype is {out_dtype!r}")
    if ci.dtype != "f32" or ci.shape != (m, n):
        raise ArgumentError(f"c must be f32 of shape {(m, n)}; it is {ci.dtype} {ci.shape}")
    ldc = ci.strides[0] if m > 1 else n
    if n > 1 and ci.strides[1] != 1 or ldc < n or ci.ptr % 4:
        raise ArgumentError(f"c must be row-major with unit column stride and 4-byte aligned; it has strides {ci.strides}")
    if oi is not None and (oi.ptr, oi.strides) != (ci.ptr, ci.strides) and overlaps(oi.ptr, span_bytes(oi), ci.ptr, span_bytes(ci)):
        raise ArgumentError("out overlaps c without being c: pass out=c to accumulate in place, or arrays apart")
    return {"alpha": 1.0, "beta": 1.0, "C": ci.ptr, "ldc": ldc}
