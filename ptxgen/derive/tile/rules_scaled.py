"""The legality rules of block-scaled tile specs (tcgen05 kinds mxf8f6f4, mxf4, mxf4nvf4; ``--scale``): the element and
scale-factor types, M, N and BK, the transposes, the padded 6-/4-bit operands of kind::mxf8f6f4, and what ptxgen
generates of them. :func:`ptxgen.derive.tile.rules.validate` calls :func:`validate_block_scaled` for a spec with scale
factors; like it, this module takes the spec as an argument and does not import :mod:`ptxgen.derive.tile.spec`.
"""

from __future__ import annotations

from ...isa.ptxref import cite
from ...isa.types import Arch, DType, Loader, Major, SpecError, Swizzle, legal_values

# CUTLASS's block-scaled collective takes CTA N of 64, 128, 192 or 256 (static_assert in
# sm100_blockscaled_mma_warpspecialized.hpp); for N=64 it moves the SFB TMEM address by (tile_n % 2) * 2 columns,
# as ptxgen does. ptxgen leaves out 192 (a tile spanning two atoms from mid-atom) and anything narrower than 64.
BLOCK_SCALED_BN = (64, 128, 192, 256)


def validate_block_scaled(t: "TileSpec") -> None:
    """The block-scaled rules (PTX 'Block Scaling for tcgen05.mma' and shapes) and what ptxgen generates of them."""
    from ...isa.blockscale import GENERATED, MXF8F6F4_ELEMENTS, SCALED_ELEMENT_DTYPES, kind_for, legal_scales

    scale = t.scale.dtype
    if t.arch is not Arch.SM100A:
        raise SpecError("--scale", t.scale.value, "block-scaled MMAs are tcgen05 kinds (mxf8f6f4, mxf4, mxf4nvf4): sm_100a only",
                        "--arch sm_100a, or --scale none", cite("block_scaling"))
    if (t.dtype, scale) not in GENERATED:
        if t.dtype in SCALED_ELEMENT_DTYPES:
            rule = f"{t.dtype.value} takes {'/'.join(d.value for d in legal_scales(t.dtype))} scale factors"
        else:
            rule = f"{t.dtype.value} is not a block-scaled element type"
        legal = ", ".join(f"--dtype {d.value} --scale {s_.value} (kind::{k.kind})" for (d, s_), k in GENERATED.items())
        raise SpecError("--dtype", t.dtype.value, rule, legal, cite("scale_vec"))
    try:
        k = kind_for(t.dtype, t.b_dtype, scale)
    except KeyError:
        # A and B may differ only under kind::mxf8f6f4 (ue8m0), whose a_format/b_format are independent
        legal_b = (t.dtype,) + (tuple(d for d in MXF8F6F4_ELEMENTS if d is not t.dtype) if scale is DType.UE8M0 else ())
        raise SpecError("--b-dtype", t.b_dtype.value,
                        f"with A {t.dtype.value} and {scale.value} scales, B must be {' or '.join(d.value for d in legal_b)}: "
                        "types may differ only in kind::mxf8f6f4 (ue8m0 scales; e4m3, e5m2, e2m3, e3m2, e2m1 for A and B "
                        "independently), and kind::mxf4nvf4 with ue4m3 takes e2m1 only",
                        legal_values(d.value for d in legal_b), cite("scale_vec")) from None
    if t.acc is not DType.F32:
        raise SpecError("--acc", t.acc.value, f"kind::{k.kind} accumulates in f32 only", "f32", cite("shapes"))
    if t.pair and t.bm != 256:
        # PTX allows cta_group::2 M = 128 with block scaling, but its scale factors then take the 2x2 data path: SFB is
        # duplicated over lane halves (CUTLASS SM100_MMA_*_2x1SM_SS: TmemAlloc = ScaleFactorDuplicated2by2 for M = 128,
        # tmem_sf_frg's '2x2 Datapath' atom); ptxgen derives the 4x1 path of M = 256 only. CUTLASS builds block-scaled
        # pairs at M = 256 only: its builder and its kind::mxf8f6f4 pair atom static_assert M == 256
        # (tools/cute_pair/blockscaled_2sm_m128.cu), so no CUTLASS kernel places a pair's M = 128 scale factors.
        raise SpecError("--bm", t.bm,
                        f"tcgen05.mma.cta_group::2.kind::{k.kind} at M = 128 reads its scale factors through the 2x2 data path "
                        "(scale factors of B duplicated over the two 64-lane halves), which ptxgen does not derive; M = 256 "
                        "uses the 4x1 path (each CTA: its 128 rows of SFA and all BN rows of SFB, as one CTA at M = 128); "
                        "CUTLASS too builds block-scaled pairs at M = 256 only",
                        "256 with --cta-group 2", CUTLASS_SF_PAIR_REF)
    if not t.pair and t.bm != 128:
        raise SpecError("--bm", t.bm, f"tcgen05.mma.cta_group::1.kind::{k.kind} has M = 128", "128", cite("shapes"))
    if t.bn not in BLOCK_SCALED_BN:
        raise SpecError("--bn", t.bn,
                        "a tile's N rows must start on a half of a 128-row scale-factor atom (each TMEM column of SFB "
                        "holds 32 rows; a BN=64 or 192 tile starts 0 or 2 columns into its atom, as in CUTLASS's block-scaled "
                        "collective, which handles N = 192 as 256 for SFB)",
                        legal_values(BLOCK_SCALED_BN), f"{cite('sfb_id')}; {cite('tcgen05_cp')}")
    for name in ("a", "b"):
        op = t.operand(name)
        if op.major is not Major.K and k.kind in ("mxf4", "mxf4nvf4"):  # a PTX rule
            raise SpecError(f"--{name}", op.token,
                            f"kind::{k.kind} cannot transpose A or B (PTX's table of transpose and negate support per "
                            "MMA-Kind: 'Is Transpose A/B supported' is No for .kind::mxf4 and .kind::mxf4nvf4), so its "
                            "packed e2m1 operands are K-major", "kmajor-{none,sw32,sw64,sw128}", cite("transpose"))
        # kind::mxf8f6f4 transposes 8-bit operands (PTX 'Transpose and Negate operations': Yes; 'Valid combinations of
        # type-size, major-ness and swizzling': 8-bit MN-major with every swizzle but 128B with 32-B atomicity, checked
        # by rules_operand.validate_operand); CUTLASS's sm100 block-scaled collective builds
        # MN-major A/B with K-major scale factors, as ptxgen does.
        if t.unpacked(name):
            _validate_unpacked(t, name)
    group = 4 * k.vec_elements
    if t.bk <= 0 or t.bk % group:
        raise SpecError("--bk", t.bk,
                        f"a stage holds whole scale-factor atoms: 4 scale factors of {k.vec_elements} elements = {group} of K "
                        "(one 32-bit TMEM word per row)", f"{group}, {2 * group}, {3 * group}, ...", CUTLASS_SF_REF)
    if t.loader is not Loader.TMA:
        raise SpecError("--loader", t.loader.value,
                        "block-scaled kernels load the scale factors with cp.async.bulk on the TMA full barrier", "tma")


