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

import numpy as np

from ...model.layouts import readmodel
from ...derive.tile.explain import cell_label
from ...derive.tile.kernel import plan_kernel
from ...derive.tile.layout import TileLayout
from ...derive.operands.operand import OperandLayout
from ...isa.types import Major
from ..sources import generated_line
from .svg_panels import bfp8_panel, chain_panel, grouped_panel, kgrouped_panel, order_panel, scale_panel, store_panel
from .svgkit import CELL_H, CELL_W, LEFT, LINE_BYTES, STEP_COLOURS, STYLE, row_colour, svg_text, xml_escape

TOP_PAD = 8
MAX_LINES = 64  # larger stages: first lines in full, the rest summarised


def _copy_of_offset(op: OperandLayout):
    """TMA: offset within the stage -> index of the copy whose box covers it (None for cp.async)."""
    if op.tma is None:
        return None
    box_bytes = op.tma.box_bytes
    starts = [c.smem_offset_bytes for c in op.tma.copies]

    def copy_of(off: int) -> int:
        return next(i for i, st in enumerate(starts) if st <= off < st + box_bytes)

    return copy_of


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


def _panel_title(op: OperandLayout, y: float) -> str:
    MN = "M" if op.name == "a" else "N"
    return svg_text(
        10,
        y + 16,
        f"{op.name.upper()} stage ({MN} x K = {op.mn} x {op.bk}, {op.dtype.value}"
        + (f", unpacked: 16 packed in {2 * op.dtype.bits} B + {16 - 2 * op.dtype.bits} B padding per 16-B cell"
           if op.unpacked else "")
        + f"): {op.major.value}-major "
        f"{op.swizzle.value}, atom order {op.order.value}; {op.stage_bytes} B aligned to {op.alignment_bytes} B",
        "title",
    )


def _descriptor_legend(t: TileLayout, op: OperandLayout, decode: int | None, y: float, el: list[str]) -> tuple[list, float]:
    """One legend line per descriptor (the K-steps', or the user's ``decode``); the addresses each one reads."""
    arch = t.spec.arch.value
    if decode is None:
        descs = [op.descriptor(i).encode() for i in range(len(op.k_steps))]
        names = [f"K-step {i} (K {st.k}..{st.k + t.spec.k_per_mma - 1})" for i, st in enumerate(op.k_steps)]
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
        el.append(svg_text(28, y + 15, f"{name}: {d:#018x} = {_decode_legend(arch, d)}", "legend"))
        y += 18
    if read_error:
        el.append(svg_text(28, y + 15, f"read model: {read_error}", "bad"))
        y += 18
    return reads, y


def _cells_read(op: OperandLayout, reads) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """cell offset -> index of the descriptor that reads it, and -> (mma row, first K element) it is read as."""
    reader_of: dict[int, int] = {}
    read_as: dict[int, tuple[int, int]] = {}
    # one 16-byte cell holds T elements along the contiguous dimension: K for K-major, MN for MN-major
    T = op.per_cell
    r_step, k_step = (1, T) if op.major is Major.K else (T, 1)
    for i, addr in enumerate(reads):
        for r in range(0, addr.shape[0], r_step):
            for kk in range(0, addr.shape[1], k_step):
                cell = int(addr[r, kk]) // 16 * 16
                reader_of[cell] = i
                read_as[cell] = (r, kk)
    return reader_of, read_as


def _decode_verdict(op: OperandLayout, reads, read_as, where, y: float, el: list[str]) -> tuple[set[int], float]:
    """A user's descriptor: which cells it reads hold what the MMA expects there (read as the K-step its first cell
    starts); the line that says how many."""
    T = op.per_cell
    mismatches = 0
    expected_ok: set[int] = set()
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
        svg_text(
            28,
            y + 15,
            f"read as the K-step starting at K {k0}: {len(read_as) - mismatches} of the {len(read_as)} distinct cells read "
            f"hold the data the MMA expects there; {mismatches} wrong (red)",
            "bad" if mismatches else "legend",
        )
    )
    return expected_ok, y + 18


