"""Pictures of a shared-memory stage: the swizzle, the banks, and what each MMA reads.

One self-contained SVG (no fonts, scripts or links from elsewhere). Per operand stage:

* the stage as lines of 128 bytes (one pass over the 32 banks), 16-byte cells in physical order, each
  labelled with the logical coordinates stored there and filled by logical row, so the swizzle's
  permutation shows as a change of colour order;
* bank numbers along the top; swizzle atoms (core matrices for ``none``) outlined, atom rows separated;
* for each MMA K-step, the cells its descriptor reads outlined in that step's colour, computed by the
  independent read model (ptxgen.readmodel) from the 64-bit descriptor, not from the store table;
* LBO and SBO as labelled arrows between the atoms they span;
* the loader's thread -> cell map for the first copy iteration (small ``tN`` in each cell);
* a legend with each descriptor (hex and decoded) and the spec.

With ``decode=HEX`` the highlighted cells are those a user's raw descriptor reads; every cell read as
something other than the logical data it holds is marked red.
"""

from __future__ import annotations

import html

import numpy as np

from ..model import readmodel
from ..derive.explain import cell_label
from ..derive.kernel import plan_kernel
from ..derive.layout import TileLayout
from ..derive.operand import OperandLayout
from ..isa.types import Major
from .sources import generated_line

CELL_W, CELL_H = 92, 22
LEFT, TOP_PAD = 190, 8
LINE_BYTES = 128  # one pass over the 32 four-byte banks
MAX_LINES = 64  # larger stages: first lines in full, the rest summarised
STEP_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")



def _escape(text: str) -> str:
    """XML character data: &, < and > escaped (what xml.sax.saxutils.escape does, without importing it: it loads
    urllib and email)."""
    return html.escape(text, quote=False)

def _copy_of_offset(op: OperandLayout):
    """TMA: offset within the stage -> index of the copy whose box covers it (None for cp.async)."""
    if op.tma is None:
        return None
    box_bytes = op.tma.box_bytes
    starts = [c.smem_offset_bytes for c in op.tma.copies]

    def copy_of(off: int) -> int:
        return next(i for i, st in enumerate(starts) if st <= off < st + box_bytes)

    return copy_of


def row_colour(logical_row: int, atom_rows: int) -> str:
    """Fill of a cell, by its logical row inside the atom (the row the swizzle keys on)."""
    hue = (logical_row % atom_rows) * 360 // atom_rows
    return f"hsl({hue},70%,82%)"


def _text(x: float, y: float, s: str, cls: str = "", anchor: str = "start") -> str:
    c = f' class="{cls}"' if cls else ""
    a = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text x="{x:g}" y="{y:g}"{c}{a}>{_escape(s)}</text>'


def _reads(t: TileLayout, op: OperandLayout, descs: list[int]) -> list[np.ndarray]:
    """For each descriptor, the byte addresses of every element one MMA reads (read model)."""
    out = []
    for d in descs:
        out.append(
            readmodel.element_addresses(t.spec.arch.value, d, op.major.value, op.mma_mn, op.smem_element)
        )
    return out


def _decode_legend(arch: str, desc: int) -> str:
    try:
        d = readmodel.decode(arch, desc)
    except readmodel.Unmodelled as e:
        return str(e)
    return f"start {d.start} B, LBO {d.lbo} B, SBO {d.sbo} B, swizzle {d.mode}, base offset {d.base_offset}"


