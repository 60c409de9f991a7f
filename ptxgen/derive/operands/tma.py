"""TMA: the tensor map and the copies that fill one operand stage, derived from its shared-memory layout.

A TMA box is written densely: box row ``o`` (along the outer dimension) lands ``o x inner_bytes`` past the
copy's destination, then the swizzle permutes the 16-byte chunks of every 128-byte line. So a box whose
inner extent is one atom row (the swizzle span; 16 B for ``none``) and whose outer extent covers atoms that
sit next to each other in the stage writes exactly those atoms. The copies of a stage are the runs of
adjacent atoms of the operand's :class:`~ptxgen.derive.operands.smem_layout.SmemLayout`: one copy per column of atoms
when atoms are adjacent along the outer dimension, one per atom otherwise.

Global side (one map per operand; the kernel's global layouts follow the operand's majorness):
dimension 0 (inner) is the contiguous one (K for K-major, M or N for MN-major), dimension 1 the other;
the row stride is ``ld x element bytes``. Out-of-bounds elements are read as zeros, which is how partial
tiles and the K tail work. A batched operand (``--batch``, or a grouped kernel's N-major B) has a third,
outermost dimension, the batch (or group), with its own stride ``ld_batch x element bytes``: the box is
(inner, outer, 1), a copy's third coordinate is the tile's batch, and since TMA checks each coordinate
against its own dimension, rows past M (N) and K past K read zeros instead of the next batch's elements.
The box still lands densely (its one batch plane is the whole box), so the copies, the smem offsets and the
descriptors are those of the 2-D map.

>>> from ptxgen.derive.tile.spec import make_spec
>>> from ptxgen.derive.tile.layout import derive
>>> t = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"))
>>> t.a.tma.box, t.a.tma.swizzle.json_name, [(c.smem_offset_bytes, c.inner, c.outer) for c in t.a.tma.copies]
((32, 128), '64B', [(0, 0, 0)])
>>> t.b.tma.box, len(t.b.tma.copies)   # N-major B, atom order mn: atoms adjacent along N, one box per atom
((64, 8), 8)
>>> t = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", b_order="k"))   # atoms adjacent along K
>>> t.b.tma.box, [(c.smem_offset_bytes, c.inner, c.outer) for c in t.b.tma.copies]
((64, 32), [(0, 0, 0), (4096, 64, 0)])
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.tensormap import (
    INTERLEAVE_NONE,
    UNPACKING_DATA_TYPES,
    L2_PROMOTION_128B,
    L2_PROMOTION_256B,
    L2_SECTOR_BYTES,
    MAX_BOX_ELEMENTS,
    OOB_FILL_ZERO,
    TmaDataType,
    TmaSwizzle,
)
from ..tile.derived import Derived

from .smem_layout import SmemLayout


@dataclass(frozen=True)
class TmaCopy:
    """One ``cp.async.bulk.tensor.2d`` of a stage: where its box goes and where it starts in the tile."""

    smem_offset_bytes: int  # from the stage base
    inner: int  # box origin along the contiguous global dimension, elements, relative to the tile origin
    outer: int  # box origin along the other dimension

    def to_json(self) -> dict:
        return {"smem_offset_bytes": self.smem_offset_bytes, "inner": self.inner, "outer": self.outer}


@dataclass(frozen=True)
class CopyGrid:
    """The copies as a grid: copy (j, i) for j < columns, i < runs lands at j x column_stride_bytes +
    i x run_stride_bytes and starts at (j x inner_step, i x outer_step). Kernels loop over it when the
    list is long (hundreds of unrolled copies cost the 40-register producer its registers)."""

    columns: int
    runs: int
    column_stride_bytes: int
    run_stride_bytes: int
    inner_step: int
    outer_step: int

    def expand(self) -> tuple[TmaCopy, ...]:
        copies = [
            TmaCopy(j * self.column_stride_bytes + i * self.run_stride_bytes, j * self.inner_step, i * self.outer_step)
            for j in range(self.columns)
            for i in range(self.runs)
        ]
        return tuple(sorted(copies, key=lambda c: c.smem_offset_bytes))


@dataclass(frozen=True)
class TmaPlan:
    """Everything ``cuTensorMapEncodeTiled`` needs but the pointer and the problem size, plus the copies."""

    operand: str
    layout: SmemLayout | None  # the same object the MMA descriptors were derived from (checked at render time); None
    # for a map that feeds no MMA descriptor (scale_a's, derive.scaled.sfa_tma: one f32 row a box into a plain slot)
    data_type: TmaDataType
    element_bytes: int
    rank: int
    global_dims: tuple[str, ...]  # names of the problem extents, inner first ("K", "M"), ("K", "M", "batch"), ...
    ld_name: str  # the leading-dimension parameter: row stride = ld x element_bytes
    box: tuple[int, ...]  # (inner elements, outer elements), and 1 along the batch for a rank-3 map
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: TmaSwizzle
    l2_promotion: int
    oob_fill: int
    copies: tuple[TmaCopy, ...]
    grid: CopyGrid  # the same copies as a loop nest
    expect_tx_bytes: int  # bytes this operand's copies deliver per stage (full boxes, zero-fill included)
    derivation: tuple[Derived, ...]
    multicast: "MulticastPlan | None" = None  # the operand a 2-CTA cluster shares: each CTA loads one share
    batch_ld_name: str = ""  # rank 3: the batch stride's problem value (elements between batches), e.g. "lda_batch"

    @property
    def batched(self) -> bool:
        """A rank-3 map: the third coordinate of every copy is the tile's batch (or group)."""
        return self.rank == 3

    @property
    def stride_names(self) -> tuple[str, ...]:
        """The problem values of the strides of dimensions 1.. (elements): (ld,) or (ld, ld_batch)."""
        return (self.ld_name, self.batch_ld_name) if self.batched else (self.ld_name,)

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * self.element_bytes

    def to_json(self) -> dict:
        """The ``"tma"`` object of ``explain --json`` (exactly these keys; tools read them). The unpacking types
        (kind::mxf8f6f4's 6-/4-bit operands) add ``"data_type"``: their copies write padded 16-byte cells."""
        d = {
            "swizzle": self.swizzle.json_name,
            "box": list(self.box),
            "copies": [c.to_json() for c in self.copies],
        }
        if self.batched:  # rank 3 only: the batch dimension's name and stride (2-D maps keep exactly the keys above)
            d["rank"] = 3
            d["global_dims"] = list(self.global_dims)
            d["strides"] = list(self.stride_names)
        if self.data_type.value in UNPACKING_DATA_TYPES:
            d["data_type"] = self.data_type.cuda_name
        return d


