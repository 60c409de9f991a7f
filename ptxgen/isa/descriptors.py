"""The 64-bit shared-memory matrix descriptor (both families), its lint, and the tensor-memory address.

The instruction descriptors (tcgen05's 32-bit ones, dense and block-scaled, and wgmma's opcode and immediates) are
in :mod:`ptxgen.isa.idesc`.

Each class holds its bit table once and both encodes and decodes from it. The swizzle is one value
(:class:`ptxgen.isa.types.Swizzle`); it is turned into each family's layout-type number only here, at the
boundary: tcgen05 and wgmma encode the same swizzle differently.

Worked example (the seed post's A operand: K-major, 64-byte swizzle, SBO 512, LBO field 1):

>>> d = SmemDescriptor(Arch.SM100A, start_address_bytes=0, lbo_bytes=16, sbo_bytes=512, swizzle=Swizzle.SW64)
>>> hex(d.encode())
'0x8000402000010000'
>>> SmemDescriptor.decode(Arch.SM100A, 0x8000402000010000) == d
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .bits import BitField, BitTable
from .ptxref import cite
from .types import Arch, Swizzle

# ---------------------------------------------------------------------------------------------
# Layout type: one swizzle, two encodings.
# tcgen05 (PTX Table 40): 3 bits at 61-63. wgmma (matrix-descriptor format): 2 bits at 62-63.
# The tcgen05 code is the wgmma code shifted left by one, plus 128B_base32B = 1, which wgmma lacks.
# ---------------------------------------------------------------------------------------------
_TCGEN05_LAYOUT = {Swizzle.NONE: 0, Swizzle.SW128B32: 1, Swizzle.SW128: 2, Swizzle.SW64: 4, Swizzle.SW32: 6}
_WGMMA_LAYOUT = {Swizzle.NONE: 0, Swizzle.SW128: 1, Swizzle.SW64: 2, Swizzle.SW32: 3}
_LAYOUT = {Arch.SM100A: _TCGEN05_LAYOUT, Arch.SM90A: _WGMMA_LAYOUT}


def layout_type(arch: Arch, swizzle: Swizzle) -> int:
    """The descriptor's layout-type value for ``swizzle`` on ``arch``."""
    try:
        return _LAYOUT[arch][swizzle]
    except KeyError:
        raise ValueError(f"{swizzle.value} has no {arch.family} layout type") from None


def swizzle_of_layout_type(arch: Arch, value: int) -> Swizzle | None:
    """Inverse of :func:`layout_type`; None for a reserved value."""
    for swz, v in _LAYOUT[arch].items():
        if v == value:
            return swz
    return None


def _address(name: str, lo: int, doc: str) -> BitField:
    return BitField(name, lo, 14, unit_bytes=16, units="16 B", doc=doc)


# Bits 0-45 mean the same on both families (PTX: tcgen05 Table 40 and wgmma's matrix-descriptor format).
_SMEM_COMMON = (
    _address("start_address", 0, "matrix start address, (addr & 0x3FFFF) >> 4"),
    BitField("reserved_14", 14, 2, fixed=0, doc="reserved"),
    _address("lbo", 16, "leading-dimension byte offset"),
    BitField("reserved_30", 30, 2, fixed=0, doc="reserved"),
    _address("sbo", 32, "stride-dimension byte offset"),
)
_SMEM_TABLES = {
    Arch.SM100A: BitTable(
        "tcgen05 shared-memory descriptor",
        64,
        _SMEM_COMMON
        + (
            BitField("version", 46, 3, fixed=1, doc="fixed constant 0b001 (CUTLASS: version_ = 1 for Blackwell)"),
            BitField("base_offset", 49, 3, doc="matrix base offset: where the swizzle pattern starts, in 128 B"),
            BitField("lbo_mode", 52, 1, doc="0: LBO is a relative offset; 1: absolute address (sm_103a only)"),
            BitField("reserved_53", 53, 8, fixed=0, doc="fixed constant 0"),
            BitField("layout_type", 61, 3, doc="swizzle: 0 none, 1 128B_base32B, 2 128B, 4 64B, 6 32B"),
        ),
    ),
    Arch.SM90A: BitTable(
        "wgmma matrix descriptor",
        64,
        _SMEM_COMMON
        + (
            BitField("reserved_46", 46, 3, fixed=0, doc="reserved (sm_100a puts its version bits here)"),
            BitField("base_offset", 49, 3, doc="matrix base offset"),
            BitField("reserved_52", 52, 10, fixed=0, doc="reserved"),
            BitField("layout_type", 62, 2, doc="swizzle: 0 none, 1 128B, 2 64B, 3 32B"),
        ),
    ),
}