def _bank_header(y: float, el: list[str]) -> float:
    for c in range(LINE_BYTES // 16):
        el.append(svg_text(LEFT + c * CELL_W + CELL_W / 2, y + 12, f"banks {4 * c}-{4 * c + 3}", "bank", "middle"))
    el.append(svg_text(LEFT - 8, y + 12, "byte", "bank", "end"))
    return y + 18


def _cell_grid(op: OperandLayout, where, reader_of, read_as, expected_ok, decode, threads: int, lines: int,
               grid_top: float, el: list[str]) -> None:
    """The stage's first ``lines`` 128-byte lines, one rectangle a 16-byte cell: its logical row and column, who
    reads it, and who writes it (a TMA copy, or the loader thread of the first iteration)."""
    copy_of = _copy_of_offset(op)
    for L in range(lines):
        ly = grid_top + L * CELL_H
        el.append(svg_text(LEFT - 8, ly + 15, f"+{L * LINE_BYTES}", "off", "end"))
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
            el.append(svg_text(x + 5, ly + 15, cell_label(op, r, col), "lbl"))
            if copy_of is not None:  # TMA: which copy (box) writes this cell
                el.append(svg_text(x + CELL_W - 4, ly + 15, f"c{copy_of(off)}", "tid", "end"))
            elif linear_index < threads:  # the loader's first copy iteration: thread t copies logical cell t
                el.append(svg_text(x + CELL_W - 4, ly + 15, f"t{linear_index}", "tid", "end"))
            el.append("</g>")


def _atom_marks(op: OperandLayout, lines: int, grid_top: float, el: list[str]) -> None:
    """Atom-row boundaries inside a line and one outline per atom (or core matrix)."""
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


def _stride_arrows(op: OperandLayout, lines: int, grid_top: float, el: list[str]) -> None:
    """LBO / SBO arrows in the left margin."""
    arrows = []
    if op.major is Major.K and op.swizzle.is_swizzled:
        arrows.append(("SBO", op.sbo_bytes, "next 8-row group"))
    else:
        arrows += [("LBO", op.lbo_bytes, ""), ("SBO", op.sbo_bytes, "")]
    for i, (name, value, _) in enumerate(arrows):
        x = 20 + i * 70
        if value <= 0:
            el.append(svg_text(x, grid_top + 12, f"{name} unused", "note"))
            continue
        y2 = grid_top + min(value / LINE_BYTES, lines) * CELL_H
        el.append(f'<line class="arrow" x1="{x}" y1="{grid_top}" x2="{x}" y2="{y2}" marker-end="url(#arrowhead)"/>')
        label = f"{name} {value} B" + ("" if value / LINE_BYTES <= lines else " (below)")
        el.append(svg_text(x + 4, grid_top + 12 + 18 * 0, label, "arrowlbl"))
    if op.major is Major.K and op.swizzle.is_swizzled:
        el.append(svg_text(20, grid_top + 30, "LBO unused", "note"))
        el.append(svg_text(20, grid_top + 42, "(swizzled K-major)", "note"))


def _panel_footer(op: OperandLayout, lines: int, lines_total: int, threads: int, y: float, el: list[str]) -> float:
    """The lines not drawn, and the legend of fills and labels."""
    if lines < lines_total:
        rest = lines_total - lines
        el.append(
            svg_text(
                LEFT,
                y + 14,
                f"... {rest} more lines ({rest * LINE_BYTES} B) repeat the same pattern: {op.swizzle.value} atoms "
                f"every {op.swizzle.atom_bytes} B (LBO {op.lbo_bytes} B, SBO {op.sbo_bytes} B)",
                "note",
            )
        )
        y += 20
    el.append(
        svg_text(
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
    return y + 24


def operand_panel(t: TileLayout, op: OperandLayout, y0: float, decode: int | None = None) -> tuple[list[str], float]:
    """One operand's stage as SVG elements from height ``y0``: its descriptors, the cells they read (checked against
    what the MMA expects when ``decode`` is a user's descriptor), who writes each cell, atoms and strides."""
    el = [f'<g class="operand" id="operand-{op.name}">', _panel_title(op, y0)]
    reads, y = _descriptor_legend(t, op, decode, y0 + 26, el)
    table = op.store.table()
    where = {table[r][c]: (r, c) for r in range(op.store.rows) for c in range(op.store.cols)}
    reader_of, read_as = _cells_read(op, reads)
    expected_ok: set[int] = set()
    if decode is not None and reads:
        expected_ok, y = _decode_verdict(op, reads, read_as, where, y, el)
    grid_top = _bank_header(y + 6, el)
    lines_total = op.stage_bytes // LINE_BYTES
    lines = min(lines_total, MAX_LINES)
    threads = plan_kernel(t.spec, t).pipeline.role("producer").threads
    _cell_grid(op, where, reader_of, read_as, expected_ok, decode, threads, lines, grid_top, el)
    _atom_marks(op, lines, grid_top, el)
    _stride_arrows(op, lines, grid_top, el)
    y = _panel_footer(op, lines, lines_total, threads, grid_top + lines * CELL_H + 6, el)
    el.append("</g>")
    return el, y


def svg_generated_line(spec) -> str:
    pairs = " ".join(f"{k}={v}" for k, v in spec.to_json().items())
    return generated_line(pairs).replace("`ptxgen build ", "spec `")


def layout_svg(t: TileLayout, operands: tuple[str, ...] = ("a", "b", "d"), decode: int | None = None) -> str:
    s = t.spec
    parts: list[str] = []
    y = TOP_PAD
    header = [
        svg_text(10, y + 14, f"ptxgen {s.kernel_name}", "title"),
        svg_text(10, y + 30, f"spec: {s.cli_args()}", "legend"),
    ]
    y += 38
    if t.idesc is not None:
        header.append(svg_text(10, y + 12, f"instruction descriptor {t.idesc.hex}: kind::{s.mma_kind}, M {s.bm}, N {s.bn}", "legend"))
    else:
        header.append(svg_text(10, y + 12, f"instruction: {t.wgmma.opcode}, imm-trans-a {t.wgmma.imm_trans_a}, imm-trans-b {t.wgmma.imm_trans_b}", "legend"))
    y += 22
    parts += header
    for name in operands:
        if name == "d":
            from ...derive.store.epilogue import plan_store

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
    if s.grouped.along_k:
        el, y = kgrouped_panel(s, y + 10)
        parts += el
    elif s.grouped.value != "none":
        el, y = grouped_panel(s, y + 10)
        parts += el
    if s.fuse is not None:
        el, y = chain_panel(t, y + 10)
        parts += el
    if s.fp8_blocks.value != "none":
        el, y = bfp8_panel(s, y + 10)
        parts += el
    if s.epilogue_order.value != "none":
        el, y = order_panel(s, y + 10)
        parts += el
    width = LEFT + CELL_W * LINE_BYTES // 16 + 20
    height = int(y + 10)
    return (
        # XML comments cannot hold "--", so the header spells the spec as key=value pairs; <desc> has the flags.
        f"<!-- {xml_escape(svg_generated_line(s))} -->\n"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">\n'
        f"<title>{xml_escape(s.kernel_name)} shared-memory layout</title>\n"
        f"<desc>{xml_escape(generated_line(s.cli_args()))}</desc>\n"
        f"<style>{STYLE}</style>\n"
        '<defs><marker id="arrowhead" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>\n'
        f'<rect width="{width}" height="{height}" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n"
    )
