"""Scale factors of a block-scaled tile: where each one lives in global memory, in shared memory, in tensor
memory, and which MMA reads it. Pure arithmetic, explained beside the math.

The chain, for an operand X (A: rows are M, B: rows are N) with V elements per scale factor:

1. **Global** (CUTLASS ``Sm1xxBlockScaledConfig``, include/cutlass/detail/sm100_blockscaled_layout.hpp): the
   scale factors of 128 rows x 4 consecutive chunks of K form one 512-byte atom, ``SfKMajorAtom`` =
   ``((32,4),(V,4)) : ((16,4),(0,1))`` -- row r = r0 + 32 r1 and chunk j sit at byte 16 r0 + 4 r1 + j. Atoms are
   tiled K first (``tile_to_shape(..., Step<_2,_1,_3>)``): atom (row // 128, chunk // 4) starts at
   512 x ((row // 128) x ceil(K / 4V) + chunk // 4). Rows past the matrix pad the last atom.
2. **Shared** (one stage): the atoms of the tile's 128-row block(s) for the stage's BK / 4V chunk groups, each
   block's atoms contiguous along K, so one ``cp.async.bulk`` per block copies them (they are contiguous in
   global memory too) and completes on the stage's full barrier.
3. **Tensor memory**: ``tcgen05.cp.32x128b.warpx4`` copies one atom (32 rows of 16 B) to 32 lanes x 4 columns and
   multicasts it to the four 32-lane partitions: row r of the block lands in lane r0 (every partition), column
   r1, byte j. Block b of B goes 4 columns after block b - 1, so row n is at column n // 32 for N up to 256.
4. **MMA**: the MMA gets the TMEM address of the atom holding its chunks and the SF ID = the byte of the 32-bit
   word where its first chunk is (PTX #tcgen05-mma-scale-factor-a/-b): the MMA reading K chunk s (of its stage)
   uses atom s // 4 and SF ID s % 4; with .scale_vec::2X/4X it reads 2/4 consecutive bytes from there.

>>> from ptxgen.derive.tile.spec import make_spec
>>> p = derive_scales(make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0"))
>>> [(s.k, s.sf_id, s.a_column, s.b_column) for s in p.steps]
[(0, 0, 0, 4), (32, 1, 0, 4), (64, 2, 0, 4), (96, 3, 0, 4)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...isa.blockscale import CP_32X128B_WARPX4, UNPACKED_GROUP, ScaledKind, TmemCopyShape, idesc_ref
from ...isa.descriptors import SmemDescriptor
from ...isa.idesc import BlockScaledInstrDescriptor
from ...isa.ptxref import cite
from ...isa.types import Arch, Swizzle
from ..tile.derived import Derived
from .sf_atoms import (
    SF_ATOM_BYTES,
    SF_ATOM_CHUNKS,
    SF_ATOM_ROWS,
    SF_CP_ROW_BYTES,
    ceil_div,
)

if TYPE_CHECKING:
    from ..tile.spec import TileSpec

CUTLASS_REF = "CUTLASS Sm1xxBlockScaledConfig / SfKMajorAtom (include/cutlass/detail/sm100_blockscaled_layout.hpp)"

@dataclass(frozen=True)
class SfCopy:
    """One cp.async.bulk of a stage: ``nbytes`` from global byte ``global_atom`` x 512 (relative to the tile's
    first atom, see :attr:`SfOperand.global_origin_doc`) to ``smem_offset_bytes`` in the stage."""

    block: int  # 128-row block of the tile
    smem_offset_bytes: int
    nbytes: int


@dataclass(frozen=True)
class SfTmemCopy:
    """One tcgen05.cp of a stage: the atom at ``smem_offset_bytes`` to TMEM column ``column`` (from the operand's
    stage base column)."""

    block: int
    group: int  # K chunk group (atom along K) in the stage
    smem_offset_bytes: int
    column: int


@dataclass(frozen=True)
class SfOperand:
    name: str
    rows: int  # tile rows (BM or BN)
    blocks: int  # 128-row blocks per stage
    groups: int  # atoms along K per stage (BK / 4V)
    stage_bytes: int
    tmem_columns: int  # per stage
    copies: tuple[SfCopy, ...]
    tmem_copies: tuple[SfTmemCopy, ...]

    def smem_atom_offset(self, block: int, group: int) -> int:
        return SF_ATOM_BYTES * (block * self.groups + group)

    def tmem_column(self, block: int, group: int) -> int:
        return CP_32X128B_WARPX4.columns * (group * self.blocks + block)

    def to_json(self) -> dict:
        return {
            "rows": self.rows,
            "blocks": self.blocks,
            "groups": self.groups,
            "stage_bytes": self.stage_bytes,
            "tmem_columns": self.tmem_columns,
            "copies": [{"block": c.block, "smem_offset_bytes": c.smem_offset_bytes, "bytes": c.nbytes} for c in self.copies],
            "tmem_copies": [
                {"block": c.block, "group": c.group, "smem_offset_bytes": c.smem_offset_bytes, "column": c.column}
                for c in self.tmem_copies
            ],
        }


@dataclass(frozen=True)
class SfStep:
    """What one MMA of a stage reads: its first K chunk, the atom group, the SF ID and the TMEM columns."""

    k: int  # first K element (within the stage)
    chunk: int  # first scale-factor chunk (within the stage)
    group: int
    sf_id: int
    a_column: int  # from the stage's SF base column (A's atoms come first)
    b_column: int
    idesc: BlockScaledInstrDescriptor


@dataclass(frozen=True)
class ScalePlan:
    kind: ScaledKind
    stages: int
    a: SfOperand
    b: SfOperand
    cp: TmemCopyShape
    cp_descriptor: SmemDescriptor  # for an atom at shared address 0; kernels add the atom's address
    tmem_columns_per_stage: int
    steps: tuple[SfStep, ...]
    derivation: tuple[Derived, ...]
    # A CTA pair (cta_group 2): CTA r's copies start at tile row a_cta_row0[r] of SFA and b_cta_row0[r] of SFB
    cta_group: int = 1
    a_cta_row0: tuple[int, ...] = (0,)
    b_cta_row0: tuple[int, ...] = (0,)

    @property
    def mma_opcode(self) -> str:
        return self.kind.opcode_for(self.cta_group)

    @property
    def cp_opcode(self) -> str:
        return self.cp.opcode_for(self.cta_group)

    def cta_row0(self, name: str, rank: int) -> int:
        """First tile row of operand ``name``'s scale factors that CTA ``rank`` of a pair copies (0 for one CTA)."""
        return (self.a_cta_row0 if name == "a" else self.b_cta_row0)[rank]

    @property
    def vec(self) -> int:
        return self.kind.vec_elements

    @property
    def expect_tx_bytes(self) -> int:
        return self.a.stage_bytes + self.b.stage_bytes

    def operand(self, name: str) -> SfOperand:
        return {"a": self.a, "b": self.b}[name]

    def stage_base_column(self, stage: int) -> int:
        """TMEM column (from the scale-factor region's start) of stage ``stage``'s scale factors."""
        return stage * self.tmem_columns_per_stage

    def to_json(self) -> dict:
        return {
            "kind": self.kind.kind,
            "opcode": self.mma_opcode,
            "scale_dtype": self.kind.scale.value,
            "vec_elements": self.vec,
            "k_per_mma": self.kind.k_per_mma,
            "sfs_per_mma": self.kind.sfs_per_mma,
            "global_atom": {"rows": SF_ATOM_ROWS, "chunks": SF_ATOM_CHUNKS, "bytes": SF_ATOM_BYTES,
                            "cute_layout": f"((32,4),({self.vec},4)):((16,4),(0,1))"},
            "sfa": self.a.to_json(),
            "sfb": self.b.to_json(),
            "tcgen05_cp": self.cp_opcode,
            "cp_desc_hex": self.cp_descriptor.hex,
            "tmem_columns_per_stage": self.tmem_columns_per_stage,
            "steps": [
                {"k": s.k, "chunk": s.chunk, "group": s.group, "sf_id": s.sf_id, "a_column": s.a_column,
                 "b_column": s.b_column, "idesc_hex": s.idesc.hex}
                for s in self.steps
            ],
        } | ({"cta_row0": {"sfa": list(self.a_cta_row0), "sfb": list(self.b_cta_row0)}} if self.cta_group > 1 else {})