def tile_map(batch_dim: str = "", batch_ld_name: str = "", **fields) -> TmaPlan:
    """A TmaPlan with what every ptxgen tensor map shares: rank 2, every element (strides 1), no interleave,
    whole 256-byte L2 lines, out-of-bounds elements zero. The operands' maps and D's (derive.store.epilogue) come from here.

    ``batch_dim`` (a problem extent's name, e.g. "batch" or "G") makes it rank 3: that extent is the outermost
    dimension, ``batch_ld_name`` its stride, and the box is one batch deep."""
    if batch_dim:
        fields = dict(fields, global_dims=tuple(fields["global_dims"]) + (batch_dim,), box=tuple(fields["box"]) + (1,))
        return TmaPlan(rank=3, element_strides=(1, 1, 1), interleave=INTERLEAVE_NONE, l2_promotion=L2_PROMOTION_256B,
                       oob_fill=OOB_FILL_ZERO, batch_ld_name=batch_ld_name, **fields)
    return TmaPlan(rank=2, element_strides=(1, 1), interleave=INTERLEAVE_NONE, l2_promotion=L2_PROMOTION_256B,
                   oob_fill=OOB_FILL_ZERO, **fields)


def l2_promotion_for_rows(row_bytes: int) -> int:
    """The tensor map's L2 promotion for operand rows ``row_bytes`` apart: 256-byte lines when every row starts on a
    32-byte L2 sector, 128-byte lines otherwise.

    Measured on the H200 (docs/performance.md, run 25; 128 x 256 x 64 persistent kernel, M = N = 5120, K = 5000):
    rows 16, 48, 80 or 112 B past a 128-byte line (not on a sector) ran at 0.64-0.65 of cuBLAS with 256-byte
    promotion and 0.75-0.78 with 128-byte (or 64-byte, or none); rows on a sector (0, 32, 64 B) ran at 0.89-0.92,
    where 256-byte promotion is the best of the four (0.924 against 0.90-0.91). ncu: at the 16-byte phase the
    kernel's L2 work (throughput x duration) is 2.4 x that at phase 0, and it becomes L2-bound (75% of the L2's
    peak)."""
    return L2_PROMOTION_256B if row_bytes % L2_SECTOR_BYTES == 0 else L2_PROMOTION_128B


