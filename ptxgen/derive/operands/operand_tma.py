"""One operand's TMA plan: its tensor map and copies, derived from the spec and the operand's shared-memory layout.

The box and copy arithmetic (and the tensor-map types) live in :mod:`ptxgen.derive.operands.tma`; this module adds what
the spec decides (element type, the cluster's multicast share) and the reasons ``ptxgen explain`` prints.
"""

from __future__ import annotations

from ...isa.ptxref import cite
from ...isa.tensormap import (
    DRIVER_REF,
    PTX_TENSOR_REF,
    PTX_TMA_REF,
    SMEM_DST_ALIGN,
    TMA_DATA_TYPE_OF,
    TMA_SWIZZLE_KEY,
    TMA_SWIZZLE_OF,
    TMA_UNPACKED_DATA_TYPE_OF,
    UNPACKED_BOX_INNER_ELEMENTS,
    UNPACKED_GLOBAL_ADDRESS_ALIGN,
    UNPACKED_GLOBAL_DIM0_MULTIPLE,
    UNPACKED_GLOBAL_STRIDE_ALIGN,
    UNPACKED_LOAD_SWIZZLES,
)
from ...isa.types import Major
from ..tile.derived import Derived
from .operand import OperandLayout
from ..tile.spec import TileSpec
from .tma import L2_SECTOR_BYTES, TmaPlan, copies_of, split_copies, tile_map


def batch_dim_of(spec: TileSpec, name: str) -> tuple[str, str]:
    """(batch dimension, its stride's problem value) of operand ``name``'s map: ("batch", "lda_batch") for a batched
    operand (``--batch``), ("G", "ldb_group") for a grouped kernel's N-major B (one 3-D map over N, K, G: a K tail
    reads zeros, not the next group's K rows), ("", "") for a 2-D map."""
    if spec.batch.batched(name):
        return "batch", f"ld{name}_batch"
    if name == "b" and spec.grouped.along_m and spec.b.major is Major.MN:
        return "G", "ldb_group"
    return "", ""


