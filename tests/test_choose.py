"""Kernel choice (ptxgen.runtime.choose) and the row-pitch rule of the operands' tensor maps, on a CPU.

The rules' thresholds come from run 25 on the H200 (docs/performance.md); these tests check that the code applies
them, not that they are fast (no test asserts a duration)."""

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.derive.operands.tma import l2_promotion_for_rows
from ptxgen.isa.tensormap import L2_PROMOTION_128B, L2_PROMOTION_256B
from ptxgen.isa.types import Schedule
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import choose, small_m_tile
from ptxgen.runtime.launch.launch import Problem, gemm_args
from ptxgen.runtime.choose.tune import candidates, default_spec

TABLE = [
    {"dtype": "bf16", "arch": "sm_90a", "m": 4096, "n": 4096, "k": 4096, "spec": default_spec("bf16", "sm_90a").to_json()},
    {"dtype": "bf16", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 1024, "spec": candidates("bf16", "sm_90a")[-1].to_json()},
]


@pytest.mark.parametrize("row_bytes,want", [(10000, L2_PROMOTION_128B), (10112, L2_PROMOTION_256B), (10016, L2_PROMOTION_256B),
                                            (14000, L2_PROMOTION_128B), (6000, L2_PROMOTION_128B), (4000, L2_PROMOTION_256B),
                                            (10064, L2_PROMOTION_128B), (10080, L2_PROMOTION_256B)])
def test_l2_promotion_follows_the_row_phase_against_32_byte_sectors(row_bytes, want):
    # 10000 B is 16 past a 128-B line, 14000 48, 6000 112, 10064 80: mid-sector; 10016 (32), 4000 (32), 10080 (96): on one
    assert l2_promotion_for_rows(row_bytes) == want


def _captured_l2(spec, p):
    seen = []

    def fake(args):
        seen.append(args.l2_promotion)
        return bytes(128)

    gemm_args(plan_kernel(spec), 0x10000, 0x20000, 0x30000, p, encode=fake)
    return seen


def test_launch_gives_each_operand_map_the_promotion_of_its_own_rows():
    spec = make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16",
                     arch="sm_90a", stages=4, schedule="persistent", epilogue="tma")
    assert _captured_l2(spec, Problem(5120, 5120, 5000, 5056, 5056, 5120)) == [3, 3, 3]  # A, B on a line; D's map stays 256 B
    assert _captured_l2(spec, Problem(5120, 5120, 5000, 5000, 5056, 5120)) == [2, 3, 3]  # A 16 B off: 128 B
    assert _captured_l2(spec, Problem(5120, 5120, 5000, 5056, 5000, 5120)) == [3, 2, 3]
    assert _captured_l2(spec, Problem(5120, 5120, 5000, 5008, 5008, 5120)) == [3, 3, 3]  # 32 B off: on a sector


def test_small_m_tile_fills_one_wave():
    assert small_m_tile(16, 4096) == (64, 8, 64)  # 64 x 128 would launch 32 CTAs (< 40% of 132): the narrower tile
    assert small_m_tile(128, 4096) == (128, 8, 64)  # two tile rows: 64 CTAs of 64 x 128 already fill 40%
    assert small_m_tile(1, 7168) == (128, 8, 56)
    assert small_m_tile(128, 7168) == (128, 8, 112)
    assert small_m_tile(64, 16384) == (128, 8, 128)
    assert small_m_tile(128, 16384) is None  # every BM = 64 tile needs two waves
    assert small_m_tile(129, 64) is None  # not small M
    assert small_m_tile(1, 4) == (64, 8, 1)