@dataclass(frozen=True)
class SmemDescriptor:
    """A shared-memory matrix descriptor for one MMA operand slice.

    Addresses and offsets are in bytes here; the 16-byte encoding lives in the bit table. The
    descriptor does not know the operand's majorness: tcgen05 takes it from the instruction
    descriptor's transpose bits, wgmma from ``imm-trans-a/b``.
    """

    arch: Arch
    start_address_bytes: int
    lbo_bytes: int
    sbo_bytes: int
    swizzle: Swizzle | None
    base_offset: int = 0
    lbo_mode: int = 0
    raw_layout_type: int | None = None  # only set by decode() for a reserved value

    TABLES = _SMEM_TABLES

    @property
    def table(self) -> BitTable:
        return _SMEM_TABLES[self.arch]

    @property
    def layout_type(self) -> int:
        if self.swizzle is None:
            assert self.raw_layout_type is not None
            return self.raw_layout_type
        return layout_type(self.arch, self.swizzle)

    def fields(self) -> dict[str, int]:
        values = dict(
            start_address=self.start_address_bytes,
            lbo=self.lbo_bytes,
            sbo=self.sbo_bytes,
            base_offset=self.base_offset,
            layout_type=self.layout_type,
        )
        if self.arch is Arch.SM100A:
            values["lbo_mode"] = self.lbo_mode
        return values

    def encode(self) -> int:
        return self.table.encode(**self.fields())

    @property
    def hex(self) -> str:
        return f"{self.encode():#018x}"

    @classmethod
    def decode(cls, arch: Arch, raw: int) -> "SmemDescriptor":
        """The descriptor's meaningful fields (reserved bits are reported by :func:`lint_smem_descriptor`)."""
        f = _SMEM_TABLES[arch].decode(raw)
        swz = swizzle_of_layout_type(arch, f["layout_type"])
        return cls(
            arch=arch,
            start_address_bytes=f["start_address"],
            lbo_bytes=f["lbo"],
            sbo_bytes=f["sbo"],
            swizzle=swz,
            base_offset=f["base_offset"],
            lbo_mode=f.get("lbo_mode", 0),
            raw_layout_type=None if swz is not None else f["layout_type"],
        )

    def with_start(self, start_address_bytes: int) -> "SmemDescriptor":
        return SmemDescriptor(
            self.arch, start_address_bytes, self.lbo_bytes, self.sbo_bytes, self.swizzle, self.base_offset, self.lbo_mode
        )

    @classmethod
    def start_field_c_expr(cls, arch: Arch, byte_address_expr: str) -> str:
        """C expression that puts a run-time shared-memory byte address into the start-address field.

        Kernels add this to a descriptor derived for a stage at address 0: the start field holds the
        address in 16-byte units, so adding the scaled address moves the whole matrix.
        """
        f = _SMEM_TABLES[arch].by_name["start_address"]
        unit_shift = f.unit_bytes.bit_length() - 1
        mask = (1 << f.width) - 1
        return f"((unsigned long long)((({byte_address_expr}) >> {unit_shift}) & {mask:#x}u) << {f.lo})"


@dataclass
class DecodeReport:
    """A decoded word: its fields, and what is wrong with it."""

    fields: dict
    problems: list[str] = field(default_factory=list)  # the hardware rejects it, or it is almost surely a bug
    notes: list[str] = field(default_factory=list)  # legal but worth knowing

    @property
    def valid(self) -> bool:
        return not self.problems


