"""Block-scaled tcgen05 kinds: which element and scale types go together, K per MMA, the scale vector, the
instruction-descriptor bit tables, and the tcgen05.cp shape that puts scale factors into tensor memory.

PTX ISA 'Block Scaling for tcgen05.mma' (#tcgen05-block-scaling): D = (A * scale_A) * (B * scale_B) + D, where
each row of A is cut into chunks of V elements along K and every chunk is multiplied by one scale factor of
that row (likewise each column of B). Tables 54-55 (#tcgen05-mma-scale-valid-comb-detail):

=============  ===========================  ========  =====================  ================
.kind          elements                     scale     .scale_vectorsize      V (elements/SF)
=============  ===========================  ========  =====================  ================
mxf8f6f4       e4m3 e5m2 e2m3 e3m2 e2m1     ue8m0     .scale_vec::1X         32 (K=32: 1 SF)
mxf4           e2m1                         ue8m0     .scale_vec::2X         32 (K=64: 2 SFs)
mxf4nvf4       e2m1                         ue8m0     .scale_vec::2X         32
mxf4nvf4       e2m1                         ue4m3     .scale_vec::4X         16 (K=64: 4 SFs)
=============  ===========================  ========  =====================  ================

>>> kind_of(DType.E4M3, DType.UE8M0).opcode
'tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X'
>>> k = kind_of(DType.E2M1, DType.UE4M3); (k.kind, k.vec_elements, k.k_per_mma, k.sfs_per_mma)
('mxf4nvf4', 16, 64, 4)
"""

from __future__ import annotations

from dataclasses import dataclass

from .bits import BitField, BitTable
from .ptxref import cite
from .types import DType


@dataclass(frozen=True)
class ScaledKind:
    """One legal (kind, element types, scale type, vector size) row of PTX Table 55."""

    kind: str
    elements: tuple[DType, ...]
    scale: DType
    vec_elements: int  # V: elements of a row along K that share one scale factor
    scale_vec: str  # the .scale_vectorsize qualifier
    k_per_mma: int  # dense K of one MMA: 256 bits of a row (32 for 8-bit containers, 64 for packed e2m1)

    @property
    def sfs_per_mma(self) -> int:
        """Scale factors per row one MMA reads (its scale_A is M x this, scale_B this x N)."""
        return self.k_per_mma // self.vec_elements

    @property
    def opcode(self) -> str:
        return self.opcode_for(1)

    def opcode_for(self, cta_group: int) -> str:
        """The MMA of one CTA (1) or of a CTA pair (2: tcgen05.mma.cta_group::2, issued by one thread of the pair)."""
        return f"tcgen05.mma.cta_group::{cta_group}.kind::{self.kind}.block_scale.{self.scale_vec}"

    @property
    def sf_id_step(self) -> int:
        """SF IDs are byte offsets in a 32-bit TMEM word: 1X takes any byte (0..3), 2X a half word (0, 2), 4X only 0."""
        return self.sfs_per_mma


SCALED_KINDS = (
    ScaledKind("mxf8f6f4", (DType.E4M3, DType.E5M2, DType.E2M3, DType.E3M2, DType.E2M1), DType.UE8M0, 32, "scale_vec::1X", 32),
    ScaledKind("mxf4", (DType.E2M1,), DType.UE8M0, 32, "scale_vec::2X", 64),
    ScaledKind("mxf4nvf4", (DType.E2M1,), DType.UE8M0, 32, "scale_vec::2X", 64),
    ScaledKind("mxf4nvf4", (DType.E2M1,), DType.UE4M3, 16, "scale_vec::4X", 64),
)
SCALED_KIND_NAMES = ("mxf8f6f4", "mxf4", "mxf4nvf4")

