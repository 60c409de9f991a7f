"""Render context of the loader piece (templates/loader.cuh.j2): each operand's TMA copies or cp.async loop, rendered."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.operands.operand import OperandLayout
from ...isa.types import Major
from ..cexpr import linear_offset_c_expr, swizzle_c_expr


@dataclass(frozen=True)
class CopyView:
    smem_offset_bytes: int
    x: str  # coordinate along the map's dimension 0 (contiguous)
    y: str  # along dimension 1
    z: str = ""  # along dimension 2 (a 3-D map: the batch or group); "" for a 2-D map


@dataclass(frozen=True)
class MulticastCopyView:
    smem_offset: str  # C expression in cta_rank
    x: str
    y: str


@dataclass(frozen=True)
class CopyLoopView:
    columns: int
    runs: int
    smem_offset: str  # C expression in cj (column) and ci (run)
    x: str
    y: str
    z: str = ""  # a 3-D map's batch (or group) coordinate


UNROLL_COPIES = 16
CP_ASYNC_UNROLL = 4  # cp.async copies a producer thread keeps in flight per loop trip  # more copies than this per operand and stage: a loop nest instead of straight-line code


@dataclass(frozen=True)
class OperandView:
    name: str
    NAME: str
    global_layout: str
    summary: str
    # TMA multicast (the operand a 2-CTA cluster shares): this CTA's share, the rank's shift already in x / y / smem
    mc_copies: tuple["MulticastCopyView", ...] = ()
    mc_mask: int = 0
    # TMA: the copies unrolled, or (when there are many) one loop nest over copy_loop
    tma_doc: str = ""
    copies: tuple[CopyView, ...] = ()
    copy_loop: "CopyLoopView | None" = None
    # cp.async
    rows: int = 0
    cols: int = 0
    row_word: str = ""
    cells: int = 0
    iters: int = 0
    guard: bool = False
    linear_expr: str = ""
    swizzle_expr: str = ""
    outer_origin: str = ""
    inner_origin: str = ""
    outer_extent: str = ""
    inner_extent: str = ""
    per_cell: int = 0
    esize: int = 0
    ld: str = ""
    unroll: int = 1
    # cp.async narrower than 16 B (spec.copy_bytes 8 or 4): each cell's pieces, byte offsets within the cell
    copy_bytes: int = 16
    pieces: tuple[int, ...] = ()


def _global_layout(op: OperandLayout) -> str:
    X, ld = op.name.upper(), f"ld{op.name}"
    MN = "M" if op.name == "a" else "N"
    if op.major is Major.K:
        return f"{X} is {MN} x K, K contiguous (row-major {MN} x K), row stride {ld} >= K elements"
    return f"{X} is K x {MN}, {MN} contiguous (row-major K x {MN}), row stride {ld} >= {MN} elements"


def _extents(op: OperandLayout, pair: bool = False, b_row0: str = "n0") -> tuple[str, str, str, str]:
    """(inner origin, outer origin, inner extent, outer extent) of the operand's global tensor. A CTA of a pair
    loads its own share of the tile, from ``m_cta`` / ``n_cta`` (tile_coords_c)."""
    mn0, MN = ("m0", "M") if op.name == "a" else (b_row0, "N")  # b_row0: a grouped kernel's row in B's (G N) x K view
    if pair:
        mn0 = {"m0": "m_cta", "n0": "n_cta"}[mn0]
    # packed e2m1 (K-major only): the tensor map counts bytes along K, two elements each; the unpacking maps of
    # kind::mxf8f6f4's 6-/4-bit types count elements (container_bits 8)
    k0 = "k0" if op.container_bits >= 8 else f"(k0 / {8 // op.container_bits})"
    return (k0, mn0, "K", MN) if op.major is Major.K else (mn0, k0, MN, "K")


def _tma_view(op: OperandLayout, common: dict, inner0: str, outer0: str, batch_coord: str) -> OperandView:
    """The TMA loader's copies of one stage: unrolled, a loop nest, or a cluster's multicast share."""
    if op.tma.layout is not op.store:
        raise AssertionError(f"{op.name}: the TMA plan was not derived from the layout the MMA descriptors read")
    tma = op.tma
    if tma.batched != bool(batch_coord):
        raise AssertionError(f"{op.name}: a rank-{tma.rank} map with batch coordinate {batch_coord!r}")
    z = batch_coord
    doc = (f"{len(tma.copies)} box(es) of {tma.box[0]} x {tma.box[1]} elements, swizzle {tma.swizzle.json_name}; "
           f"{tma.expect_tx_bytes} B a stage")
    if tma.multicast is not None:
        mc = tma.multicast
        r = "static_cast<int>(cta_rank)"
        views = tuple(
            MulticastCopyView(f"{c.smem_offset_bytes}u + cta_rank * {mc.smem_delta_bytes}u", f"{inner0} + {c.inner} + {r} * {mc.inner_delta}",
                              f"{outer0} + {c.outer} + {r} * {mc.outer_delta}")
            for c in mc.copies
        )
        if z:
            raise AssertionError(f"{op.name}: a multicast copy of a 3-D map is not derived")
        doc += (f"; shared by the cluster: this CTA loads {len(mc.copies)} of them ({mc.bytes_per_cta} B) and multicasts them "
                f"to the {mc.ctas} CTAs of ctaMask {mc.cta_mask}, which receive the rest from the peer")
        return OperandView(**common, tma_doc=doc, mc_copies=views, mc_mask=mc.cta_mask)
    if len(tma.copies) > UNROLL_COPIES:
        g = tma.grid
        if g.expand() != tma.copies:
            raise AssertionError(f"{op.name}: the copy loop does not write the derived copies")
        loop = CopyLoopView(
            g.columns,
            g.runs,
            f"static_cast<unsigned>(cj) * {g.column_stride_bytes}u + static_cast<unsigned>(ci) * {g.run_stride_bytes}u",
            f"{inner0} + cj * {g.inner_step}",
            f"{outer0} + ci * {g.outer_step}",
            z,
        )
        return OperandView(**common, tma_doc=doc + ", in a loop nest", copy_loop=loop)
    copies = tuple(CopyView(c.smem_offset_bytes, f"{inner0} + {c.inner}", f"{outer0} + {c.outer}", z) for c in tma.copies)
    return OperandView(**common, tma_doc=doc, copies=copies)


def _cp_async_view(op: OperandLayout, common: dict, producer_threads: int, copy_bytes: int, origins: tuple) -> OperandView:
    """The cp.async loader: each producer thread copies 16-byte cells (or their 8- or 4-byte pieces) to their swizzled
    offsets."""
    inner0, outer0, inner_ext, outer_ext = origins
    word = "M" if op.name == "a" else "N"
    store = op.store
    cells = store.rows * store.cols
    pieces = ()
    if copy_bytes != 16:
        # a cell's pieces stay contiguous at the cell's swizzled offset: the swizzle moves 16-byte units only
        if store.swizzle.bms[0] and store.swizzle.bms[1] < 4:
            raise AssertionError(f"{op.name}: a swizzle below 16-byte units would split a cell's {copy_bytes}-byte pieces")
        pieces = tuple(range(0, 16, copy_bytes))
    return OperandView(
        **common,
        copy_bytes=copy_bytes,
        pieces=pieces,
        rows=store.rows,
        cols=store.cols,
        row_word=f"{word} row" if op.major is Major.K else "K row",
        cells=cells,
        iters=-(-cells // producer_threads),
        # unrolling every copy of a 16-iteration loop spilled (sm_90a, BK=128, measured with NVRTC 13.5)
        unroll=min(CP_ASYNC_UNROLL, -(-cells // producer_threads)),
        guard=cells % producer_threads != 0,
        linear_expr=linear_offset_c_expr(store),
        swizzle_expr=swizzle_c_expr(store),
        outer_origin=outer0,
        inner_origin=inner0,
        outer_extent=outer_ext,
        inner_extent=inner_ext,
        per_cell=op.per_cell,
        esize=op.container_bits // 8,
        ld=f"ld{op.name}",
    )


def operand_view(op: OperandLayout, producer_threads: int, pair: bool = False, b_row0: str = "n0",
                 copy_bytes: int = 16, batch_coord: str = "") -> OperandView:
    """``batch_coord``: the C expression of a 3-D map's third coordinate (the tile's batch or group); required exactly
    when the operand's map is rank 3."""
    word = "M" if op.name == "a" else "N"
    summary = (
        f"{op.name.upper()}: {op.major.value}-major {op.swizzle.value}, atom order {op.order.value}, {op.stage_bytes} B per stage "
        f"aligned to {op.alignment_bytes} B, ring at +{op.ring_offset_bytes} B; LBO {op.lbo_bytes} B, SBO {op.sbo_bytes} B, layout type "
        f"{op.layout_type}, base offset {op.base_offset}; one MMA reads {op.mma_mn} x K of {word}"
        + (" from each CTA of the pair" if pair else "")
    )
    inner0, outer0, inner_ext, outer_ext = _extents(op, pair, b_row0)
    common = dict(name=op.name, NAME=op.name.upper(), global_layout=_global_layout(op), summary=summary)
    if op.tma is not None:
        return _tma_view(op, common, inner0, outer0, batch_coord)
    return _cp_async_view(op, common, producer_threads, copy_bytes, (inner0, outer0, inner_ext, outer_ext))
