"""Render context of the epilogue pieces: the accumulator read-out (wgmma fragments or TMEM loads), the conversion
to the output type and, with --epilogue tma, the staging in shared memory and the TMA store."""

from __future__ import annotations

from dataclasses import dataclass

# Named barriers 1 and 2 are the ping-pong mainloop's; the store epilogue's per-warpgroup barriers (3 + wg) follow:
# every id is allocated in ptxgen.derive.roles.barriers.
from ...derive.roles.barriers import STORE_FIRST_BARRIER_ID
from ...derive.store.epilogue import STMATRIX_MATRICES, STMATRIX_ROWS, WARP_ROWS, StorePlan
from ...derive.tile.kernel import KernelPlan
from ...isa.descriptors import tmem_lane_c_expr
from ...isa.types import DType
from ..cexpr import (
    OUT_CTYPE,
    convert_c_expr,
    linear_offset_c_expr,
    reg_list,
    swizzle_c_expr,
    wgmma_fragment_col,
    wgmma_fragment_row,
)


@dataclass(frozen=True)
class EpilogueView:
    out_ctype: str
    convert_expr: str
    acc_word_doc: str
    layout_doc: str
    # wgmma
    acc_elems: int = 0
    frag_row_expr: str = ""
    frag_col_expr: str = ""
    pair_ctype: str = ""
    store_pair_stmt: str = ""
    first_word: str = ""
    second_word: str = ""
    # where (row, col) of D goes (derive.store.output.DirectStore): an element offset from D, the step to (row, col + 1), and
    # whether the pair (col, col + 1) is one vector store (row-major D) or two scalar stores (M-major D)
    d_offset_expr: str = "static_cast<size_t>(row) * ldd + col"
    next_col_expr: str = "1"
    vector_pair: bool = True
    # tcgen05
    chunk: int = 0
    vectors: int = 0
    tmem_ld_regs: str = ""
    tmem_ld_outputs: str = ""
    group: int = 0  # tcgen05.ld per tcgen05.wait::ld (direct epilogue): group x chunk columns a wait
    store_group: int = 0  # the same, per TMA-store chunk
    wait_operands: str = ""  # C: "+r" of every register of a direct-epilogue group, tied to its wait
    store_wait_operands: str = ""
    tmem_warp_offset_expr: str = ""
    row_expr: str = ""
    row_active: str = ""
    store_row0_expr: str = ""  # TMA-store epilogue: this warp's first row (from row_base)
    store_col_base: str = "n0"  # TMA-store epilogue: this warp's first column of D
    row_base: str = "m0"
    cols: int = 0  # columns of D each epilogue warp reads
    col_expr: str = "n0 + c0"


@dataclass(frozen=True)
class StmatrixCall:
    offset_expr: str  # C: this lane's row address in the staging buffer (swizzled), bytes
    elems: tuple[tuple[int, int], ...]  # per matrix: the fragment elements (i, i + 1) its register packs, chunk-relative
    fn: str = "stmatrix_x4"  # the wrapper: stmatrix_x4, or (M-major D) stmatrix_x4_trans / stmatrix_x2_trans


@dataclass(frozen=True)
class PairStore:
    offset_expr: str  # C: this lane's byte in the staging buffer of its pair's first element (swizzled)
    first: int  # the fragment elements (first, first + 1) of the pair, chunk-relative
    second: int


