"""The instruction descriptors: tcgen05's 32-bit descriptor (dense kinds, PTX Table 42; block-scaled kinds,
Tables 43-44) and wgmma's opcode and immediates (wgmma has no instruction descriptor), each with its lint.

Each class holds its bit table once and both encodes and decodes from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bits import BitField, BitTable
from .descriptors import DecodeReport
from .ptxref import cite
from .types import DType, Major


# ---------------------------------------------------------------------------------------------
# tcgen05 instruction descriptor (PTX Table 42: .kind::tf32, ::f16, ::f8f6f4, ::i8)
# ---------------------------------------------------------------------------------------------
_IDESC_TABLE = BitTable(
    "tcgen05 instruction descriptor",
    32,
    (
        BitField("sparse_id2", 0, 2, doc="sparsity selector (sparse only)"),
        BitField("sparse", 2, 1, doc="0 dense, 1 sparse"),
        BitField("saturate", 3, 1, doc="saturate (i8 only)"),
        BitField("d_format", 4, 2, doc="D type: F16=0, F32=1, S32=2"),
        BitField("reserved_6", 6, 1, fixed=0),
        BitField("a_format", 7, 3, doc="A type (codes depend on .kind)"),
        BitField("b_format", 10, 3, doc="B type (codes depend on .kind)"),
        BitField("negate_a", 13, 1),
        BitField("negate_b", 14, 1),
        BitField("a_major", 15, 1, doc="transpose A: 0 K-major, 1 M-major"),
        BitField("b_major", 16, 1, doc="transpose B: 0 K-major, 1 N-major"),
        BitField("n", 17, 6, unit_bytes=8, units="N >> 3", doc="N >> 3"),
        BitField("reserved_23", 23, 1, fixed=0),
        BitField("m", 24, 5, unit_bytes=16, units="M >> 4", doc="M >> 4"),
        BitField("reserved_29", 29, 1, fixed=0),
        BitField("max_shift", 30, 2, doc="max B-reuse shift for .ws: 0 none, 1 = 8, 2 = 16, 3 = 32"),
    ),
)

_D_FORMAT = {DType.F16: 0, DType.F32: 1, DType.S32: 2}
# A/B format codes per .kind, with names for the codes ptxgen does not generate (decode only). A and B have
# a field each (a_format bits 7-9, b_format bits 10-12), so a mixed pair just puts a different code in each:
# e4m3 A x e5m2 B is a_format 0, b_format 1; u8 A x s8 B is 0, 1. Same codes as CuTe's UMMA::MXF8F6F4Format
# (E4M3 = 0, E5M2 = 1, E2M3 = 3, E3M2 = 4, E2M1 = 5) and UMMA::S8Format (UINT8 = 0, INT8 = 1), which
# make_instr_desc<a_type, b_type, ...> writes through to_UMMAFormat<a_type>() and to_UMMAFormat<b_type>()
# independently (NVIDIA/cutlass include/cute/arch/mma_sm100_desc.hpp).
_AB_FORMAT = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "i8": {"u8": 0, "s8": 1},
}
_LEGAL_D = {"f16": {"f16", "f32"}, "tf32": {"f32"}, "f8f6f4": {"f16", "f32"}, "i8": {"s32"}}
KINDS = tuple(_AB_FORMAT)


def _operand_fields(d, codes: dict[str, int]) -> dict[str, int]:
    """The A/B fields every tcgen05 instruction descriptor has at the same bits (PTX Tables 42-44): formats, negation,
    transposes, N and M. ``d`` is a dense or block-scaled descriptor, ``codes`` its kind's format codes."""
    return dict(
        a_format=codes[d.a_dtype],
        b_format=codes[d.b_dtype],
        negate_a=int(d.negate_a),
        negate_b=int(d.negate_b),
        a_major=int(d.a_major is Major.MN),
        b_major=int(d.b_major is Major.MN),
        n=d.n,
        m=d.m,
    )


