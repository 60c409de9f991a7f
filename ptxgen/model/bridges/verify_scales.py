"""L1 for block scaling: the writer's scale-factor plan run through the independent model ``sfmodel``.

For a few tiles (origins inside and across the 128-row atoms, the first two K-tiles, every pipeline stage they
land in) the bridge feeds the writer's cp.async.bulk copies, tcgen05.cp placements and per-MMA TMEM columns and
instruction descriptors (SF IDs) to the model, and asks which global scale factor each element (m, k) of A and
(n, k) of B is multiplied by. Block scaling says: chunk (k0 + k) // V of row m0 + m (n0 + n). Any difference,
a TMEM column outside the scale-factor region, or a lane partition without its copy is a problem.

With K not a multiple of BK (``k_elements``) the last K-tile's stage holds chunks past ceil(K / V): the padding of
CUTLASS's last atom (user bytes, marked here as such) and atoms the kernel does not copy (stale bytes of an
earlier K-tile). Each must reach the MMA as 0 (0 x NaN = NaN even where the operands are zero-filled), and no copy
may read outside the CUTLASS-sized buffer.
"""

from __future__ import annotations

from ..numerics import sfmodel
from ...derive.tile.layout import TileLayout
from ...derive.scaled.scales import (
    sfb_row_column,
    stage_copy_sources,
    stage_tmem_copies,
    stage_zero_fill,
)
from ...derive.scaled.sf_atoms import sf_global_bytes, sf_k_atoms, sf_k_chunks

PADDING = "padding"  # a byte of the global buffer that holds no scale factor (the user's: could be NaN)
STALE = "stale"  # a shared-memory byte no copy of this K-tile wrote


