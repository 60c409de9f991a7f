"""beta x C with C read through TMA (``--fuse c=tma``): the wgmma TMA-store epilogue loads each chunk of C into the
staging buffer that the same chunk of D is about to use, reads it back in the accumulator fragment layout, runs the
chain on the chunk and writes D over it.

Per chunk of a consumer warpgroup (buffer b = store_chunk % 2, the same as the D store's):

1. thread 0 waits until at most one of its bulk stores still reads its source (``cp.async.bulk.wait_group.read 1``:
   the store that last read buffer b is done), and the warpgroup syncs on its named barrier (as without C);
2. thread 0 arms the warpgroup's ``c_full`` mbarrier with the buffer's bytes and issues one TMA load of C's box at
   (n0 + chunk x 64, slab row 0): the D store's box, through a tensor map derived from the same staging layout value,
   so C lands in exactly the swizzled places where the stmatrix of D's chunk would put the same elements;
3. every thread waits on ``c_full`` (phase = the warpgroup's TMA-path chunks so far, mod 2: one load per chunk);
4. ``ldmatrix.x4`` at the stmatrix addresses: ldmatrix is stmatrix's inverse (same matrices, same lane -> row address,
   register q of thread t = matrix q's row t/4, columns 2(t%4), +1), so each register holds the C pair of exactly the
   two accumulator elements that the stmatrix register would pack;
5. the chain on the chunk's elements (C from those registers), ``__syncwarp``, then stmatrix of D over the same
   buffer (each warp reads and writes only its own 16 rows), ``fence.proxy.async``, named barrier, TMA store.

tcgen05 (L2 only: never run): the same derivation serves an epilogue warp (32 TMEM lanes = 32 rows of D): lane 0
arms the warp's c_full and loads C's 64 x 32 box at the warp's first row and column; each thread reads its own row's
cells back with ``ld.shared.v4`` at the addresses its ``st.shared.v4`` of D uses (register i of TMEM load h is chunk
column h x 32 + i), runs the chain on each TMEM chunk with that C, ``__syncwarp``, and stores D over the buffer.

No new buffer: C uses the two staging buffers (and their reuse rule). The C load's latency is not hidden (each chunk
waits for its own load). Tiles that take the direct stores (the edge rule of derive.store.epilogue) read C with the global
loads of ``--fuse c``. Outside M x N the load fills zeros; those elements of D are clipped by the store.

>>> from ptxgen.derive.tile.kernel import plan_kernel
>>> from ptxgen.derive.tile.spec import make_spec
>>> p = plan_kernel(make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a",
...                           stages=3, out_dtype="bf16", epilogue="tma", fuse="c=tma")).c_load
>>> p.tma.box, p.tma.swizzle.json_name, p.tma.ld_name, p.expect_tx_bytes, p.box_origin(chunk=3, slab_row0=64)
((64, 64), '128B', 'ldc', 8192, (192, 64))
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...isa.ptxref import cite
from ...isa.tensormap import DRIVER_REF, PTX_TMA_REF, TMA_DATA_TYPE_OF
from ..tile.derived import Derived
from .epilogue import StorePlan
from ..tile.spec import TileSpec
from ..operands.tma import TmaPlan

BARRIER = "c_full"
PHASES = 2  # an mbarrier's phase parity alternates: the k-th completion is parity k % 2


@dataclass(frozen=True)
class CLoadPlan:
    tma: TmaPlan  # C's tensor map: D's box and swizzle, from the same staging layout
    barriers: int  # one c_full mbarrier per storer (consumer warpgroup)
    expect_tx_bytes: int  # one staging buffer: what one load delivers
    chunk_cols: int
    reader: str  # "ldmatrix" (wgmma: the inverse of the store's stmatrix) or "ld.shared.v4" (tcgen05: of its st.shared.v4)
    derivation: tuple[Derived, ...]

    def box_origin(self, chunk: int, slab_row0: int) -> tuple[int, int]:
        """(column, row) of chunk ``chunk``'s C box relative to the storer's origin (wgmma: (n0, m0); tcgen05: the epilogue
        warp's first column), for the storer whose first tile row is ``slab_row0`` (a wgmma slab's, or 32 x warp): the D
        store's box of the same chunk."""
        return chunk * self.chunk_cols, slab_row0

    def col_c_expr(self, chunk: str) -> str:
        """C: the box's column offset from n0 for chunk index ``chunk`` (box_origin's first coordinate)."""
        return f"{chunk} * {self.chunk_cols}"

    @staticmethod
    def row_word(col: int) -> int:
        """tcgen05: the 32-bit word of the thread's read-back row (cell q in words 4q..4q+3) that holds column ``col`` of
        the chunk (two 16-bit elements a word, the lower column in the low half)."""
        return col // 2

    @staticmethod
    def row_word_c_expr(col: str) -> str:
        """C: row_word of chunk column ``col`` as an index into the thread's words ``cw``."""
        return f"cw[({col}) / 2]"

    @staticmethod
    def wait_parity(load_index: int) -> int:
        """The phase parity a storer waits for on its c_full barrier at its ``load_index``-th C load (0-based)."""
        return load_index % PHASES

    def to_json(self) -> dict:
        return {"barrier": BARRIER, "barriers": self.barriers, "expect_tx_bytes": self.expect_tx_bytes, "reader": self.reader,
                "tma": {"swizzle": self.tma.swizzle.json_name, "box": list(self.tma.box), "ld": self.tma.ld_name}}


