"""The vocabulary of a tile: architectures, majorness, swizzle modes, atom orders and data types.

Pure facts, no derivation. Each enum carries the hardware numbers that belong to it, so the rest of
the code asks ``Swizzle.SW64.row_bytes`` instead of repeating 64 somewhere else.
"""

from __future__ import annotations

from enum import Enum


class SpecError(ValueError):
    """An illegal tile specification.

    The message names the field, the offending value, the rule that it breaks and the legal values,
    e.g. ``--bn=100 is illegal: kind::f16 N must be a multiple of 8 in [8, 256] (PTX ISA 'tcgen05 matrix
    shapes', #tcgen05-kind-shapes). Legal: 8, 16, 24, ..., 256``.
    """

    def __init__(self, field: str, value: object, rule: str, legal: str, ref: str | None = None):
        self.field = field
        self.value = value
        self.rule = rule
        self.legal = legal
        self.ref = ref
        where = f" ({ref})" if ref else ""
        super().__init__(f"{field}={value} is illegal: {rule}{where}. Legal: {legal}")


def legal_values(values) -> str:
    """A SpecError's list of legal values: all of them up to 8, else the first three and the last two around '...'."""
    v = list(values)
    if len(v) > 8:
        return ", ".join(map(str, v[:3])) + ", ..., " + ", ".join(map(str, v[-2:]))
    return ", ".join(map(str, v))


class Arch(Enum):
    """Target architecture, which also picks the MMA instruction family."""

    SM100A = "sm_100a"  # Blackwell: tcgen05.mma.cta_group::1, accumulator in tensor memory
    SM90A = "sm_90a"  # Hopper: wgmma.mma_async, accumulator in registers

    @property
    def family(self) -> str:
        return "tcgen05" if self is Arch.SM100A else "wgmma"


class Major(Enum):
    """Which logical dimension of an operand is contiguous in memory (16-byte cells run along it)."""

    K = "k"
    MN = "mn"

    @property
    def token(self) -> str:
        return "kmajor" if self is Major.K else "mnmajor"


class AtomOrder(Enum):
    """Along which dimension consecutive swizzle atoms (core matrices for ``none``) sit next to each other."""

    MN = "mn"
    K = "k"


class Loader(Enum):
    """How K-tiles reach shared memory."""

    TMA = "tma"  # cp.async.bulk.tensor: one elected thread, a tensor map per operand
    CP_ASYNC = "cp.async"  # cp.async 16 B per thread, explicit swizzled store offsets


class Schedule(Enum):
    """Which tiles a CTA computes."""

    TILE = "tile"  # one CTA per output tile (grid = number of tiles)
    PERSISTENT = "persistent"  # one CTA per SM, looping over tiles; the pipeline runs on across tiles


class Consumers(Enum):
    """How wgmma consumer warpgroups share the work."""

    COOPERATIVE = "cooperative"  # every consumer warpgroup takes 64 rows of the same tile
    PINGPONG = "pingpong"  # two consumer warpgroups take alternate tiles: one's epilogue overlaps the other's MMAs


class EpilogueOrder(Enum):
    """The order of a persistent cooperative wgmma CTA's consumer warpgroups' epilogues (ptxgen.derive.roles.epiorder)."""

    NONE = "none"  # each warpgroup runs its epilogue as soon as its MMAs of the tile are complete
    ALTERNATE = "alternate"  # round-robin: warpgroup w after w - 1 of the same tile, warpgroup 0 after the last of the previous
    # the same order with no branch on the warpgroup in the tile loop: the last warpgroup arrives on warpgroup 0's barrier
    # once before its first tile, and every warpgroup syncs on its own barrier before each epilogue
    ALTERNATE_UNIFORM = "alternate-uniform"


class Cluster(Enum):
    """Thread-block cluster shape (CTAs along M x CTAs along N); a 2-CTA cluster multicasts the operand it shares."""

    C1X1 = "1x1"  # no cluster
    C2X1 = "2x1"  # two CTAs along M share one B tile: each loads half of it and multicasts it to both
    C1X2 = "1x2"  # two CTAs along N share one A tile

    @property
    def dims(self) -> tuple[int, int]:
        """(CTAs along M, CTAs along N)."""
        m, n = self.value.split("x")
        return int(m), int(n)

    @property
    def size(self) -> int:
        return self.dims[0] * self.dims[1]

    @property
    def shared_operand(self) -> str | None:
        """The operand both CTAs of the cluster read ("b" for 2x1, "a" for 1x2), None without a cluster."""
        return {"1x1": None, "2x1": "b", "1x2": "a"}[self.value]


class Epilogue(Enum):
    """How the accumulator tile reaches global memory."""

    DIRECT = "direct"  # every thread stores its own fragment to global memory
    TMA = "tma"  # registers -> shared memory (stmatrix, swizzled) -> global with a TMA bulk tensor store


class DMajor(Enum):
    """How the kernel's M x N result D lies in global memory (ptxgen.derive.store.output)."""

    N = "n"  # row-major: element (i, j) at i x ldd + j (the rows of D are the kernel's M)
    M = "m"  # column-major: element (i, j) at j x ldd + i; swap-AB's D^T written into a row-major user D