def tile_cases(bm: int, bn: int, stages: int) -> list[tuple[int, int, int]]:
    """(m0, n0, kt): two row blocks of A, N origins covering every position inside a 128-row atom and the
    next atom, and enough K-tiles to visit every stage (at most 3)."""
    n0s = sorted({j * bn for j in range(max(1, 256 // bn) + 1)})
    return [(m0, n0, kt) for m0 in (0, bm) for n0 in n0s for kt in range(min(3, max(2, stages)))]


def check_scales(t: TileLayout, plan=None, k_elements: int | None = None, zeroing_ctas: tuple[int, ...] | None = None,
                 m_rows: int | None = None, n_rows: int | None = None, clamp: bool = True) -> list[str]:
    """[] when every element of every MMA is scaled by its own scale factor. ``plan`` replaces t.scales (controls).
    ``k_elements``: the problem's K (default: the K-tiles visited x BK); the last K-tile visited is partial when
    it is not a multiple of BK.

    A CTA pair (``--cta-group 2``): each CTA's shared memory is filled by its own copies (from the plan's per-CTA
    row origins), the plan's tcgen05.cp form decides which Tensor Memory it fills (cta_group::2: every CTA's from its
    own shared memory; cta_group::1 issued by the leader: the leader's only), and the pair model says which CTA's
    TMEM scales each element of D. ``zeroing_ctas``: the CTAs that zero their chunks past K (default: all, as the
    kernel does: the leader's MMA thread and the peer's relay; controls).

    ``m_rows`` / ``n_rows``: the problem's M and N (default: every tile whole). The buffers then hold CUTLASS's
    rows (padded to 128, not to the tile), only rows inside the matrix are checked, and no copy may read past a
    buffer (``clamp`` false: the writer's copies without its last-block rule, a control)."""
    s = t.spec
    p = plan or t.scales
    V, kmma, nsf = p.vec, p.kind.k_per_mma, p.kind.sfs_per_mma
    cases = tile_cases(s.bm, s.bn, s.stages)
    k_tiles = max(kt for _, _, kt in cases) + 1
    K = k_tiles * s.bk if k_elements is None else k_elements
    k_tiles = -(-K // s.bk)
    kts = sorted({kt for _, _, kt in cases if kt < k_tiles} | {k_tiles - 1})  # the last K-tile, partial or not
    cases = sorted({(m0, n0, kt) for m0, n0, _ in cases for kt in kts})
    rows_a = m_rows or max(m0 for m0, _, _ in cases) + s.bm
    rows_b = n_rows or -(-(max(n0 for _, n0, _ in cases) + s.bn) // 128) * 128
    cases = [(m0, n0, kt) for m0, n0, kt in cases if m0 < rows_a and n0 < rows_b]
    rows_of = {"a": rows_a, "b": rows_b}
    gmem = {}
    for name, rows in (("a", rows_a), ("b", rows_b)):
        sources = sfmodel.global_sources(rows, K, V)
        gmem[name] = {b: (name, *sources[b]) if b in sources else PADDING for b in range(sf_global_bytes(rows, K, V))}
    k_atoms, k_chunks = sf_k_atoms(K, V), sf_k_chunks(K, V)
    acc_cols = s.accumulator_stages * s.tmem_columns
    ctas = s.cta_group
    problems: list[str] = []
    for m0, n0, kt in cases:
        stage = kt % s.stages
        base = {"a": t.smem.sfa_offset + stage * t.smem.sfa_stage_bytes, "b": t.smem.sfb_offset + stage * t.smem.sfb_stage_bytes}
        smems: list = [{} for _ in range(ctas)]  # each CTA's shared memory (a pair: the same offsets in both)
        for c, smem in enumerate(smems):
            for name, row0 in (("a", m0 + p.cta_row0("a", c)), ("b", n0 + p.cta_row0("b", c))):
                op = p.operand(name)
                for i in range(op.stage_bytes):
                    smem[base[name] + i] = STALE
                copies = [(base[name] + so, go, n)
                          for so, go, n in stage_copy_sources(p, name, row0, kt, k_atoms, rows_of[name] if clamp else None)]
                outside = [(go, n) for _, go, n in copies if go < 0 or go + n > len(gmem[name])]
                if outside:
                    problems.append(f"tile (m0 {m0}, n0 {n0}) K-tile {kt}: SF{name.upper()} copy of bytes {outside[0][0]}.."
                                    f"{sum(outside[0]) - 1} reads past the {len(gmem[name])}-byte buffer")
                sfmodel.bulk_copies(copies, smem, gmem[name])
                for offset, keep in stage_zero_fill(p, name, kt, k_chunks) if zeroing_ctas is None or c in zeroing_ctas else ():
                    for row in range(32):
                        for w in range(4):
                            for j in range(keep, 4):
                                smem[base[name] + offset + 16 * row + 4 * w + j] = 0
        tmems = [sfmodel.Tmem({}) for _ in range(ctas)]
        col0 = acc_cols + stage * p.tmem_columns_per_stage
        for name, so, col in stage_tmem_copies(p):
            if not acc_cols <= col0 + col and col0 + col + 4 <= s.tmem_alloc_columns:
                problems.append(f"tcgen05.cp to columns {col0 + col}..{col0 + col + 3}: outside the scale-factor region "
                                f"[{acc_cols}, {s.tmem_alloc_columns})")
            if p.cta_group == 1:  # one CTA, or (a control) a cta_group::1 copy issued by the pair's leader
                sfmodel.tcgen05_cp_32x128b_warpx4(tmems[0], col0 + col, base[name] + so, smems[0])
            else:
                sfmodel.tcgen05_cp_pair(tmems, col0 + col, base[name] + so, smems)
        label = f"tile (m0 {m0}, n0 {n0}) K-tile {kt} stage {stage}"
        for i, st in enumerate(p.steps):
            a_id, b_id = sfmodel.sf_ids(int(st.idesc.hex, 16))
            k0 = kt * s.bk + st.k
            a_col, b_col = col0 + st.a_column, col0 + st.b_column + sfb_row_column(n0, s.bn)
            if ctas == 1:
                got_a, more = sfmodel.mma_reads(tmems[0], a_col, a_id, nsf, s.bm)
                got_b, more_b = sfmodel.mma_reads(tmems[0], b_col, b_id, nsf, s.bn)
                reads = [("A", "a", got_a, s.bm, m0), ("B", "b", got_b, s.bn, n0)]
                more += more_b
            else:
                got_a, got_bs, more = sfmodel.pair_mma_reads(tmems, a_col, b_col, a_id, b_id, nsf, s.bm, s.bn)
                reads = [("A", "a", got_a, s.bm, m0)] + [(f"B (CTA {c}'s rows of D)", "b", g, s.bn, n0) for c, g in enumerate(got_bs)]
            problems += [f"{label} MMA {i}: {m}" for m in more[:2]]
            # element (r, kk) takes slot kk // V of row r and wants chunk (k0 + kk) // V: the elements of one (slot, chunk)
            # pair (a run of kk) are checked together, the count and the first bad element as element by element
            runs: dict[tuple[int, int], list[int]] = {}
            for kk in range(kmma):
                runs.setdefault((kk // V, (k0 + kk) // V), []).append(kk)
            for what, name, got, rows, row0 in reads:
                bad = [(r, kks) for r in range(min(rows, rows_of[name] - row0)) for (slot, chunk), kks in runs.items()
                       if got.get((r, slot)) != ((name, row0 + r, chunk) if chunk < k_chunks else 0)]
                if bad:
                    r, kk = bad[0][0], bad[0][1][0]
                    problems.append(
                        f"{label} MMA {i} {what}: {sum(len(kks) for _, kks in bad)} of {rows * kmma} elements scaled by the wrong factor, "
                        f"e.g. ({r}, {kk}) gets {got.get((r, kk // V))}, wants "
                        f"{(name, row0 + r, (k0 + kk) // V) if (k0 + kk) // V < k_chunks else '0 (a chunk past K)'}"
                    )
    return problems
