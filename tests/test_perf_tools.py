"""CPU tier for the benchmark tools: the tuned-kernel choice, argument checks before any GPU work, the
alternating timing loop (with a fake clock), and the SVG chart."""

import xml.etree.ElementTree as ET

import pytest

from ptxgen.cli import main
from ptxgen.emit.pictures.chart import chart_svg, parse
from ptxgen.runtime.check import bench
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.runtime.choose import choose_spec, tile_fit
from ptxgen.runtime.choose.tune import candidates, default_spec, load_table

TABLE = [
    {"dtype": "bf16", "arch": "sm_90a", "m": 4096, "n": 4096, "k": 4096, "spec": default_spec("bf16", "sm_90a").to_json()},
    {"dtype": "bf16", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 1024,
     "spec": candidates("bf16", "sm_90a")[-1].to_json()},
]


def test_choose_spec_exact_nearest_and_default(monkeypatch):
    from ptxgen.runtime.choose import rules as choose_mod

    monkeypatch.setattr(choose_mod, "COST_MODEL", False)  # the nearest-fit rule (the cost model: tests/test_costmodel.py)
    spec, why = choose_spec("bf16", "sm_90a", 8192, 8192, 1024, TABLE)
    assert spec.to_json() == TABLE[1]["spec"] and why == "tuned for this shape"
    spec, why = choose_spec("bf16", "sm_90a", 7000, 9000, 1100, TABLE)
    fits = [round(tile_fit(TileSpec.from_json(e["spec"]), 7000, 9000), 2) for e in (TABLE[1], TABLE[0])]  # nearest first
    pick = TABLE[1] if fits[0] >= fits[1] else TABLE[0]
    assert spec.to_json() == pick["spec"] and f"tuned for {pick['m']}x{pick['n']}x{pick['k']}" in why
    spec, why = choose_spec("f16", "sm_90a", 100, 100, 100, [])  # no entries of its own and none to borrow
    assert spec == default_spec("f16", "sm_90a") and why.startswith("default")


def test_shipped_table_is_loadable_and_every_entry_is_a_legal_spec():
    from ptxgen.derive.tile.spec import TileSpec

    entries = load_table()
    for e in entries:
        assert TileSpec.from_json(e["spec"]).kernel_name == e["kernel"]


def test_candidates_are_legal_and_distinct():
    for dtype in ("bf16", "f16", "e4m3"):
        names = [s.kernel_name for s in candidates(dtype, "sm_90a")]
        assert len(names) == len(set(names)) >= 10


@pytest.mark.parametrize("argv", [["bench", "--bm", "128"], ["bench", "--shapes", "4096x4096"], ["tune", "--shapes", "1x2x3x4"]])
def test_bench_usage_errors_exit_2_before_any_gpu_work(argv, capsys):
    assert main(argv) == 2
    assert "ptxgen" in capsys.readouterr().err


def test_alternating_rounds_with_a_fake_clock(monkeypatch):
    """Both sides are timed in every round, in alternating order, and the check runs after every round."""
    order, checks = [], []
    monkeypatch.setattr(bench, "_batch", lambda torch, fn, reps: fn())

    class FakeTorch:
        class cuda:
            @staticmethod
            def synchronize():
                pass

    def ours():
        order.append("o")
        return 1.0

    def base():
        order.append("b")
        return 2.0

    o, b, worst = bench.alternate(FakeTorch, ours, base, lambda: checks.append(1) or 0.5, rounds=4, warmup=0)
    assert (o, b, worst) == (1.0, 2.0, 0.5)
    assert "".join(order[1:]) == "obboobbo" and len(checks) == 5  # after the 1 calibration launch


@pytest.mark.parametrize("rotate, want", [(False, "xyzzyxxyzzyx"), (True, "xyzyzxzxyxyz")])
def test_alternate_medians_times_every_entry_every_round_in_turning_order(monkeypatch, rotate, want):
    """Each named entry once a round, the order reversed every other round (or rotated by one); medians per entry."""
    order = []
    monkeypatch.setattr(bench, "_batch", lambda torch, fn, reps: fn())

    def entry(name, ms):
        return lambda: order.append(name) or ms

    got = bench.alternate_medians(None, {"x": entry("x", 1.0), "y": entry("y", 2.0), "z": entry("z", 3.0)}, rounds=4,
                                  rotate=rotate)
    assert got == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert "".join(order[3:]) == want  # after one calibration batch each