class Grouping(Enum):
    """Whether a kernel computes one GEMM or a group of them (mixture-of-experts layers)."""

    NONE = "none"  # one GEMM
    OFFS = "offs"  # torch._grouped_mm: A stacked along M, int32 cumulative row ends on the GPU, B of G x N x K (derive.roles.grouped)
    OFFS_ROWWISE = "offs_rowwise"  # the same with torch._scaled_grouped_mm's f32 scales: per row of A, per (group, column)
    OFFS_K = "offs_k"  # torch._grouped_mm's 2-D x 2-D form: groups along K (int32 cumulative K ends), out G x M x N (derive.roles.kgrouped)
    OFFS_K_ROWWISE = "offs_k_rowwise"  # the same with torch._scaled_grouped_mm's 2-D x 2-D f32 scales: per (group, row), per (group, column)

    @property
    def along_m(self) -> bool:
        """Groups of rows of A (offs and offs_rowwise: derive.roles.grouped), as opposed to groups along K or none."""
        return self in (Grouping.OFFS, Grouping.OFFS_ROWWISE)

    @property
    def along_k(self) -> bool:
        """Groups along K (offs_k and offs_k_rowwise: derive.roles.kgrouped)."""
        return self in (Grouping.OFFS_K, Grouping.OFFS_K_ROWWISE)

    @property
    def rowwise(self) -> bool:
        """With torch._scaled_grouped_mm's row-wise f32 scales on the f32 accumulator (offs_rowwise, offs_k_rowwise)."""
        return self in (Grouping.OFFS_ROWWISE, Grouping.OFFS_K_ROWWISE)


class Batch(Enum):
    """Whether a kernel multiplies one pair of matrices or a batch of them, with the batch as the tensor maps'
    outer (third) dimension (ptxgen.derive.operands.tma; docs/batched.md)."""

    NONE = "none"  # one GEMM
    A = "a"  # A is B x M x K (3-D map), B is one N x K matrix shared by every batch (2-D map)
    AB = "ab"  # A is B x M x K and B is B x N x K: both 3-D maps

    def batched(self, operand: str) -> bool:
        """Whether operand ``operand`` ("a", "b", "d") has the batch dimension."""
        return self is not Batch.NONE and (operand != "b" or self is Batch.AB)


class Swizzle(Enum):
    """A shared-memory swizzle mode, independent of how an instruction family encodes it.

    Every mode is CuTe's ``Swizzle<B, M, S>`` on byte addresses: the B bits at [M+S, M+S+B) are XORed
    into the B bits at [M, M+B). The atom is ``atom_rows`` rows of ``row_bytes`` bytes.

    >>> Swizzle.SW64.apply(0x0C0)   # row 3 of a 64-B-row atom, cell 0 -> cell 1
    208
    >>> Swizzle.SW64.repeat_bytes
    512
    """

    NONE = "none"
    SW32 = "sw32"
    SW64 = "sw64"
    SW128 = "sw128"
    SW128B32 = "sw128b32"  # 128-byte swizzle with 32-byte atomicity (tcgen05 only, MN-major tf32)

    @property
    def bms(self) -> tuple[int, int, int]:
        return {
            Swizzle.NONE: (0, 4, 3),
            Swizzle.SW32: (1, 4, 3),
            Swizzle.SW64: (2, 4, 3),
            Swizzle.SW128: (3, 4, 3),
            Swizzle.SW128B32: (2, 5, 2),
        }[self]

    @property
    def row_bytes(self) -> int:
        """Bytes of one atom row, along the operand's contiguous dimension (16 for ``none``)."""
        return {Swizzle.NONE: 16, Swizzle.SW32: 32, Swizzle.SW64: 64, Swizzle.SW128: 128, Swizzle.SW128B32: 128}[self]

    @property
    def atom_rows(self) -> int:
        """Rows of one atom: 8, except 4 for the 32-byte-atomicity mode."""
        return 4 if self is Swizzle.SW128B32 else 8

    @property
    def atom_bytes(self) -> int:
        return self.atom_rows * self.row_bytes

    @property
    def repeat_bytes(self) -> int:
        """Period of the XOR pattern in bytes (CuTe ``alignment_for_swizzle`` = 2^(B+M+S))."""
        b, m, s = self.bms
        return 1 << (b + m + s)

    @property
    def is_swizzled(self) -> bool:
        return self is not Swizzle.NONE

    def apply(self, byte_address: int) -> int:
        """The swizzled byte address (identity for ``none``)."""
        b, m, s = self.bms
        mask = ((1 << b) - 1) << (m + s)
        return byte_address ^ ((byte_address & mask) >> s)


