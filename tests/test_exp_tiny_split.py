"""tools/exp_tiny_split.py on the CPU: its shapes (the held-out tiny long-K ones among them), the kernels it times (the
rule's pick, the pick without it, forced splits of the same tile), its summary of a run's rows, its usage errors."""

import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))

import exp_tiny_split  # noqa: E402


@pytest.fixture
def exp():
    return exp_tiny_split


def test_the_shapes_hold_the_heldout_tiny_ones(exp):
    held = json.loads((TOOLS / "heldout30.json").read_text())["shapes"]
    want = [tuple(s) for s in held if min(s[0], s[1]) <= 64 and s[2] >= 1024]
    assert (5, 2, 6816) in want and all(s in exp.shapes() for s in want)
    assert len(exp.shapes()) == len(set(exp.shapes())) == 14
    for s in ((1, 4096, 4096), (8, 8, 16384), (32, 128, 8192), (128, 1, 12288)):
        assert s in exp.shapes()


def test_each_shape_times_on_off_and_forced_splits_of_one_tile(exp):
    device = exp.device_for("h100")
    ks = {k.label: k for k in exp.kernels(5, 2, 6816, device)}
    assert set(ks) == {"on", "off", "split2", "split4", "split8", "split16"}
    assert ks["on"].chosen_by == "split-k" and ks["on"].spec.split_k == 8
    assert ks["off"].chosen_by == "small-m" and ks["off"].spec.split_k == 1
    for s in (2, 4, 8, 16):
        f = ks[f"split{s}"].spec
        assert f.split_k == s and (f.bm, f.bn, f.stages) == (ks["off"].spec.bm, ks["off"].spec.bn, ks["off"].spec.stages)
    swapped = {k.label: k for k in exp.kernels(1, 4096, 4096, device)}  # the swap rule's shape: forced splits of 64 x 64
    assert swapped["on"].swap_ab and swapped["split2"].spec.split_k == 2 and not swapped["split2"].swap_ab
    assert (swapped["split2"].spec.bm, swapped["split2"].spec.bn) == (64, 64)


def test_the_summary_reads_a_runs_rows(exp):
    rows = [{"shape": "5x2x6816", "label": "control", "cublas_ms": 0.014, "cublas_twin_over_cublas": 1.0}]
    for lab, ms, s in (("on", 0.007, 13), ("off", 0.0169, 1), ("split2", 0.010, 2), ("split4", 0.008, 4),
                       ("split8", 0.0075, 8), ("split16", 0.0072, 16)):
        rows.append({"shape": "5x2x6816", "label": lab, "ms": ms, "ratio": 0.014 / ms, "checked_ok": True, "split_k": s,
                     "chosen_by": {"on": "split-k", "off": "small-m"}.get(lab)})
    rows.append({"shape": "1x1x8192", "label": "control", "error": "skipped: past --budget-s"})
    text = exp.summary_text(rows)
    assert "on(S=13) 2.000 7.0us" in text and "off(S=1) 0.828 16.9us" in text and "on/off 2.414" in text
    assert "best forced split16 1.944" in text and "at >= 0.95: on 1, off 0, best 1" in text
    bad = rows[:2] + [{**rows[2], "checked_ok": False, "rel_error": 0.5}]
    assert "off FAILED 0.5" in exp.summary_text(bad)  # control: a failed check is named, not counted


def test_usage(exp, capsys):
    with pytest.raises(SystemExit) as e:
        exp.main([])
    assert e.value.code == 2 and "--out DIR" in capsys.readouterr().err
    assert exp.main(["--dry-run", "--no-compile"]) == 0 and "14 shapes" in capsys.readouterr().out