@dataclass(frozen=True)
class StoreView:
    """The TMA-store epilogue (derive.store.epilogue.StorePlan), rendered."""

    offset: int
    storer_bytes: int
    buffer_bytes: int
    chunks: int
    chunk_cols: int
    rows: int
    first_barrier_id: int
    use_tma_expr: str  # C: whether this tile goes through TMA (StorePlan.use_tma_c_expr)
    pending_reads: int  # cp.async.bulk.wait_group.read N before a buffer is rewritten: buffers - 1
    buffer_offset_expr: str  # C: bytes from the storer's first buffer to this chunk's
    pack_expr: str  # C: two accumulator words lo, hi -> one register of two 16-bit (8-bit) outputs, lo in the low half;
    # "" for f32 outputs (stored as two words, no packing)
    doc: str
    # wgmma (stmatrix)
    elems_per_chunk: int = 0
    calls: tuple[StmatrixCall, ...] = ()
    pair_stores: tuple[PairStore, ...] = ()  # wgmma e4m3 / f32: one shared store of each pair a thread holds
    pair_words: bool = False  # the pairs are f32 words (st.shared.v2.f32), not e4m3 bytes packed by pack_pair (st.shared.b16)
    m_major: bool = False  # M-major D: the box's coordinates are (m0 + slab, n0 + chunk); stmatrix .trans
    edge_doc: str = "column N"  # where a box would cross the end of D's contiguous dimension (M-major D: row M)
    group_coord: str = ""  # C: the third coordinate of a rank-3 D map (the K-grouped kernel's group); "" for rank 2
    # tcgen05 (st.shared.v4 of TMEM rows)
    tmem_loads: int = 0  # tcgen05.ld of EpilogueView.chunk columns per store chunk
    cells_per_load: int = 0
    row_cell_expr: str = ""  # C: offset of cell `cell` of this thread's row `lane`, swizzled


# Columns (32-bit registers a thread) of TMEM loads issued before one tcgen05.wait::ld in the epilogues.
TMEM_WAIT_GROUP_COLS = 64


def _tied(loads: int, chunk: int) -> str:
    """Inline-asm operands that name every register of ``loads`` tcgen05.ld of ``chunk`` columns (r[g][i]) as read
    and written: the wait they are attached to then orders every use of them after it."""
    return ", ".join(f'"+r"(r[{g}][{i}])' for g in range(loads) for i in range(chunk))


def stmatrix_row_cell_c(call: int, warp: str = "(wg_tid / 32)", lane: str = "lane") -> tuple[str, str]:
    """C expressions of StorePlan.stmatrix_row_cell: matrix q = lane / 8, row lane % 8 of it."""
    row = f"{WARP_ROWS} * {warp} + {STMATRIX_ROWS} * (({lane} / {STMATRIX_ROWS}) % 2) + {lane} % {STMATRIX_ROWS}"
    cell = f"{2 * call} + {lane} / {2 * STMATRIX_ROWS}"
    return row, cell


def pair_row_col_c(group: int, half: int, warp: str = "(wg_tid / 32)", lane: str = "lane") -> tuple[str, str]:
    """C expressions of StorePlan.pair_row_col: row 16w + lane/4 (+8 for half 1), column 8 group + 2(lane % 4)."""
    row = f"{WARP_ROWS} * {warp} + {STMATRIX_ROWS * half} + {lane} / 4"
    return row, f"{8 * group} + 2 * ({lane} % 4)"


def _row_cell_c(p: StorePlan, row: str, cell: str) -> str:
    linear = linear_offset_c_expr(p.staging, f"static_cast<unsigned>({row})", f"static_cast<unsigned>({cell})")
    return swizzle_c_expr(p.staging, f"({linear})")