# What ptxgen builds, keyed by (A's type, scale type). e2m1 x e2m1 is packed two a byte and goes to kind::mxf4
# (ue8m0) or kind::mxf4nvf4 (ue4m3), the kinds that read packed e2m1 (half the shared memory of mxf8f6f4's form).
# kind::mxf8f6f4 takes e4m3, e5m2, e2m3, e3m2 and e2m1 for A and for B independently (PTX 'Block Scaling' Tables
# 54-55; a_format/b_format are separate idesc fields): e2m1 reaches it only mixed with another type (kind_for).
GENERATED = {
    (DType.E4M3, DType.UE8M0): SCALED_KINDS[0],
    (DType.E5M2, DType.UE8M0): SCALED_KINDS[0],
    (DType.E2M3, DType.UE8M0): SCALED_KINDS[0],
    (DType.E3M2, DType.UE8M0): SCALED_KINDS[0],
    (DType.E2M1, DType.UE8M0): SCALED_KINDS[1],
    (DType.E2M1, DType.UE4M3): SCALED_KINDS[3],
}
SCALED_ELEMENT_DTYPES = (DType.E4M3, DType.E5M2, DType.E2M3, DType.E3M2, DType.E2M1)
MXF8F6F4_ELEMENTS = SCALED_KINDS[0].elements


def kind_of(dtype: DType, scale: DType) -> ScaledKind:
    """The block-scaled kind ptxgen uses when A and B are both ``dtype`` elements with ``scale`` factors (KeyError
    if none)."""
    return GENERATED[(dtype, scale)]


def kind_for(a: DType, b: DType, scale: DType) -> ScaledKind:
    """The kind for A of type ``a`` and B of type ``b``: kind_of(a) when they match; a mixed pair needs
    kind::mxf8f6f4 (ue8m0), the one kind whose A and B types are independent (KeyError if none)."""
    if a is b:
        return kind_of(a, scale)
    if scale is DType.UE8M0 and a in MXF8F6F4_ELEMENTS and b in MXF8F6F4_ELEMENTS:
        return SCALED_KINDS[0]
    raise KeyError((a, b, scale))


# ---------------------------------------------------------------------------------------------
# The 6- and 4-bit types inside kind::mxf8f6f4 are "unpacked" in shared memory: PTX 'Packing format used for matrix
# A and B by .kind::mxf8f6f4 in Shared Memory' (#tcgen05-packing-formats-mxf8f6f4-smem): "The 4-bit and 6-bit
# floating point elements in shared memory must be contiguously packed along with padding": each 16 consecutive
# elements along K are packed into the first 8 B (4-bit) or 12 B (6-bit) of a 16-byte cell, and the rest of the
# cell is padding. So a stage takes one byte per element, like 8-bit, and the MMA's K = 32 is 32 B of a row. TMA
# makes the form from packed global memory (CUDA Driver API cuTensorMapEncodeTiled): CU_TENSOR_MAP_DATA_TYPE_
# 16U4_ALIGN16B "copies '16 x U4' packed values to memory aligned as 16 bytes. There are 8 byte gaps between every 8
# byte chunk"; 16U6_ALIGN16B: "4 byte gaps between every 12 byte chunk". CUTLASS maps float_e2m1/e2m3/e3m2 to
# *_unpacksmem_t for f8f6f4 kinds (sm1xx_common.inl sm1xx_kernel_input_element_to_mma_input_element), allocates
# their stages as uint8_t, and picks those tensor-map types (include/cute/arch/copy_sm90_desc.hpp).
# ---------------------------------------------------------------------------------------------
UNPACKED_GROUP = 16  # elements of one 16-byte cell
UNPACKED_TYPES = (DType.E2M3, DType.E3M2, DType.E2M1)


def unpacked_in_smem(kind: str, dtype: DType) -> bool:
    """A 6- or 4-bit ``dtype`` under ``kind`` sits in shared memory 16 elements to a padded 16-byte cell."""
    return kind == "mxf8f6f4" and dtype in UNPACKED_TYPES


def smem_container_bits(kind: str, dtype: DType) -> int:
    """Bits of shared memory one element takes: 8 for every kind::mxf8f6f4 type (the padded cells hold 16 elements in
    16 B), else the type's own container (4 for mxf4/mxf4nvf4's packed e2m1)."""
    return 8 if kind == "mxf8f6f4" else dtype.container_bits


def legal_scales(dtype: DType) -> tuple[DType, ...]:
    return tuple(s for (d, s) in GENERATED if d is dtype)


