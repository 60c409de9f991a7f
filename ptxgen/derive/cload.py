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

No new buffer: C uses the two staging buffers (and their reuse rule). The C load's latency is not hidden (each chunk
waits for its own load). Tiles that take the direct stores (the edge rule of derive.epilogue) read C with the global
loads of ``--fuse c``. Outside M x N the load fills zeros; those elements of D are clipped by the store.

>>> from ptxgen.derive.kernel import plan_kernel
>>> from ptxgen.derive.spec import make_spec
>>> p = plan_kernel(make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a",
...                           stages=3, out_dtype="bf16", epilogue="tma", fuse="c=tma")).c_load
>>> p.tma.box, p.tma.swizzle.json_name, p.tma.ld_name, p.expect_tx_bytes, p.box_origin(chunk=3, slab_row0=64)
((64, 64), '128B', 'ldc', 8192, (192, 64))
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..isa.tensormap import DRIVER_REF, PTX_TMA_REF, TMA_DATA_TYPE_OF
from ..isa.types import Arch
from .derived import Derived
from .epilogue import StorePlan
from .spec import TileSpec
from .tma import TmaPlan

BARRIER = "c_full"
PHASES = 2  # an mbarrier's phase parity alternates: the k-th completion is parity k % 2


@dataclass(frozen=True)
class CLoadPlan:
    tma: TmaPlan  # C's tensor map: D's box and swizzle, from the same staging layout
    barriers: int  # one c_full mbarrier per storer (consumer warpgroup)
    expect_tx_bytes: int  # one staging buffer: what one load delivers
    chunk_cols: int
    reader: str  # "ldmatrix": the inverse of the store's stmatrix, at the same addresses
    derivation: tuple[Derived, ...]

    def box_origin(self, chunk: int, slab_row0: int) -> tuple[int, int]:
        """(column, row) of chunk ``chunk``'s C box relative to the tile origin (n0, m0), for the slab whose first tile
        row is ``slab_row0``: the D store's box of the same chunk."""
        return chunk * self.chunk_cols, slab_row0

    def col_c_expr(self, chunk: str) -> str:
        """C: the box's column offset from n0 for chunk index ``chunk`` (box_origin's first coordinate)."""
        return f"{chunk} * {self.chunk_cols}"

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
    assert spec.arch is Arch.SM90A and store is not None and store.writer == "stmatrix", "rules.check_chain"
    aux = ch.aux_dtype(spec.out_dtype)
    assert aux.bytes == store.tma.element_bytes, (aux, store.tma.element_bytes)
    D = (
        Derived("tma_c_map", f"box {list(store.tma.box)}, {store.tma.swizzle.json_name}, rows ldc apart",
                "derived from the store's staging layout value (the D map's), with C's pointer and row stride",
                "the load writes C's chunk where the stmatrix of D's chunk writes the same elements", DRIVER_REF),
        Derived("c_buffer", f"the store's buffer store_chunk % {store.buffers_per_storer}",
                "C's chunk lands in the staging buffer D's chunk then overwrites",
                "no extra shared memory; reused after cp.async.bulk.wait_group.read 1, as without C", PTX_TMA_REF),
        Derived("c_barrier", f"{store.storers} x c_full, 1 arrival + {store.buffer_bytes} B",
                "one mbarrier per consumer warpgroup; thread 0 arms it (expect_tx) and issues the load; phase = the "
                "warpgroup's TMA-path chunks so far mod 2", "one load per chunk, each waited for before the next is issued",
                "PTX ISA 'mbarrier', 'cp.async.bulk.tensor'"),
        Derived("c_read", f"{store.stmatrix_per_chunk} x ldmatrix.x4 per chunk",
                "at the stmatrix addresses; register q of lane t = matrix q's row t/4, columns 2(t%4), +1",
                "ldmatrix is the inverse of stmatrix: each register holds C at its two accumulator elements",
                "PTX ISA 'ldmatrix'"),
        Derived("c_order", "wait_read 1 -> bar -> TMA load C -> mbar wait -> ldmatrix -> chain -> syncwarp -> stmatrix "
                "-> fence.proxy.async -> bar -> TMA store",
                "the generic-proxy reads of C follow the load's completion on the mbarrier; D's writes follow the reads "
                "in each warp (a warp reads and writes only its own 16 rows)",
                "the load (async proxy) overwrites the buffer only after the store that read it finished reading",
                "PTX ISA 'Memory consistency model: proxies'"),
        Derived("c_edge", "direct-store tiles: global loads",
                "a tile that fails the store's edge rule reads C with the --fuse c loads; TMA fills zeros outside M x N",
                "those elements of D are clipped by the store", "derive.epilogue edge_rule"),
    )
    tma = replace(store.tma, operand="c", data_type=TMA_DATA_TYPE_OF[aux], element_bytes=aux.bytes, ld_name="ldc",
                  expect_tx_bytes=store.buffer_bytes, derivation=D)
    return CLoadPlan(tma, store.storers, store.buffer_bytes, store.chunk_cols, "ldmatrix", D)
