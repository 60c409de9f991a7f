"""The panels of ``layout.svg`` beside the operand stages: the TMA-store epilogue's staging buffer, the fused epilogue
chain's register map, a block-scaled kernel's scale-factor atom in Tensor Memory, a grouped kernel's walk and a
block-FP8 kernel's B-scale blocks per column group (ptxgen.emit.pictures.svg assembles them)."""

from __future__ import annotations

from ...derive.tile.layout import TileLayout
from .svgkit import CELL_H, CELL_W, LEFT, LINE_BYTES, STEP_COLOURS, row_colour, svg_text

STORE_LINES = 16  # the staging picture: the first two 8-row swizzle atoms of a buffer


def chain_panel(t: TileLayout, y0: float) -> tuple[list[str], float]:
    """The fused epilogue chain (derive.store.fusion): its steps, and which operand elements lanes 0..7 of warp 0 load for
    the first 16 columns of their rows (the register map the L1 model checks)."""
    from ...derive.store.fusion import plan_chain, steps_text

    s = t.spec
    plan = plan_chain(s.fuse, s.arch, s.bm, s.bn, s.out_dtype, s.epilogue)
    el = ['<g class="operand" id="fuse">', svg_text(10, y0 + 16, f"fused epilogue chain ({s.fuse.token}), per output element:", "title")]
    y = y0 + 26
    for i, line in enumerate(steps_text(s.fuse, plan.out, plan.aux), 1):
        el.append(svg_text(20, y + 12, f"{i}. {line}", "legend"))
        y += 16
    if s.fuse.c_tma:
        el.append(svg_text(20, y + 12, "C through TMA (derive.store.cload): on the TMA-store tiles each 64-column chunk of C is loaded into the "
                        "D staging buffer below (C's map = D's box and swizzle) and read back with ldmatrix at the stmatrix "
                        "addresses (the outlined cells); the direct-store tiles use the loads listed here", "legend"))
        y += 16
    for op, arrow in [(o, "->") for o in s.fuse.operands()] + [(o, "<-") for o in s.fuse.stores()]:  # loads, then aux's stores
        for lane in range(8):
            loads = [ld for ld in plan.loads(op, 0, lane, 0, 16) if ld.col is None or ld.col < 16]
            what = "; ".join(f"{op}[{'' if ld.row is None else f'row {ld.row}'}{', ' if ld.row is not None and ld.col is not None else ''}"
                             f"{'' if ld.col is None else f'col {ld.col}' + (f'..{ld.col + ld.count - 1}' if ld.count > 1 else '')}]"
                             f" {arrow} registers {', '.join(map(str, (r for t_ in ld.targets for r in t_)))}" for ld in loads[:3])
            el.append(svg_text(20, y + 12, f"warp 0 lane {lane}: {what or 'nothing (no row)'}", "legend"))
            y += 14
    el.append("</g>")
    return el, y + 6