def store_view(p: StorePlan | None, tmem_chunk: int = 0) -> StoreView | None:
    if p is None:
        return None
    common = dict(
        offset=p.offset_bytes,
        storer_bytes=p.storer_bytes,
        buffer_bytes=p.buffer_bytes,
        chunks=p.chunks_per_slab,
        chunk_cols=p.chunk_cols,
        rows=p.rows,
        first_barrier_id=STORE_FIRST_BARRIER_ID,
        use_tma_expr=p.use_tma_c_expr,
        pending_reads=p.buffers_per_storer - 1,
        buffer_offset_expr=f"static_cast<unsigned>(store_chunk % {p.buffers_per_storer}) * {p.buffer_bytes}u",
        pack_expr="" if p.tma.element_bytes == 4 else
        f"static_cast<unsigned>(acc_to_out(lo)) | (static_cast<unsigned>(acc_to_out(hi)) << {8 * p.tma.element_bytes})",
        doc=(f"M-major D, {p.rows} rows of the user's D x {p.tma.box[0]} elements" if p.m_major else f"{p.rows} x {p.chunk_cols}")
        + f" chunks, {p.staging.swizzle.value} staging, {p.buffers_per_storer} buffer{'s' if p.buffers_per_storer > 1 else ''} per "
        + ("warpgroup" if p.wgmma else "warp"),
    )
    if p.pair_writer:
        pairs = []
        for g in range(p.chunk_cols // 8):
            for h in range(2):
                row, col = pair_row_col_c(g, h)
                cell = f"({col}) / {p.elements_per_cell}"
                byte = f"(({col}) % {p.elements_per_cell}) * {p.tma.element_bytes}u"
                pairs.append(PairStore(f"{_row_cell_c(p, row, cell)} + {byte}", 4 * g + 2 * h, 4 * g + 2 * h + 1))
        return StoreView(**common, elems_per_chunk=p.fragment_elements_per_chunk, pair_stores=tuple(pairs),
                         pair_words=p.tma.element_bytes == 4)
    if p.writer == "stmatrix.trans":
        calls = tuple(StmatrixCall(_row_cell_c(p, c.row_expr.replace("warp", "(wg_tid / 32)"), c.cell_expr.replace("warp", "(wg_tid / 32)")),
                                   tuple(c.elements(q) for q in range(c.matrices)), f"stmatrix_x{c.matrices}_trans")
                      for c in p.trans_calls)
        return StoreView(**common, elems_per_chunk=p.fragment_elements_per_chunk, calls=calls, m_major=True, edge_doc="row M")
    if p.writer == "stmatrix":
        calls = []
        for j in range(p.stmatrix_per_chunk):
            row, cell = stmatrix_row_cell_c(j)
            calls.append(StmatrixCall(_row_cell_c(p, row, cell), tuple(p.fragment_elements(j, q) for q in range(STMATRIX_MATRICES))))
        return StoreView(**common, elems_per_chunk=p.fragment_elements_per_chunk, calls=tuple(calls))
    assert p.chunk_cols % tmem_chunk == 0
    return StoreView(**common, tmem_loads=p.chunk_cols // tmem_chunk, cells_per_load=tmem_chunk // p.elements_per_cell,
                     row_cell_expr=_row_cell_c(p, "lane", "cell"))


def wgmma_epilogue_view(plan: KernelPlan) -> EpilogueView:
    s = plan.spec
    packed = s.acc is DType.F16  # f16 accumulators: two per 32-bit register
    if packed:
        word = ("(acc[i / 2] & 0xFFFFu)", "(acc[i / 2] >> 16)")
    elif s.acc is DType.F32:
        word = ("__float_as_uint(acc[i])", "__float_as_uint(acc[i + 1])")
    else:
        word = ("static_cast<unsigned>(acc[i])", "static_cast<unsigned>(acc[i + 1])")
    if s.out_dtype.bytes == 4:
        pair_ctype, stmt = "uint2", f"pair = make_uint2(acc_to_out({word[0]}), acc_to_out({word[1]}));"
    elif s.out_dtype.bytes == 1:
        pair_ctype = "unsigned short"
        stmt = f"pair = static_cast<unsigned short>(acc_to_out({word[0]}) | (static_cast<unsigned>(acc_to_out({word[1]})) << 8));"
    else:
        pair_ctype = "unsigned"
        stmt = f"pair = static_cast<unsigned>(acc_to_out({word[0]})) | (static_cast<unsigned>(acc_to_out({word[1]})) << 16);"
    return EpilogueView(
        out_ctype=OUT_CTYPE[s.out_dtype],
        convert_expr=convert_c_expr(s.acc, s.out_dtype),
        acc_word_doc="f16 pairs packed in 32-bit registers" if packed else f"one {s.acc.value} register",
        layout_doc="Element pairs (i, i + 1) are adjacent columns of one row.",
        acc_elems=s.bn // 2,  # m64nN: 64 x N over 128 threads
        frag_row_expr=wgmma_fragment_row("i", "wg_tid", "lane"),
        frag_col_expr=wgmma_fragment_col("i", "lane"),
        pair_ctype=pair_ctype,
        store_pair_stmt=stmt,
        first_word=word[0],
        second_word=word[1],
        d_offset_expr=plan.direct.offset_expr,
        next_col_expr=plan.direct.next_col_expr,
        vector_pair=plan.direct.vector_pair,
    )


def tcgen05_epilogue_view(plan: KernelPlan) -> EpilogueView:
    s, t = plan.spec, plan.layout
    cols = t.pair.epilogue_col_split if t.pair is not None else s.bn
    chunk = 32 if cols % 32 == 0 else 16 if cols % 16 == 0 else 8
    # Loads are issued a group at a time and waited for once (tcgen05.wait::ld waits for all of a thread's prior
    # tcgen05.ld), as CUTLASS's epilogue does per subtile: up to TMEM_WAIT_GROUP_COLS columns (registers) a wait.
    group = max(g for g in range(1, TMEM_WAIT_GROUP_COLS // chunk + 1) if cols % (g * chunk) == 0)
    store_group = plan.store.chunk_cols // chunk if plan.store is not None else 0
    common = dict(
        out_ctype=OUT_CTYPE[s.out_dtype],
        convert_expr=convert_c_expr(s.acc, s.out_dtype),
        acc_word_doc="the 32-bit TMEM column" + (", f16 in the low half" if s.acc is DType.F16 else ""),
        chunk=chunk,
        vectors=chunk * s.out_dtype.bytes // 16,
        tmem_ld_regs=reg_list(chunk),
        tmem_ld_outputs=", ".join(f'"=r"(r[{i}])' for i in range(chunk)),
        group=group,
        store_group=store_group,
        wait_operands=_tied(group, chunk),
        store_wait_operands=_tied(store_group, chunk),
        tmem_warp_offset_expr=tmem_lane_c_expr("warp * 32"),
        cols=cols,
    )
    if plan.store is not None and plan.store.writer != "stmatrix":
        st = plan.store
        common["store_row0_expr"] = st.warp_row0_expr
        common["store_col_base"] = "n0" if st.warp_col0_expr == "0" else f"n0 + {st.warp_col0_expr}"
    if t.pair is not None and t.pair.tmem_layout == "A":
        # M=256 over the pair (data-path Layout A): each CTA's D row m (of its 128) is TMEM lane m.
        epi = EpilogueView(**common, layout_doc="cta_group::2, M=256 (Layout A): this CTA's D row m is TMEM lane m.",
                           row_expr=t.pair.epi_row_expr, row_active="true", row_base="m_cta", col_expr=f"n0 + {t.pair.epi_col_expr}")
    elif t.pair is not None:
        # M=128 over the pair (Layout B, '2x2'): this CTA's 64 rows are in lanes 0-63 (columns 0..BN/2-1) and again in
        # lanes 64-127 (columns BN/2..BN-1): warps 0, 1 read the left half, warps 2, 3 the right half.
        half = s.bn // 2
        epi = EpilogueView(
            **{**common, "cols": half},
            layout_doc=f"cta_group::2, M=128 (Layout B): lanes 0-63 hold this CTA's 64 rows x columns 0..{half - 1}, "
            f"lanes 64-127 the same rows x columns {half}..{s.bn - 1}.",
            row_expr=t.pair.epi_row_expr, row_active="true", row_base="m_cta", col_expr=f"n0 + {t.pair.epi_col_expr}")
    elif s.bm == 128:
        # M=128, cta_group::1: row m of D is TMEM lane m (PTX data-path Layout D; CUTLASS tmem_frg).
        epi = EpilogueView(**common, layout_doc="M=128: D row m is TMEM lane m.", row_expr="warp * 32 + lane", row_active="true")
    else:
        # M=64: rows 16q..16q+15 sit in lanes 32q..32q+15 (CUTLASS tmem_frg atom ((16,4),N):((1,32),128)).
        epi = EpilogueView(
            **common,
            layout_doc="M=64: D rows 16w..16w+15 are TMEM lanes 32w..32w+15 (half the data path).",
            row_expr="warp * 16 + lane",
            row_active="lane < 16",
        )
    return epi
