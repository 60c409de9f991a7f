"""The TMA tensor map (``CUtensorMap``, built by ``cuTensorMapEncodeTiled``): its enums and limits.

The 128-byte map itself is opaque (the driver encodes it); what ptxgen derives are the arguments.
Values are those of ``cuda.h`` (CUDA 12.8+ / 13.x); sources: CUDA Driver API 'Tensor Map Object
Management' (cuTensorMapEncodeTiled) and PTX ISA 'Tensor' / 'cp.async.bulk.tensor'.
"""

from __future__ import annotations

from enum import Enum

from .types import DType, Swizzle

DRIVER_REF = "CUDA Driver API cuTensorMapEncodeTiled (#group__CUDA__TENSOR__MEMORY)"
PTX_TMA_REF = "PTX ISA 9.7.9.25.5.2 'cp.async.bulk.tensor' (#data-movement-and-conversion-instructions-cp-async-bulk-tensor)"
PTX_TENSOR_REF = "PTX ISA 5.5 'Tensors' (#tensors), 5.5.7 'Swizzling modes' (#tensor-swizzling-modes)"

TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap); 64-byte aligned
TENSOR_MAP_ALIGN = 64
MAX_RANK = 5
MAX_BOX_ELEMENTS = 256  # every boxDim[i] is 1..256
GLOBAL_ADDRESS_ALIGN = 16  # globalAddress, for interleave NONE
GLOBAL_STRIDE_ALIGN = 16  # globalStrides[i] % 16 == 0
GLOBAL_STRIDE_LIMIT = 1 << 40
GLOBAL_DIM_LIMIT = 1 << 32
BOX_INNER_BYTES_ALIGN = 16  # boxDim[0] * elementSize % 16 == 0
SMEM_DST_ALIGN = 128  # PTX: the shared-memory destination of a tensor copy is 128-byte aligned


class TmaDataType(Enum):
    """CUtensorMapDataType values used here. 8-bit inputs travel as raw bytes; tf32 as 32-bit words."""

    UINT8 = 0
    FLOAT16 = 6
    FLOAT32 = 7
    BFLOAT16 = 9
    U4X16_ALIGN16B = 14  # CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B: 16 packed 4-bit values (8 B) + an 8-byte gap in smem
    U6X16_ALIGN16B = 15  # CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: 16 packed 6-bit values (12 B) + a 4-byte gap in smem

    @property
    def cuda_name(self) -> str:
        """The cuda.h enumerator's suffix (CU_TENSOR_MAP_DATA_TYPE_<this>)."""
        return {14: "16U4_ALIGN16B", 15: "16U6_ALIGN16B"}.get(self.value, self.name)


class TmaSwizzle(Enum):
    """CUtensorMapSwizzle, with the JSON names of `explain --json`."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3
    B128_ATOM_32B = 4  # 128-byte span, 32-byte atoms (CUDA 12.8+, Blackwell)

    @property
    def json_name(self) -> str:
        return {0: "none", 1: "32B", 2: "64B", 3: "128B", 4: "128B_ATOM_32B"}[self.value]

    @property
    def span_bytes(self) -> int:
        """The inner box dimension may span at most this many bytes (16 B granules for NONE: no limit but 16-B multiples)."""
        return {0: 0, 1: 32, 2: 64, 3: 128, 4: 128}[self.value]


TMA_SWIZZLE_OF = {
    Swizzle.NONE: TmaSwizzle.NONE,
    Swizzle.SW32: TmaSwizzle.B32,
    Swizzle.SW64: TmaSwizzle.B64,
    Swizzle.SW128: TmaSwizzle.B128,
    Swizzle.SW128B32: TmaSwizzle.B128_ATOM_32B,
}

TMA_DATA_TYPE_OF = {
    DType.F16: TmaDataType.FLOAT16,
    DType.BF16: TmaDataType.BFLOAT16,
    DType.TF32: TmaDataType.FLOAT32,  # raw 32-bit words: the inputs are tf32-exact, no conversion wanted
    DType.F32: TmaDataType.FLOAT32,  # D of the f32 TMA store (derive.store.epilogue)
    DType.E4M3: TmaDataType.UINT8,
    DType.E5M2: TmaDataType.UINT8,
    DType.S8: TmaDataType.UINT8,
    DType.U8: TmaDataType.UINT8,
    DType.E2M1: TmaDataType.UINT8,  # packed two a byte: the map counts bytes
}

# The unpacking types (kind::mxf8f6f4's 6- and 4-bit operands; ptxgen.isa.blockscale). cuTensorMapEncodeTiled: "When
# tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B": globalAddress
# 32-byte aligned, globalDim[0] a multiple of 128, globalStrides multiples of 32, boxDim[0] must be 128; swizzle NONE,
# 128B or 128B_ATOM_32B only (loads); dimensions count elements ("Dimension for the packed data types must reflect
# the number of individual U# values"). The global tensor is packed: 16 elements in 8 or 12 bytes.
TMA_UNPACKED_DATA_TYPE_OF = {
    DType.E2M1: TmaDataType.U4X16_ALIGN16B,
    DType.E2M3: TmaDataType.U6X16_ALIGN16B,
    DType.E3M2: TmaDataType.U6X16_ALIGN16B,
}
UNPACKING_DATA_TYPES = (TmaDataType.U4X16_ALIGN16B.value, TmaDataType.U6X16_ALIGN16B.value)
UNPACKED_BOX_INNER_ELEMENTS = 128
UNPACKED_GLOBAL_ADDRESS_ALIGN = 32
UNPACKED_GLOBAL_STRIDE_ALIGN = 32
UNPACKED_GLOBAL_DIM0_MULTIPLE = 128
UNPACKED_LOAD_SWIZZLES = (TmaSwizzle.NONE, TmaSwizzle.B128, TmaSwizzle.B128_ATOM_32B)

INTERLEAVE_NONE = 0  # CU_TENSOR_MAP_INTERLEAVE_NONE
L2_PROMOTION_128B = 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
L2_PROMOTION_256B = 3
L2_SECTOR_BYTES = 32  # the L2's sector: rows that do not start on one straddle an extra sector per box row
OOB_FILL_ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zero

# How a swizzled TMA write picks the XOR key. "address": chunk bits [4, 7) of the shared-memory address
# are XORed with bits [7, 10) of that same address (the pattern is anchored to absolute 1024-byte
# boundaries, like the MMA's with base offset 0), whatever the copy's destination. The alternative,
# "destination", keys it on the offset from the copy's destination. `ptxgen probe --category tma` tells
# them apart on a Hopper GPU (docs/hardware-layout.md, 'TMA').
TMA_SWIZZLE_KEY = "address"
