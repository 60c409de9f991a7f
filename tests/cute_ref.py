"""CuTe's UMMA descriptor constructors, typed from the CUTLASS source as an independent test reference.

Nothing here imports ptxgen. Transcribed from NVIDIA/cutlass at commit 7107b0553 (2026-11-30):

- ``include/cute/arch/mma_sm100_desc.hpp``: ``union SmemDescriptor`` (start_address_ bits [0,14), leading_byte_offset_
  [16,30), stride_byte_offset_ [32,46), version_ [46,48), base_offset_ [49,52), lbo_mode_ 52, layout_type_ [61,64)),
  ``enum class LayoutType`` (SWIZZLE_NONE 0, 128B_BASE32B 1, 128B 2, 64B 4, 32B 6), ``make_umma_desc<Major>``
  (version 1, base offset 0, lbo_mode 0; MN-major: ``logical_divide(u128 layout, Tile<Layout<SwizzleAtomMNSize>,
  Layout<8>>)``, SBO = stride<1,1> and LBO = stride<0,1>, swapped for SWIZZLE_NONE; K-major: ``logical_divide(u128
  layout, Tile<Layout<_8>, Layout<_2>>)``, SBO = stride<0,1>, LBO = stride<1,0>), ``union InstrDescriptorBlockScaled``
  and ``make_instr_desc_block_scaled`` (a/b_format_ from ``MXF8F6F4Format`` E4M3 0, E5M2 1, E2M3 3, E3M2 4, E2M1 5 or
  ``MXF4Format`` E2M1 1; scale_format_ UE4M3 0, UE8M0 1; m_dim_ = M >> 4 at [24,29); n_dim_ = N >> 3 at [17,23);
  a_major_ 15, b_major_ 16; SF IDs 0).
- The shared-memory layouts are CUTLASS's sm100 block-scaled collective's
  (``include/cutlass/gemm/collective/sm100_blockscaled_mma_warpspecialized.hpp``): ``UMMA::tile_to_mma_shape(atom,
  (MN, BK), is_mn_major ? Step<_2,_1,_3> : Step<_1,_2,_3>)`` with ``Layout_{MN,K}_{INTER,SW32,SW64,SW128}_Atom``
  of ``uint8_t`` (the 4- and 6-bit types are allocated as ``uint8_t``: ``SmemAllocTypeA``): atoms K first for an
  MN-major operand, MN first for a K-major one. ``k_first`` picks the other order too (``tile_to_shape``'s default
  Step<_1,_2> for MN-major), which CuTe accepts as well.
- A mode of extent 1 after ``logical_divide`` contributes stride 0 (CuTe host run, shared/reference/descriptors.md:
  "MN-major SW128 fp16 MN=64 -> lbo_bytes 0").
"""

from __future__ import annotations

LAYOUT_TYPE = {0: 0, 32: 6, 64: 4, 128: 2}  # swizzle bytes (0: INTERLEAVE) -> UMMA::LayoutType
MXF8F6F4_FORMAT = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}
MXF4_FORMAT = {"e2m1": 1}
SCALE_FORMAT = {"ue4m3": 0, "ue8m0": 1}


def smem_desc(start_u128: int, lbo_u128: int, sbo_u128: int, layout_type: int) -> int:
    """union SmemDescriptor with version_ = 1, base_offset_ = 0, lbo_mode_ = 0."""
    return ((start_u128 & 0x3FFF) | (lbo_u128 & 0x3FFF) << 16 | (sbo_u128 & 0x3FFF) << 32 | 1 << 46
            | layout_type << 61)