def test_choose_rules_and_their_names():
    c = choose("bf16", "sm_90a", 8192, 8192, 1024, TABLE)
    assert c.chosen_by == "tuned" and c.spec.to_json() == TABLE[1]["spec"]
    c = choose("bf16", "sm_90a", 16, 4096, 512, TABLE)  # 8 K-tiles: too few to split (split-k: tests/test_splitk.py)
    assert c.chosen_by == "small-m" and (c.spec.bm, c.spec.bn, c.spec.stages) == (64, 64, 8)
    assert c.spec.schedule is Schedule.TILE and c.spec.a == c.spec.b and c.spec.dtype.value == "bf16"
    assert c.spec.out_dtype.value == "bf16"
    c = choose("bf16", "sm_90a", 128, 14000, 4096, TABLE)  # BM = 64 tiles take two waves: the 128 x 128 kernel, 110 CTAs
    assert c.chosen_by == "small-m" and (c.spec.bm, c.spec.bn, c.spec.consumers.value) == (128, 128, "pingpong")
    c = choose("bf16", "sm_90a", 128, 20000, 4096, TABLE)  # bandwidth-bound: outside the cost model's calibrated range
    assert c.chosen_by == "nearest-fit"  # (157 CTAs of 128 x 128: two waves too)
    c = choose("bf16", "sm_90a", 7000, 9000, 1152, TABLE)
    assert c.chosen_by == "cost-model" and "128-byte L2" not in c.why and c.why.startswith("cost model: ")
    assert choose("f16", "sm_90a", 100, 100, 100, TABLE).chosen_by == "small-m"  # bf16's tuning, lent to f16
    no_lender = [e for e in TABLE if e["dtype"] != "bf16"]
    assert choose("f16", "sm_90a", 100, 100, 100, no_lender).chosen_by == "default"


def test_choose_says_when_rows_are_off_a_sector():
    c = choose("bf16", "sm_90a", 5000, 5000, 5000, TABLE)
    assert "A rows 16 B past a 128-byte line, B rows 16 B past a 128-byte line: 128-byte L2 promotion" in c.why
    c = choose("bf16", "sm_90a", 5000, 5000, 5000, TABLE, lda=5056)
    assert "A rows" not in c.why and "B rows 16 B" in c.why
    assert "L2" not in choose("bf16", "sm_90a", 5000, 5000, 5008, TABLE).why  # 10016 B: 32 past, on a sector


def test_rows_off_a_sector_take_the_multicast_variant_of_a_persistent_kernel(monkeypatch):
    """The nearest-fit rule's pitch variant (the cost model off; it ranks the cluster variants itself:
    tests/test_costmodel.py)."""
    monkeypatch.setattr(choose_mod, "COST_MODEL", False)
    table = [dict(TABLE[0], m=5120, n=5120, k=5120)]  # 128 x 256 persistent cooperative
    c = choose("bf16", "sm_90a", 5000, 5000, 5000, table)
    assert c.chosen_by == "nearest-fit+off-sector" and c.spec.cluster.value == "2x1"
    c = choose("bf16", "sm_90a", 5000, 5000, 5056, table)
    assert c.chosen_by == "nearest-fit" and c.spec.cluster.value == "1x1"
    pingpong = [dict(TABLE[1], m=5120, n=5120, k=5120)]  # ping-pong: no cluster variant (run 15: 2x1 lost there)
    assert choose("bf16", "sm_90a", 5000, 5000, 5000, pingpong).spec.cluster.value == "1x1"


def test_small_n_is_the_mirror_of_small_m():
    c = choose("bf16", "sm_90a", 10711, 12, 7832, TABLE)
    assert c.chosen_by == "small-n" and (c.spec.bm, c.spec.bn, c.spec.stages) == (128, 64, 8)  # 84 CTAs
    c = choose("bf16", "sm_90a", 1359, 20, 3776, TABLE)
    # 22 CTAs of 64 rows (the most CTAs), few enough for the tiny split along K (59 K-tiles, 6 splits fill 132 SMs)
    assert c.chosen_by == "split-k" and (c.spec.bm, c.spec.bn, c.spec.split_k) == (64, 64, 6)
    assert c.why.startswith("N = 20 <= 128: 64 x 64 tiles, 22 CTAs")
    c = choose("bf16", "sm_90a", 100, 12, 7832, TABLE)  # both small: small M decides (2 tiles, 123 K-tiles: split along K)
    assert c.chosen_by == "split-k" and c.why.startswith("M = 100 <= 128: 64 x 64 tiles")
    c = choose("bf16", "sm_90a", 20000, 64, 4096, TABLE)  # N <= 64: 128 x 64 tiles, B multicast
    assert c.chosen_by == "small-n" and (c.spec.bm, c.spec.bn, c.spec.cluster.value) == (128, 64, "2x1")
    c = choose("bf16", "sm_90a", 16384, 100, 4096, TABLE)  # BM x 64 tiles take two waves: 128 x 128, B multicast
    assert c.chosen_by == "small-n" and (c.spec.bm, c.spec.bn, c.spec.cluster.value) == (128, 128, "2x1")
    assert c.spec.schedule.value == "persistent"