def store_panel(plan, y0: float) -> tuple[list[str], float]:
    """The TMA-store epilogue's staging buffer (derive.store.epilogue.StorePlan): 128-byte rows in physical order,
    each cell labelled with the tile row and columns it holds, and the cells that one warp-wide shared store
    writes (stmatrix matrix 0 of the first call, or the first st.shared.v4 of 8 rows) outlined: 8 different
    bank groups."""
    el = ['<g class="operand" id="operand-d">']
    y = y0
    per_cell = plan.chunk_cols // plan.staging.cols
    el.append(svg_text(10, y + 16, f"D staging buffer ({plan.rows} rows x {plan.chunk_cols} columns, {plan.staging.swizzle.value}): "
                    f"{plan.buffers_per_storer} per {'consumer warpgroup' if plan.wgmma else 'epilogue warp'}, "
                    f"written with {plan.writer}, read by a TMA store (box {plan.tma.box[0]} x {plan.tma.box[1]})", "title"))
    y += 26
    for c in range(LINE_BYTES // 16):
        el.append(svg_text(LEFT + c * CELL_W + CELL_W / 2, y + 12, f"banks {4 * c}-{4 * c + 3}", "bank", "middle"))
    y += 18
    where = {plan.row_cell_offset(r, c): (r, c) for r in range(plan.rows) for c in range(plan.staging.cols)}
    if plan.writer == "stmatrix":  # matrix 0 of the first stmatrix of warp 0: lanes 0..7 address rows 0..7, cell 0
        wave = {plan.stmatrix_offset(0, lane, 0) for lane in range(8)}
        wave_doc = "outlined: the 8 rows of one 8x8 matrix of one stmatrix (lanes 0..7)"
    elif plan.pair_writer:  # e4m3 / f32: one warp-wide store of a pair a lane, group 0 of rows 0..7
        wave = {plan.pair_offset(0, lane, 0, 0) // 16 * 16 for lane in range(32)}
        wave_doc = (f"outlined: the cells one warp-wide {plan.writer} writes (columns 0..7 of rows 0..7, "
                    f"{2 * plan.tma.element_bytes} bytes a lane)")
    else:
        wave = {plan.row_cell_offset(r, 0) for r in range(8)}
        wave_doc = "outlined: cell 0 of rows 0..7, stored by lanes 0..7 in one st.shared.v4"
    for L in range(min(STORE_LINES, plan.rows)):
        ly = y + L * CELL_H
        el.append(svg_text(LEFT - 8, ly + 15, f"+{L * LINE_BYTES}", "off", "end"))
        for c in range(LINE_BYTES // 16):
            off = L * LINE_BYTES + c * 16
            r, col = where[off]
            stroke, sw = ("#d62728", 2.5) if off in wave else ("#999", 0.5)
            el.append(f'<g class="cell" data-offset="{off}" data-row="{r}" data-col="{col}">')
            el.append(f'<rect x="{LEFT + c * CELL_W + 1}" y="{ly + 1}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
                      f'fill="{row_colour(r, plan.staging.atom_rows)}" stroke="{stroke}" stroke-width="{sw}"/>')
            el.append(svg_text(LEFT + c * CELL_W + 5, ly + 15, f"r{r}:n{col * per_cell}-{col * per_cell + per_cell - 1}", "lbl"))
            el.append("</g>")
    lines = min(STORE_LINES, plan.rows)
    for a in range(0, lines, plan.staging.atom_rows):
        el.append(f'<rect class="atom" x="{LEFT}" y="{y + a * CELL_H}" width="{CELL_W * LINE_BYTES // 16}" '
                  f'height="{plan.staging.atom_rows * CELL_H}"/>')
    y += lines * CELL_H + 6
    el.append(svg_text(LEFT, y + 14, f"label: tile row : columns of the chunk; fill: row inside the atom; {wave_doc} "
                    f"({len({off % LINE_BYTES // 16 for off in wave})} bank groups); the other {plan.rows - lines} rows repeat the pattern",
                    "note"))
    y += 24
    el.append("</g>")
    return el, y




SF_CELL_W, SF_CELL_H = 44, 13


def scale_panel(t: TileLayout, y0: float) -> tuple[list[str], float]:
    """One 512-byte scale-factor atom as tcgen05.cp puts it in TMEM: 32 lanes (its 16-byte smem rows) x 4 columns
    (32-bit words) x 4 bytes. Each byte is labelled with the row of A (or B) and the K chunk it scales, filled by
    chunk, and outlined in the colour of the MMA step whose SF ID selects it (first atom group of a stage)."""
    p = t.scales
    el = [svg_text(10, y0 + 14, f"Scale factors: {p.mma_opcode}, {p.kind.scale.value} per {p.vec} elements; one 512-B atom "
                f"(128 rows x 4 chunks) = smem rows 0..31 of 16 B -> TMEM lanes 0..31 (x4 partitions), columns +0..+3", "title")]
    y = y0 + 24
    el.append(svg_text(10, y + 10, "global / smem byte 16 r0 + 4 r1 + j holds row r0 + 32 r1, chunk j (CUTLASS SfKMajorAtom "
                    f"((32,4),({p.vec},4)):((16,4),(0,1)))", "legend"))
    y += 16
    by_id: dict[int, list[int]] = {}
    for i, st in enumerate(p.steps):
        if st.group == 0:
            for b in range(st.sf_id, st.sf_id + p.kind.sfs_per_mma):
                by_id.setdefault(b, []).append(i)
    for w in range(4):
        el.append(svg_text(LEFT + (4 * w + 2) * SF_CELL_W, y + 10, f"column +{w} (rows {32 * w}..{32 * w + 31})", "legend", "middle"))
    y += 14
    for r0 in range(32):
        el.append(svg_text(LEFT - 8, y + SF_CELL_H - 3, f"lane {r0} / smem +{16 * r0}", "legend", "end"))
        for w in range(4):
            for j in range(4):
                x = LEFT + (4 * w + j) * SF_CELL_W
                steps = by_id.get(j, [])
                stroke = STEP_COLOURS[steps[0] % len(STEP_COLOURS)] if steps else "#999"
                el.append(f'<rect x="{x}" y="{y:g}" width="{SF_CELL_W - 1}" height="{SF_CELL_H - 1}" '
                          f'fill="hsl({j * 90},60%,85%)" stroke="{stroke}" stroke-width="{1.5 if steps else 0.5}"/>')
                el.append(svg_text(x + 2, y + SF_CELL_H - 3, f"r{r0 + 32 * w} c{j}", "tid"))
        y += SF_CELL_H
    y += 6
    for i, st in enumerate(p.steps):
        el.append(svg_text(10, y + 12, f"MMA {i} (K {st.k}..{st.k + p.kind.k_per_mma - 1}): chunk {st.chunk} -> atom group {st.group}, "
                        f"SF ID {st.sf_id}, SFA column +{st.a_column}, SFB column +{st.b_column} from the stage's scale-factor "
                        f"base; idesc {st.idesc.hex}", "legend"))
        y += 15
    return el, y


GROUP_COLOURS = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2", "#c7e9c0")


def grouped_panel(spec, y0: float) -> tuple[list[str], float]:
    """A grouped kernel's walk on the example of GroupedPlan.walk_picture: D's rows (down) and columns (across),
    each work item's loaded tile dashed and its stored part filled in its group's colour and labelled with the item
    and the CTA of a 3-CTA grid; the groups' first rows marked."""
    from ...derive.roles.grouped import GroupedPlan

    plan = GroupedPlan(spec.bm, spec.bn, spec.raster_group)
    offs, grid = [0, 1, spec.bm + 2, spec.bm + 2], 3
    m_total, n = offs[-1], spec.bn + 1
    walk = plan.walk(offs, m_total, n)
    rows = plan.group_rows(offs, m_total)
    extent_rows = max([m_total] + [t.a_row0 + spec.bm for t in walk])
    extent_cols = max([n] + [t.n0 + spec.bn for t in walk])
    width = CELL_W * LINE_BYTES // 16
    sx, sy = width / extent_cols, min(3.0, 420 / extent_rows)
    el = ['<g class="grouped" id="grouped-walk">',
          svg_text(10, y0 + 16, f"grouped walk (docs/grouped.md): offs = {offs} (groups of {', '.join(str(e - b) for b, e in rows)} rows), "
                f"M = {m_total}, N = {n}, {grid} CTAs", "title"),
          svg_text(10, y0 + 32, "filled: rows and columns a work item stores; dashed: the tile it loads (rows past its group, "
                "columns past N: multiplied, not stored); empty groups have no items", "legend")]
    top = y0 + 44
    el.append(f'<rect x="{LEFT}" y="{top}" width="{n * sx:.1f}" height="{m_total * sy:.1f}" fill="none" stroke="#000" stroke-width="1.5"/>')
    for t in walk:
        colour = GROUP_COLOURS[t.group % len(GROUP_COLOURS)]
        x, y = LEFT + t.n0 * sx, top + t.a_row0 * sy
        rh, cw = min(t.a_row0 + spec.bm, t.row_end) - t.a_row0, min(t.n0 + spec.bn, n) - t.n0
        el.append(f'<g class="item" data-item="{t.item}" data-group="{t.group}" data-cta="{t.item % grid}">')
        el.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{spec.bn * sx:.1f}" height="{spec.bm * sy:.1f}" fill="none" '
                  f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="4,3"/>')
        el.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{cw * sx:.1f}" height="{rh * sy:.1f}" fill="{colour}" stroke="#333" stroke-width="0.5"/>')
        scales = f"; scale_b[{t.group}], scale_a rows {t.a_row0}.." if spec.fp8_blocks.value != "none" else ""
        el.append(svg_text(x + 3, y + 12, f"item {t.item} CTA {t.item % grid}: group {t.group} tile ({t.tile_m}, {t.tile_n}){scales}", "lbl"))
        el.append("</g>")
    for g, (b, e) in enumerate(rows):
        el.append(svg_text(LEFT - 8, top + b * sy + 10, f"group {g}: rows {b}..{e - 1}" if e > b else f"group {g}: empty", "off", "end"))
    el.append("</g>")
    return el, top + extent_rows * sy + 10


BFP8_COLOURS = ("#9ecae1", "#fdae6b")  # block n0 / 128, the next block


def bfp8_panel(spec, y0: float) -> tuple[list[str], float]:
    """Block FP8 (derive.scaled.blockfp8): for each split n0 % 128 a tile can start at, the tile's 8-column register groups
    coloured by the 128-column block of B whose scale multiplies them (the promotion branch of that phase)."""
    from ...derive.scaled.blockfp8 import BLOCK_K, COLUMNS_1D1D, GROUP_COLS, plan_block_fp8

    if spec.fp8_blocks.value == COLUMNS_1D1D:
        return bfp8_columns_panel(spec, y0)
    plan = plan_block_fp8(spec.bm, spec.bn, spec.bk)
    width = CELL_W * LINE_BYTES // 16
    cw = min(CELL_W, width / plan.groups)
    el = ['<g class="bfp8" id="bfp8-scales">',
          svg_text(10, y0 + 16, f"block FP8 (docs/block-fp8.md): per {BLOCK_K} of K, acc += partial x sfa[row, kb] x sfb[kb, block]; "
                   f"register group g = columns {GROUP_COLS}g..{GROUP_COLS}g+{GROUP_COLS - 1} of the {spec.bn}-column tile", "title"),
          svg_text(10, y0 + 32, "blue: the scale of block n0 / 128; orange: of block n0 / 128 + 1 (one promotion branch per row)", "legend")]
    y = y0 + 44
    for ph in plan.phases:
        el.append(svg_text(LEFT - 8, y + CELL_H - 4, f"n0 % 128 = {ph.residue}", "off", "end"))
        for g in range(plan.groups):
            block = 0 if g < ph.first_groups else 1
            el.append(f'<rect x="{LEFT + g * cw:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{CELL_H}" fill="{BFP8_COLOURS[block]}" '
                      f'stroke="#333" stroke-width="0.5" data-phase="{ph.residue}" data-group="{g}" data-block="{block}"/>')
        y += CELL_H + 4
    if spec.consumer_slabs > 1:
        rows, y = slabs_rows(spec, y + 6)
        el += rows
    el.append("</g>")
    return el, y + 6


def bfp8_columns_panel(spec, y0: float) -> tuple[list[str], float]:
    """--fp8-blocks 1x128x1x128 (derive.scaled.bfp8cols): per lane % 4, the two columns of each register group whose B scales
    the thread reads (one 8-byte pair per group from the stage's sfb slot)."""
    from ...derive.scaled.bfp8cols import plan_columns
    from ...derive.scaled.blockfp8 import BLOCK_K

    plan = plan_columns(spec.bm, spec.bn, spec.bk, scale_load=spec.scale_load.value)
    width = CELL_W * LINE_BYTES // 16
    cw = min(CELL_W, width / plan.groups)
    el = ['<g class="bfp8" id="bfp8-scales">',
          svg_text(10, y0 + 16, f"block FP8 1x128x1x128 (docs/block-fp8.md): per {BLOCK_K} of K, acc += partial x sfa[row, kb] x "
                   f"sfb[kb, column]; each cell: the two columns of register group g whose B scales a thread reads", "title"),
          svg_text(10, y0 + 32, "one row per lane % 4 (every lane of a row reads the same columns)", "legend")]
    y = y0 + 44
    for q in range(4):
        el.append(svg_text(LEFT - 8, y + CELL_H - 4, f"lane % 4 = {q}", "off", "end"))
        for g, (col, _) in enumerate(plan.thread_column_pairs(q)):
            el.append(f'<rect x="{LEFT + g * cw:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{CELL_H}" fill="{BFP8_COLOURS[g % 2]}" '
                      f'stroke="#333" stroke-width="0.5" data-lane4="{q}" data-group="{g}" data-columns="{col},{col + 1}"/>')
        y += CELL_H + 4
    el.append("</g>")
    return el, y + 6


SLAB_COLOURS = ("#c7e9c0", "#dadaeb", "#fdd0a2", "#d9d9d9")  # consumer warpgroup 0, 1, 2, 3


def slabs_rows(spec, y0: float) -> tuple[list[str], float]:
    """--consumer-slabs N (derive.scaled.bfp8slabs): the tile's 64-row slabs coloured by the consumer warpgroup that owns them,
    and the order of one K block through the warpgroup's shared partial."""
    from ...derive.scaled.bfp8slabs import SLAB_ROWS, plan_consumer_slabs

    plan = plan_consumer_slabs(spec.bm, spec.consumer_slabs)
    order = ", ".join(st.op + ("" if st.slab < 0 else f" {st.slab}") for st in plan.steps)
    el = [svg_text(10, y0 + 12, f"{plan.slabs} slabs per consumer warpgroup, one shared partial; per K block: {order}", "legend")]
    y = y0 + 20
    cw = CELL_W * LINE_BYTES // 16 / (spec.bm // SLAB_ROWS)
    for wg in range(plan.consumer_warpgroups):
        for i in range(plan.slabs):
            t = plan.tile_slab(wg, i)
            el.append(f'<rect x="{LEFT + t * cw:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{CELL_H}" '
                      f'fill="{SLAB_COLOURS[wg % len(SLAB_COLOURS)]}" stroke="#333" stroke-width="0.5" data-slab="{t}" '
                      f'data-warpgroup="{wg}" data-own-slab="{i}"/>')
            el.append(svg_text(LEFT + (t + 0.5) * cw, y + CELL_H - 4, f"rows {plan.first_row(wg, i)}..: wg {wg} slab {i}",
                               "lbl", "middle"))
    el.append(svg_text(LEFT - 8, y + CELL_H - 4, "tile rows", "off", "end"))
    return el, y + CELL_H + 4


ORDER_COLOURS = ("#d9d9d9", "#fdae6b")  # main loop, epilogue
ORDER_TILES = 3  # tiles drawn
ORDER_MAINLOOP_UNITS, ORDER_EPILOGUE_UNITS = 6, 2  # an illustration: a main loop three epilogues long


def order_panel(spec, y0: float) -> tuple[list[str], float]:
    """--epilogue-order alternate (derive.roles.epiorder): a timeline of ORDER_TILES tiles, one row per consumer warpgroup,
    each epilogue starting after the previous warpgroup's (round-robin) and the warpgroup's own main loop. The lengths
    are an illustration, not a measurement; the order is the derived one."""
    from ...derive.tile.kernel import plan_kernel

    plan = plan_kernel(spec).epi_order
    c = plan.consumers
    el = ['<g class="epilogue-order" id="epilogue-order">',
          svg_text(10, y0 + 16, f"epilogue order alternate: warpgroup w's epilogue of tile t after w - 1's, warpgroup 0's "
                   f"of t + 1 after warpgroup {c - 1}'s of t (named barriers {plan.first_barrier_id}.."
                   f"{plan.first_barrier_id + c - 1})", "title"),
          svg_text(10, y0 + 32, "grey: main loop (MMAs); orange: epilogue; lengths illustrative", "legend")]
    unit = CELL_W * LINE_BYTES // 16 / (ORDER_TILES * (ORDER_MAINLOOP_UNITS + ORDER_EPILOGUE_UNITS) + c * ORDER_EPILOGUE_UNITS)
    free = [0] * c  # when each warpgroup's main loop of the next tile can start
    last_end = 0  # when the previous epilogue in the order ended
    y = y0 + 44
    rows = {w: [] for w in range(c)}
    for t in range(ORDER_TILES):
        for w in range(c):
            ml_end = free[w] + ORDER_MAINLOOP_UNITS
            rows[w].append(("eo-ml", free[w], ml_end, t))
            start = max(ml_end, last_end)
            last_end = start + ORDER_EPILOGUE_UNITS
            rows[w].append(("eo-epi", start, last_end, t))
            free[w] = last_end
    for w in range(c):
        el.append(svg_text(LEFT - 8, y + CELL_H - 4, f"warpgroup {w}", "off", "end"))
        for cls, a, b, t in rows[w]:
            colour = ORDER_COLOURS[cls == "eo-epi"]
            el.append(f'<rect class="{cls}" x="{LEFT + a * unit:.1f}" y="{y:.1f}" width="{(b - a) * unit:.1f}" height="{CELL_H}" '
                      f'fill="{colour}" stroke="#333" stroke-width="0.5" data-wg="{w}" data-tile="{t}"/>')
        y += CELL_H + 4
    el.append("</g>")
    return el, y + 6


def kgrouped_panel(spec, y0: float) -> tuple[list[str], float]:
    """A K-grouped kernel's K axis on the example of KGroupedPlan.walk_picture: each group's K range in its colour,
    each K-tile's box dashed, and the box rows past the group's end (the next group's, zeroed in shared memory) hatched."""
    from ...derive.roles.kgrouped import KGroupedPlan, k_align_of

    plan = KGroupedPlan(spec.bm, spec.bn, spec.bk, spec.raster_group, k_align_of(spec))
    offs = [0, 1, spec.bk + 2, 2 * spec.bk + 2]
    k_total = offs[-1]
    ranges = plan.group_k(offs, k_total)
    width = CELL_W * LINE_BYTES // 16
    sx = width / (k_total + spec.bk)
    el = ['<g class="kgrouped" id="kgrouped-k">',
          svg_text(10, y0 + 16, f"K-grouped walk (derive.roles.kgrouped): offs = {offs}, K_total = {k_total}; every tile of out[g] "
                   "takes group g's K-tiles", "title"),
          svg_text(10, y0 + 32, "filled: the group's K indices; dashed: a K-tile's TMA box; hatched: box rows of another "
                   "group, zeroed before the MMA; an empty group has no K-tile (out[g] = 0)", "legend")]
    top = y0 + 44
    for g, (ks, ke) in enumerate(ranges):
        y = top + g * 22
        colour = GROUP_COLOURS[g % len(GROUP_COLOURS)]
        el.append(svg_text(LEFT - 8, y + 12, f"group {g}: K {ks}..{ke - 1}" if ke > ks else f"group {g}: empty", "off", "end"))
        el.append(f'<rect x="{LEFT + ks * sx:.1f}" y="{y:.1f}" width="{(ke - ks) * sx:.1f}" height="16" fill="{colour}"/>')
        for k0, lo, hi in plan.k_blocks(ks, ke):
            el.append(f'<rect x="{LEFT + k0 * sx:.1f}" y="{y:.1f}" width="{spec.bk * sx:.1f}" height="16" fill="none" '
                      f'stroke="#333" stroke-dasharray="4,3"/>')
            for z0, z1 in ((0, lo), (hi, spec.bk)):
                if z1 > z0:
                    el.append(f'<rect class="zeroed" x="{LEFT + (k0 + z0) * sx:.1f}" y="{y + 4:.1f}" '
                              f'width="{(z1 - z0) * sx:.1f}" height="8" fill="#999" opacity="0.6"/>')
    el.append("</g>")
    return el, top + len(ranges) * 22 + 10