class CuteSmemLayout:
    """tile_to_shape(Layout_<major>_<swizzle>_Atom<T>, (MN, BK), step) as a byte-offset function (before the swizzle,
    which make_umma_desc reads only through the layout type)."""

    def __init__(self, major: str, swizzle_bytes: int, mn: int, bk: int, elem_bytes: int = 1, k_first: bool | None = None):
        self.major, self.S, self.mn, self.bk, self.eb = major, swizzle_bytes, mn, bk, elem_bytes
        row = swizzle_bytes or 16  # bytes of one atom row along the contiguous dimension (INTER: 16 B)
        self.row = row
        if major == "mn":
            self.atom = (row // elem_bytes, 8)  # (MN elements, K rows)
        else:
            self.atom = (8, row // elem_bytes)  # (MN rows, K elements)
        self.k_first = (major == "mn") if k_first is None else k_first
        self.n_mn, self.n_k = mn // self.atom[0], bk // self.atom[1]
        assert self.n_mn * self.atom[0] == mn and self.n_k * self.atom[1] == bk

    def offset(self, m: int, k: int) -> int:
        i, r_mn = divmod(m, self.atom[0])
        j, r_k = divmod(k, self.atom[1])
        idx = j + i * self.n_k if self.k_first else i + j * self.n_mn
        inner = r_k * self.row + r_mn * self.eb if self.major == "mn" else r_mn * self.row + r_k * self.eb
        return idx * 8 * self.row + inner

    def umma_desc(self, k0: int, k_mma: int) -> int:
        """make_umma_desc<major> of the (MN, k_mma) slice that starts at K element k0."""
        lt = LAYOUT_TYPE[self.S]
        start = self.offset(0, k0)
        if self.major == "mn":
            w_el = self.atom[0]  # SwizzleAtomMNSize uint128s = one atom row along MN
            s01 = (self.offset(w_el, k0) - start) if self.mn > w_el else 0
            s11 = (self.offset(0, k0 + 8) - start) if k_mma > 8 else 0
            sbo, lbo = (s01, s11) if self.S == 0 else (s11, s01)
        else:
            s01 = (self.offset(8, k0) - start) if self.mn > 8 else 0  # the next 8-row group
            t_el = 16 // self.eb  # T elements of one uint128 along K
            s10 = self.offset(0, k0 + t_el) - start  # the second uint128 along K
            sbo, lbo = s01, s10
        return smem_desc(start // 16, lbo // 16, sbo // 16, lt)


def instr_desc_block_scaled(kind: str, a: str, b: str, sf: str, m: int, n: int, a_mn: bool, b_mn: bool) -> int:
    """make_instr_desc_block_scaled<a_type, b_type, float, sf_type, M, N, a_major, b_major> (no negate, dense)."""
    fmt = MXF8F6F4_FORMAT if kind == "mxf8f6f4" else MXF4_FORMAT
    return (fmt[a] << 7 | fmt[b] << 10 | int(a_mn) << 15 | int(b_mn) << 16 | (n >> 3) << 17 | SCALE_FORMAT[sf] << 23
            | (m >> 4) << 24)


# ---- the block-scaled configurations CUTLASS's sm100 builder makes ------------------------------------------------
# include/cutlass/gemm/collective/builders/sm100_blockscaled_umma_builder.inl with the sm100 block-scaled collective
# (sm100_blockscaled_mma_warpspecialized.hpp): MMA tile N in {64, 128, 192, 256} (its static_assert); 1SM atoms with
# M = 128 and 2SM atoms (SM100_MMA_*_2x1SM_SS, a CTA pair) with M = 256; kind::mxf8f6f4 takes e4m3, e5m2, e2m3, e3m2
# and e2m1 for A and B independently with UE8M0 scales (sm1xx_kernel_input_element_to_mma_input_element), e2m1 x e2m1
# also as mxf4 (UE8M0) and nvf4 (UE4M3, V = 16); "Only MMA.MXF8F6F4 supports non-K major inputs", and of those the
# 8-bit types only (InstrDescriptorBlockScaled, mma_sm100_desc.hpp); the 4-/6-bit ones need TileShape_K % 128
# (sm1xx_gemm_check_for_f8f6f4_mix8bit_requirement). The shared-memory atom is the builder's
# sm100_smem_selector: the widest swizzle whose atom row divides the operand's contiguous extent in one CTA (BK bytes
# for K-major, the CTA's M or N rows for MN-major). BK: 128 for mxf8f6f4, 256 for mxf4/nvf4 (4 scale factors a row).
BS_TYPES = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
# The M a 2SM block-scaled atom and the builder take (tools/cute_pair/blockscaled_2sm_m128.cu, compiled 2026-12-06
# against commit 7107b0553): SM100_MMA_MXF8F6F4_2x1SM_SS static_asserts M == 256 (mma_sm100_umma.hpp:1543),
# SM100_MMA_MXF4_2x1SM_SS (mxf4 at VS 32, mxf4nvf4 at VS 16) M == 128 || M == 256; the builder's
# sm100_make_blockscaled_2sm_trivial_tiled_mma static_asserts M == 256 for every kind (sm100_common.inl:888).
CUTE_2SM_BLOCKSCALED_ATOM_M = {"mxf8f6f4": (256,), "mxf4": (128, 256), "mxf4nvf4": (128, 256)}
CUTLASS_2SM_BLOCKSCALED_BUILDER_M = (256,)


def blockscaled_kind(a: str, b: str, scale: str) -> str:
    """The kind CUTLASS's builder picks: e2m1 x e2m1 goes to MXF4 (ue8m0) / MXF4NVF4 (ue4m3), the rest to MXF8F6F4."""
    if a == b == "e2m1":
        return "mxf4" if scale == "ue8m0" else "mxf4nvf4"
    return "mxf8f6f4"


def _smem_selector(extent_bytes: int, major: str) -> str:
    for sw in (128, 64, 32):
        if extent_bytes % sw == 0:
            return f"{major}major-sw{sw}"
    return f"{major}major-none"


def blockscaled_configs() -> list[dict]:
    """Every configuration of the space above, as make_spec keyword arguments (2 stages)."""
    out = []
    for two_sm in (False, True):
        (m,) = CUTLASS_2SM_BLOCKSCALED_BUILDER_M if two_sm else (128,)
        for a in BS_TYPES:
            for b in BS_TYPES:
                scales = ("ue8m0", "ue4m3") if a == b == "e2m1" else ("ue8m0",)
                majors = [("k", "k")] + ([("mn", "k"), ("k", "mn"), ("mn", "mn")] if a in ("e4m3", "e5m2") and b in ("e4m3", "e5m2") else [])
                for scale in scales:
                    for am, bmj in majors:
                        for n in (64, 128, 192, 256):
                            bk = 256 if a == b == "e2m1" else 128
                            rows = (m // 2, n // 2) if two_sm else (m, n)  # one CTA's rows (8-bit: bytes)
                            k_row = 128  # bytes of a K-major row: BK = 128 one byte an element, or 256 e2m1 packed
                            ta = _smem_selector(rows[0], "mn") if am == "mn" else _smem_selector(k_row, "k")
                            tb = _smem_selector(rows[1], "mn") if bmj == "mn" else _smem_selector(k_row, "k")
                            out.append(dict(bm=m, bn=n, bk=bk, a=ta, b=tb, dtype=a, b_dtype=b, scale=scale, stages=2,
                                            cta_group=2 if two_sm else 1))
    return out