def test_small_n_wide_takes_the_b_multicast_kernel_only_past_one_wave(monkeypatch):
    from ptxgen.runtime.choose import rules
    # 2 x ceil(M / 128) BM=128 x BN=64 tiles: 132 at M = 8448 fit one wave of 132 SMs, 134 at 8449 do not
    assert choose("bf16", "sm_90a", 8448, 120, 14800, TABLE).spec.bn == 64
    wide = choose("bf16", "sm_90a", 8449, 120, 14800, TABLE)
    assert (wide.chosen_by, wide.spec.bn, wide.spec.cluster.value) == ("small-n", 128, "2x1")
    assert choose("bf16", "sm_90a", 12453, 120, 14800, TABLE).spec.cluster.value == "2x1"
    assert choose("bf16", "sm_90a", 12453, 129, 14800, TABLE).chosen_by != "small-n"  # N past 128: not this rule
    assert choose("e4m3", "sm_90a", 12453, 120, 14800, TABLE).chosen_by != "small-n"  # measured on bf16 only
    monkeypatch.setattr(rules, "SMALL_N_WIDE", False)  # control: the rule off, the shape goes back to nearest-fit
    assert choose("bf16", "sm_90a", 12453, 120, 14800, TABLE).chosen_by == "nearest-fit"


def test_bench_json_names_the_rule_that_picked_each_kernel(monkeypatch, capsys):
    """``ptxgen bench --json`` without tile flags: each shape's object has chosen_by and why from runtime.choose (the
    GPU and the timing are faked; what is checked is the plumbing from the chooser to the JSON)."""
    import json
    from types import SimpleNamespace

    from ptxgen.cli import main
    from ptxgen.runtime.check import bench
    from ptxgen.runtime.launch import gpu

    monkeypatch.setattr(gpu, "require_gpu", lambda: SimpleNamespace(arch=SimpleNamespace(value="sm_90a"), name="NVIDIA H200", sm_count=132))

    def fake_bench(spec, m, n, k, warmup, iters, swap_ab=False):
        assert swap_ab == (spec.d_major.value == "m")  # the swap-ab rule's kernel runs swapped
        return bench.BenchResult("fake", spec.kernel_name, m, n, k, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, iters, "none")

    monkeypatch.setattr(bench, "bench_spec", fake_bench)
    assert main(["bench", "--dtype", "bf16", "--json", "--shapes",
                 "16x4096x512,4096x4096x4096,5000x5000x5000,1x2048x8192,16x7168x16384"]) == 0
    out = json.loads(capsys.readouterr().out)
    rules = [s["chosen_by"] for s in out["shapes"]]
    assert rules == ["small-m", "tuned", "cost-model+off-sector+stream-k", "split-k", "swap-ab"]
    assert out["shapes"][2]["kernel"].endswith("_streamk8")
    assert out["shapes"][3]["kernel"].endswith("_sk4") and out["shapes"][4]["kernel"].endswith("_64x16x64_s12_a_k_sw128_ok_b_k_sw128_ok_tmastore_dm")
    assert "64 x 64 tiles" in out["shapes"][0]["why"] and "ours_tbps" in out["shapes"][0]


def test_the_api_passes_the_operands_row_pitch_to_the_choice():
    """A K = 5000 operand read through a view whose rows are 5056 elements apart starts every row on a line: no
    multicast variant; the same K with tight rows takes it (the shipped table)."""
    from ptxgen.api.select import _gemm_spec
    from ptxgen.runtime.launch.arrays import ArrayInfo

    def info(name, rows, k, pitch):
        return ArrayInfo(name, 0x10000, (rows, k), (pitch, 1), "bf16", 2, None, "numpy", "dlpack")

    tight, _ = _gemm_spec(info("a", 5000, 5000, 5000), info("b", 5000, 5000, 5000), None, None, "sm_90a")
    padded, why = _gemm_spec(info("a", 5000, 5000, 5056), info("b", 5000, 5000, 5056), None, None, "sm_90a")
    assert tight.cluster.value == "2x1" and padded.cluster.value == "1x1" and "L2" not in why


