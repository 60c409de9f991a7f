"""C for the K-grouped GEMM (ptxgen.derive.roles.kgrouped): the item's group and K range, and the K tail's zeroing.

Rendered from the plan and the operands' shared-memory layouts; the templates paste these lines. The zeroing walks
each operand stage's 16-byte cells with the loader's own cell map (``cexpr.linear_offset_c_expr`` and
``swizzle_c_expr``, the same expressions the cp.async loader writes through), so it zeroes exactly where TMA put
the K indices past the group's end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.roles.barriers import kgrouped_tail_barrier
from ...derive.roles.kgrouped import KGroupedPlan
from ...derive.operands.operand import OperandLayout
from ...isa.types import Major
from ..cexpr import linear_offset_c_expr, swizzle_c_expr
from .grouped_view import RowScalesView
from .schedule_view import BATCH



@dataclass(frozen=True)
class KGroupedView:
    helpers: str  # shared-memory zero stores
    tail: tuple[str, ...]  # C statements after full[s] of K-tile kt, before the MMAs read stage s
    doc: str
    pingpong: bool = False  # each consumer warpgroup takes whole tiles: it counts the other's K-tiles (the template)
    # --fp8-blocks 1x128x1x128: the C of a NaN the accumulator takes where the item's group is off the scale blocks
    # (k_unaligned, tile_k_c); "" otherwise
    unaligned_value: str = ""


def row_scales_view(plan: KGroupedPlan) -> RowScalesView | None:
    """--grouped offs_k_rowwise: scale_a[g M + row], scale_b[g N + col] (derive.roles.kgrouped.KGroupedPlan.scale_index)."""
    if not plan.rowwise:
        return None
    g = f"static_cast<size_t>({BATCH})"
    return RowScalesView(
        doc="Row-wise FP8 scales (torch._scaled_grouped_mm 2-D x 2-D): acc x scale_a[g M + row] x scale_b[g N + column]; "
            "0 outside M or N.",
        a_index=f"{g} * M + row", b_index=f"{g} * N + col", row_limit="M")


def tile_k_c(plan: KGroupedPlan) -> tuple[str, ...]:
    """The item's K range, its K-tiles' base and trip count (after batched_tile_coords_c defined the group ``bz``):
    group_k, k_base and k_trips of the plan."""
    g, bk = BATCH, plan.bk
    base = "k_start" if plan.k_align == 1 else f"k_start - k_start % {plan.k_align}"
    trips = "k_end > k_start"
    check = ()
    if plan.k_block:  # derive.roles.kgrouped.KGroupedPlan.blocks_aligned
        kb = plan.k_block
        check = (f"const bool k_unaligned = k_end > k_start && (k_start % {kb} != 0 || (k_end % {kb} != 0 && k_end != K));"
                 f"  // a group off the {kb}-blocks of the scales: not computed, out[g] NaN",)
        trips = "k_end > k_start && !k_unaligned"
    return (
        f"const int k_start = {g} == 0 ? 0 : min(max(offs[{g} - 1], 0), K);  // the group's K range, read on the device",
        f"const int k_end = min(max(offs[{g}], k_start), K);  // untrusted offs: clamped into [k_start, K]",
        f"const int k_base = {base};  // the first K-tile's box start",
        *check,
        f"const int num_k_tiles = {trips} ? (k_end - k_base + {bk - 1}) / {bk} : 0;  // both roles: the same trip count",
        "const int k_head = k_start - k_base;  // offsets of the first K-tile below the group (the previous group's)",
        f"const int k_valid_last = k_end - k_base - (num_k_tiles - 1) * {bk};  // offsets of the last K-tile inside the group",
        "(void)k_head;",
        "(void)k_valid_last;",
    )


def k_block_first_c(plan: KGroupedPlan) -> str:
    """--fp8-blocks 1x128x1x128: the C of the item's first scale block (KGroupedPlan.scale_blocks: k_base / k_block, the
    group starting on a block); "" otherwise."""
    return f"(k_base / {plan.k_block})" if plan.k_block else ""


def k0_c(plan: KGroupedPlan) -> str:
    return f"k_base + kt * {plan.bk}"


def _group_bytes_c(ld: str, element_bytes: int) -> str:
    """The bytes from a G x M x N array's [0] to its [g]: g M ld elements."""
    return f"static_cast<size_t>({BATCH}) * static_cast<size_t>(M) * static_cast<size_t>({ld}) * {element_bytes}u"


def d_base_c(out_bytes: int) -> str:
    """out[g] = D + g M ldd elements."""
    return f"(D + {_group_bytes_c('ldd', out_bytes)})"


def c_offset_c(c_bytes: int) -> str:
    """C[g] = C + g M ldc elements (the accumulating 1D1D kernel's C, grouped as out)."""
    return _group_bytes_c("ldc", c_bytes)