@dataclass(frozen=True)
class InstrDescriptor:
    """The 32-bit instruction descriptor of a dense ``tcgen05.mma`` (kinds f16, tf32, f8f6f4, i8).

    Worked example (bf16 x bf16 -> f32, M=128, N=256, both K-major; CuTe's make_instr_desc gives the same):

    >>> hex(InstrDescriptor("f16", 128, 256, "bf16", "bf16", "f32", Major.K, Major.K).encode())
    '0x8400490'
    """

    kind: str
    m: int
    n: int
    a_dtype: str
    b_dtype: str
    d_dtype: str
    a_major: Major
    b_major: Major
    negate_a: bool = False
    negate_b: bool = False
    sparse: bool = False
    saturate: bool = False
    max_shift: int = 0

    TABLE = _IDESC_TABLE

    def fields(self) -> dict[str, int]:
        return dict(
            sparse=int(self.sparse),
            saturate=int(self.saturate),
            d_format=_D_FORMAT[DType(self.d_dtype)],
            **_operand_fields(self, _AB_FORMAT[self.kind]),
            max_shift=self.max_shift,
        )

    def encode(self) -> int:
        return _IDESC_TABLE.encode(**self.fields())

    @property
    def hex(self) -> str:
        return f"{self.encode():#010x}"


def _name_of(codes: dict[str, int], value: int) -> str:
    for name, v in codes.items():
        if v == value:
            return name
    return f"reserved({value})"


def lint_instr_descriptor(raw: int, kind: str) -> DecodeReport:
    """Decode a tcgen05 instruction descriptor for ``kind`` and list what is illegal or suspicious."""
    if raw < 0 or raw >> 32:
        return DecodeReport({"kind": kind}, [f"{raw:#x} is not a 32-bit value"])
    f = _IDESC_TABLE.decode(raw)
    codes = _AB_FORMAT[kind]
    d_name = {v: k.value for k, v in _D_FORMAT.items()}.get(f["d_format"], f"reserved({f['d_format']})")
    a_name, b_name = _name_of(codes, f["a_format"]), _name_of(codes, f["b_format"])
    fields = {
        "kind": kind,
        "m": f["m"],
        "n": f["n"],
        "a_dtype": a_name,
        "b_dtype": b_name,
        "d_dtype": d_name,
        "a_major": "mn" if f["a_major"] else "k",
        "b_major": "mn" if f["b_major"] else "k",
        "negate_a": f["negate_a"],
        "negate_b": f["negate_b"],
        "sparse": f["sparse"],
        "saturate": f["saturate"],
        "max_shift": f["max_shift"],
    }
    rep = DecodeReport(fields)
    p, notes = rep.problems, rep.notes
    ref = cite("idesc")
    for fld, value in _IDESC_TABLE.fixed_violations(raw):
        p.append(f"reserved bit {fld.bits_label} is {value}, must be 0 ({ref})")
    if d_name not in _LEGAL_D[kind]:
        p.append(f"D type {d_name} is not legal for kind::{kind}; legal: {', '.join(sorted(_LEGAL_D[kind]))} ({ref})")
    for which, name in (("A", a_name), ("B", b_name)):
        if name.startswith("reserved"):
            p.append(f"{which} type code {name} is not a kind::{kind} type; legal: {', '.join(codes)} ({ref})")
    if kind in ("f16", "tf32") and a_name != b_name:
        p.append(f"kind::{kind} needs A and B of the same type, got {a_name} and {b_name}")
    elif a_name != b_name and not any(x.startswith("reserved") for x in (a_name, b_name)):
        # kind::f8f6f4 and kind::i8 take any of their types for A and for B, independently
        notes.append(f"mixed input types: A {a_name}, B {b_name} (legal for kind::{kind}: {ref})")
    if kind == "f16" and d_name == "f16" and "bf16" in (a_name, b_name):
        p.append(f"kind::f16 gives an f16 D only for f16 inputs; bf16 accumulates in f32 ({cite('shapes')})")
    if kind == "i8" and (f["negate_a"] or f["negate_b"]):
        p.append(f"negate is not supported for kind::i8 ({cite('transpose')})")
    if kind != "i8" and f["saturate"]:
        p.append(f"saturate (bit 3) exists only for kind::i8 ({ref})")
    if not f["sparse"] and f["sparse_id2"]:
        p.append("sparsity selector (bits 0-1) is set on a dense descriptor")
    m, n = f["m"], f["n"]
    if m not in (32, 64, 128, 256):
        p.append(f"M={m} is not a tcgen05 shape; legal: 64, 128 (cta_group::1), 128, 256 (cta_group::2) ({cite('shapes')})")
    elif m == 256:
        notes.append("M=256 exists only with cta_group::2")
    elif m == 32:
        notes.append("M=32 exists only for the .ws variants")
    if not 8 <= n <= 256:
        p.append(f"N={n} is outside 8..256 ({cite('shapes')})")
    elif kind == "i8" and n > 32 and n % 16:
        p.append(f"kind::i8 N above 32 must be a multiple of 16, got {n} ({cite('shapes')})")
    elif kind in ("i8", "f8f6f4") and f["b_major"] and n % 16:
        p.append(f"8-bit B transposed (N-major) needs N a multiple of 16, got {n} ({cite('transpose')})")
    if kind == "tf32" and (f["a_major"] or f["b_major"]):
        notes.append("MN-major tf32 works only with the 128B_base32B swizzle (layout type 1) in the smem descriptor")
    if f["max_shift"]:
        notes.append("max shift is used only by the .ws variants")
    return rep


