"""Block FP8 with 1 x 128 scales on both operands (``--fp8-blocks 1x128x1x128``; DeepGEMM's sm90 "1D1D", DeepSeek-V3's
weight-gradient recipe; torch._scaled_mm with BlockWise1x128 for A and for B):

    D[m, n] = C[m, n] + sum over K blocks kb of  sfa[m, kb] x sfb[kb, n] x (A[m, kb-block] . B[n, kb-block])

(C optional, the fused chain's ``--fuse c`` with beta = 1 into an f32 D). scale_b is MN-major: (kb, n) at kb x lds_b + n
(torch's ``y_scales.t()`` of an outer-dim-major N x ceil(K/128) array; DeepGEMM TMA-loads the same layout per stage).

The kernel is the 1D2D kernel's (derive.scaled.blockfp8) with one change in what the promotion multiplies: each register of a
thread's partial holds one column of the tile (derive.store.fusion_loads.wgmma_column_pairs: columns 8g + 2(lane % 4) and + 1 in
register group g), so a thread needs BN / 4 B scales per K block instead of one or two. The producer's scale warp
stages a K block's BN column scales beside its BM row scales in the stage's slots (lane l: columns l + 32 j,
coalesced, zero past N); each consumer thread reads its BN / 4 columns' scales with ld.shared after issuing the K
block's MMAs, before the stage is released, as DeepGEMM's 1D1D kernel reads them (a pair of adjacent columns per
register group, one 8-byte load).

>>> p = plan_columns(128, 128, 128, scale_load="smem")
>>> [(l.operand, l.index, l.targets) for l in p.promotion_loads(warp=0, lane=5, kb=2, m0=0, n0=256)][:4]
[('sfa', (1, 2), (0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29, 32, 33, 36, 37, 40, 41, 44, 45, 48, 49, 52, 53, 56, 57, 60, 61)), ('sfa', (9, 2), (2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31, 34, 35, 38, 39, 42, 43, 46, 47, 50, 51, 54, 55, 58, 59, 62, 63)), ('sfb', (2, 258), (0, 2)), ('sfb', (2, 259), (1, 3))]
"""

from __future__ import annotations

import dataclasses

from ...isa.shapes import REGISTER_RESERVE, setmaxnreg_consumer_registers
from ...isa.types import SpecError
from ..tile.derived import Derived
from .blockfp8 import (BLOCK_K, BLOCKS_1D2D, COLUMNS_1D1D, FLAG, GROUP_COLS, MAX_BN_1D1D, SCALE_WARP, SCALE_WARP_LANES,
                       SF_BYTES, BlockFp8Plan, ScalePhase, plan_block_fp8)

SCALE_LOADS = ("smem", "cpasync")  # how the 1D1D kernel's scales reach the consumers (the producer's scale warp)


