"""The drawing primitives and the geometry every panel of ``layout.svg`` shares (ptxgen.emit.pictures.svg draws the operand
stages and assembles the picture; ptxgen.emit.pictures.svg_panels draws the epilogue, scale-factor and grouped-walk panels)."""

from __future__ import annotations

import html

CELL_W, CELL_H = 92, 22
LEFT = 190  # x of the first cell: the row labels sit left of it
LINE_BYTES = 128  # one pass over the 32 four-byte banks
STEP_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def xml_escape(text: str) -> str:
    """XML character data: &, < and > escaped (what xml.sax.saxutils.escape does, without importing it: it loads
    urllib and email)."""
    return html.escape(text, quote=False)


def row_colour(logical_row: int, atom_rows: int) -> str:
    """Fill of a cell, by its logical row inside the atom (the row the swizzle keys on)."""
    hue = (logical_row % atom_rows) * 360 // atom_rows
    return f"hsl({hue},70%,82%)"


def svg_text(x: float, y: float, s: str, cls: str = "", anchor: str = "start") -> str:
    c = f' class="{cls}"' if cls else ""
    a = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text x="{x:g}" y="{y:g}"{c}{a}>{xml_escape(s)}</text>'


STYLE = """
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