def test_fp8_keeps_the_table_rules_where_nothing_e4m3_was_measured():
    table = [{"dtype": "e4m3", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 8192,
              "spec": candidates("e4m3", "sm_90a")[1].to_json()}]
    assert choose("e4m3", "sm_90a", 16, 4096, 2048, table).chosen_by == "nearest-fit"  # below FP8_SMALL_M_MIN_WEIGHT
    assert choose("e4m3", "sm_90a", 128, 20000, 4096, table).chosen_by == "nearest-fit"  # two waves of any narrow tile
    assert choose("e4m3", "sm_90a", 10711, 12, 7832 * 16, table).chosen_by == "small-n"  # e4m3's own (below)
    assert choose("e4m3", "sm_90a", 2512, 10000, 4000, table).chosen_by.startswith("nearest-fit")  # rows 32 B past a line
    c = choose("e4m3", "sm_90a", 5000, 5000, 5008, table)  # 5008 B: 16 past a sector; the e4m3 cost table decides
    assert c.chosen_by.startswith("cost-model+off-sector") and c.spec.cluster.value == "2x1" and c.spec.bk == 128


@pytest.mark.parametrize("m, n, k, tile, stages", [(12000, 128, 16384, (128, 128), 6), (16384, 112, 4096, (128, 128), 6),
                                                   (20000, 64, 4096, (256, 128), 3), (10711, 12, 7832 * 16, (256, 128), 3)])
def test_fp8_small_n_takes_its_own_kernel(m, n, k, tile, stages):
    """e4m3 with N <= 128 < M (no tiny split): 128 x 128 with six stages, 256 x 128 with three up to 64 columns; both
    persistent with the TMA store, the table's output type (narrow.FP8_SMALL_N_KERNEL, measured on the H100)."""
    table = [{"dtype": "e4m3", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 8192,
              "spec": candidates("e4m3", "sm_90a")[1].to_json()}]
    c = choose("e4m3", "sm_90a", m, n, k, table)
    assert c.chosen_by == "small-n" and (c.spec.bm, c.spec.bn, c.spec.bk, c.spec.stages) == (*tile, 128, stages)
    assert c.spec.schedule is Schedule.PERSISTENT and c.spec.epilogue.value == "tma" and c.spec.split_k == 1
    assert c.spec.out_dtype == TileSpec.from_json(table[0]["spec"]).out_dtype
    assert c.why.startswith(f"N = {n} <= 128 (e4m3): {tile[0]} x {tile[1]} tiles")


def test_control_fp8_small_n_off_gives_the_table_tile(monkeypatch):
    """Control: with rules.FP8_SMALL_N off the same shape goes back to nearest-fit's 128 x 256."""
    from ptxgen.runtime.choose import rules

    table = [{"dtype": "e4m3", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 8192,
              "spec": candidates("e4m3", "sm_90a")[1].to_json()}]
    monkeypatch.setattr(rules, "FP8_SMALL_N", False)
    c = choose("e4m3", "sm_90a", 12000, 128, 16384, table)
    assert c.chosen_by == "nearest-fit" and (c.spec.bm, c.spec.bn) == (128, 256)