def copies_of(layout: SmemLayout, elems_per_cell: int, split: int = 1) -> tuple[tuple[int, int], tuple[TmaCopy, ...], CopyGrid]:
    """(box, copies, grid) that write ``layout`` densely: runs of atoms adjacent along the outer dimension.

    ``split`` > 1 (a multicast operand): the number of copies must be a multiple of ``split``, so runs are
    shortened until it is (the caller checks that it is; see :func:`split_copies`)."""
    R, W = layout.atom_rows, layout.atom_cols
    n_row_atoms, n_col_atoms = layout.rows // R, layout.cols // W
    run = n_row_atoms if layout.row_atom_stride_bytes == layout.atom_bytes else 1
    run = min(run, MAX_BOX_ELEMENTS // R)
    while n_row_atoms % run or (n_col_atoms % split and (n_row_atoms // run) % split and run > 1):
        run -= 1
    box = (W * elems_per_cell, run * R)
    copies = []
    for j in range(n_col_atoms):
        for i in range(0, n_row_atoms, run):
            copies.append(
                TmaCopy(
                    smem_offset_bytes=i * layout.row_atom_stride_bytes + j * layout.col_atom_stride_bytes,
                    inner=j * W * elems_per_cell,
                    outer=i * R,
                )
            )
    grid = CopyGrid(n_col_atoms, n_row_atoms // run, layout.col_atom_stride_bytes, run * layout.row_atom_stride_bytes,
                    W * elems_per_cell, run * R)
    return box, tuple(sorted(copies, key=lambda c: c.smem_offset_bytes)), grid


@dataclass(frozen=True)
class MulticastPlan:
    """The shared operand of a 2-CTA cluster: CTA r issues ``copies`` shifted by r x the deltas, each with
    ``.multicast::cluster`` and ctaMask ``cta_mask``, so both CTAs receive every box at the same offsets."""

    ctas: int
    cta_mask: int  # bit r: CTA rank r of the cluster receives the box
    copies: tuple[TmaCopy, ...]  # rank 0's share
    smem_delta_bytes: int  # rank r's copy i: copies[i] shifted by r x these
    inner_delta: int
    outer_delta: int
    bytes_per_cta: int  # what one CTA's copies move (it receives ctas x this)


def split_copies(layout: SmemLayout, elems_per_cell: int, element_bytes: int, ctas: int = 2) -> MulticastPlan | None:
    """Split the stage's copies into ``ctas`` equal shares that differ by one constant shift (smem offset,
    box origin), or None when the stage has no such split."""
    box, copies, _ = copies_of(layout, elems_per_cell, ctas)
    if len(copies) % ctas:
        return None
    h = len(copies) // ctas
    shares = [copies[r * h:(r + 1) * h] for r in range(ctas)]
    first, second = shares[0], shares[1]
    d = (second[0].smem_offset_bytes - first[0].smem_offset_bytes, second[0].inner - first[0].inner, second[0].outer - first[0].outer)
    for r, share in enumerate(shares):
        for c0, c in zip(first, share):
            if (c.smem_offset_bytes - c0.smem_offset_bytes, c.inner - c0.inner, c.outer - c0.outer) != (r * d[0], r * d[1], r * d[2]):
                return None
    return MulticastPlan(ctas, (1 << ctas) - 1, first, d[0], d[1], d[2], h * box[0] * box[1] * element_bytes)