# ---------------------------------------------------------------------------------------------
# wgmma: no instruction descriptor; the shape, types and transposes are in the opcode and immediates.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WgmmaInstr:
    """One ``wgmma.mma_async`` with both operands in shared memory.

    >>> WgmmaInstr(128, DType.F16, DType.F32, Major.K, Major.MN).opcode
    'wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16'
    >>> WgmmaInstr(64, DType.E4M3, DType.F32, Major.K, Major.K, DType.E5M2).opcode
    'wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2'

    The opcode is ``.shape.dtype.atype.btype``. PTX wgmma.mma_async lists .atype and .btype separately for
    the 8-bit types: {.e4m3, .e5m2} x {.e4m3, .e5m2} with .dtype .f16/.f32, and {.s8, .u8} x {.s8, .u8}
    with .dtype .s32 (e.g. ``wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8`` in its examples); CUTLASS
    has the same, e.g. SM90_64x8x32_F32E4M3E5M2_SS_TN and SM90_64x8x32_S32U8S8_SS_TN (cute/arch/mma_sm90_gmma.hpp).
    """

    n: int
    dtype: DType  # A's type (and B's unless b_dtype is given)
    acc: DType
    a_major: Major
    b_major: Major
    b_dtype: DType | None = None  # B's type when it differs from A's

    m = 64

    @property
    def btype(self) -> DType:
        return self.dtype if self.b_dtype is None else self.b_dtype

    @property
    def k(self) -> int:
        return self.dtype.k_per_mma

    @property
    def shape(self) -> str:
        return f"m64n{self.n}k{self.k}"

    @property
    def opcode(self) -> str:
        return f"wgmma.mma_async.sync.aligned.{self.shape}.{self.acc.value}.{self.dtype.value}.{self.btype.value}"

    @property
    def has_transpose(self) -> bool:
        # imm-trans-a/b exist only for the .f16/.bf16 variants (PTX wgmma.mma_async)
        return self.dtype in (DType.F16, DType.BF16)

    @property
    def imm_trans_a(self) -> int:
        return int(self.a_major is Major.MN)

    @property
    def imm_trans_b(self) -> int:
        return int(self.b_major is Major.MN)

    def to_json(self) -> dict:
        return {
            "instruction": self.opcode,
            "shape": self.shape,
            "imm_trans_a": self.imm_trans_a,
            "imm_trans_b": self.imm_trans_b,
        }


# ---------------------------------------------------------------------------------------------
# Block-scaled tcgen05 instruction descriptor (PTX Tables 43-44: .kind::mxf8f6f4, ::mxf4, ::mxf4nvf4)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockScaledInstrDescriptor:
    """The 32-bit instruction descriptor of a block-scaled ``tcgen05.mma`` (D is always f32: no D-format field).

    Worked examples (CuTe make_instr_desc_block_scaled gives the same, /work/shared/reference/descriptors.md 4.2):

    >>> hex(BlockScaledInstrDescriptor("mxf8f6f4", 128, 128, "e4m3", "e4m3", "ue8m0").encode())
    '0x8a00000'
    >>> hex(BlockScaledInstrDescriptor("mxf4nvf4", 128, 128, "e2m1", "e2m1", "ue4m3").encode())
    '0x8200480'
    """

    kind: str
    m: int
    n: int
    a_dtype: str
    b_dtype: str
    scale_dtype: str
    a_major: Major = Major.K
    b_major: Major = Major.K
    a_sf_id: int = 0
    b_sf_id: int = 0
    negate_a: bool = False
    negate_b: bool = False

    @property
    def table(self) -> BitTable:
        from .blockscale import IDESC_BS_TABLES

        return IDESC_BS_TABLES[self.kind]

    def fields(self) -> dict[str, int]:
        from .blockscale import BS_AB_FORMAT, SCALE_TYPE_CODE

        return dict(
            b_sf_id=self.b_sf_id,
            **_operand_fields(self, BS_AB_FORMAT[self.kind]),
            scale_type=SCALE_TYPE_CODE[self.scale_dtype],
            a_sf_id=self.a_sf_id,
        )

    def encode(self) -> int:
        return self.table.encode(**self.fields())

    @property
    def hex(self) -> str:
        return f"{self.encode():#010x}"

    def with_sf_ids(self, a_sf_id: int, b_sf_id: int) -> "BlockScaledInstrDescriptor":
        return BlockScaledInstrDescriptor(
            self.kind, self.m, self.n, self.a_dtype, self.b_dtype, self.scale_dtype, self.a_major, self.b_major,
            a_sf_id, b_sf_id, self.negate_a, self.negate_b,
        )