def test_fp8_small_m_and_split_k_on_a_heavy_weight():
    """e4m3 at small M against N x K >= FP8_SMALL_M_MIN_WEIGHT (4096 x 4096): the BM = 64 tiles with the table's BK
    (128) and, where CTAs leave SMs idle, K split; lighter weights keep the table's tile."""
    table = [{"dtype": "e4m3", "arch": "sm_90a", "m": 8192, "n": 8192, "k": 8192,
              "spec": candidates("e4m3", "sm_90a")[1].to_json()}]
    assert choose("e4m3", "sm_90a", 16, 7168, 16384, table).chosen_by == "swap-ab"  # (tests/test_dmajor.py)
    c = choose("e4m3", "sm_90a", 16, 7168, 16384, table, allow_swap=False)  # the rules under swap-ab, for the fused paths
    assert c.chosen_by == "split-k" and (c.spec.bm, c.spec.bn, c.spec.bk, c.spec.split_k) == (64, 128, 128, 2)
    assert c.spec.dtype.value == "e4m3" and c.spec.schedule is Schedule.TILE
    c = choose("e4m3", "sm_90a", 128, 7168, 16384, table)
    assert c.chosen_by == "small-m" and (c.spec.bm, c.spec.bn, c.spec.split_k) == (64, 128, 1)  # 112 CTAs: no split
    c = choose("e4m3", "sm_90a", 16, 4096, 4096, table, allow_swap=False)  # 64 CTAs of 64 x 64, 32 K-tiles: split 2 ways
    assert c.chosen_by == "split-k" and (c.spec.bm, c.spec.bn, c.spec.bk, c.spec.split_k) == (64, 64, 128, 2)
    assert choose("e4m3", "sm_90a", 16, 4096, 2048, table).chosen_by == "nearest-fit"  # N x K below the threshold
    assert choose("e4m3", "sm_90a", 4096, 4096, 4096, table).chosen_by == "cost-model"


def test_bench_reports_a_shape_the_baseline_refuses_and_goes_on(monkeypatch, capsys):
    """torch._scaled_mm refuses dimensions that are not multiples of 16 (seen on the H200: 3000x7000x5008 in FP8 ended
    the whole bench with a traceback). Now that shape is named and skipped, the others are measured, and the exit
    status says not everything was compared (1); a run where nothing could be compared is 1 too."""
    import json
    from types import SimpleNamespace

    from ptxgen.cli import main
    from ptxgen.runtime.check import bench
    from ptxgen.runtime.launch import gpu

    monkeypatch.setattr(gpu, "require_gpu", lambda: SimpleNamespace(arch=SimpleNamespace(value="sm_90a"), name="fake", sm_count=132))

    def fake_bench(spec, m, n, k, warmup, iters):
        if m % 16:
            raise bench.BaselineError(f"{m}x{n}x{k}: the baseline cannot run this shape (mat2 shape must be divisible by 16)")
        return bench.BenchResult("fake", spec.kernel_name, m, n, k, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, iters, "none")

    monkeypatch.setattr(bench, "bench_spec", fake_bench)
    assert main(["bench", "--dtype", "e4m3", "--json", "--shapes", "4096x4096x4096,3000x7000x5008"]) == 1
    cap = capsys.readouterr()
    assert json.loads(cap.out)["m"] == 4096 and "3000x7000x5008" in cap.err and "skipped" in cap.err
    assert main(["bench", "--dtype", "e4m3", "--shapes", "3001x7000x5008"]) == 1
    assert "no shape could be compared" in capsys.readouterr().err
    # control: every shape comparable is exit 0
    assert main(["bench", "--dtype", "e4m3", "--shapes", "4096x4096x4096"]) == 0


def test_f16_borrows_bf16s_tuning_and_only_the_types_change():
    # every rule bf16 reaches, f16 reaches with the same tile; e4m3 and tf32 borrow nothing
    from ptxgen.runtime.choose import BORROWS_TABLE

    assert BORROWS_TABLE == {"f16": "bf16"}
    shapes = [(4096, 4096, 4096), (64, 4096, 4096), (1, 16384, 4096), (333, 8192, 8192), (5000, 5000, 5000),
              (2500, 10000, 4000), (12000, 1000, 6000), (777, 1333, 2049)]
    rules = set()
    for m, n, k in shapes:
        f, b = choose("f16", "sm_90a", m, n, k), choose("bf16", "sm_90a", m, n, k)
        assert (f.chosen_by, f.swap_ab) == (b.chosen_by, b.swap_ab)
        fj, bj = f.spec.to_json(), b.spec.to_json()
        assert f.spec.dtype.value == f.spec.b_dtype.value == f.spec.out_dtype.value == "f16"
        assert {k: v for k, v in fj.items() if "dtype" not in k} == {k: v for k, v in bj.items() if "dtype" not in k}
        rules.add(f.chosen_by)
    assert len(rules) >= 5
    # control: a table without bf16 entries leaves f16 on the default kernel
    assert choose("f16", "sm_90a", 4096, 4096, 4096, table=[]).chosen_by == "default"