class DType(Enum):
    """Element types: MMA inputs, accumulators and outputs."""

    F16 = "f16"
    BF16 = "bf16"
    TF32 = "tf32"
    E4M3 = "e4m3"
    E5M2 = "e5m2"
    S8 = "s8"
    U8 = "u8"
    F32 = "f32"
    S32 = "s32"
    # Narrow floats of the block-scaled kinds (OCP MX spec v1.0: FP6 E2M3/E3M2, FP4 E2M1) and the scale types
    # (UE8M0: an unsigned power of two; UE4M3: NVFP4's unsigned e4m3). Only block-scaled specs (--scale) use them.
    E2M3 = "e2m3"
    E3M2 = "e3m2"
    E2M1 = "e2m1"
    UE8M0 = "ue8m0"
    UE4M3 = "ue4m3"

    @property
    def bits(self) -> int:
        """Bits of the value itself (6 for e2m3/e3m2, 4 for e2m1)."""
        return {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "s32": 32, "e2m3": 6, "e3m2": 6, "e2m1": 4}.get(self.value, 8)

    @property
    def container_bits(self) -> int:
        """Bits one element takes in shared and global memory as ptxgen stores it.

        e2m1 is packed two to a byte (what kind::mxf4 and kind::mxf4nvf4 read: PTX 'Packing format used for matrix
        A and B by .kind::mxf4 and .kind::mxf4nvf4 in Shared Memory', "two 4-bit elements in a 8-bit container, with
        no padding"). The 6-bit types only exist padded to a byte in shared memory (kind::f8f6f4/mxf8f6f4).
        """
        return 4 if self is DType.E2M1 else max(8, self.bits)

    @property
    def bytes(self) -> int:
        """Bytes of one element; an error for packed e2m1 (half a byte): ask ``container_bits`` there."""
        if self.container_bits % 8:
            raise ValueError(f"{self.value} is packed {8 // self.container_bits} to a byte: it has no whole byte size")
        return self.container_bits // 8

    @property
    def per_cell(self) -> int:
        """Elements in one 16-byte cell (PTX's T = 128 / bits; 32 for packed e2m1)."""
        return 128 // self.container_bits

    def bytes_of(self, elements: int) -> int:
        """Bytes of ``elements`` consecutive elements (packed e2m1: two a byte)."""
        bits = elements * self.container_bits
        if bits % 8:
            raise ValueError(f"{elements} {self.value} elements are not a whole number of bytes")
        return bits // 8

    @property
    def is_integer(self) -> bool:
        return self in (DType.S8, DType.U8, DType.S32)

    @property
    def kind(self) -> str:
        """The tcgen05 ``.kind`` that multiplies this input type."""
        return {
            DType.F16: "f16",
            DType.BF16: "f16",
            DType.TF32: "tf32",
            DType.E4M3: "f8f6f4",
            DType.E5M2: "f8f6f4",
            DType.S8: "i8",
            DType.U8: "i8",
            DType.E2M3: "f8f6f4",
            DType.E3M2: "f8f6f4",
            DType.E2M1: "f8f6f4",
        }[self]

    @property
    def k_per_mma(self) -> int:
        """K of one MMA: 256 bits of each A/B row as stored (16 for 16-bit types, 8 for tf32, 32 for 8-bit,
        64 for packed e2m1: kind::mxf4/mxf4nvf4 K=64)."""
        return 256 // self.container_bits


INPUT_DTYPES = (DType.F16, DType.BF16, DType.TF32, DType.E4M3, DType.E5M2, DType.S8, DType.U8)
ACC_DTYPES = (DType.F32, DType.F16, DType.S32)
OUT_DTYPES = (DType.F32, DType.F16, DType.BF16, DType.S32)

# Which accumulators each input type can use. PTX: kind::f16 gives .f16 D only for .f16 inputs
# (#tcgen05-kind-shapes, Table "Various combinations of .kind and shapes"); wgmma's .bf16 and .tf32
# variants list .dtype = {.f32} (#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async).
LEGAL_ACC = {
    DType.F16: (DType.F32, DType.F16),
    DType.BF16: (DType.F32,),
    DType.TF32: (DType.F32,),
    DType.E4M3: (DType.F32, DType.F16),
    DType.E5M2: (DType.F32, DType.F16),
    DType.S8: (DType.S32,),
    DType.U8: (DType.S32,),
}


class Scale(Enum):
    """Block scaling (``--scale``): none (a dense kind) or the scale-factor type of a block-scaled kind."""

    NONE = "none"
    UE8M0 = "ue8m0"  # MX: one power of two per 32 elements (mxf8f6f4, mxf4, mxf4nvf4)
    UE4M3 = "ue4m3"  # NVFP4: one unsigned e4m3 per 16 elements (mxf4nvf4 only)

    @property
    def dtype(self) -> "DType | None":
        return None if self is Scale.NONE else DType(self.value)


def parse_enum(enum_cls, value: str, field: str, legal: str | None = None):
    """``enum_cls(value)`` with a SpecError naming the field and the legal values (``legal``: the field's, where it
    takes fewer than the enum holds)."""
    try:
        return enum_cls(value)
    except ValueError:
        legal = legal or ", ".join(e.value for e in enum_cls)
        raise SpecError(field, value, f"unknown {enum_cls.__name__}", legal) from None