def lint_block_scaled_idesc(raw: int, kind: str) -> DecodeReport:
    """Decode a block-scaled instruction descriptor for ``kind`` and list what is illegal or suspicious."""
    from .blockscale import BS_AB_FORMAT, IDESC_BS_TABLES, SCALE_TYPE_CODE, SCALED_KINDS, idesc_ref

    if raw < 0 or raw >> 32:
        return DecodeReport({"kind": kind}, [f"{raw:#x} is not a 32-bit value"])
    table = IDESC_BS_TABLES[kind]
    f = table.decode(raw)
    codes = BS_AB_FORMAT[kind]
    a_name, b_name = _name_of(codes, f["a_format"]), _name_of(codes, f["b_format"])
    scale = _name_of(SCALE_TYPE_CODE, f["scale_type"])
    fields = {
        "kind": kind,
        "m": f["m"],
        "n": f["n"],
        "a_dtype": a_name,
        "b_dtype": b_name,
        "d_dtype": "f32",
        "scale_dtype": scale,
        "a_sf_id": f["a_sf_id"],
        "b_sf_id": f["b_sf_id"],
        "a_major": "mn" if f["a_major"] else "k",
        "b_major": "mn" if f["b_major"] else "k",
        "negate_a": f["negate_a"],
        "negate_b": f["negate_b"],
        "sparse": f["sparse"],
    }
    if "k_size" in f:
        fields["k_size"] = f["k_size"]
    rep = DecodeReport(fields)
    p, notes = rep.problems, rep.notes
    ref = idesc_ref(kind)
    for fld, value in table.fixed_violations(raw):
        p.append(f"reserved bit(s) {fld.bits_label} hold {value}, must be 0 ({ref})")
    for which, name in (("A", a_name), ("B", b_name)):
        if name.startswith("reserved"):
            p.append(f"{which} type code {name} is not a kind::{kind} type; legal: {', '.join(f'{k}={v}' for k, v in codes.items())} ({ref})")
    rows = [k for k in SCALED_KINDS if k.kind == kind and k.scale.value == scale]
    if not rows:
        legal = sorted({k.scale.value for k in SCALED_KINDS if k.kind == kind})
        p.append(f"scale type {scale} is not legal for kind::{kind}; legal: {', '.join(legal)} ({cite('scale_vec')})")
    else:
        steps = sorted({k.sf_id_step for k in rows})
        for which, sf_id in (("A", f["a_sf_id"]), ("B", f["b_sf_id"])):
            if not any(sf_id % step == 0 for step in steps):
                vecs = ", ".join(k.scale_vec for k in rows)
                p.append(
                    f"scale factor {which} ID {sf_id} is not a multiple of {min(steps)}: with {vecs} the scale factors of one "
                    f"MMA are {min(steps)} byte(s) of the 32-bit TMEM word, aligned ({cite('sfa_id' if which == 'A' else 'sfb_id')})"
                )
        if kind == "mxf4nvf4" and scale == "ue8m0":
            notes.append("ue8m0 with kind::mxf4nvf4: legal with .scale_vec::2X (V=32) or .scale_vec::4X (V=16); the opcode says which")
    if kind in ("mxf4", "mxf4nvf4") and (f["a_major"] or f["b_major"]):
        p.append(f"kind::{kind} cannot transpose: A and B must be K-major ({cite('transpose')})")
    if f.get("k_size"):
        notes.append("K size 1 = dense K=96: exists only on sm_103a")
    if f["sparse"]:
        notes.append("sparse block-scaled MMA: ptxgen does not generate sparse kernels")
    if not f["sparse"] and f["sparse_id2"]:
        p.append("sparsity selector (bits 0-1) is set on a dense descriptor")
    m, n = f["m"], f["n"]
    if m not in (128, 256):
        p.append(f"M={m} is not a block-scaled shape; legal: 128 (cta_group::1), 128 or 256 (cta_group::2) ({cite('shapes')})")
    elif m == 256:
        notes.append("M=256 exists only with cta_group::2")
    if not 8 <= n <= 256:
        p.append(f"N={n} is outside 8..256 ({cite('shapes')})")
    return rep