def test_small_m_takes_the_128_x_128_kernel_where_64_row_tiles_need_two_waves(monkeypatch):
    from ptxgen.runtime.choose import rules as choose_mod
    from ptxgen.runtime.choose import small_m_wide_ctas

    assert small_m_wide_ctas(128, 16384) == 128 and small_m_wide_ctas(96, 12288) == 96
    assert small_m_wide_ctas(128, 7168) is None  # 112 CTAs of 64 x 64 fit one wave: small_m_tile's
    assert small_m_wide_ctas(128, 17000) is None  # 133 CTAs: two waves of these too
    assert small_m_wide_ctas(129, 16384) is None and small_m_wide_ctas(64, 8500) is None  # M > 128; 67 CTAs of 64: one wave
    assert small_m_wide_ctas(128, 8500) == 67  # two rows of 64 x 128 tiles: 134 CTAs
    for dtype in ("bf16", "e4m3"):
        c = choose(dtype, "sm_90a", 128, 16384, 4096)
        assert c.chosen_by == "small-m" and c.spec.consumers.value == "pingpong" and (c.spec.bm, c.spec.bn) == (128, 128)
        assert c.spec.dtype.value == dtype and c.spec.out_dtype.value == ("bf16" if dtype == "e4m3" else dtype)
    monkeypatch.setattr(choose_mod, "SMALL_M_WIDE", False)  # control: the rule before
    assert choose("bf16", "sm_90a", 128, 16384, 4096).chosen_by == "nearest-fit"



def test_the_swap_rule_takes_the_shapes_its_family_was_fitted_on(monkeypatch):
    """The swapped family's constants came from swapped tiles at M 200..450 against N x K of 6144..16384 x 4096..8192
    (costmodel.SWAP_FIT_POINTS); those shapes read most of their bytes once from memory, so the kernels' compute-bound
    test refused them on the H100 (its fitted launch term puts the floor within 25% of the compute term) and the H200
    table's 128 x 192 entry stayed at 0.901 of cuBLAS where the swapped 128 x 168 kernel ran at 0.972
    (runs/2026-12-06-h100-candidates). Control: with the box test refusing, the entry comes back."""
    from ptxgen.runtime.choose import Problem, choose as choose_on
    from ptxgen.runtime.choose import costmodel
    from ptxgen.runtime.choose.calibration import shipped

    p = Problem("bf16", "sm_90a", 333, 8192, 8192)
    h100 = shipped()["h100-80gb-hbm3"].device
    got = choose_on(p, h100)
    assert (got.chosen_by, got.swap_ab, got.spec.bn) == ("cost-model+swap-ab", True, 168)
    assert all(costmodel.swap_calibrated(m, n, k) for m, n, k, _ in costmodel.SWAP_FIT_POINTS)
    assert not costmodel.swap_calibrated(333, 8192, 2048) and not costmodel.swap_calibrated(600, 8192, 8192)
    monkeypatch.setattr(costmodel, "swap_calibrated", lambda m, n, k: False)
    assert choose_on(p, h100).chosen_by == "tuned"


