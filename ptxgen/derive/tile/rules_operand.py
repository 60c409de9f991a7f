"""The legality rules of each operand of a tile spec: which B types may meet an A type in one MMA (``MIXABLE``,
:func:`legal_b_dtypes`), and each operand's swizzle and majorness against its type, BK and its M/N extent (atom rows
filled whole). :func:`ptxgen.derive.tile.rules.validate` calls them; like it, this module takes the spec as an
argument and does not import :mod:`ptxgen.derive.tile.spec`."""

from __future__ import annotations

from ...isa.ptxref import cite
from ...isa.shapes import legal_swizzles
from ...isa.types import Arch, DType, Major, SpecError, Swizzle, legal_values


# Input types that may meet in one MMA when they differ: PTX lets A and B differ only inside these families.
# tcgen05 (#tcgen05-kind-shapes, '.kind and shapes' table): kind::f8f6f4 takes any of its types for A and for B
# (instruction descriptor a_format/b_format separately, #tcgen05-instuction-desc-kind-tf32-f16-f8f6f4),
# kind::i8 takes .u8/.s8 for each. wgmma.mma_async (#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async):
# ".dtype.atype.btype" with .atype, .btype in {.e4m3, .e5m2} (dtype .f16/.f32) or in {.s8, .u8} (dtype .s32);
# f16, bf16 and tf32 name one type for both (.f16.f16, .bf16.bf16, .tf32.tf32).
MIXABLE = ((DType.E4M3, DType.E5M2), (DType.S8, DType.U8))


def legal_b_dtypes(a: DType) -> tuple[DType, ...]:
    """The B types that may go with an A of type ``a`` (``a`` itself first)."""
    for family in MIXABLE:
        if a in family:
            return (a,) + tuple(d for d in family if d is not a)
    return (a,)


def validate_b_dtype(t: "TileSpec") -> None:
    legal = legal_b_dtypes(t.dtype)
    if t.b_dtype in legal:
        return
    ref = cite("shapes") if t.arch is Arch.SM100A else cite("wgmma")
    raise SpecError(
        "--b-dtype",
        t.b_dtype.value,
        f"A and B may differ only between the 8-bit floats (e4m3 x e5m2, either way: tcgen05 kind::f8f6f4, wgmma "
        f".e4m3/.e5m2) or between the 8-bit integers (u8 x s8, either way: kind::i8, wgmma .u8/.s8); with A "
        f"{t.dtype.value} (--dtype), B must be {' or '.join(d.value for d in legal)}",
        legal_values(d.value for d in legal),
        ref,
    )


def _esize_word(d: DType, bits: int) -> str:
    return f"{bits // 8} B" if bits % 8 == 0 else f"1/{8 // bits} B ({d.value}, packed)"


def validate_operand(t: "TileSpec", name: str) -> None:
    op = t.operand(name)
    flag = f"--{name}"
    dt, cbits = t.operand_dtype(name), t.container_bits(name)  # B's own type; kind::mxf8f6f4's padded 6/4-bit: 8 bits
    legal = legal_swizzles(t.arch, dt, op.major)
    if op.swizzle not in legal:
        if not legal:
            rule = f"wgmma transposes (MN-major operands) only .f16/.bf16, not .{dt.value}"
            ref = cite("wgmma")
            legal_s = f"kmajor-{{none,sw32,sw64,sw128}} for {dt.value}"
        elif op.swizzle is Swizzle.SW128B32 and t.arch is Arch.SM90A:
            rule, ref = "wgmma has no 128-byte swizzle with 32-byte atomicity", cite("wgmma_desc")
            legal_s = legal_values(f"{op.major.token}-{s.value}" for s in legal)
        elif op.swizzle is Swizzle.SW128B32:
            rule = "128B_base32B is only for MN-major tf32 (K-major never; other types not transposed with it)"
            ref, legal_s = cite("majorness"), legal_values(f"{op.major.token}-{s.value}" for s in legal)
        else:
            rule = "MN-major tf32 on tcgen05 needs the 128-byte swizzle with 32-byte atomicity"
            ref, legal_s = cite("majorness"), legal_values(f"{op.major.token}-{s.value}" for s in legal)
        raise SpecError(flag, op.token, rule, legal_s, ref)

    swz = op.swizzle
    if op.major is Major.K:
        row_bytes = t.bk * cbits // 8
        if row_bytes % swz.row_bytes:
            fits = [s.value for s in legal if row_bytes % s.row_bytes == 0]
            raise SpecError(
                flag,
                op.token,
                f"a K-major {swz.value} atom row is {swz.row_bytes} B of K, but BK={t.bk} x {_esize_word(dt, cbits)} = {row_bytes} B "
                "does not fill whole atom rows",
                f"kmajor-{{{','.join(fits)}}} at this BK, or BK a multiple of {swz.row_bytes * 8 // cbits}",
                cite("canonical"),
            )
        return
    esize = cbits // 8
    for what, extent in (("tile", t.mn_extent(name)), ("one MMA's", t.mma_mn(name))):
        if extent * esize % swz.row_bytes:
            dim = "BM" if name == "a" else "BN"
            fits = [s.value for s in legal if extent * esize % s.row_bytes == 0]
            raise SpecError(
                flag,
                op.token,
                f"an MN-major {swz.value} atom row is {swz.row_bytes} B of {dim[1]}, but {what} {dim[1]} extent "
                f"{extent} x {esize} B = {extent * esize} B does not fill whole atom rows",
                f"mnmajor-{{{','.join(fits)}}}" if fits else f"{dim} a multiple of {swz.row_bytes // esize}",
                cite("canonical"),
            )
