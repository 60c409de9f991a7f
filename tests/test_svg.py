"""Pictures: the SVG is well-formed, has one element per 16-byte cell with the right labels and colours,
highlights what each K-step reads, and draws in a real browser."""

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from ptxgen.emit.pictures.svg import layout_svg
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec

SEED = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"))
NS = "{http://www.w3.org/2000/svg}"


def cells(svg: str, operand: str):
    root = ET.fromstring(svg)  # the whole file, header comment included, is well-formed XML
    g = next(e for e in root.iter(f"{NS}g") if e.get("id") == f"operand-{operand}")
    return [e for e in g.iter(f"{NS}g") if e.get("class") == "cell"]


def hue(fill: str) -> int:
    return int(re.match(r"hsl\((\d+),", fill).group(1))


def test_seed_svg_cells_labels_and_colours():
    svg = layout_svg(SEED)
    a = cells(svg, "a")
    assert len(a) == 8192 // 16 and len(cells(svg, "b")) == 8192 // 16  # one element per 16-B cell
    offsets = sorted(int(e.get("data-offset")) for e in a)
    assert offsets == list(range(0, 8192, 16))
    for e in a:
        off = int(e.get("data-offset"))
        band, rest = divmod(off, 512)
        r, phys_q = divmod(rest, 64)
        q = (phys_q // 16) ^ ((r >> 1) & 3)  # the seed post's pattern, inverted
        m = band * 8 + r
        label = e.find(f"{NS}text").text
        assert label == f"m{m}:q{q}", (off, label)
        assert (int(e.get("data-row")), int(e.get("data-col"))) == (m, q)
        fill = e.find(f"{NS}rect").get("fill")
        assert hue(fill) == (m % 8) * 45  # coloured by logical row inside the atom
        # K-step 0 reads K cells q0, q1; K-step 1 reads q2, q3
        assert int(e.get("data-read-by")) == q // 2


def test_mn_major_kstep_highlights_cover_whole_k_groups():
    b = cells(layout_svg(SEED), "b")
    # B: MN-major SW128, BK=32 = two K-steps of 16 K rows; every cell belongs to the step of its K row
    assert all(int(e.get("data-read-by")) == int(e.get("data-row")) // 16 for e in b)


def test_decode_view_marks_a_wrong_descriptor():
    right = layout_svg(SEED, ("a",), decode=0x8000402000010000)
    wrong = layout_svg(SEED, ("a",), decode=0x4000402000010000)  # 128B swizzle over 64B-swizzled data
    red = lambda s: sum(1 for e in cells(s, "a") if e.find(f"{NS}rect").get("fill") == "#ff4d4d")  # noqa: E731
    assert red(right) == 0 and red(wrong) > 0
    assert "; 0 wrong" in right and "; 0 wrong" not in wrong


def test_large_stage_is_summarised():
    t = derive(make_spec(bm=128, bn=256, bk=128, a="kmajor-sw128", b="mnmajor-sw128", stages=1))
    svg = layout_svg(t, ("b",))
    assert len(cells(svg, "b")) == 64 * 8 and "more lines" in svg


@pytest.mark.browser
def test_renders_in_headless_chromium(tmp_path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    src = tmp_path / "seed.svg"
    src.write_text(layout_svg(SEED))
    png = tmp_path / "seed.png"
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=960,1400", src.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert png.exists(), proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # a blank or error page compresses to a few KB; the drawn grid of coloured, labelled cells does not
    assert len(data) > 100_000, len(data)