def test_two_192_row_swapped_tiles_where_128_row_tiles_take_two_rounds(monkeypatch):
    """rules.SWAP_WIDE_PAIR: where ceil(N / 128) x 2 swapped tiles exceed the SMs and ceil(N / 192) x 2 fit them, the
    pick is two 192-row tiles over M as one 1x2 cluster, one CTA per tile, its ring at least 4 stages deep (the three
    measured shapes). Not taken: a 192 x 192 ring holds 3 stages (384 rows), 128-row tiles already fit one round
    (333 x 8192), 192-row tiles would not (N = 16384). Control: the switch off gives the 128-row stream-K form back."""
    from ptxgen.isa.types import Cluster
    from ptxgen.runtime.choose import Problem, choose as choose_on
    from ptxgen.runtime.choose.calibration import shipped
    from ptxgen.runtime.choose.swap import wide_pair

    for name in ("h100-80gb-hbm3",):  # measured there only (rules.SWAP_WIDE_PAIR_DEVICES)
        dev = shipped()[name].device
        for m, n, k, bn, stages in ((300, 12288, 6000, 152, 5), (300, 10240, 8192, 152, 5), (280, 12288, 8192, 144, 4)):
            got = choose_on(Problem("bf16", "sm_90a", m, n, k), dev)
            s = got.spec
            assert (got.swap_ab, s.bm, s.bn, s.stages, s.cluster, s.schedule, s.stream_k) == \
                (True, 192, bn, stages, Cluster.C1X2, Schedule.TILE, 1), (name, m, n, k, s.kernel_name)
            assert -(-n // 192) * 2 <= 132 < -(-n // 128) * 2 and "wide-pair rule" in got.why
        for m, n, k in ((384, 12288, 6000), (333, 8192, 8192)):
            assert choose_on(Problem("bf16", "sm_90a", m, n, k), dev).spec.bm == 128, (name, m, n, k)
    like = choose_on(Problem("bf16", "sm_90a", 300, 12288, 6000), shipped()["h100-80gb-hbm3"].device).spec
    h100 = "h100-80gb-hbm3"
    assert wide_pair(like, 300, 12288, 132, h100).bm == 192 and wide_pair(like, 300, 12288, 132, "h200") is None
    assert wide_pair(like, 300, 16384, 132, h100) is None and wide_pair(like, 384, 12288, 132, h100) is None
    assert wide_pair(like, 300, 8192, 132, h100) is None  # 64 x 2 tiles of 128 rows: one round already
    h200 = shipped()["h200"].device  # not measured there: the H200's picks stay as they were
    assert all(choose_on(Problem("bf16", "sm_90a", m, n, k), h200).spec.bm != 192
               for m, n, k in ((300, 12288, 6000), (300, 10240, 8192), (280, 12288, 8192)))
    monkeypatch.setattr(choose_mod, "SWAP_WIDE_PAIR", False)
    off = choose_on(Problem("bf16", "sm_90a", 300, 12288, 6000), shipped()["h100-80gb-hbm3"].device)
    assert (off.spec.bm, off.spec.stream_k) == (128, 2) and "wide-pair" not in off.why


def test_two_swapped_tiles_over_m_run_as_one_1x2_cluster(monkeypatch):
    """rules.SWAP_PAIR_CLUSTER: where the swapped kernel covers M in two tiles, both read the same 128 weight rows, so
    the pair is one 1x2 cluster loading them once (A multicast), in the tile and the stream-K forms; `why` says so.
    One swapped tile over M has nothing to share (the small-M swap-ab rule: no cluster). Control: the switch off."""
    from ptxgen.isa.types import Cluster
    from ptxgen.runtime.choose import Problem, choose as choose_on
    from ptxgen.runtime.choose.calibration import shipped

    h100 = shipped()["h100-80gb-hbm3"].device
    for m, n, k, bn, form in ((400, 10000, 6000, 200, Schedule.PERSISTENT), (333, 8192, 8192, 168, Schedule.TILE)):
        got = choose_on(Problem("bf16", "sm_90a", m, n, k), h100)
        assert (got.chosen_by, got.swap_ab, got.spec.bn, got.spec.schedule) == ("cost-model+swap-ab", True, bn, form)
        assert -(-m // got.spec.bn) == 2 and got.spec.cluster is Cluster.C1X2 and "1x2 cluster" in got.why
        assert "_c1x2_" in got.spec.kernel_name
    small = choose_on(Problem("bf16", "sm_90a", 32, 16384, 4096), h100)
    assert small.swap_ab and small.spec.cluster is Cluster.C1X1
    monkeypatch.setattr(choose_mod, "SWAP_PAIR_CLUSTER", False)
    off = choose_on(Problem("bf16", "sm_90a", 400, 10000, 6000), h100)
    assert off.spec.cluster is Cluster.C1X1 and "1x2 cluster" not in off.why
