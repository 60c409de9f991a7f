"""An SVG bar chart of benchmark results (no plotting dependency): TFLOP/s of ptxgen and cuBLAS per
shape, the ratio above each pair, and the arithmetic floor's rate as a dashed line.

    python -m ptxgen.emit.pictures.chart BENCH_LOG OUT.svg [--title TEXT] [--peak TFLOPS]

BENCH_LOG holds the lines `ptxgen bench` prints (one per shape).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
import html

LINE = re.compile(
    r"M=(\d+) N=(\d+) K=(\d+): ptxgen ([\d.]+) TFLOP/s .*?cuBLAS ([\d.]+) TFLOP/s .*?ratio ([\d.]+)"
)


@dataclass(frozen=True)
class Bar:
    label: str
    ours: float
    base: float
    ratio: float



def _escape(text: str) -> str:
    """XML character data: &, < and > escaped (what xml.sax.saxutils.escape does, without importing it: it loads
    urllib and email)."""
    return html.escape(text, quote=False)

def parse(text: str) -> list[Bar]:
    bars = []
    for m in LINE.finditer(text):
        mm, nn, kk, ours, base, ratio = m.groups()
        bars.append(Bar(f"{mm}x{nn}x{kk}", float(ours), float(base), float(ratio)))
    return bars


def chart_svg(bars: list[Bar], title: str, peak: float | None = None) -> str:
    width, height, left, top, bottom = 110 * len(bars) + 120, 420, 70, 50, 90
    plot_h = height - top - bottom
    vmax = max([b.ours for b in bars] + [b.base for b in bars] + ([peak] if peak else [])) * 1.1
    y = lambda v: top + plot_h * (1 - v / vmax)  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15">{_escape(title)}</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 20}" y2="{top + plot_h}" stroke="#333"/>',
    ]
    step = 100 if vmax > 300 else 50
    for v in range(0, int(vmax) + 1, step):
        out.append(f'<text x="{left - 6}" y="{y(v) + 4}" text-anchor="end">{v}</text>')
        out.append(f'<line x1="{left}" y1="{y(v)}" x2="{width - 20}" y2="{y(v)}" stroke="#ddd"/>')
    out.append(f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" text-anchor="middle">TFLOP/s</text>')
    if peak:
        out.append(f'<line x1="{left}" y1="{y(peak)}" x2="{width - 20}" y2="{y(peak)}" stroke="#c00" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{width - 22}" y="{y(peak) - 4}" text-anchor="end" fill="#c00">arithmetic floor: {peak:.0f} TFLOP/s</text>')
    for i, b in enumerate(bars):
        x0 = left + 20 + 110 * i
        for j, (v, colour) in enumerate(((b.ours, "#2b7bba"), (b.base, "#999"))):
            out.append(f'<rect x="{x0 + 40 * j}" y="{y(v)}" width="36" height="{top + plot_h - y(v)}" fill="{colour}"/>')
        out.append(f'<text x="{x0 + 38}" y="{min(y(b.ours), y(b.base)) - 6}" text-anchor="middle">{b.ratio:.3f}x</text>')
        out.append(f'<text x="{x0 + 38}" y="{top + plot_h + 18}" text-anchor="middle" font-size="11">{b.label}</text>')
    ly = height - 30
    out.append(f'<rect x="{left}" y="{ly - 10}" width="12" height="12" fill="#2b7bba"/><text x="{left + 18}" y="{ly}">ptxgen</text>')
    out.append(f'<rect x="{left + 90}" y="{ly - 10}" width="12" height="12" fill="#999"/><text x="{left + 108}" y="{ly}">cuBLAS (torch), same run</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ptxgen.emit.pictures.chart")
    ap.add_argument("log")
    ap.add_argument("svg")
    ap.add_argument("--title", default="ptxgen vs cuBLAS")
    ap.add_argument("--peak", type=float, default=None)
    a = ap.parse_args(argv)
    with open(a.log, encoding="utf-8") as f:
        bars = parse(f.read())
    if not bars:
        print(f"no benchmark lines in {a.log}", file=sys.stderr)
        return 1
    with open(a.svg, "w", encoding="utf-8") as f:
        f.write(chart_svg(bars, a.title, a.peak))
    print(f"wrote {a.svg} ({len(bars)} shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