CUTLASS_SF_REF = "CUTLASS Sm1xxBlockScaledConfig (include/cutlass/detail/sm100_blockscaled_layout.hpp)"
CUTLASS_SF_PAIR_REF = ("CUTLASS include/cute/atom/mma_traits_sm100.hpp (SM100_MMA_MXF8F6F4_2x1SM_SS / MXF4 / MXF4NVF4: "
                       "TmemAllocMode::ScaleFactorDuplicated2by2 at M = 128) and mma_traits_sm100_frag.hpp (tmem_sf_frg); "
                       "builders/sm100_common.inl (sm100_make_blockscaled_2sm_trivial_tiled_mma: static_assert M == 256)")
UNPACKED_TMA_REF = ("CUDA Driver API cuTensorMapEncodeTiled (16U4_ALIGN16B/16U6_ALIGN16B: boxDim[0] must be 128; "
                    "swizzle NONE, 128B or 128B_ATOM_32B); CUTLASS include/cute/arch/copy_sm90_desc.hpp "
                    "to_CUtensorMapDataType<float_e2m1/e2m3/e3m2_unpacksmem_t>")


def _validate_unpacked(t: "TileSpec", name: str) -> None:
    """A 6- or 4-bit kind::mxf8f6f4 operand, padded 16 elements to a 16-byte cell (ptxgen.isa.blockscale)."""
    op, dt, flag = t.operand(name), t.operand_dtype(name), f"--{name}"
    if op.major is not Major.K:
        raise SpecError(flag, op.token,
                        f"{dt.value} ({dt.bits}-bit) operands cannot be transposed: PTX lists transposed (MN-major) "
                        "layouts for 8-, 16- and 32-bit types only, 4- and 6-bit ones K-major only; CuTe's "
                        "InstrDescriptorBlockScaled: 'Major value of 1 is only valid for E4M3, E5M2, INT8 (signed and "
                        "unsigned), F16, BF16 and TF32 source formats' (include/cute/arch/mma_sm100_desc.hpp)",
                        "kmajor-sw128", cite("majorness"))
    if op.swizzle is not Swizzle.SW128:
        raise SpecError(flag, op.token,
                        f"{dt.value} reaches shared memory through TMA's unpacking type (CU_TENSOR_MAP_DATA_TYPE_"
                        f"{'16U4' if dt.bits == 4 else '16U6'}_ALIGN16B), whose box is exactly 128 elements (128 B of a "
                        "K-major row) wide and which loads with no swizzle or a 128-byte one: a 128-byte K-major row is "
                        "the 128B atom's; the 32B/64B atoms and the unswizzled core matrices need 32-, 64- or 16-byte boxes",
                        "kmajor-sw128", UNPACKED_TMA_REF)
    # A CTA pair (M = 256) takes them too: each CTA loads its BM/2 rows of A and BN/2 rows of B through the same
    # unpacking map (box 128 elements x its rows) and the same uint8 K-major SW128 layout as one CTA. CUTLASS's 2SM
    # rules for K-major operands (sm1xx_gemm_check_for_f8f6f4_mix8bit_requirement, builders/sm1xx_common.inl:
    # "A_K(t) : TileShape_K % 128 == 0", "B_K(n) : TileShape_K % 128 == 0") hold: BK is a multiple of 4V = 128 here.
    # Its one 2SM rule that the 1SM case lacks, "B_N(t) : TileSize_N % 256 == 0", is for N-major B, refused above.