def lint_smem_descriptor(arch: Arch, raw: int) -> DecodeReport:
    """Decode a shared-memory descriptor and list what the hardware would reject or what is almost surely a bug."""
    table = _SMEM_TABLES[arch]
    if raw < 0 or raw >> 64:
        return DecodeReport({"arch": arch.value}, [f"{raw:#x} is not a 64-bit value"])
    f = table.decode(raw)
    swz = swizzle_of_layout_type(arch, f["layout_type"])
    fields = {
        "arch": arch.value,
        "start_address_bytes": f["start_address"],
        "lbo_bytes": f["lbo"],
        "sbo_bytes": f["sbo"],
        "version": f.get("version", 0),
        "base_offset": f["base_offset"],
        "lbo_mode": f.get("lbo_mode", 0),
        "layout_type": f["layout_type"],
        "swizzle": swz.value if swz else None,
    }
    rep = DecodeReport(fields)
    for fld, value in table.fixed_violations(raw):
        if fld.name == "version":
            rep.problems.append(
                f"version bits 46-48 are {value:#05b}, must be 0b001 on sm_100a ({cite('smem_desc')}); "
                "without them tcgen05.mma does not read the layout you meant"
                + (" (this looks like a wgmma descriptor: try --arch sm_90a)" if value == 0 else "")
            )
        elif fld.name == "reserved_46" and value == 1:
            rep.problems.append(
                "bit 46 is set: that is sm_100a's version bit; wgmma descriptors keep bits 46-48 zero "
                f"({cite('wgmma_desc')}) (this looks like a tcgen05 descriptor: try --arch sm_100a)"
            )
        else:
            rep.problems.append(f"reserved bits {fld.bits_label} hold {value:#x}, must be {fld.fixed}")
    if swz is None:
        legal = ", ".join(f"{v} ({s.value})" for s, v in sorted(_LAYOUT[arch].items(), key=lambda kv: kv[1]))
        rep.problems.append(f"layout type {f['layout_type']} is reserved on {arch.value}; legal: {legal}")
    if arch is Arch.SM100A and f["lbo_mode"] == 1:
        rep.problems.append(
            "LBO mode 1 (absolute address) exists only on sm_103a and needs 128B swizzle, K-major operands and "
            f"base offset 0 ({cite('lbo')})"
        )
    if swz is not None and swz.is_swizzled:
        if f["sbo"] % swz.atom_bytes:
            rep.problems.append(
                f"SBO {f['sbo']} B is not a multiple of the {swz.value} atom ({swz.atom_bytes} B): consecutive 8-row "
                "groups would start mid-pattern, so their XOR phase differs from the one any TMA or CuTe store wrote"
            )
        phase = f["start_address"] % swz.repeat_bytes
        if phase >= 128:  # past the first 128-byte line: a different XOR row phase
            rep.notes.append(
                f"the start address is {phase} B into a {swz.repeat_bytes} B swizzle repeat: fine if the matrix really "
                "starts inside the pattern; the pattern itself must start on the repeat boundary, or base offset must "
                f"say where it starts ({cite('base_offset')})"
            )
        if f["base_offset"]:
            rep.notes.append(
                f"base offset {f['base_offset']}: the hardware keys the XOR on (address >> 7) - {f['base_offset']} "
                "(measured on an H200, docs/hardware-layout.md), so the data must be swizzled as if the pattern started "
                f"on a 128-B line with (address >> 7) & 7 = {f['base_offset']}"
            )
    elif swz is Swizzle.NONE and f["base_offset"]:
        rep.notes.append("base offset is ignored without swizzling (PTX: valid for all modes except no-swizzle)")
    if f["sbo"] == 0:
        rep.notes.append("SBO is 0: fine only if the MMA's slice holds a single stride group")
    return rep


# ---------------------------------------------------------------------------------------------
# Tensor-memory address (PTX 'Tensor Memory addressing'): lane in bits 16-31, column in bits 0-15.
# ---------------------------------------------------------------------------------------------
TMEM_ADDRESS = BitTable(
    "tensor-memory address",
    32,
    (BitField("column", 0, 16, doc="32-bit column"), BitField("lane", 16, 16, doc="lane (row of the data path)")),
)


def tmem_lane_c_expr(lane_expr: str) -> str:
    """C expression of the address offset that selects TMEM lane ``lane_expr`` (column 0)."""
    return f"((unsigned)({lane_expr}) << {TMEM_ADDRESS.by_name['lane'].lo})"
