"""An independent model of which scale factor multiplies each element of a block-scaled tcgen05.mma.

Imports nothing from ptxgen. It follows the data the way the hardware does, from its own transcriptions:

* **Global** (CUTLASS ``Sm1xxBlockScaledConfig``): ``SfKMajorAtom = Layout<Shape<Shape<_32,_4>, Shape<SFVecSize,_4>>,
  Stride<Stride<_16,_4>, Stride<_0,_1>>>`` over (row, K element) of one 128 x 4V block, tiled with
  ``tile_to_shape(SfAtom, (M, K, L), Step<_2,_1,_3>)``: atoms follow each other along K first. Evaluated here
  as a CuTe layout (hierarchical co-lexicographic coordinates), element by element.
* **cp.async.bulk**: bytes [src, src + n) of global memory to [dst, dst + n) of shared memory.
* **tcgen05.cp.32x128b.warpx4** (PTX #tcgen05-instructions-tcgen05-cp, CUTLASS SM100_UTCCP_4x32dp128bit): the
  32 rows of 128 bits at the shared address go to lanes 0-31 of the 4 columns at the TMEM address, and are
  duplicated into every 32-lane partition (lanes 32q + r).
* **The MMA** (PTX 'Scale Factor A ID' / 'Scale Factor B ID' layouts; 'Scale factors ... need to be duplicated to
  all 32 lane partitions'): row m of A (column n of B) finds its scale factors in lane m % 32 of every partition,
  column (address column) + m // 32, bytes SF_ID .. SF_ID + SFs-per-MMA - 1 of that 32-bit word.

:func:`mma_scale_sources` answers, for one MMA: the global (row, chunk) of the scale factor that multiplies each
(row, k) of A and of B. The bridge (``ptxgen.model.bridges.verify_scales``) compares that with what block scaling
means: element (m, k) of the tile is scaled by chunk (k0 + k) // V of row m0 + m.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

ATOM_SHAPE_STRIDE = (((32, 4), (16, 4)), (("V", 4), (0, 1)))  # ((row modes), (K modes)) as (shape, stride)
ATOM_BYTES = 512
CP_ROWS, CP_ROW_BYTES, PARTITIONS = 32, 16, 4


def _colex(shape: tuple[int, ...], stride: tuple[int, ...], x: int) -> int:
    """CuTe: the index of flat coordinate ``x`` in a (shape, stride) mode, first sub-mode fastest."""
    out = 0
    for n, d in zip(shape, stride):
        out += (x % n) * d
        x //= n
    return out


def atom_offset(row: int, k: int, vec: int) -> int:
    """SfKMajorAtom at (row in 0..127, K element in 0..4V-1)."""
    (rs, rd), (ks, kd) = ATOM_SHAPE_STRIDE
    ks = tuple(vec if s == "V" else s for s in ks)
    return _colex(rs, rd, row) + _colex(ks, kd, k)


@lru_cache(maxsize=None)
def _atom_table(vec: int) -> tuple[tuple[int, ...], ...]:
    """atom_offset at every (row, K element) of one atom, evaluated element by element once per V; checks that the
    V elements of each chunk share one byte (the K mode's stride 0 over V), which global_sources relies on."""
    table = tuple(tuple(atom_offset(r, k, vec) for k in range(4 * vec)) for r in range(128))
    for r, row in enumerate(table):
        for k, b in enumerate(row):
            if b != row[k - k % vec]:
                raise ValueError(f"V={vec}: elements {k - k % vec} and {k} of row {r}'s chunk sit at different bytes")
    return table


def global_offset(row: int, k: int, vec: int, k_elements: int) -> int:
    """Byte offset of the scale factor of element (row, k) in the tiled global layout (K atoms first)."""
    atom_rows, atom_k = 128, 4 * vec
    atoms_k = -(-k_elements // atom_k)
    atom = (row // atom_rows) * atoms_k + k // atom_k  # Step<_2,_1,_3>: the K mode is tiled first
    return ATOM_BYTES * atom + _atom_table(vec)[row % atom_rows][k % atom_k]


@lru_cache(maxsize=64)
def global_sources(rows: int, k_elements: int, vec: int) -> Mapping[int, tuple[int, int]]:
    """Global byte -> (row, chunk) of the scale factor stored there. Every element of a chunk maps to one byte: its V
    elements lie in one atom (chunks start at multiples of V, atoms at multiples of 4V), where _atom_table checks it.
    Read-only (one evaluation per argument triple, shared by its callers)."""
    src: dict[int, tuple[int, int]] = {}
    for r in range(rows):
        for k in range(0, k_elements, vec):
            b = global_offset(r, k, vec, k_elements)
            if b in src and src[b] != (r, k // vec):
                raise ValueError(f"two scale factors at global byte {b}")
            src[b] = (r, k // vec)
    return MappingProxyType(src)


def sf_ids(idesc: int) -> tuple[int, int]:
    """(A, B) scale-factor IDs of a block-scaled instruction descriptor: PTX Tables 43-44 put the A ID in bits
    29-30 and the B ID in bits 4-5 (CUTLASS InstrDescriptorBlockScaled: a_sf_id_ [29,31), b_sf_id_ [4,6))."""
    return (idesc >> 29) & 3, (idesc >> 4) & 3


@dataclass
class Tmem:
    """Bytes of tensor memory: (lane, column, byte) -> what was copied there (a shared-memory byte's content)."""

    cells: dict

    def word_byte(self, lane: int, column: int, byte: int):
        return self.cells.get((lane, column, byte))


def bulk_copies(copies, smem: dict, gmem: dict) -> None:
    """``copies``: (shared byte address, global byte address, bytes)."""
    for dst, src, n in copies:
        for i in range(n):
            smem[dst + i] = gmem.get(src + i)


def tcgen05_cp_32x128b_warpx4(tmem: Tmem, column: int, smem_address: int, smem: dict) -> None:
    cells = tmem.cells
    for r in range(CP_ROWS):
        lanes = [32 * q + r for q in range(PARTITIONS)]
        for w in range(CP_ROW_BYTES // 4):
            for b in range(4):
                value = smem.get(smem_address + CP_ROW_BYTES * r + 4 * w + b)
                for lane in lanes:
                    cells[(lane, column + w, b)] = value


def mma_reads(tmem: Tmem, column: int, sf_id: int, sfs: int, rows: int) -> tuple[dict, list[str]]:
    """(row, slot) -> the TMEM byte content the MMA takes for that row's slot-th scale factor, and any row whose
    copies in the four lane partitions differ (the duplication PTX requires)."""
    out, problems = {}, []
    if sf_id % sfs:
        problems.append(f"SF ID {sf_id} is not aligned to the {sfs}-byte scale vector")
    cells = tmem.cells  # Tmem.word_byte, inlined: this loop runs for every row of every MMA the checks model
    for m in range(rows):
        lane, col = m % 32, column + m // 32
        for t in range(sfs):
            byte = sf_id + t
            if byte > 3:
                problems.append(f"row {m}: scale factor {t} would be byte {byte} of a 32-bit word")
                continue
            value = cells.get((lane, col, byte))
            for q in range(1, PARTITIONS):
                if cells.get((32 * q + lane, col, byte)) != value:
                    problems.append(f"row {m}: the lane partitions hold different scale factors")
                    break
            out[(m, t)] = value
    return out, problems


# ---- the CTA pair (tcgen05.mma.cta_group::2, M = 256) ---------------------------------------------------------
# Transcribed from CUTLASS: SM100_UTCCP_4x32dp128bit_2cta is ``tcgen05.cp.cta_group::2.32x128b.warpx4``, issued by
# one thread of the pair, and the block-scaled collective keeps each CTA's own SFA rows and the whole SFB tile at the
# same shared-memory offsets in both CTAs before that one copy (sm100_blockscaled_mma_warpspecialized.hpp: SFA
# partitioned like A by the 2-SM MMA, SFB by a 1-SM 'MMA_ScaleFactor' over the full N): so the copy takes, in each
# CTA, that CTA's shared memory to that CTA's Tensor Memory. The 2-SM atom at M = 256 uses the 4x1 data path
# (mma_traits_sm100.hpp: TmemAllocMode::ScaleFactorDuplicated4by1; mma_traits_sm100_frag.hpp tmem_sf_frg: the
# single-CTA atom for SFA over the CTA's M/2 rows and for SFB over all N): CTA c computes D rows c x M/2 .. with
# every column, taking the scale factors of its A rows and of every B row from its own Tensor Memory.


def tcgen05_cp_pair(tmems: list, column: int, smem_address: int, smems: list) -> None:
    """tcgen05.cp.cta_group::2.32x128b.warpx4: in each CTA of the pair, its own shared memory to its own TMEM."""
    for tmem, smem in zip(tmems, smems):
        tcgen05_cp_32x128b_warpx4(tmem, column, smem_address, smem)


def pair_mma_reads(tmems: list, a_column: int, b_column: int, a_id: int, b_id: int, sfs: int, m: int, n: int):
    """The scale factors one pair MMA (M = ``m`` over the pair, N = ``n``) multiplies D[row, col] by: (A's, B's,
    problems). A's[(row, slot)] for row 0..m-1 comes from the TMEM of CTA row // (m / 2) (the CTA holding that D row),
    its row row % (m / 2); B's[c][(col, slot)] is what CTA c reads for column col, used by every D row CTA c holds."""
    half = m // len(tmems)
    a_out, problems = {}, []
    per_cta = [mma_reads(t, a_column, a_id, sfs, half) for t in tmems]
    for c, (reads, more) in enumerate(per_cta):
        problems += [f"CTA {c} SFA: {p}" for p in more]
        for (r, slot), v in reads.items():
            a_out[(c * half + r, slot)] = v
    b_out = []
    for c, t in enumerate(tmems):
        reads, more = mma_reads(t, b_column, b_id, sfs, n)
        problems += [f"CTA {c} SFB: {p}" for p in more]
        b_out.append(reads)
    return a_out, b_out, problems