def derive_tma(spec: TileSpec, op: OperandLayout) -> TmaPlan:
    layout = op.store
    dt = op.dtype
    # Packed e2m1 (two a byte) travels as bytes: the map's elements, box and K coordinates count bytes (K / 2).
    packed = op.container_bits < 8
    # kind::mxf8f6f4's 6-/4-bit types: the map counts elements, reads them packed from global memory and writes each
    # 16 of them into a padded 16-byte cell (16U4_ALIGN16B / 16U6_ALIGN16B): one byte of shared memory an element.
    unpacked = op.unpacked
    ebytes = 1 if packed or unpacked else dt.bytes
    T = 16 // ebytes
    split = spec.cluster.size if spec.cluster.shared_operand == op.name else 1
    box, copies, grid = copies_of(layout, T, split)
    assert grid.expand() == copies
    swz = TMA_SWIZZLE_OF[op.swizzle]
    k_major = op.major is Major.K
    MN = "M" if op.name == "a" else "N"
    dims = ("K", MN) if k_major else (MN, "K")
    ld = f"ld{op.name}"
    smem_bytes = len(copies) * box[0] * box[1] * ebytes
    assert smem_bytes == op.stage_bytes, (smem_bytes, op.stage_bytes)
    # complete_tx counts the bytes a copy moves from global memory: for the unpacking types the packed bytes
    # (CUTLASS's ABTmaTransactionBytes = cosize(SmemLayoutA) x sizeof_bits<ElementA> / 8 with the 4-/6-bit ElementA,
    # sm100_blockscaled_mma_warpspecialized.hpp), not the padded cells they fill.
    expect = len(copies) * box[0] * box[1] * dt.bits // 8 if unpacked else smem_bytes
    data_type = TMA_UNPACKED_DATA_TYPE_OF[dt] if unpacked else TMA_DATA_TYPE_OF[dt]
    if unpacked:
        assert box[0] == UNPACKED_BOX_INNER_ELEMENTS and swz in UNPACKED_LOAD_SWIZZLES, (box, swz)
    assert all(c.smem_offset_bytes % SMEM_DST_ALIGN == 0 for c in copies)
    inner_word = "K" if k_major else MN
    outer_word = MN if k_major else "K"
    adjacent = layout.row_atom_stride_bytes == layout.atom_bytes
    atoms = "core matrices" if not op.swizzle.is_swizzled else f"{op.swizzle.value} atoms"
    batch_dim, batch_ld = batch_dim_of(spec, op.name)
    rank = 3 if batch_dim else 2
    all_dims = dims + ((batch_dim,) if batch_dim else ())
    bword = "group" if batch_dim == "G" else "batch"
    unpack_why = (f"; {dt.value} is packed in global memory (16 elements in {2 * dt.bits} B) and unpacked into the "
                  f"16-byte cells kind::mxf8f6f4 reads (16 elements + {16 - 2 * dt.bits} B of gap); the map counts elements; "
                  f"CUTLASS picks the same type for float_{dt.value}_unpacksmem_t (include/cute/arch/copy_sm90_desc.hpp). "
                  f"Needs at launch: A/B base {UNPACKED_GLOBAL_ADDRESS_ALIGN}-byte aligned, K a multiple of "
                  f"{UNPACKED_GLOBAL_DIM0_MULTIPLE}, row stride a multiple of {UNPACKED_GLOBAL_STRIDE_ALIGN} B") if unpacked else ""
    D = (
        Derived("data_type", data_type.cuda_name, f"{dt.value} -> CU_TENSOR_MAP_DATA_TYPE_{data_type.cuda_name}",
                "element size for the copy engine" + ("; raw 32-bit words (the inputs are tf32-exact)" if dt.bits == 32 else "")
                + ("; 8-bit codes travel as bytes" if dt.bits == 8 else "")
                + ("; packed e2m1 pairs travel as bytes: K counts bytes (K / 2) in the map" if packed else "") + unpack_why,
                DRIVER_REF),
        Derived("rank", rank, f"dims ({', '.join(all_dims)})",
                f"{op.name.upper()} is {dims[1]} rows of {dims[0]} contiguous elements ({op.major.value}-major)"
                + (f", {batch_dim} times: the {bword} is the outermost dimension, so one map covers every {bword} "
                   f"(no per-{bword} map on the host or the device)" if batch_dim else ""), DRIVER_REF),
        Derived("global_dims", "[" + ", ".join(all_dims) + "]", "the problem's extents at launch, inner first",
                "the bounds TMA checks: elements past them read as zero (partial tiles, the K tail)"
                + (f"; each coordinate is checked against its own dimension, so a {bword}'s K tail and row tail read "
                   f"zeros, never the next {bword}'s elements" if batch_dim else ""), PTX_TENSOR_REF),
        Derived("global_strides", (f"[{ld} x {dt.bits} / 8 B]" if unpacked else f"[{ld} x {ebytes} B]" if not packed
                                   else f"[{ld} / 2 B]")[:-1] + (f", {batch_ld} x {ebytes} B]" if batch_dim else "]"),
                f"row stride of {dims[1]} rows" + (f", then the {bword} stride; each a multiple of 16 B" if batch_dim
                                                   else f"; must be a multiple of {UNPACKED_GLOBAL_STRIDE_ALIGN if unpacked else 16} B"),
                "the copy engine addresses rows in 16-byte units" + ("; the unpacking types in 32-byte units" if unpacked else ""),
                DRIVER_REF),
        Derived("box", f"[{box[0]}, {box[1]}]",
                f"inner: one atom row = {layout.atom_cols} x 16 B = {box[0]} elements of {inner_word}; outer: "
                + (f"{box[1]} {outer_word} rows = {box[1] // layout.atom_rows} {atoms} adjacent in the stage" if adjacent and box[1] > layout.atom_rows
                   else f"{box[1]} {outer_word} rows = one atom (atoms are adjacent along {inner_word}, not {outer_word})"),
                "a box is written densely, row after row; its inner extent may not exceed the swizzle span, and its "
                "rows must land on consecutive atom rows of the stage", PTX_TMA_REF),
        Derived("element_strides", "[" + ", ".join("1" * rank) + "]", "every element", "dense tile", DRIVER_REF),
        Derived("interleave", "NONE", "INTERLEAVE_NONE", "row-major global tensors", DRIVER_REF),
        Derived("swizzle", swz.json_name, f"{op.swizzle.value} -> CU_TENSOR_MAP_SWIZZLE_{swz.name.lstrip('B') if swz.name != 'NONE' else 'NONE'}",
                "the same swizzle as the MMA descriptors' layout type: TMA writes the pattern the tensor core reads", cite("swizzling")),
        Derived("swizzle_key", TMA_SWIZZLE_KEY, "XOR of address bits [7, 10) into [4, 7) of the address written",
                "where TMA anchors the pattern decides the descriptors' base offset (docs/hardware-layout.md, 'TMA')", cite("base_offset")),
        Derived("l2_promotion", "L2_256B (rows on a 32-B sector), else L2_128B",
                f"at launch, from the row stride {ld} x {ebytes} B: L2_PROMOTION_L2_256B when it is a multiple of "
                f"{L2_SECTOR_BYTES} B, else L2_PROMOTION_L2_128B",
                "fetch whole L2 lines: every tile row is read in full; rows that start mid-sector fetch 128-byte lines "
                "(measured on the H200: 0.64 -> 0.75-0.78 of cuBLAS at the 16-B phase; docs/performance.md, run 25)", DRIVER_REF),
        Derived("oob_fill", "NONE (zeros)", "FLOAT_OOB_FILL_NONE", "out-of-bounds elements are zero, so the K tail adds nothing", DRIVER_REF),
        Derived("copies", len(copies),
                f"{layout.cols // layout.atom_cols} atom column(s) x {layout.rows // box[1]} box(es) of {box[1]} rows: "
                + ", ".join(f"+{c.smem_offset_bytes} B <- ({c.inner}, {c.outer})" for c in copies[:6]) + (" ..." if len(copies) > 6 else ""),
                "each copy writes one run of adjacent atoms; its smem offset is that run's offset in the stage layout, its "
                "box origin the run's first element relative to the tile origin (inner, outer)", PTX_TMA_REF),
        Derived("expect_tx_bytes", expect,
                f"{len(copies)} x {box[0]} x {box[1]} x {dt.bits} bits / 8 = {expect} (the stage holds {smem_bytes} B)" if unpacked
                else f"{len(copies)} x {box[0]} x {box[1]} x {ebytes} B = {expect}",
                "the full-barrier transaction count per stage for this operand: TMA counts whole boxes, zero-filled parts too"
                + ("; for the unpacking types the packed bytes read, as CUTLASS counts them (sm100_blockscaled_mma_warpspecialized."
                   "hpp: cosize(SmemLayoutA) x sizeof_bits<ElementA> / 8, ElementA the 4-/6-bit type); not measured on hardware"
                   if unpacked else ""), PTX_TMA_REF),
    )
    mc = None
    if split > 1:
        mc = split_copies(layout, T, dt.bytes, split)
        assert mc is not None and mc.bytes_per_cta * split == expect, "validate() admits only splittable stages"
        D += (
            Derived("multicast", f"{len(mc.copies)} of {len(copies)} copies per CTA, ctaMask 0b{mc.cta_mask:b}",
                    f"CTA rank r of the {split}-CTA cluster issues copies r x {len(mc.copies)} .. (r + 1) x {len(mc.copies)} - 1: copy i "
                    f"shifted by r x (+{mc.smem_delta_bytes} B, inner +{mc.inner_delta}, outer +{mc.outer_delta}), "
                    f"{mc.bytes_per_cta} B each, with .multicast::cluster",
                    f"both CTAs multiply the same {op.name.upper()} tile: each fetches half of it from L2 once and the copy engine writes "
                    "it at the same shared-memory offset in both CTAs and completes the transaction bytes on the full barrier at the "
                    f"same offset in each, so each CTA's full barrier still expects the whole {expect} B of {op.name.upper()}",
                    cite("tma_multicast") + "; CUTLASS SM90_TMA_LOAD_MULTICAST (include/cute/arch/copy_sm90_tma.hpp)"),
        )
    if batch_dim:
        D += (Derived("batch_coordinate", "the tile's " + bword, f"every copy's third coordinate: box [{box[0]}, {box[1]}, 1]",
                      f"the box is one {bword} deep, so it lands densely exactly as the 2-D box does: same copies, offsets "
                      "and descriptors", PTX_TMA_REF),)
    return tile_map(
        batch_dim=batch_dim,
        batch_ld_name=batch_ld,
        operand=op.name,
        layout=layout,
        data_type=data_type,
        element_bytes=ebytes,
        global_dims=dims,
        ld_name=ld,
        box=box,
        swizzle=swz,
        copies=copies,
        grid=grid,
        expect_tx_bytes=expect,
        derivation=D,
        multicast=mc,
    )