# ---------------------------------------------------------------------------------------------
# Instruction descriptors of the block-scaled kinds (PTX Tables 43-44; CUTLASS union InstrDescriptorBlockScaled,
# include/cute/arch/mma_sm100_desc.hpp). M is M >> 7 at bits 27-28 in PTX; CUTLASS writes M >> 4 at 24-28, the same
# bits for M = 128 and 256.
# ---------------------------------------------------------------------------------------------
def _bs_fields(b_width: int, bit31: BitField) -> tuple[BitField, ...]:
    b = (BitField("b_format", 10, b_width, doc="B type"),)
    if b_width == 2:
        b += (BitField("reserved_12", 12, 1, fixed=0),)
    return (
        BitField("sparse_id2", 0, 2, doc="sparsity selector (sparse only)"),
        BitField("sparse", 2, 1, doc="0 dense, 1 sparse"),
        BitField("reserved_3", 3, 1, fixed=0),
        BitField("b_sf_id", 4, 2, doc="scale factor B ID: byte of the TMEM word that holds B's scale factors"),
        BitField("reserved_6", 6, 1, fixed=0),
        BitField("a_format", 7, 3, doc="A type"),
        *b,
        BitField("negate_a", 13, 1),
        BitField("negate_b", 14, 1),
        BitField("a_major", 15, 1, doc="transpose A: 0 K-major, 1 M-major"),
        BitField("b_major", 16, 1, doc="transpose B: 0 K-major, 1 N-major"),
        BitField("n", 17, 6, unit_bytes=8, units="N >> 3", doc="N >> 3"),
        BitField("scale_type", 23, 1, doc="scale factor type: 0 UE4M3, 1 UE8M0"),
        BitField("reserved_24", 24, 3, fixed=0),
        BitField("m", 27, 2, unit_bytes=128, units="M >> 7", doc="M >> 7"),
        BitField("a_sf_id", 29, 2, doc="scale factor A ID: byte of the TMEM word that holds A's scale factors"),
        bit31,
    )


IDESC_BS_TABLES = {
    "mxf8f6f4": BitTable(
        "tcgen05 instruction descriptor (kind::mxf8f6f4)", 32, _bs_fields(3, BitField("reserved_31", 31, 1, fixed=0))
    ),
    "mxf4": BitTable(
        "tcgen05 instruction descriptor (kind::mxf4/mxf4nvf4)",
        32,
        _bs_fields(2, BitField("k_size", 31, 1, doc="K: 0 dense K=64 (sparse 128), 1 dense K=96 (sm_103a)")),
    ),
}
IDESC_BS_TABLES["mxf4nvf4"] = IDESC_BS_TABLES["mxf4"]
BS_AB_FORMAT = {
    "mxf8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "mxf4": {"e2m1": 1},
    "mxf4nvf4": {"e2m1": 1},
}
SCALE_TYPE_CODE = {"ue4m3": 0, "ue8m0": 1}


def idesc_ref(kind: str) -> str:
    return cite("idesc_mxf8f6f4") if kind == "mxf8f6f4" else cite("idesc_mxf4")


# ---------------------------------------------------------------------------------------------
# tcgen05.cp: shared memory -> tensor memory (PTX #tcgen05-instructions-tcgen05-cp). Scale factors use
# .32x128b.warpx4: 32 rows of 128 bits read from shared memory (an unswizzled matrix: 8-row core matrices of
# 16 B rows, 128 B apart = SBO), written to 32 lanes x 4 columns and multicast to all four 32-lane
# partitions ("scale factors ... need to be duplicated to all 32 lane partitions", #tcgen05-block-scaling).
# CUTLASS: SM100_UTCCP_4x32dp128bit_1cta (include/cute/arch/copy_sm100.hpp); DeepGEMM copies each 128-row
# block of scale factors with it to 4 TMEM columns.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TmemCopyShape:
    qualifier: str
    rows: int  # lanes written per partition
    row_bits: int
    partitions: int  # 32-lane partitions written (multicast)

    @property
    def smem_bytes(self) -> int:
        return self.rows * self.row_bits // 8

    @property
    def columns(self) -> int:
        return self.row_bits // 32

    @property
    def opcode(self) -> str:
        return self.opcode_for(1)

    def opcode_for(self, cta_group: int) -> str:
        """cta_group::2 (CUTLASS SM100_UTCCP_4x32dp128bit_2cta): one thread of the pair copies, in EACH CTA, the
        shared-memory bytes at the address to that CTA's Tensor Memory at the TMEM address."""
        return f"tcgen05.cp.cta_group::{cta_group}.{self.qualifier}"


CP_32X128B_WARPX4 = TmemCopyShape("32x128b.warpx4", 32, 128, 4)
