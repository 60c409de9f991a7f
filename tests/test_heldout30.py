"""The held-out 30 of issue 35 (tools/heldout30.json): fixed in a committed file, reproducible from its seed."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "tools" / "heldout30.json"


def _generator():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import heldout_shapes
    finally:
        sys.path.pop(0)
    return heldout_shapes


def test_file_is_the_seeded_generator_output():
    doc = json.loads(FILE.read_text())
    gen = _generator()
    assert doc["seed"] == 35 and doc["count"] == 30 and "random.Random(35)" in doc["generator"]
    assert [tuple(s) for s in doc["shapes"]] == gen.heldout30(doc["seed"], doc["count"])


def test_shapes_in_range_distinct_and_runnable():
    shapes = [tuple(s) for s in json.loads(FILE.read_text())["shapes"]]
    assert len(shapes) == 30 == len(set(shapes))
    assert all(1 <= d <= 16384 for s in shapes for d in s)
    assert all(k % 16 == 0 for _, _, k in shapes)  # rows 16-byte aligned in bf16 and e4m3
    big = [s for s in shapes if s[0] > 2000 and s[1] > 2000]
    assert len(big) >= 8  # the large random class of issue 35 is represented


def test_another_seed_gives_another_set():
    """Control: the comparison above can fail."""
    gen = _generator()
    assert gen.heldout30(36) != gen.heldout30(35)


def test_e4m3_form_rounds_only_n_to_what_scaled_mm_takes():
    """The e4m3 form keeps each draw's M and K and rounds N up to a multiple of 16 (torch._scaled_mm's B)."""
    gen = _generator()
    drawn, e4m3 = gen.heldout30(), gen.heldout30_e4m3()
    assert len(e4m3) == 30
    for (m, n, k), (m2, n2, k2) in zip(drawn, e4m3):
        assert (m2, k2) == (m, k) and n2 % 16 == 0 and 0 <= n2 - n < 16
    assert sum(n % 16 != 0 for _, n, _ in drawn) >= 20  # the form changes most of the set: the set itself would not do


def test_e4m3_form_keeps_a_shape_once_when_rounding_meets_another():
    """Control: two draws that round to one shape give one entry."""
    gen = _generator()
    assert gen.heldout30_e4m3([(8, 17, 16), (8, 30, 16), (8, 33, 16)]) == [(8, 32, 16), (8, 48, 16)]