def plan_columns(bm: int, bn: int, bk: int, dtype: str = "e4m3", a_major: str = "k", b_major: str = "k",
                 arch: str = "sm_90a", stagger: str = "none", grouped: bool = False, overlap: str = "none",
                 scale_load: str = "smem") -> BlockFp8Plan:
    """The 1D1D plan, or SpecError naming the rule it breaks (the 1D2D plan's rules on A, the dtype, arch and BK)."""
    if bn % GROUP_COLS or not GROUP_COLS <= bn <= MAX_BN_1D1D:
        raise SpecError("--bn", bn, f"a wgmma N: a multiple of {GROUP_COLS} up to {MAX_BN_1D1D} (every column has its own "
                        "B scale, so a tile may span any 128-column blocks)", "8..256 in steps of 8")
    if grouped or stagger != "none" or overlap != "none" or scale_load not in SCALE_LOADS:
        what = ("--grouped", "offs") if grouped else ("--fp8-stagger", stagger) if stagger != "none" else (
            ("--fp8-overlap", overlap) if overlap != "none" else ("--fp8-scale-load", scale_load))
        raise SpecError(*what, f"{FLAG} {COLUMNS_1D1D} is built for the dense cooperative kernel with its scales staged by "
                        "the producer's scale warp (--fp8-scale-load auto, smem or cpasync), no --fp8-stagger or --fp8-overlap",
                        "--fp8-scale-load smem --fp8-stagger none --fp8-overlap none, or --fp8-blocks 1x128x128")
    base = plan_block_fp8(bm, 128, bk, dtype, a_major, b_major, arch, scale_load=scale_load)
    kept = tuple(d for d in base.derivation if d.name in ("promotion", "sfa_loads", "warpgroup_order", "promotion_overlap"))
    plan = dataclasses.replace(base, bn=bn, phases=(ScalePhase(0, bn // GROUP_COLS),), b_scale="column", derivation=(),
                               column_scales_at=column_scales_at(bm, bn))
    return dataclasses.replace(plan, derivation=kept + column_derivation(plan))


def column_scales_at(bm: int, bn: int) -> str:
    """issue where a consumer thread (one 64-row slab: BM / 64 cooperative warpgroups) holds the accumulator, the partial
    and its BN / 4 column-scale pairs with REGISTER_RESERVE to spare, else promote (each pair read inside the promotion)."""
    held = bn // 2 + bn // 2 + bn // 2
    return "issue" if held + REGISTER_RESERVE <= setmaxnreg_consumer_registers(max(1, bm // 64)) else "promote"


def plan_recipe(recipe: str, bm: int, bn: int, bk: int, dtype: str = "e4m3", a_major: str = "k", b_major: str = "k",
                arch: str = "sm_90a", stagger: str = "none", grouped: bool = False, overlap: str = "none",
                scale_load: str = "block") -> BlockFp8Plan:
    """The plan of either --fp8-blocks recipe (1x128x128: derive.scaled.blockfp8.plan_block_fp8; 1x128x1x128: plan_columns)."""
    make = plan_columns if recipe == COLUMNS_1D1D else plan_block_fp8
    assert recipe in (BLOCKS_1D2D, COLUMNS_1D1D), recipe
    return make(bm, bn, bk, dtype, a_major, b_major, arch, stagger=stagger, grouped=grouped, overlap=overlap,
                scale_load=scale_load)


def column_derivation(plan: BlockFp8Plan) -> tuple[Derived, ...]:
    bn, bm = plan.bn, plan.bm
    return (
        Derived("recipe", COLUMNS_1D1D, "A: one f32 scale per row per 128 of K; B: one per row of B (column of D) per 128 "
                "of K; D = C + sum_kb sfa[m, kb] x sfb[kb, n] x (A . B over block kb)",
                "DeepSeek-V3's weight-gradient GEMM quantizes both operands along K in 1 x 128 groups; C (optional, "
                "--fuse c, f32) is added in the epilogue, so D += A.B when out is c",
                "DeepGEMM sm90_fp8_gemm_1d1d; torch._scaled_mm BlockWise1x128 x BlockWise1x128"),
        Derived("partial_registers", bn // 2, f"BN / 2 = {bn} / 2 f32 per thread beside the accumulator's {bn // 2}",
                "the K block's partial sum lives in its own fragment until it is promoted", "PTX ISA 'wgmma .m64nNk32 D fragments'"),
        Derived("sfb_loads", f"{bn // 4} per thread per K block, read at the {plan.column_scales_at}",
                f"register group g (g = 0..{bn // GROUP_COLS - 1}) holds columns 8g + 2 (lane % 4) and + 1 (registers 4g, "
                "4g + 2 and 4g + 1, 4g + 3): one 8-byte ld.shared of the pair's scales from the stage's sfb slot at "
                f"(8g + 2 (lane % 4)) x {SF_BYTES} B; " + (
                    "all of them after issuing the K block's MMAs, held through them" if plan.column_scales_at == "issue" else
                    "group g's inside the promotion, just before its four FFMA; the stage is released after the promotion"),
                f"every column has its own B scale: a thread needs the scales of its {bn // 4} columns; held through the "
                f"MMAs they take {bn // 2} f32 registers beside the accumulator and the partial ({3 * (bn // 2)} + "
                f"{REGISTER_RESERVE} of the {setmaxnreg_consumer_registers(max(1, bm // 64))} a consumer thread has: "
                + ("fits)" if plan.column_scales_at == "issue" else "does not fit, so each pair is read when its group is "
                   "promoted)"),
                "derive.store.fusion_loads.wgmma_column_pairs (the wgmma D fragment); DeepGEMM sm90 1D1D (scales_b as float2 per group)"),
        Derived("scale_slots", f"sfa {plan.sfa_stage_bytes} B + sfb {plan.sfb_stage_bytes} B per stage",
                f"warp {SCALE_WARP} of the producer warpgroup, per stage: lane l stores tile rows l + {SCALE_WARP_LANES} j "
                f"({bm // SCALE_WARP_LANES} A scales, zero past M) and columns l + {SCALE_WARP_LANES} j ({plan.scale_cols_per_lane} "
                f"B scales, zero past N) of K block kb, read from sfa[kb x lds_a + m] and sfb[kb x lds_b + n]; every lane "
                "arrives on full[s]",
                "both scale arrays are MN-major, so a K block's rows (and columns) are contiguous: coalesced loads",
                "torch._scaled_mm BlockWise1x128 (outer-dim-major scale_a; scale_b (ceil(K/128), N) row-major)"),
        Derived("promotion_1d1d", "acc[4g + i] += partial[4g + i] x sfa[row] x sfb[col]",
                f"per K block (BK = {BLOCK_K}): after wait_group 0, registers 4g, 4g+1 (row r, columns c, c + 1) and 4g + 2, "
                "4g + 3 (row r + 8, the same columns)", "the recipe's scale of each output element, applied to the "
                "K block's partial in f32 (a tile's columns may span any 128-blocks: no phases)",
                "DeepGEMM sm90_fp8_gemm_1d1d promotion"),
    )