def _zero_loop_c(op: OperandLayout, stage: str, threads: int, esize: int, thread: str = "tid") -> tuple[str, ...]:
    """Zero the cells (elements) of operand ``op``'s stage at ``stage`` whose K offset in the box is outside
    [z_lo, z_hi): ``threads`` threads numbered by ``thread`` (tid: the cooperative consumers; wg_tid: one ping-pong
    warpgroup)."""
    st = op.store
    cells = st.rows * st.cols
    per_cell = 16 // esize
    head = (
        f"for (int cell = {thread}; cell < {cells}; cell += {threads}) {{  // {op.name.upper()}: {st.rows} x {st.cols} cells of 16 B",
        f"  const unsigned row = static_cast<unsigned>(cell) / {st.cols}u, col = static_cast<unsigned>(cell) % {st.cols}u;",
        f"  const unsigned linear = {linear_offset_c_expr(st)};",
        f"  const unsigned dst = {stage} + {swizzle_c_expr(st)};",
    )
    if op.major is Major.MN:  # a cell row is one K row: whole cells
        body = ("  if (static_cast<int>(row) < z_lo || static_cast<int>(row) >= z_hi) st_shared_zero16(dst);",)
    else:  # a cell holds per_cell consecutive K offsets: whole cells outside, element by element where the window cuts one
        body = (
            f"  const int kc = static_cast<int>(col) * {per_cell};",
            f"  if (kc + {per_cell} <= z_lo || kc >= z_hi) {{",
            "    st_shared_zero16(dst);",
            f"  }} else if (kc < z_lo || kc + {per_cell} > z_hi) {{",
            f"    for (int e = 0; e < {per_cell}; ++e)",
            f"      if (kc + e < z_lo || kc + e >= z_hi) st_shared_zero{esize}(dst + static_cast<unsigned>(e) * {esize}u);",
            "  }",
        )
    return head + body + ("}",)


def tail_c(plan: KGroupedPlan, a: OperandLayout, b: OperandLayout, a_stage_bytes: int, b_stage_bytes: int,
           consumer_threads: int, esize: int, pingpong: bool = False) -> tuple[str, ...]:
    """The K tail's zeroing: by every consumer thread (cooperative), or by the warpgroup whose tile it is (ping-pong)."""
    warpgroups = consumer_threads // 128
    threads = 128 if pingpong else consumer_threads
    thread = "wg_tid" if pingpong else "tid"
    bar, bar_threads = kgrouped_tail_barrier(pingpong, warpgroups)
    zero_a = _zero_loop_c(a, "a_zero", threads, esize, thread)
    zero_b = _zero_loop_c(b, "b_zero", threads, esize, thread)
    bk = plan.bk
    cond = f"kt == num_k_tiles - 1 && k_valid_last < {bk}" if plan.k_align == 1 else \
        f"(kt == num_k_tiles - 1 && k_valid_last < {bk}) || (kt == 0 && k_head > 0)"
    return (
        f"if ({cond}) {{",
        "  // The box holds another group's K rows (TMA clips at K_total only): zero them before the MMA.",
        "  const int z_lo = kt == 0 ? k_head : 0;  // the group's offsets in this box: [z_lo, z_hi)",
        f"  const int z_hi = kt == num_k_tiles - 1 ? k_valid_last : {bk};",
        f"  const unsigned a_zero = smem_a + static_cast<unsigned>(s) * {a_stage_bytes}u;",
        f"  const unsigned b_zero = smem_b + static_cast<unsigned>(s) * {b_stage_bytes}u;",
        *("  " + line for line in zero_a),
        *("  " + line for line in zero_b),
        "  fence_proxy_async();  // the generic-proxy zeros, visible to wgmma (async proxy)",
        f"  named_barrier_sync({bar}, {bar_threads});  // every zeroing thread's zeros are written",
        "}",
    )


HELPERS = """// Zero stores into shared memory (the K-grouped kernel's K tail, ptxgen.derive.roles.kgrouped).
__device__ __forceinline__ void st_shared_zero16(unsigned addr) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0) : "memory");
}
__device__ __forceinline__ void st_shared_zero2(unsigned addr) {
  asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(static_cast<unsigned short>(0)) : "memory");
}"""
# FP8 operands (offs_k_rowwise): a 16-byte cell holds 16 K offsets, cut one byte at a time (0x00 is +0 in e4m3 and e5m2)
HELPER_BYTE = """
__device__ __forceinline__ void st_shared_zero1(unsigned addr) {
  asm volatile("st.shared.b8 [%0], %1;" ::"r"(addr), "h"(static_cast<unsigned short>(0)) : "memory");
}"""


def kgrouped_view(plan: KGroupedPlan, a: OperandLayout, b: OperandLayout, a_stage_bytes: int, b_stage_bytes: int,
                  consumer_threads: int, esize: int, pingpong: bool = False) -> KGroupedView:
    return KGroupedView(
        pingpong=pingpong,
        helpers=HELPERS + (HELPER_BYTE if esize == 1 else ""),
        tail=tail_c(plan, a, b, a_stage_bytes, b_stage_bytes, consumer_threads, esize, pingpong),
        doc=_doc(plan),
        unaligned_value=QUIET_NAN_C if plan.k_block else "",
    )


QUIET_NAN_C = "__int_as_float(0x7fc00000)"  # an f32 quiet NaN


def _doc(plan: KGroupedPlan) -> str:
    walk = (f": items G x tiles_m x tiles_n; each reads its group's K range from offs and takes ceil((k_end - k_base) / "
            f"{plan.bk}) K-tiles")
    if plan.k_block:
        return (f"K-grouped GEMM with 1 x {plan.k_block} scales on both operands (DeepGEMM's k-grouped 1D1D){walk}, each one "
                f"scale block; a group off the {plan.k_block}-blocks takes none and stores NaN")
    return (("K-grouped GEMM with row-wise scales (torch._scaled_grouped_mm 2-D x 2-D)" if plan.rowwise else
             "K-grouped GEMM (torch._grouped_mm 2-D x 2-D)") + walk + "; other groups' K rows in a box are zeroed in shared memory")
