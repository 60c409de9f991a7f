"""C expressions rendered from the derived plans, shared by several template pieces (and the layout probe).

Each function turns a derived number or map into C text; the arithmetic behind them lives in ptxgen.derive.
"""

from __future__ import annotations

from ..derive.operands.smem_layout import SmemLayout
from ..isa.fragment import LANES_PER_ROW, WARP_LANES, WGMMA_GROUP_COLS, WGMMA_GROUP_REGS, WGMMA_ROW_HALF, WGMMA_WARP_ROWS
from ..isa.types import DType


def linear_offset_c_expr(store: SmemLayout, row: str = "row", col: str = "col") -> str:
    """The store map's linear (pre-swizzle) byte offset as an unsigned C expression."""
    parts = []
    for t in store.terms:
        v = row if t.coord == "row" else col
        e = f"({v} >> {t.shift})" if t.shift else v
        if t.bits is not None:
            e = f"({e} & {(1 << t.bits) - 1}u)"
        parts.append(f"{e} * {t.stride_bytes}u")
    return " + ".join(parts)


def swizzle_c_expr(store: SmemLayout, linear: str = "linear") -> str:
    """The swizzle applied to a linear offset: bits [M+S, M+S+B) XORed into [M, M+B) (CuTe Swizzle<B,M,S>)."""
    b, m, s = store.swizzle.bms
    if b == 0:
        return linear
    mask = ((1 << b) - 1) << (m + s)
    return f"({linear} ^ (({linear} & {mask:#x}u) >> {s}))"


OUT_CTYPE = {DType.F32: "unsigned", DType.S32: "unsigned", DType.F16: "unsigned short", DType.BF16: "unsigned short",
             DType.E4M3: "unsigned char"}


def convert_c_expr(acc: DType, out: DType) -> str:
    """acc_to_out body: accumulator word -> output bits."""
    if acc is DType.F16:
        half = "static_cast<unsigned short>(acc_word & 0xFFFFu)"
        return {
            DType.F16: half,
            DType.F32: f"__float_as_uint(f16_bits_to_f32({half}))",
            DType.BF16: f"f32_to_bf16_bits(f16_bits_to_f32({half}))",
        }[out]
    if acc is DType.S32:
        return "acc_word"
    return {
        DType.F32: "acc_word",
        DType.F16: "f32_to_f16_bits(__uint_as_float(acc_word))",
        DType.BF16: "f32_to_bf16_bits(__uint_as_float(acc_word))",
        DType.E4M3: "f32_to_e4m3_bits(__uint_as_float(acc_word))",  # the fused chain's FP8 output (already scaled)
    }[out]


def reg_list(n: int, first: int = 0) -> str:
    return "{" + ", ".join(f"%{i}" for i in range(first, first + n)) + "}"


def wgmma_thread_row(t: str, lane: str) -> str:
    """The first of thread ``t``'s two rows in a wgmma m64nN D fragment (the other is 8 rows down)."""
    return f"({t} / {WARP_LANES}) * {WGMMA_WARP_ROWS} + {lane} / {LANES_PER_ROW}"


def wgmma_fragment_row(i: str, t: str, lane: str) -> str:
    """Row of element ``i`` of thread ``t`` in a wgmma m64nN D fragment (PTX 'wgmma .m64nNk* D fragments'):
    warp t/32 owns rows 16w..16w+15; lane/4 picks the row, and elements 2, 3 of each group of 4 are 8 rows down."""
    return f"{wgmma_thread_row(t, lane)} + {WGMMA_ROW_HALF} * (({i} >> 1) & 1)"


def wgmma_fragment_col(i: str, lane: str) -> str:
    """Column of element ``i``: groups of 4 elements cover 8 columns; lane % 4 picks a pair, i % 2 its half."""
    group_shift = WGMMA_GROUP_REGS.bit_length() - 1  # i >> 2: the element's register group (4 registers, a power of 2)
    return f"{WGMMA_GROUP_COLS} * ({i} >> {group_shift}) + 2 * ({lane} % {LANES_PER_ROW}) + ({i} & 1)"


def wgmma_operand_lists(acc_regs: int, constraint: str) -> tuple[str, str]:
    return reg_list(acc_regs), ", ".join(f'"{constraint}"(d[{i}])' for i in range(acc_regs))