def plan_c_load(spec: TileSpec, store: StorePlan | None) -> CLoadPlan | None:
    ch = spec.fuse
    if ch is None or not ch.c_tma:
        return None
    assert store is not None and not spec.pair, "rules.check_chain"
    wgmma = store.writer == "stmatrix"
    aux = ch.aux_dtype(spec.out_dtype)
    assert aux.bytes == store.tma.element_bytes, (aux, store.tma.element_bytes)
    who = "consumer warpgroup" if wgmma else "epilogue warp"
    first = "thread 0" if wgmma else "lane 0"
    sync, read, write = ("bar", "ldmatrix", "stmatrix") if wgmma else ("syncwarp", "ld.shared.v4", "st.shared.v4")
    D = (
        Derived("tma_c_map", f"box {list(store.tma.box)}, {store.tma.swizzle.json_name}, rows ldc apart",
                "derived from the store's staging layout value (the D map's), with C's pointer and row stride",
                "the load writes C's chunk where the stmatrix of D's chunk writes the same elements", DRIVER_REF),
        Derived("c_buffer", f"the store's buffer store_chunk % {store.buffers_per_storer}",
                "C's chunk lands in the staging buffer D's chunk then overwrites",
                "no extra shared memory; reused after cp.async.bulk.wait_group.read 1, as without C", PTX_TMA_REF),
        Derived("c_barrier", f"{store.storers} x c_full, 1 arrival + {store.buffer_bytes} B",
                f"one mbarrier per {who}; {first} arms it (expect_tx) and issues the load; phase = the "
                f"{who}'s TMA-path chunks so far mod {PHASES}", "one load per chunk, each waited for before the next is issued",
                "PTX ISA 'mbarrier', 'cp.async.bulk.tensor'"),
        Derived("c_read", f"{store.stmatrix_per_chunk} x ldmatrix.x4 per chunk" if wgmma else
                f"{store.chunk_cols // 8} x ld.shared.v4 per thread per chunk",
                "at the stmatrix addresses; register q of lane t = matrix q's row t/4, columns 2(t%4), +1" if wgmma else
                "at the st.shared.v4 addresses of the thread's row (lane = TMEM lane = row): cell q = columns 8q..8q+7",
                "ldmatrix is the inverse of stmatrix: each register holds C at its two accumulator elements" if wgmma else
                "the thread reads back the cells its own stores would write: C at its row's columns, in TMEM register order",
                "PTX ISA 'ldmatrix'" if wgmma else cite("tmem_layout")),
        Derived("c_order", f"wait_read 1 -> {sync} -> TMA load C -> mbar wait -> {read} -> chain -> syncwarp -> {write} "
                f"-> fence.proxy.async -> {sync} -> TMA store",
                "the generic-proxy reads of C follow the load's completion on the mbarrier; D's writes follow the reads "
                + ("in each warp (a warp reads and writes only its own 16 rows)" if wgmma else "(a thread reads and writes only its own row)"),
                "the load (async proxy) overwrites the buffer only after the store that read it finished reading",
                "PTX ISA 'Memory consistency model: proxies'"),
        Derived("c_edge", "direct-store tiles: global loads",
                "a tile that fails the store's edge rule reads C with the --fuse c loads; TMA fills zeros outside M x N",
                "those elements of D are clipped by the store", "derive.store.epilogue edge_rule"),
    )
    tma = replace(store.tma, operand="c", data_type=TMA_DATA_TYPE_OF[aux], element_bytes=aux.bytes, ld_name="ldc",
                  expect_tx_bytes=store.buffer_bytes, derivation=D)
    return CLoadPlan(tma, store.storers, store.buffer_bytes, store.chunk_cols, "ldmatrix" if wgmma else "ld.shared.v4", D)