def _operand(name: str, rows: int, groups: int) -> SfOperand:
    blocks = ceil_div(rows, SF_ATOM_ROWS)
    stage_bytes = blocks * groups * SF_ATOM_BYTES
    op = SfOperand(name, rows, blocks, groups, stage_bytes, CP_32X128B_WARPX4.columns * blocks * groups, (), ())
    copies = tuple(SfCopy(b, op.smem_atom_offset(b, 0), groups * SF_ATOM_BYTES) for b in range(blocks))
    tcps = tuple(
        SfTmemCopy(b, g, op.smem_atom_offset(b, g), op.tmem_column(b, g)) for g in range(groups) for b in range(blocks)
    )
    return SfOperand(name, rows, blocks, groups, stage_bytes, op.tmem_columns, copies, tcps)


def base_idesc(spec: "TileSpec") -> BlockScaledInstrDescriptor:
    k = spec.scaled_kind
    return BlockScaledInstrDescriptor(
        k.kind, spec.bm, spec.bn, spec.dtype.value, spec.b_dtype.value, k.scale.value, spec.a.major, spec.b.major
    )


def derive_scales(spec: "TileSpec") -> ScalePlan:
    k = spec.scaled_kind
    V, kmma = k.vec_elements, k.k_per_mma
    groups = spec.bk // (SF_ATOM_CHUNKS * V)
    a, b = _operand("a", spec.sf_rows("a"), groups), _operand("b", spec.sf_rows("b"), groups)
    per_stage = a.tmem_columns + b.tmem_columns
    idesc0 = base_idesc(spec)
    steps = []
    for i in range(spec.bk // kmma):
        kk = i * kmma
        chunk = kk // V
        g, sf_id = chunk // SF_ATOM_CHUNKS, chunk % SF_ATOM_CHUNKS
        steps.append(SfStep(kk, chunk, g, sf_id, a.tmem_column(0, g), a.tmem_columns + b.tmem_column(0, g),
                            idesc0.with_sf_ids(sf_id, sf_id)))
    cp_desc = SmemDescriptor(Arch.SM100A, 0, 0, 8 * SF_CP_ROW_BYTES, Swizzle.NONE)
    D = _explain(spec, k, a, b, per_stage, steps, cp_desc)
    g = spec.cta_group
    return ScalePlan(k, spec.stages, a, b, CP_32X128B_WARPX4, cp_desc, per_stage, tuple(steps), tuple(D), cta_group=g,
                     a_cta_row0=tuple(r * spec.cta_rows for r in range(g)), b_cta_row0=(0,) * g)


def _explain(spec, k: ScaledKind, a: SfOperand, b: SfOperand, per_stage: int, steps, cp_desc) -> list[Derived]:
    V = k.vec_elements
    D = [
        Derived("kind", k.kind,
                f"--dtype {spec.dtype.value}" + (f" --b-dtype {spec.b_dtype.value}" if spec.mixed else "")
                + f" --scale {k.scale.value} -> kind::{k.kind}, {k.scale_vec}",
                f"{k.scale.value} scale factors, one per {V} elements of a row along K; e2m1 x e2m1 goes to kind::mxf4/"
                "mxf4nvf4 (packed, two a byte); e4m3, e5m2, e2m3, e3m2 and e2m1 mixed with another type go to "
                "kind::mxf8f6f4, whose A and B types are independent", cite("scale_vec")),
        Derived("k_per_mma", k.k_per_mma, f"256 bits of a row / {spec.container_bits('a')} bits = {k.k_per_mma}",
                f"one MMA reads {k.k_per_mma} / {V} = {k.sfs_per_mma} scale factor(s) per row ({k.scale_vec})", cite("shapes")),
    ]
    for name in ("a", "b"):
        dt = spec.operand_dtype(name)
        X = name.upper()
        if spec.container_bits(name) == 4:
            D.append(Derived(f"{name}_element_packing", "two e2m1 a byte, element 2i in bits 0-3",
                             f"BK={spec.bk} e2m1 = {dt.bytes_of(spec.bk)} B of a K-major row; one MMA's K=64 is 32 B, like 8-bit K=32",
                             f"{X}: kind::mxf4/mxf4nvf4 read e2m1 packed without padding", cite("mxf4_smem")))
        elif spec.unpacked(name):
            packed = UNPACKED_GROUP * dt.bits // 8
            D.append(Derived(f"{name}_element_packing",
                             f"{UNPACKED_GROUP} {dt.value} packed in {packed} B + {16 - packed} B of padding per 16-B cell",
                             f"element k of a K-major row: cell k // {UNPACKED_GROUP}, bits {dt.bits} x (k % {UNPACKED_GROUP}) .. of "
                             f"its first {packed} B; BK={spec.bk} = {spec.bk} B of a row (one byte an element), one MMA's K=32 = 32 B",
                             f"{X}: kind::mxf8f6f4 reads 4- and 6-bit elements 'contiguously packed along with padding' in 16-B "
                             "cells, so the stage has the 8-bit geometry (CUTLASS allocates it as uint8_t); TMA unpacks the "
                             "packed global rows into it", cite("mxf8f6f4_smem")))
        else:
            D.append(Derived(f"{name}_element_packing", "one byte an element",
                             f"{dt.value}: 8-bit codes, the dense f8f6f4 layout", f"{X}: kind::mxf8f6f4 reads 8-bit elements",
                             cite("mxf8f6f4_smem")))
    D += [
        Derived("sf_global_layout", f"((32,4),({V},4)):((16,4),(0,1)) atoms of 512 B, K first",
                "scale (row, chunk) at 512 x ((row // 128) x ceil(K / %d) + chunk // 4) + 16 x (row %% 32) + 4 x ((row // 32) %% 4) + chunk %% 4" % (4 * V),
                "128 rows x 4 chunks per atom so that 4 consecutive bytes (one TMEM word) hold one row's chunks", CUTLASS_REF),
    ]
    for op in (a, b):
        X = op.name.upper()
        D.append(Derived(f"sf{op.name}_stage_bytes", op.stage_bytes,
                         f"ceil({op.rows} / 128) = {op.blocks} block(s) x BK / 4V = {spec.bk} / {4 * V} = {op.groups} atom(s) x 512 B",
                         f"SF{X} of one stage: each 128-row block's atoms contiguous along K", CUTLASS_REF))
        D.append(Derived(f"sf{op.name}_copies", len(op.copies),
                         ", ".join(f"+{c.smem_offset_bytes} B <- {c.nbytes} B of block {c.block}" for c in op.copies),
                         "one cp.async.bulk per 128-row block: the block's atoms for this stage are contiguous in global memory "
                         "(K first) and in the stage; completes on the stage's full barrier (complete_tx)", cite("bulk_copy")))
        D.append(Derived(f"sf{op.name}_tmem", f"{op.tmem_columns} columns",
                         "; ".join(f"atom (block {c.block}, group {c.group}) +{c.smem_offset_bytes} B -> column +{c.column}" for c in op.tmem_copies[:6])
                         + (" ..." if len(op.tmem_copies) > 6 else ""),
                         f"{CP_32X128B_WARPX4.opcode_for(spec.cta_group)}: 32 rows x 16 B -> lanes 0-31 x 4 columns, duplicated to all four lane "
                         f"partitions; row r sits in lane r % 32, column r // 32 (block b of {X} 4 columns after block b-1)", cite("tcgen05_cp")))
    D.append(Derived("sf_cp_descriptor", cp_desc.hex, "no swizzle, SBO = 8 rows x 16 B = 128 B, LBO unused (one 16-B column)",
                     "tcgen05.cp reads the atom as an unswizzled K-major matrix of 8-row core matrices", cite("smem_desc")))
    D.append(Derived("sf_tmem_columns_per_stage", per_stage, f"SFA {a.tmem_columns} + SFB {b.tmem_columns}",
                     "each pipeline stage has its own TMEM columns: tcgen05.cp -> tcgen05.mma is pipelined (same thread, in "
                     "order) but tcgen05.mma -> tcgen05.cp is not, so a stage's columns are rewritten only after the MMAs that "
                     "read them have completed (the empty barrier, committed after them, orders it)", cite("pipelined")))
    for i, s in enumerate(steps):
        D.append(Derived(f"sf_step[{i}]", f"SF ID {s.sf_id}, A col +{s.a_column}, B col +{s.b_column}, {s.idesc.hex}",
                         f"K {s.k}: chunk {s.chunk} = atom group {s.chunk} // 4 = {s.group}, byte {s.chunk} % 4 = {s.sf_id}",
                         "the instruction descriptor's a_sf_id/b_sf_id pick the byte of each TMEM word; the scale-factor "
                         "addresses pick the atom's columns", f"{cite('sfa_id')}; {idesc_ref(k.kind)}"))
    return D


# ---- the concrete copies and addresses of one tile, for the L1 bridge (ptxgen.model.bridges.verify_scales) -------------
def sfb_row_column(n0: int, bn: int) -> int:
    """Extra SFB column of a tile whose N origin can be inside a 128-row atom (BN = 64 or 192): rows n0 % 128.. of the
    atom sit in columns (n0 % 128) // 32 onward, and the next block's rows 4 columns after the block's first (a BN =
    192 tile at n0 = 192 reads columns 2..7 of blocks 1 and 2, as CUTLASS's 'MMA_N_SFB' rounds 192 up to 256). The
    kernel renders the same as ``(n0 % 128) / 32``."""
    return (n0 % SF_ATOM_ROWS) // 32 if bn % SF_ATOM_ROWS else 0


def stage_atoms(groups: int, kt: int, k_atoms: int) -> int:
    """Atoms along K that K-tile ``kt`` copies per 128-row block: BK / 4V, fewer in the last K-tile when K is not a
    multiple of BK (the global buffer ends after ``k_atoms``: copying the full stage would read the next block's
    atoms, or past the buffer)."""
    return max(0, min(groups, k_atoms - kt * groups))


def stage_copy_sources(plan: ScalePlan, name: str, row0: int, kt: int, k_atoms: int,
                       rows: int | None = None) -> tuple[tuple[int, int, int], ...]:
    """(smem offset in the stage, global byte offset, bytes) of operand ``name``'s cp.async.bulk copies for the
    tile whose rows start at ``row0`` and its K-tile ``kt``; ``k_atoms`` atoms along K in global memory
    (:func:`sf_k_atoms`); the last K-tile copies only the atoms that exist (:func:`stage_atoms`).

    ``rows``: the matrix's rows (M or N). CUTLASS pads the buffer's rows to 128, not to the tile, so a tile block
    that lies wholly past the last row (BN = 256 at the N edge; a pair's second CTA at the M edge) has no atoms: its
    copy takes the last block instead (:func:`last_block`), in bounds. Those scale factors multiply only rows past
    the matrix, whose outputs are never stored."""
    op = plan.operand(name)
    n = stage_atoms(op.groups, kt, k_atoms) * SF_ATOM_BYTES
    return tuple(
        (c.smem_offset_bytes, SF_ATOM_BYTES * (last_block(row0 // SF_ATOM_ROWS + c.block, rows) * k_atoms + kt * op.groups), n)
        for c in op.copies
        if n
    )


def last_block(block: int, rows: int | None) -> int:
    """``block``, or the buffer's last 128-row block when ``block`` lies past ``rows`` rows (None: no limit)."""
    return block if rows is None else min(block, ceil_div(rows, SF_ATOM_ROWS) - 1)


def keep_chunks(first_chunk: int, k_chunks: int) -> int:
    """Of an atom whose first K chunk is ``first_chunk``, how many chunks (bytes 0.. of each 32-bit word) hold
    scale factors inside K; the rest are set to 0 in shared memory before tcgen05.cp."""
    return max(0, min(SF_ATOM_CHUNKS, k_chunks - first_chunk))


def keep_mask_c_expr(keep: str) -> str:
    """C: the 32-bit mask that keeps bytes 0..keep-1 of a scale-factor word (chunk j is byte j) and clears the
    others, for 0 <= keep < 4."""
    return f"((1u << (8 * ({keep}))) - 1u)"


def stage_zero_fill(plan: ScalePlan, name: str, kt: int, k_chunks: int) -> tuple[tuple[int, int], ...]:
    """(smem offset of the atom in the stage, chunks kept) of every atom of operand ``name`` in K-tile ``kt``'s
    stage that holds chunks past K (``k_chunks`` = ceil(K / V)): the kernel zeroes their bytes past ``kept``."""
    op = plan.operand(name)
    out = []
    for g in range(op.groups):
        keep = keep_chunks((kt * op.groups + g) * SF_ATOM_CHUNKS, k_chunks)
        if keep < SF_ATOM_CHUNKS:
            out += [(op.smem_atom_offset(b, g), keep) for b in range(op.blocks)]
    return tuple(out)


def stage_tmem_copies(plan: ScalePlan) -> tuple[tuple[str, int, int], ...]:
    """(operand, smem offset in its stage, TMEM column from the stage's scale-factor base) of every tcgen05.cp."""
    out = []
    for name, col0 in (("a", 0), ("b", plan.a.tmem_columns)):
        out += [(name, c.smem_offset_bytes, col0 + c.column) for c in plan.operand(name).tmem_copies]
    return tuple(out)