def operand_panel(t: TileLayout, op: OperandLayout, y0: float, decode: int | None = None) -> tuple[list[str], float]:
    s = t.spec
    arch = s.arch.value
    T = op.per_cell
    el: list[str] = []
    y = y0
    MN = "M" if op.name == "a" else "N"
    el.append(f'<g class="operand" id="operand-{op.name}">')
    el.append(
        _text(
            10,
            y + 16,
            f"{op.name.upper()} stage ({MN} x K = {op.mn} x {op.bk}, {op.dtype.value}"
            + (f", unpacked: 16 packed in {2 * op.dtype.bits} B + {16 - 2 * op.dtype.bits} B padding per 16-B cell"
               if op.unpacked else "")
            + f"): {op.major.value}-major "
            f"{op.swizzle.value}, atom order {op.order.value}; {op.stage_bytes} B aligned to {op.alignment_bytes} B",
            "title",
        )
    )
    y += 26

    # descriptors and what they read
    if decode is None:
        descs = [op.descriptor(i).encode() for i in range(len(op.k_steps))]
        names = [f"K-step {i} (K {st.k}..{st.k + s.k_per_mma - 1})" for i, st in enumerate(op.k_steps)]
    else:
        descs, names = [decode], ["your descriptor"]
    try:
        reads = _reads(t, op, descs)
        read_error = None
    except (readmodel.Unmodelled, ValueError) as e:
        reads, read_error = [], str(e)
    for i, (d, name) in enumerate(zip(descs, names)):
        colour = STEP_COLOURS[i % len(STEP_COLOURS)]
        el.append(f'<rect x="10" y="{y + 4}" width="12" height="12" fill="none" stroke="{colour}" stroke-width="3"/>')
        el.append(_text(28, y + 15, f"{name}: {d:#018x} = {_decode_legend(arch, d)}", "legend"))
        y += 18
    if read_error:
        el.append(_text(28, y + 15, f"read model: {read_error}", "bad"))
        y += 18

    table = op.store.table()
    where = {table[r][c]: (r, c) for r in range(op.store.rows) for c in range(op.store.cols)}
    reader_of: dict[int, int] = {}  # cell offset -> index of the descriptor that reads it
    read_as: dict[int, tuple[int, int]] = {}  # cell offset -> (mma row, first K element) it is read as
    # one 16-byte cell holds T elements along the contiguous dimension: K for K-major, MN for MN-major
    r_step, k_step = (1, T) if op.major is Major.K else (T, 1)
    for i, addr in enumerate(reads):
        for r in range(0, addr.shape[0], r_step):
            for kk in range(0, addr.shape[1], k_step):
                cell = int(addr[r, kk]) // 16 * 16
                reader_of[cell] = i
                read_as[cell] = (r, kk)

    mismatches = 0
    expected_ok: set[int] = set()
    if decode is not None and reads:
        first = reads[0]
        stored0 = where.get(int(first[0, 0]) // 16 * 16)
        k0 = (stored0[1] * T if op.major is Major.K else stored0[0]) if stored0 else 0
        for cell, (r, kk) in read_as.items():
            logical = where.get(cell)
            want = (r, (k0 + kk) // T) if op.major is Major.K else (k0 + kk, r // T)
            if logical == want:
                expected_ok.add(cell)
            else:
                mismatches += 1
        el.append(
            _text(
                28,
                y + 15,
                f"read as the K-step starting at K {k0}: {len(read_as) - mismatches} of the {len(read_as)} distinct cells read "
                f"hold the data the MMA expects there; {mismatches} wrong (red)",
                "bad" if mismatches else "legend",
            )
        )
        y += 18

    # bank header
    y += 6
    for c in range(LINE_BYTES // 16):
        el.append(_text(LEFT + c * CELL_W + CELL_W / 2, y + 12, f"banks {4 * c}-{4 * c + 3}", "bank", "middle"))
    el.append(_text(LEFT - 8, y + 12, "byte", "bank", "end"))
    y += 18
    grid_top = y

    lines_total = op.stage_bytes // LINE_BYTES
    lines = min(lines_total, MAX_LINES)
    threads = plan_kernel(s, t).pipeline.role("producer").threads
    copy_of = _copy_of_offset(op)
    for L in range(lines):
        ly = grid_top + L * CELL_H
        el.append(_text(LEFT - 8, ly + 15, f"+{L * LINE_BYTES}", "off", "end"))
        for c in range(LINE_BYTES // 16):
            off = L * LINE_BYTES + c * 16
            r, col = where[off]
            linear_index = r * op.store.cols + col
            x = LEFT + c * CELL_W
            stroke, sw = "#999", 0.5
            if off in reader_of:
                stroke, sw = STEP_COLOURS[reader_of[off] % len(STEP_COLOURS)], 2.5
            bad = decode is not None and off in read_as and off not in expected_ok
            fill = "#ff4d4d" if bad else row_colour(r, op.atom_rows)
            el.append(
                f'<g class="cell" data-offset="{off}" data-row="{r}" data-col="{col}"'
                + (f' data-read-by="{reader_of[off]}"' if off in reader_of else "")
                + ">"
            )
            el.append(
                f'<rect x="{x + 1}" y="{ly + 1}" width="{CELL_W - 2}" height="{CELL_H - 2}" fill="{fill}" '
                f'stroke="{stroke}" stroke-width="{sw}"/>'
            )
            el.append(_text(x + 5, ly + 15, cell_label(op, r, col), "lbl"))
            if copy_of is not None:  # TMA: which copy (box) writes this cell
                el.append(_text(x + CELL_W - 4, ly + 15, f"c{copy_of(off)}", "tid", "end"))
            elif linear_index < threads:  # the loader's first copy iteration: thread t copies logical cell t
                el.append(_text(x + CELL_W - 4, ly + 15, f"t{linear_index}", "tid", "end"))
            el.append("</g>")
    # atom rows and atoms
    grid_w = CELL_W * LINE_BYTES // 16
    if op.swizzle.row_bytes < LINE_BYTES:
        for L in range(lines):
            for b in range(op.swizzle.row_bytes, LINE_BYTES, op.swizzle.row_bytes):
                x = LEFT + b // 16 * CELL_W
                ly = grid_top + L * CELL_H
                el.append(f'<line class="atomrow" x1="{x}" y1="{ly}" x2="{x}" y2="{ly + CELL_H}"/>')
    atom_lines = op.swizzle.atom_bytes // LINE_BYTES
    kind = "core matrix" if not op.swizzle.is_swizzled else "atom"
    for a in range(0, lines, atom_lines):
        h = min(atom_lines, lines - a) * CELL_H
        el.append(
            f'<rect class="atom" data-kind="{kind}" x="{LEFT}" y="{grid_top + a * CELL_H}" width="{grid_w}" height="{h}"/>'
        )
    # LBO / SBO arrows in the left margin
    arrows = []
    if op.major is Major.K and op.swizzle.is_swizzled:
        arrows.append(("SBO", op.sbo_bytes, "next 8-row group"))
    else:
        arrows += [("LBO", op.lbo_bytes, ""), ("SBO", op.sbo_bytes, "")]
    for i, (name, value, _) in enumerate(arrows):
        x = 20 + i * 70
        if value <= 0:
            el.append(_text(x, grid_top + 12, f"{name} unused", "note"))
            continue
        y2 = grid_top + min(value / LINE_BYTES, lines) * CELL_H
        el.append(f'<line class="arrow" x1="{x}" y1="{grid_top}" x2="{x}" y2="{y2}" marker-end="url(#arrowhead)"/>')
        label = f"{name} {value} B" + ("" if value / LINE_BYTES <= lines else " (below)")
        el.append(_text(x + 4, grid_top + 12 + 18 * 0, label, "arrowlbl"))
    if op.major is Major.K and op.swizzle.is_swizzled:
        el.append(_text(20, grid_top + 30, "LBO unused", "note"))
        el.append(_text(20, grid_top + 42, "(swizzled K-major)", "note"))
    y = grid_top + lines * CELL_H + 6
    if lines < lines_total:
        rest = lines_total - lines
        el.append(
            _text(
                LEFT,
                y + 14,
                f"... {rest} more lines ({rest * LINE_BYTES} B) repeat the same pattern: {op.swizzle.value} atoms "
                f"every {op.swizzle.atom_bytes} B (LBO {op.lbo_bytes} B, SBO {op.sbo_bytes} B)",
                "note",
            )
        )
        y += 20
    el.append(
        _text(
            LEFT,
            y + 14,
            f"fill: logical row inside the atom (0..{op.atom_rows - 1}); label: "
            + ("M/N row : 16-B K cell" if op.major is Major.K else "K row : 16-B M/N cell")
            + (
                f"; cN: TMA copy N (box {op.tma.box[0]} x {op.tma.box[1]}, {len(op.tma.copies)} a stage) writes this cell"
                if op.tma is not None
                else f"; tN: producer thread N copies this cell in the loader's first iteration ({threads} threads)"
            ),
            "note",
        )
    )
    y += 24
    el.append("</g>")
    return el, y


STORE_LINES = 16  # the staging picture: the first two 8-row swizzle atoms of a buffer


def chain_panel(t: TileLayout, y0: float) -> tuple[list[str], float]:
    """The fused epilogue chain (derive.fusion): its steps, and which operand elements lanes 0..7 of warp 0 load for
    the first 16 columns of their rows (the register map the L1 model checks)."""
    from ..derive.fusion import plan_chain, steps_text

    s = t.spec
    plan = plan_chain(s.fuse, s.arch, s.bm, s.bn, s.out_dtype, s.epilogue)
    el = ['<g class="operand" id="fuse">', _text(10, y0 + 16, f"fused epilogue chain ({s.fuse.token}), per output element:", "title")]
    y = y0 + 26
    for i, line in enumerate(steps_text(s.fuse, plan.out, plan.aux), 1):
        el.append(_text(20, y + 12, f"{i}. {line}", "legend"))
        y += 16
    if s.fuse.c_tma:
        el.append(_text(20, y + 12, "C through TMA (derive.cload): on the TMA-store tiles each 64-column chunk of C is loaded into the "
                        "D staging buffer below (C's map = D's box and swizzle) and read back with ldmatrix at the stmatrix "
                        "addresses (the outlined cells); the direct-store tiles use the loads listed here", "legend"))
        y += 16
    for op in s.fuse.operands():
        for lane in range(8):
            loads = [ld for ld in plan.loads(op, 0, lane, 0, 16) if ld.col is None or ld.col < 16]
            what = "; ".join(f"{op}[{'' if ld.row is None else f'row {ld.row}'}{', ' if ld.row is not None and ld.col is not None else ''}"
                             f"{'' if ld.col is None else f'col {ld.col}' + (f'..{ld.col + ld.count - 1}' if ld.count > 1 else '')}]"
                             f" -> registers {', '.join(map(str, (r for t_ in ld.targets for r in t_)))}" for ld in loads[:3])
            el.append(_text(20, y + 12, f"warp 0 lane {lane}: {what or 'nothing (no row)'}", "legend"))
            y += 14
    el.append("</g>")
    return el, y + 6


def store_panel(plan, y0: float) -> tuple[list[str], float]:
    """The TMA-store epilogue's staging buffer (derive.epilogue.StorePlan): 128-byte rows in physical order,
    each cell labelled with the tile row and columns it holds, and the cells that one warp-wide shared store
    writes (stmatrix matrix 0 of the first call, or the first st.shared.v4 of 8 rows) outlined: 8 different
    bank groups."""
    el = ['<g class="operand" id="operand-d">']
    y = y0
    per_cell = plan.chunk_cols // plan.staging.cols
    el.append(_text(10, y + 16, f"D staging buffer ({plan.rows} rows x {plan.chunk_cols} columns, {plan.staging.swizzle.value}): "
                    f"{plan.buffers_per_storer} per {'consumer warpgroup' if plan.wgmma else 'epilogue warp'}, "
                    f"written with {plan.writer}, read by a TMA store (box {plan.tma.box[0]} x {plan.tma.box[1]})", "title"))
    y += 26
    for c in range(LINE_BYTES // 16):
        el.append(_text(LEFT + c * CELL_W + CELL_W / 2, y + 12, f"banks {4 * c}-{4 * c + 3}", "bank", "middle"))
    y += 18
    where = {plan.row_cell_offset(r, c): (r, c) for r in range(plan.rows) for c in range(plan.staging.cols)}
    if plan.writer == "stmatrix":  # matrix 0 of the first stmatrix of warp 0: lanes 0..7 address rows 0..7, cell 0
        wave = {plan.stmatrix_offset(0, lane, 0) for lane in range(8)}
        wave_doc = "outlined: the 8 rows of one 8x8 matrix of one stmatrix (lanes 0..7)"
    elif plan.writer == "st.shared.b16":  # e4m3: one warp-wide 2-byte store, group 0 of rows 0..7
        wave = {plan.pair_offset(0, lane, 0, 0) // 16 * 16 for lane in range(32)}
        wave_doc = "outlined: the cells one warp-wide st.shared.b16 writes (columns 0..7 of rows 0..7, 2 bytes a lane)"
    else:
        wave = {plan.row_cell_offset(r, 0) for r in range(8)}
        wave_doc = "outlined: cell 0 of rows 0..7, stored by lanes 0..7 in one st.shared.v4"
    for L in range(min(STORE_LINES, plan.rows)):
        ly = y + L * CELL_H
        el.append(_text(LEFT - 8, ly + 15, f"+{L * LINE_BYTES}", "off", "end"))
        for c in range(LINE_BYTES // 16):
            off = L * LINE_BYTES + c * 16
            r, col = where[off]
            stroke, sw = ("#d62728", 2.5) if off in wave else ("#999", 0.5)
            el.append(f'<g class="cell" data-offset="{off}" data-row="{r}" data-col="{col}">')
            el.append(f'<rect x="{LEFT + c * CELL_W + 1}" y="{ly + 1}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
                      f'fill="{row_colour(r, plan.staging.atom_rows)}" stroke="{stroke}" stroke-width="{sw}"/>')
            el.append(_text(LEFT + c * CELL_W + 5, ly + 15, f"r{r}:n{col * per_cell}-{col * per_cell + per_cell - 1}", "lbl"))
            el.append("</g>")
    lines = min(STORE_LINES, plan.rows)
    for a in range(0, lines, plan.staging.atom_rows):
        el.append(f'<rect class="atom" x="{LEFT}" y="{y + a * CELL_H}" width="{CELL_W * LINE_BYTES // 16}" '
                  f'height="{plan.staging.atom_rows * CELL_H}"/>')
    y += lines * CELL_H + 6
    el.append(_text(LEFT, y + 14, f"label: tile row : columns of the chunk; fill: row inside the atom; {wave_doc} "
                    f"({len({off % LINE_BYTES // 16 for off in wave})} bank groups); the other {plan.rows - lines} rows repeat the pattern",
                    "note"))
    y += 24
    el.append("</g>")
    return el, y


_STYLE = """
text { font-family: monospace; font-size: 11px; fill: #222; }
.title { font-size: 14px; font-weight: bold; }
.legend { font-size: 11px; }
.bank, .off { font-size: 10px; fill: #555; }
.lbl { font-size: 10px; }
.tid { font-size: 8px; fill: #444; }
.note { font-size: 10px; fill: #555; }
.bad { font-size: 11px; fill: #c00; font-weight: bold; }
.atom { fill: none; stroke: #000; stroke-width: 2; }
.atomrow { stroke: #000; stroke-width: 1; stroke-dasharray: 3,2; }
.arrow { stroke: #333; stroke-width: 1.5; }
.arrowlbl { font-size: 10px; fill: #333; }
"""


SF_CELL_W, SF_CELL_H = 44, 13


def scale_panel(t: TileLayout, y0: float) -> tuple[list[str], float]:
    """One 512-byte scale-factor atom as tcgen05.cp puts it in TMEM: 32 lanes (its 16-byte smem rows) x 4 columns
    (32-bit words) x 4 bytes. Each byte is labelled with the row of A (or B) and the K chunk it scales, filled by
    chunk, and outlined in the colour of the MMA step whose SF ID selects it (first atom group of a stage)."""
    p = t.scales
    el = [_text(10, y0 + 14, f"Scale factors: {p.mma_opcode}, {p.kind.scale.value} per {p.vec} elements; one 512-B atom "
                f"(128 rows x 4 chunks) = smem rows 0..31 of 16 B -> TMEM lanes 0..31 (x4 partitions), columns +0..+3", "title")]
    y = y0 + 24
    el.append(_text(10, y + 10, "global / smem byte 16 r0 + 4 r1 + j holds row r0 + 32 r1, chunk j (CUTLASS SfKMajorAtom "
                    f"((32,4),({p.vec},4)):((16,4),(0,1)))", "legend"))
    y += 16
    by_id: dict[int, list[int]] = {}
    for i, st in enumerate(p.steps):
        if st.group == 0:
            for b in range(st.sf_id, st.sf_id + p.kind.sfs_per_mma):
                by_id.setdefault(b, []).append(i)
    for w in range(4):
        el.append(_text(LEFT + (4 * w + 2) * SF_CELL_W, y + 10, f"column +{w} (rows {32 * w}..{32 * w + 31})", "legend", "middle"))
    y += 14
    for r0 in range(32):
        el.append(_text(LEFT - 8, y + SF_CELL_H - 3, f"lane {r0} / smem +{16 * r0}", "legend", "end"))
        for w in range(4):
            for j in range(4):
                x = LEFT + (4 * w + j) * SF_CELL_W
                steps = by_id.get(j, [])
                stroke = STEP_COLOURS[steps[0] % len(STEP_COLOURS)] if steps else "#999"
                el.append(f'<rect x="{x}" y="{y:g}" width="{SF_CELL_W - 1}" height="{SF_CELL_H - 1}" '
                          f'fill="hsl({j * 90},60%,85%)" stroke="{stroke}" stroke-width="{1.5 if steps else 0.5}"/>')
                el.append(_text(x + 2, y + SF_CELL_H - 3, f"r{r0 + 32 * w} c{j}", "tid"))
        y += SF_CELL_H
    y += 6
    for i, st in enumerate(p.steps):
        el.append(_text(10, y + 12, f"MMA {i} (K {st.k}..{st.k + p.kind.k_per_mma - 1}): chunk {st.chunk} -> atom group {st.group}, "
                        f"SF ID {st.sf_id}, SFA column +{st.a_column}, SFB column +{st.b_column} from the stage's scale-factor "
                        f"base; idesc {st.idesc.hex}", "legend"))
        y += 15
    return el, y


GROUP_COLOURS = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2", "#c7e9c0")


def grouped_panel(spec, y0: float) -> tuple[list[str], float]:
    """A grouped kernel's walk on the example of GroupedPlan.walk_picture: D's rows (down) and columns (across),
    each work item's loaded tile dashed and its stored part filled in its group's colour and labelled with the item
    and the CTA of a 3-CTA grid; the groups' first rows marked."""
    from ..derive.grouped import GroupedPlan

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
          _text(10, y0 + 16, f"grouped walk (docs/grouped.md): offs = {offs} (groups of {', '.join(str(e - b) for b, e in rows)} rows), "
                f"M = {m_total}, N = {n}, {grid} CTAs", "title"),
          _text(10, y0 + 32, "filled: rows and columns a work item stores; dashed: the tile it loads (rows past its group, "
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
        el.append(_text(x + 3, y + 12, f"item {t.item} CTA {t.item % grid}: group {t.group} tile ({t.tile_m}, {t.tile_n})", "lbl"))
        el.append("</g>")
    for g, (b, e) in enumerate(rows):
        el.append(_text(LEFT - 8, top + b * sy + 10, f"group {g}: rows {b}..{e - 1}" if e > b else f"group {g}: empty", "off", "end"))
    el.append("</g>")
    return el, top + extent_rows * sy + 10


def svg_generated_line(spec) -> str:
    pairs = " ".join(f"{k}={v}" for k, v in spec.to_json().items())
    return generated_line(pairs).replace("`ptxgen build ", "spec `")


def layout_svg(t: TileLayout, operands: tuple[str, ...] = ("a", "b", "d"), decode: int | None = None) -> str:
    s = t.spec
    parts: list[str] = []
    y = TOP_PAD
    header = [
        _text(10, y + 14, f"ptxgen {s.kernel_name}", "title"),
        _text(10, y + 30, f"spec: {s.cli_args()}", "legend"),
    ]
    y += 38
    if t.idesc is not None:
        header.append(_text(10, y + 12, f"instruction descriptor {t.idesc.hex}: kind::{s.mma_kind}, M {s.bm}, N {s.bn}", "legend"))
    else:
        header.append(_text(10, y + 12, f"instruction: {t.wgmma.opcode}, imm-trans-a {t.wgmma.imm_trans_a}, imm-trans-b {t.wgmma.imm_trans_b}", "legend"))
    y += 22
    parts += header
    for name in operands:
        if name == "d":
            from ..derive.epilogue import plan_store

            store = plan_store(s)
            if store is not None:
                el, y = store_panel(store, y + 10)
                parts += el
            continue
        el, y = operand_panel(t, t.operand(name), y + 10, decode)
        parts += el
    if t.scales is not None:
        el, y = scale_panel(t, y + 10)
        parts += el
    if s.grouped.value != "none":
        el, y = grouped_panel(s, y + 10)
        parts += el
    if s.fuse is not None:
        el, y = chain_panel(t, y + 10)
        parts += el
    width = LEFT + CELL_W * LINE_BYTES // 16 + 20
    height = int(y + 10)
    return (
        # XML comments cannot hold "--", so the header spells the spec as key=value pairs; <desc> has the flags.
        f"<!-- {_escape(svg_generated_line(s))} -->\n"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">\n'
        f"<title>{_escape(s.kernel_name)} shared-memory layout</title>\n"
        f"<desc>{_escape(generated_line(s.cli_args()))}</desc>\n"
        f"<style>{_STYLE}</style>\n"
        '<defs><marker id="arrowhead" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>\n'
        f'<rect width="{width}" height="{height}" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n"
    )
