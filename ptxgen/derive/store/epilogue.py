"""The TMA-store epilogue: accumulators -> swizzled shared memory -> global memory, on both families.

Each *storer* owns two staging buffers: a consumer warpgroup on wgmma (its 64-row slab), an epilogue
warp on tcgen05 (its 32 TMEM lanes = 32 rows of D at M=128). A buffer holds one chunk of the storer's
rows: 64 columns of 16-bit outputs (128 e4m3, 32 f32 on wgmma), one 128-byte row per tile row, 128-byte swizzled. A
wgmma warpgroup writes a chunk with ``stmatrix`` (8x8 matrices of b16, one 16-byte cell per matrix row), or, e4m3 and f32,
each fragment pair with one ``st.shared.b16`` / ``st.shared.v2.f32`` at its swizzled byte; a
tcgen05 epilogue warp reads its rows out of TMEM (``tcgen05.ld 32x32b``: lane = row) and writes each
row's cells with ``st.shared.v4``. The storer fences the chunk into the async proxy and one thread hands
it to a TMA bulk tensor store. The next chunk goes to the other buffer; a buffer is rewritten only after
the store that read it has finished reading (``cp.async.bulk.wait_group.read 1``), so the stores overlap
the next chunk and, after the last chunk, the next tile's main loop.

The staging layout is a :class:`~ptxgen.derive.operands.smem_layout.SmemLayout` (rows = tile rows, cells of 16 B);
D's tensor map is derived from that same value, as the operands' maps are from theirs.

>>> from ptxgen.derive.tile.spec import make_spec
>>> p = plan_store(make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16",
...                          arch="sm_90a", stages=4, out_dtype="bf16", epilogue="tma"))
>>> p.tma.box, p.tma.swizzle.json_name, p.chunks_per_slab, p.buffer_bytes
((64, 64), '128B', 4, 8192)
>>> p.stmatrix_offset(warp=0, lane=9, call=1)   # matrix 1 (rows 8-15), its row 1 = tile row 9; cell 2 of the chunk
1200
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.ptxref import cite
from ...isa.tensormap import (
    DRIVER_REF,
    PTX_TMA_REF,
    TMA_DATA_TYPE_OF,
    TMA_SWIZZLE_OF,
)
from ...isa.shapes import WGMMA_D_ROWS
from ...isa.types import Arch, DMajor, Epilogue, Swizzle
from ..tile.derived import Derived
from ..roles.kgrouped import STORE_GROUP_DIM, STORE_GROUP_STRIDE, store_map_derivation
from ..operands.smem_layout import AddressTerm, SmemLayout
from ..tile.rules import STORE_BUFFERS as BUFFERS
from ..tile.rules import F32_STORE_CHUNK_COLS, FP8_STORE_CHUNK_COLS, M_MAJOR_MAX_CHUNK_COLS, STORE_CHUNK_COLS
from ..tile.spec import TileSpec
from ..operands.tma import TmaPlan, copies_of, tile_map

SLAB_ROWS = WGMMA_D_ROWS  # rows a consumer warpgroup stores per slab
WARP_ROWS = 16  # rows of the fragment one warp holds (PTX 'wgmma .m64nNk* D fragments')
CELL_BYTES = 16
# stmatrix.sync.aligned.m8n8.x4.b16 (PTX 'stmatrix'): four 8x8 matrices of 16-bit elements; lanes 8q..8q+7
# give the row addresses of matrix q, and thread t's register q holds row t / 4, columns 2(t % 4), +1 of it.
STMATRIX_MATRICES = 4
STMATRIX_ROWS = 8
# Measured on an H200 (runs/2026-11-30-12-tma-store/validate_store.jsonl): where N x element bytes is not a
# multiple of 16, a TMA store whose box crosses column N also wrote the columns up to the next 16-byte
# boundary (N = 45 f16: columns 45..47 of every row). A tile is stored through TMA only where that cannot
# happen; the others take the direct stores, which stop at N exactly.
TMA_STORE_EDGE_BYTES = 16
# The pair writers (StorePlan.pair_writer) by output element bytes: no stmatrix for e4m3 (no 8-bit form on sm_90a) or f32
# (stmatrix moves b16 only); each thread stores a row's two adjacent outputs at their swizzled byte address.
PAIR_WRITER_OF_BYTES = {1: "st.shared.b16", 4: "st.shared.v2.f32"}
PAIR_WRITERS = tuple(PAIR_WRITER_OF_BYTES.values())


@dataclass(frozen=True)
class TransCall:
    """One ``stmatrix.sync.aligned.m8n8.{x4,x2}.trans`` of a warp for an M-major D: ``matrices`` (4 or 2) 8x8 matrices of
    the fragment, matrix q = column group ``first_group + q / 2`` (8 kernel columns), rows 8 (q % 2).. of the warp's 16.
    ``.trans`` stores matrix column c as a 16-byte row: staging row (kernel column) 8 x group + c, cell (8 kernel rows)
    2 x warp + q % 2. ``row_expr``/``cell_expr``: that row and cell for the address lane ``lane`` of warp ``warp`` gives
    (lanes 8q..8q+7 address matrix q's columns), as C integer expressions (``/`` integer division)."""

    first_group: int
    matrices: int
    row_expr: str
    cell_expr: str

    def elements(self, matrix: int) -> tuple[int, int]:
        """The wgmma D fragment elements (i, i + 1), chunk-relative, that register ``matrix`` packs: group g's elements
        4g + 2(q % 2), + 1 (the pair of a row; 8 rows down for odd q)."""
        i = 4 * (self.first_group + matrix // 2) + 2 * (matrix % 2)
        return i, i + 1


def trans_calls(chunk_cols: int) -> tuple[TransCall, ...]:
    """The stmatrix.trans calls that stage one chunk of ``chunk_cols`` kernel columns: an x4 per two 8-column groups,
    an x2 for an odd last group (its lanes 16..31 give no address)."""
    groups = chunk_cols // STMATRIX_ROWS
    calls = []
    for g0 in range(0, groups, 2):
        x4 = g0 + 1 < groups
        row = f"{STMATRIX_ROWS * g0} + {STMATRIX_ROWS} * (lane / {2 * STMATRIX_ROWS}) + lane % {STMATRIX_ROWS}" if x4 else \
            f"{STMATRIX_ROWS * g0} + lane % {STMATRIX_ROWS}"
        cell = f"2 * warp + (lane / {STMATRIX_ROWS}) % 2"
        calls.append(TransCall(g0, STMATRIX_MATRICES if x4 else STMATRIX_MATRICES // 2, row, cell))
    return tuple(calls)


@dataclass(frozen=True)
class StorePlan:
    staging: SmemLayout  # one buffer: ``rows`` rows x 8 cells of 16 B, 128-byte swizzled
    tma: TmaPlan  # D's tensor map, derived from ``staging``
    offset_bytes: int  # first buffer, from the kernel's aligned shared-memory base
    buffer_bytes: int
    buffers_per_storer: int
    storers: int  # consumer warpgroups (wgmma) or epilogue warps (tcgen05)
    writer: str  # "stmatrix" (wgmma, 16-bit), "st.shared.b16" (wgmma, e4m3: a row's two adjacent outputs),
    # "st.shared.v2.f32" (wgmma, f32: the same pairs, 8 bytes each) or "st.shared.v4" (tcgen05: one TMEM row per thread)
    chunk_cols: int
    chunks_per_slab: int  # chunks per storer per tile (per 64-row slab on wgmma)
    stmatrix_per_chunk: int  # wgmma: stmatrix.x4 per warp per chunk; tcgen05: 0
    derivation: tuple[Derived, ...]
    tile_cols: int = 0  # columns of the tile (BN): the per-tile TMA-or-direct choice looks at n0 + tile_cols
    # tcgen05: the first row (within this CTA's rows of D) and column (within the tile) that epilogue warp ``warp``
    # stores, as C/Python integer expressions in ``warp`` (``/`` is integer division; the L1 check evaluates them).
    # One CTA at M=128 and a pair at M=256 (Layout A): warp w stores rows 32w.., every column; a pair at M=128
    # (Layout B): rows 32(w % 2).., columns (w / 2) x BN/2 ..
    warp_row0_expr: str = ""
    warp_col0_expr: str = "0"
    pair_layout: str = ""  # --cta-group 2: the data-path layout of D in each CTA's TMEM ("A": M=256, "B": M=128)
    # M-major D (--d-major m, writer "stmatrix.trans"): a staging row is one kernel column (a row of the user's D), its
    # 8 cells the slab's 64 kernel rows; the stmatrix calls of one chunk, and the rule that sends a tile through TMA
    trans_calls: tuple["TransCall", ...] = ()
    use_tma_c_expr: str = ""  # C (and Python, `||` aside): whether the tile at (m0, n0) is stored through TMA

    @property
    def m_major(self) -> bool:
        """D is M-major: the TMA box is (64 kernel rows, chunk_cols kernel columns) of the user's row-major D."""
        return self.writer == "stmatrix.trans"

    @property
    def rows(self) -> int:
        """Tile rows one storer stores per chunk (the box's outer extent)."""
        return self.staging.rows

    @property
    def wgmma(self) -> bool:
        """A consumer warpgroup stores (the wgmma D fragment), not a tcgen05 epilogue warp."""
        return self.writer != "st.shared.v4"

    @property
    def pair_writer(self) -> bool:
        """wgmma, row-major D, no stmatrix: each thread stores its fragment's pairs (row r, columns 2(lane % 4), +1 of each
        8-column group) one shared store each (e4m3: 2 bytes, f32: 8 bytes)."""
        return self.writer in PAIR_WRITERS

    @property
    def storer_bytes(self) -> int:
        return self.buffers_per_storer * self.buffer_bytes

    @property
    def elements_per_cell(self) -> int:
        """Outputs in one 16-byte cell of a staging row (8 16-bit, 16 e4m3, 4 f32)."""
        return self.chunk_cols // self.staging.cols

    @property
    def fragment_elements_per_chunk(self) -> int:
        """wgmma: accumulator elements a thread holds per chunk (4 per 8 columns: two rows x two columns)."""
        return 4 * (self.chunk_cols // 8)

    def row_cell_offset(self, row: int, cell: int) -> int:
        """Byte offset in a buffer of 16-byte cell ``cell`` of row ``row`` (swizzled)."""
        return self.staging.physical(row, cell)

    def to_json(self) -> dict:
        """The ``"epilogue"`` object of ``explain --json`` (TMA-store kernels only)."""
        return {
            "kind": "tma",
            "staging_offset_bytes": self.offset_bytes,
            "buffer_bytes": self.buffer_bytes,
            "buffers_per_storer": self.buffers_per_storer,
            "storers": self.storers,
            "writer": self.writer,
            "chunk": [SLAB_ROWS, self.chunk_cols] if self.m_major else [self.staging.rows, self.chunk_cols],
            "chunks_per_slab": self.chunks_per_slab,
            "tma": {"swizzle": self.tma.swizzle.json_name, "box": list(self.tma.box)},
        } | ({"d_major": "m", "tma_global_dims": list(self.tma.global_dims)} if self.m_major else {}) | (
            {"tma_global_dims": list(self.tma.global_dims), "tma_strides": list(self.tma.stride_names)}
            if self.tma.batched else {}) | ({"pair": {"tmem_layout": self.pair_layout, "warp_row0": self.warp_row0_expr, "warp_col0": self.warp_col0_expr,
                       "cols_per_warp": self.chunk_cols * self.chunks_per_slab}} if self.pair_layout else {})

    @property
    def edge_elements(self) -> int:
        """Columns per 16-byte granule of D (8 of 16-bit outputs, 16 e4m3, 4 f32): a tile whose columns pass N goes through TMA only if N is a
        multiple of this (else the direct stores take it)."""
        return TMA_STORE_EDGE_BYTES // self.tma.element_bytes

    def uses_tma(self, n0: int, bn: int, n: int) -> bool:
        """Whether the tile starting at column ``n0`` is stored through TMA for a problem of ``n`` columns (M-major D:
        pass the tile's first row, BM and M: the box's contiguous dimension is the kernel's M)."""
        return n0 + bn <= n or n % self.edge_elements == 0

    def stmatrix_row_cell(self, warp: int, lane: int, call: int) -> tuple[int, int]:
        """(slab row, 16-B cell of the chunk) whose address lane ``lane`` of warp ``warp`` gives to
        stmatrix ``call`` (0..stmatrix_per_chunk-1): matrix q = lane / 8 covers rows 8(q % 2).. of the
        warp's 16 and column group 2 x call + q / 2 (8 columns = one cell)."""
        q, r = divmod(lane, STMATRIX_ROWS)
        return WARP_ROWS * warp + STMATRIX_ROWS * (q % 2) + r, 2 * call + q // 2

    def stmatrix_offset(self, warp: int, lane: int, call: int) -> int:
        """Byte offset in the buffer of that row's 16-byte cell (swizzled)."""
        return self.staging.physical(*self.stmatrix_row_cell(warp, lane, call))

    def pair_row_col(self, warp: int, lane: int, group: int, half: int) -> tuple[int, int]:
        """st.shared.b16 (e4m3) / st.shared.v2.f32 (f32): (slab row, chunk column) of the pair of fragment elements (4 group + 2 half, + 1) of
        ``lane`` of ``warp``: row 16w + lane/4 (+8 for half 1), columns 8 group + 2(lane % 4), + 1."""
        return WARP_ROWS * warp + STMATRIX_ROWS * half + lane // 4, 8 * group + 2 * (lane % 4)

    def pair_offset(self, warp: int, lane: int, group: int, half: int) -> int:
        """Byte offset in the buffer of that pair's first element: its 16-byte cell, swizzled, then its byte in the cell."""
        row, col = self.pair_row_col(warp, lane, group, half)
        cell, k = divmod(col, self.elements_per_cell)
        return self.staging.physical(row, cell) + k * self.tma.element_bytes

    @staticmethod
    def fragment_elements(call: int, matrix: int) -> tuple[int, int]:
        """The wgmma D fragment elements (i, i + 1) that a thread's stmatrix register ``matrix`` packs, for
        chunk-local ``call``: column group g = 2 x call + matrix / 2, rows +8 for odd matrices (elements 2, 3 of
        the group of 4). Relative to the chunk: add 4 x 8 x chunk to i."""
        group = 2 * call + matrix // 2
        i = 4 * group + 2 * (matrix % 2)
        return i, i + 1


def staging_layout(rows: int) -> SmemLayout:
    """``rows`` rows of 128 B (one row per tile row), 16-byte cells along the row, the 128-byte swizzle."""
    cols = Swizzle.SW128.row_bytes // CELL_BYTES
    return SmemLayout(
        rows=rows,
        cols=cols,
        row_dim="mn",
        terms=(AddressTerm("row", 0, None, Swizzle.SW128.row_bytes), AddressTerm("col", 0, None, CELL_BYTES)),
        swizzle=Swizzle.SW128,
        atom_rows=Swizzle.SW128.atom_rows,
        atom_cols=cols,
        row_atom_stride_bytes=Swizzle.SW128.atom_bytes,
        col_atom_stride_bytes=rows * Swizzle.SW128.row_bytes,
    )


def plan_store(spec: TileSpec) -> StorePlan | None:
    if spec.epilogue is not Epilogue.TMA:
        return None
    if spec.d_major is DMajor.M:
        return _plan_m_major(spec)
    out = spec.out_dtype
    wgmma = spec.arch is Arch.SM90A
    rows, storers = spec.store_staging_rows_and_storers
    layout = staging_layout(rows)
    box, copies, grid = copies_of(layout, out.per_cell)
    chunk = layout.cols * out.per_cell  # one 128-byte row: 64 16-bit outputs, 128 e4m3, 32 f32
    assert box == (chunk, rows) and len(copies) == 1 and chunk in (STORE_CHUNK_COLS, FP8_STORE_CHUNK_COLS,
                                                                   F32_STORE_CHUNK_COLS), (box, copies)
    swz = TMA_SWIZZLE_OF[layout.swizzle]
    buf = layout.stage_bytes
    smem = spec.smem_plan()
    assert smem.store_bytes == BUFFERS * buf * storers, (smem.store_bytes, buf, storers)
    warp_cols, row0, col0 = _warp_share(spec, rows)
    chunks = warp_cols // chunk
    pairs = wgmma and out.bytes in PAIR_WRITER_OF_BYTES  # e4m3, f32: each thread stores its fragment's pairs
    calls = chunk // (STMATRIX_MATRICES // 2 * 8) if wgmma and not pairs else 0
    writer = PAIR_WRITER_OF_BYTES[out.bytes] if pairs else "stmatrix" if wgmma else "st.shared.v4"
    D = _derivation(spec, box, swz.json_name, buf, chunks, calls, smem.store_offset, rows, storers, writer, chunk)
    if spec.pair:
        D += (_pair_derivation(spec, rows, warp_cols, row0, col0),)
    grouped_k = {}
    if spec.grouped.along_k:  # out G x M x N: one group deep boxes of a rank-3 map clip at each out[g]'s row M
        D += (store_map_derivation(box),)
        grouped_k = dict(batch_dim=STORE_GROUP_DIM, batch_ld_name=STORE_GROUP_STRIDE)
    tma = tile_map(
        **grouped_k,
        operand="d",
        layout=layout,
        data_type=TMA_DATA_TYPE_OF[out],
        element_bytes=out.bytes,
        global_dims=("N", "M"),
        ld_name="ldd",
        box=box,
        swizzle=swz,
        copies=copies,
        grid=grid,
        expect_tx_bytes=0,  # a store completes a bulk group, not a barrier transaction
        derivation=D,
    )
    return StorePlan(layout, tma, smem.store_offset, buf, BUFFERS, storers, writer, chunk, chunks, calls, D,
                     tile_cols=spec.bn, warp_row0_expr=row0, warp_col0_expr=col0,
                     pair_layout=("B" if spec.bm == 128 else "A") if spec.pair else "",
                     use_tma_c_expr=f"n0 + {spec.bn} <= N || N % {TMA_STORE_EDGE_BYTES // out.bytes} == 0")


def _plan_m_major(spec: TileSpec) -> StorePlan:
    """The TMA store of an M-major D (wgmma, 16-bit outputs). The kernel's tile (BM rows over its M = the user's N, BN
    columns over its N = the user's M) is, in the user's row-major D, BN rows of BM contiguous elements. A consumer
    warpgroup's 64-row slab is 128 B of each such row: the staging buffer holds ``chunk_cols`` rows of it (one per kernel
    column), 8 cells of 8 kernel rows each, 128-byte swizzled, and D's tensor map (inner dimension the kernel's M, rows
    ``ldd`` apart) takes it as one box (64, chunk_cols) at (m0 + slab, n0 + chunk)."""
    out = spec.out_dtype
    chunk, storers = spec.store_staging_rows_and_storers  # rows of a buffer = kernel columns of a chunk
    layout = staging_layout(chunk)
    box, copies, grid = copies_of(layout, out.per_cell)
    assert box == (SLAB_ROWS, chunk) and len(copies) == 1, (box, copies)
    swz = TMA_SWIZZLE_OF[layout.swizzle]
    buf, buffers = layout.stage_bytes, spec.store_buffers
    smem = spec.smem_plan()
    assert smem.store_bytes == buffers * buf * storers, (smem.store_bytes, buf, storers)
    chunks = spec.bn // chunk
    calls = trans_calls(chunk)
    edge = TMA_STORE_EDGE_BYTES // out.bytes
    D = (
        Derived("chunk", f"{chunk} x {SLAB_ROWS}", f"{chunk} kernel columns (rows of the user's D) x the warpgroup's "
                f"{SLAB_ROWS} rows ({SLAB_ROWS} x {out.bytes} B = 128 B, contiguous in D); {chunk} the largest multiple "
                f"of 8 dividing BN = {spec.bn}, at most {M_MAJOR_MAX_CHUNK_COLS}",
                "D is M-major: a kernel column is a row of the user's D, so a staging row is one column's 64 rows",
                cite("swizzling")),
        Derived("staging_swizzle", "sw128", "cell c of row r at r x 128 + (c ^ (r % 8)) x 16",
                "stmatrix.trans writes 8 consecutive rows (columns of one 8x8 matrix) at the same cell: 8 different "
                "16-byte bank groups", cite("swizzling")),
        Derived("buffers", f"{buffers} x {storers} x {buf} B at +{smem.store_offset}",
                f"{buffers} per consumer warpgroup ({storers}) of {chunk} x 128 B",
                "one chunk per warpgroup and one tile per CTA: one buffer; else two, one written while the TMA store of "
                "the other reads it", PTX_TMA_REF),
        Derived("stmatrix.trans", f"{len(calls)} per warp per chunk ("
                + ", ".join(f"x{c.matrices}" for c in calls) + ")",
                f"{chunk} / 8 = {chunk // 8} 8-column groups x 2 matrices (rows 0-7, 8-15 of the warp's 16): four a call, "
                "two for an odd last group",
                ".trans stores each 8x8 matrix column-major: the 8 rows a thread group holds of one column become one "
                "16-byte row of the staging buffer, i.e. 8 consecutive elements of a row of the user's D", cite("stmatrix")),
        Derived("tma_d_box", f"[{box[0]}, {box[1]}]", f"{box[0]} kernel rows (the user's N, contiguous) x {box[1]} kernel "
                "columns (the user's M, rows ldd apart)", "one chunk per store at (m0 + slab, n0 + chunk); the copy "
                "engine drops rows of D past the kernel's N", PTX_TMA_REF),
        Derived("tma_d_swizzle", swz.json_name, "the staging layout's swizzle", "TMA reads the pattern stmatrix wrote",
                DRIVER_REF),
        Derived("edge_rule", f"M % {edge} == 0 or the tile inside M",
                f"a tile is stored through TMA if m0 + {spec.bm} <= M or M x {out.bytes} B is a multiple of "
                f"{TMA_STORE_EDGE_BYTES} B; other tiles take the direct M-major stores",
                "measured on an H200 (row-major D): a TMA store crossing the inner dimension's end wrote on to the next "
                "16-byte boundary; here the inner dimension is the kernel's M", "docs/hardware-layout.md"),
        Derived("chunks_per_tile", chunks, f"BN / {chunk} = {spec.bn} / {chunk} per 64-row slab",
                "chunks alternate between the buffers; a buffer is reused after cp.async.bulk.wait_group.read "
                f"{buffers - 1}", PTX_TMA_REF),
    )
    tma = tile_map(operand="d", layout=layout, data_type=TMA_DATA_TYPE_OF[out], element_bytes=out.bytes,
                   global_dims=("M", "N"), ld_name="ldd", box=box, swizzle=swz, copies=copies, grid=grid,
                   expect_tx_bytes=0, derivation=D)
    return StorePlan(layout, tma, smem.store_offset, buf, buffers, storers, "stmatrix.trans", chunk, chunks, len(calls), D,
                     tile_cols=spec.bn, trans_calls=calls,
                     use_tma_c_expr=f"m0 + {spec.bm} <= M || M % {edge} == 0")


def _warp_share(spec: TileSpec, rows: int) -> tuple[int, str, str]:
    """(columns each storer stores, its first row, its first column) on tcgen05; wgmma: (BN, "", "0")."""
    if spec.arch is Arch.SM90A:
        return spec.bn, "", "0"
    if spec.pair and spec.bm == 128:  # Layout B ('2x2'): warps 0, 1 hold columns [0, BN/2), warps 2, 3 [BN/2, BN)
        half = spec.bn // 2
        return half, f"(warp % 2) * {rows}", f"(warp / 2) * {half}"
    return spec.bn, f"warp * {rows}", "0"


def _pair_derivation(spec: TileSpec, rows: int, warp_cols: int, row0: str, col0: str) -> Derived:
    layout = "B" if spec.bm == 128 else "A"
    what = (f"CTA r's warp w stages rows m0 + r x {spec.bm // 2} + {row0} and columns n0 + {col0} .. +{warp_cols - 1}"
            .replace("warp", "w"))
    return Derived(
        "pair_store", f"Layout {layout}: {warp_cols} columns per warp, its own CTA's rows", what,
        "each CTA's epilogue warps store the D rows in that CTA's Tensor Memory (CTA r holds rows r x BM/2 ..) through the "
        "same tensor map, with no exchange between the CTAs; at M=128 (Layout B) lanes 64-127 hold the right half of the "
        "columns of the same 64 rows, so warps 2, 3 store the right half (CUTLASS tmem_frg_2sm)", cite("tmem_layout"))


def _derivation(spec: TileSpec, box, swz_name: str, buf: int, chunks: int, calls: int, offset: int, rows: int,
                storers: int, writer: str, chunk_cols: int) -> tuple[Derived, ...]:
    out = spec.out_dtype
    who = "epilogue warp" if writer == "st.shared.v4" else "consumer warpgroup"
    if writer == "st.shared.b16":
        write = Derived("st.shared.b16", f"{2 * chunk_cols // 8} per thread per chunk",
                        f"per 8 columns a thread holds 2 adjacent outputs in each of 2 rows: one 2-byte word each, at the "
                        f"swizzled byte of (row, column); {chunk_cols} / 8 x 2",
                        "sm_90a has no 8-bit stmatrix (NVRTC 13.5.37: 'stmatrix.b8' not supported on sm_90a), and a b16 "
                        "stmatrix register would need 4 consecutive e4m3 columns where the fragment gives a thread 2",
                        "PTX ISA 'st', 'stmatrix'")
    elif writer == "st.shared.v2.f32":
        write = Derived("st.shared.v2.f32", f"{2 * chunk_cols // 8} per thread per chunk",
                        f"per 8 columns a thread holds 2 adjacent outputs in each of 2 rows: one 8-byte store each, at the "
                        f"swizzled byte of (row, column) (columns 2(lane % 4), +1: 8-byte aligned); {chunk_cols} / 8 x 2",
                        "stmatrix moves b16 elements only; a warp's store covers 8 rows x 2 cells = 256 B, 2 wavefronts "
                        "(the minimum) under the 128-byte swizzle", "PTX ISA 'st', 'stmatrix'")
    elif writer == "stmatrix":
        write = Derived("stmatrix", f"{calls} x stmatrix.x4 per chunk",
                        f"each covers 16 rows x 16 columns per warp; {chunk_cols} / 16 = {calls}",
                        "lanes 8q..8q+7 address the rows of matrix q; register q packs two converted accumulator elements",
                        cite("stmatrix"))
    else:
        write = Derived("st.shared.v4", f"{chunk_cols // 8} per thread per chunk",
                        f"thread = TMEM lane = row; {chunk_cols} columns / 8 per 16-byte cell",
                        "tcgen05.ld 32x32b gives each thread one row's consecutive columns; each 16-byte cell goes to its "
                        "swizzled place (32 rows x 16 B per instruction: 4 wavefronts, the minimum for 512 B)", cite("tmem_layout"))
    return (
        Derived("chunk", f"{rows} x {chunk_cols}", f"{rows} rows per {who}; {chunk_cols} x {out.bytes} B = 128 B per row: one 128-byte swizzle row",
                "the widest row the 128-byte swizzle spans; a whole row per tile row", cite("swizzling")),
        Derived("staging_swizzle", "sw128", "cell c of row r at r x 128 + (c ^ (r % 8)) x 16",
                "8 consecutive rows put the same cell in 8 different 16-byte bank groups: no bank conflicts", cite("swizzling")),
        Derived("buffers", f"{BUFFERS} x {storers} x {buf} B at +{offset}",
                f"{BUFFERS} per {who} ({storers}) of {rows} x 128 B",
                "one is written while the TMA store of the other reads it", PTX_TMA_REF),
        write,
        Derived("tma_d_box", f"[{box[0]}, {box[1]}]", f"{box[0]} columns (N, contiguous) x {box[1]} rows (M)",
                "one chunk per store; the copy engine drops rows past M, and columns past N where N's rows end on a 16-byte "
                "boundary (edge_rule)", PTX_TMA_REF),
        Derived("tma_d_swizzle", swz_name, "the staging layout's swizzle", "TMA reads the pattern the epilogue writes", DRIVER_REF),
        Derived("edge_rule", f"N % {TMA_STORE_EDGE_BYTES // out.bytes} == 0 or the tile inside N",
                f"a tile is stored through TMA if n0 + {spec.bn} <= N or N x {out.bytes} B is a multiple of {TMA_STORE_EDGE_BYTES} B; "
                "other tiles take the direct stores",
                "measured on an H200: a TMA store crossing column N wrote on to the next 16-byte boundary", "docs/hardware-layout.md"),
        Derived("chunks_per_tile", chunks, (f"BN / {chunk_cols} = {spec.bn} / {chunk_cols}" if chunks * chunk_cols == spec.bn else
                 f"BN / 2 / {chunk_cols} = {spec.bn // 2} / {chunk_cols} per warp (Layout B)")
                + (" per 64-row slab" if writer != "st.shared.v4" else ""),
                "chunks alternate between the two buffers; a buffer is reused after cp.async.bulk.wait_group.read 1", PTX_TMA_REF),
    )