def test_chart_parses_bench_lines_and_is_valid_svg():
    log = ("k1 M=4096 N=4096 K=4096: ptxgen 622.3 TFLOP/s (0.221 ms), cuBLAS 689.1 TFLOP/s (0.199 ms), ratio 0.903; x\n"
           "k2 M=8192 N=8192 K=1024: ptxgen 547.4 TFLOP/s (0.251 ms), cuBLAS 608.7 TFLOP/s (0.226 ms), ratio 0.899; x\n")
    bars = parse(log)
    assert [(b.label, b.ours, b.base, b.ratio) for b in bars] == [("4096x4096x4096", 622.3, 689.1, 0.903), ("8192x8192x1024", 547.4, 608.7, 0.899)]
    root = ET.fromstring(chart_svg(bars, "t", peak=790))
    assert len(root.findall("{http://www.w3.org/2000/svg}rect")) == 2 * 2 + 2  # two bars per shape + legend
    assert parse("no numbers here") == []


def test_a_named_tuning_table_that_is_missing_is_an_error_not_the_default(tmp_path, monkeypatch):
    """PTXGEN_TUNING naming a missing or broken file must not fall back to the default kernel silently (it did on the
    H200 once, and the benchmark measured the wrong kernel)."""
    from ptxgen.runtime.choose import choose_spec

    monkeypatch.setenv("PTXGEN_TUNING", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="not a readable tuning table"):
        choose_spec("bf16", "sm_90a", 4096, 4096, 4096)
    (tmp_path / "bad.json").write_text("{not json")
    monkeypatch.setenv("PTXGEN_TUNING", str(tmp_path / "bad.json"))
    with pytest.raises(ValueError):
        choose_spec("bf16", "sm_90a", 4096, 4096, 4096)
    monkeypatch.delenv("PTXGEN_TUNING")
    spec, why = choose_spec("bf16", "sm_90a", 4096, 4096, 4096)  # the shipped table
    assert why == "tuned for this shape" and spec.epilogue.value == "tma"


def test_tile_fit_counts_padding_and_the_last_wave():
    spec = make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4)
    # 12000 x 1000: 94 x 4 = 376 tiles, padding (12000 x 1000) / (12032 x 1024); 3 waves of 132 hold 396
    assert tile_fit(spec, 12000, 1000) == pytest.approx(12000 * 1000 / (12032 * 1024) * 376 / 396)
    assert tile_fit(spec, 128 * 132, 256) == 1.0  # one full wave, no padding
    assert tile_fit(spec, 128 * 133, 256) == pytest.approx(133 / 264)  # a second wave with one tile


def test_untuned_shape_takes_the_best_fit_of_the_nearest_entries(monkeypatch):
    """12000x1000x6000 (measured on the H200, run 22): the single nearest entry's 128x192 tile pads N = 1000 to 1152
    and ran at 0.71 of cuBLAS; of the three nearest entries the rule takes a 256-wide tile (1.01). The nearest-fit
    rule with the cost model off (the cost model picks a 256-wide tile too: tests/test_costmodel.py)."""
    from ptxgen.runtime.choose import rules as choose_mod

    monkeypatch.setattr(choose_mod, "COST_MODEL", False)
    spec, why = choose_spec("bf16", "sm_90a", 12000, 1000, 6000)
    assert spec.bn == 256 and "best tile fit" in why
    import math

    table = [e for e in load_table() if e["dtype"] == "bf16" and e["arch"] == "sm_90a"]
    near = sorted(table, key=lambda e: sum(abs(math.log(x / e[d])) for x, d in ((12000, "m"), (1000, "n"), (6000, "k"))))[:3]
    best = max(round(tile_fit(TileSpec.from_json(e["spec"]), 12000, 1000), 2) for e in near)
    assert round(tile_fit(spec, 12000, 1000), 2) == best > round(tile_fit(TileSpec.from_json(near[0]["spec"]), 12000, 1000), 2)


def test_bench_with_an_unreadable_named_table_exits_2_before_any_gpu_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PTXGEN_TUNING", str(tmp_path / "missing.json"))
    assert main(["bench", "--dtype", "bf16", "--m", "64", "--n", "64", "--k", "64"]) == 2
    err = capsys.readouterr().err
    assert "not a readable tuning table" in err and "Traceback" not in err
