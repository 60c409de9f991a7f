"""The cost model (ptxgen.runtime.choose.costmodel) and the cost-model rule of ptxgen.runtime.choose, on a CPU: pure arithmetic.

What the model predicts was compared with the H200 in runs/2026-12-01-cost-model (docs/performance.md); these tests
check the arithmetic (wave counting, padding, monotonicity, the tie rule) and which rule names itself, never a time.
"""

import itertools
import json
from pathlib import Path

import pytest

from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.choose import candidates
from ptxgen.runtime.choose import costmodel as cm
from ptxgen.runtime.choose import choose

ONE = cm.Costs(launch_us=5.0, tile_us=1.0, ktile_us=0.5, off_sector=1.3, bandwidth_tbps=3.0)
NO_FLOOR = cm.Costs(launch_us=5.0, tile_us=1.0, ktile_us=0.5, off_sector=1.3, bandwidth_tbps=1e9)  # waves only


def _rounds_violations(fn, tiles_max=300, slots_max=24):
    """Where ``fn(tiles, slots)`` is not the fewest rounds of ``slots`` that hold ``tiles``."""
    bad = []
    for tiles, slots in itertools.product(range(tiles_max + 1), range(1, slots_max + 1)):
        r = fn(tiles, slots)
        if r * slots < tiles or (tiles > 0 and (r - 1) * slots >= tiles) or (tiles == 0 and r != 0):
            bad.append((tiles, slots, r))
    return bad


def test_rounds_is_the_fewest_that_hold_every_tile_exhaustively():
    assert _rounds_violations(cm.rounds) == []


def test_the_rounds_check_catches_a_count_that_drops_the_last_partial_wave():
    # control: floor division forgets the last partial round; the same check must see it
    assert _rounds_violations(lambda t, s: t // s)
    assert _rounds_violations(lambda t, s: t // s + 1)  # and one that adds a round to full waves


@pytest.mark.parametrize("bm,bn,cluster_m", [(128, 256, 1), (128, 192, 1), (64, 256, 1), (128, 224, 2), (256, 128, 2)])
def test_tile_grid_counts_the_tiles_that_touch_the_output_exhaustively(bm, bn, cluster_m):
    # brute force: a tile (i, j) is launched when it holds an output element, rows rounded up to whole clusters
    for m, n in itertools.product(range(1, 3 * bm * cluster_m + 2, 37), range(1, 3 * bn + 2, 41)):
        rows = sum(1 for i in range(0, m + bm * cluster_m, bm) if i < m)
        rows = -(-rows // cluster_m) * cluster_m
        cols = sum(1 for j in range(0, n + bn, bn) if j < n)
        assert cm.tile_grid(m, n, bm, bn, cluster_m) == rows * cols, (m, n)


def test_prediction_counts_the_last_partial_wave_whole():
    c = cm.BY_NAME["p128x256"]
    full = cm.predict_us(c, NO_FLOOR, 128 * 132, 256, 4096)  # 132 tiles: one round
    one_more = cm.predict_us(c, NO_FLOOR, 128 * 133, 256, 4096)  # 133 tiles: a second round for one tile
    two = cm.predict_us(c, NO_FLOOR, 128 * 264, 256, 4096)  # 264 tiles: two full rounds
    assert one_more == two > full
    assert one_more - NO_FLOOR.launch_us == pytest.approx(2 * (full - NO_FLOOR.launch_us))


def test_prediction_counts_tile_padding_and_the_k_tail():
    c = cm.BY_NAME["p128x192"]
    assert cm.predict_us(c, NO_FLOOR, 129, 193, 4097) == cm.predict_us(c, NO_FLOOR, 256, 384, 4160)  # padded M, N, K
    assert cm.predict_us(c, NO_FLOOR, 128, 192, 4096) < cm.predict_us(c, NO_FLOOR, 128, 192, 4097)  # a whole K-tile


def test_prediction_is_monotone_in_every_dimension_and_in_the_row_phase():
    dims = [1, 7, 64, 100, 128, 129, 500, 1000, 4096, 5000, 16384]
    for c in cm.CANDIDATES:
        for m, n, k in itertools.product(dims, dims, [16, 64, 65, 1024, 5000]):
            t = cm.predict_us(c, ONE, m, n, k)
            assert cm.predict_us(c, ONE, m, n, k, off_sector=True) >= t
            for bigger in ((m * 2, n, k), (m, n * 2, k), (m, n, k * 2), (m + 1, n, k), (m, n + 1, k), (m, n, k + 1)):
                assert cm.predict_us(c, ONE, *bigger) >= t, (c.name, (m, n, k), bigger)


def test_the_bandwidth_floor_bounds_thin_shapes():
    c = cm.BY_NAME["p128x256"]
    m, n, k = 1, 16384, 16384
    compute, floor = cm.time_terms_us(c, ONE, m, n, k)
    assert floor > compute and cm.predict_us(c, ONE, m, n, k) == floor
    assert floor - ONE.launch_us == pytest.approx(2 * (m * k + n * k + m * n) / 3.0e6)


def test_pick_takes_the_argmin_and_gives_ties_to_the_candidates_measured_most():
    costs = {"p128x256": cm.Costs(0, 0, 1.0), "p128x224": cm.Costs(0, 0, 0.97)}  # x224 is 3% faster per K-tile...
    m, n, k = 128 * 132, 224, 4096  # ...and both fit one round
    r, ranked = cm.pick(costs, m, n, k, tolerance=0.0)
    assert r.candidate.name == "p128x224" == ranked[0].candidate.name
    r, _ = cm.pick(costs, m, n, k, tolerance=0.05)  # within tolerance: the earlier candidate (a tuning-table winner)
    assert r.candidate.name == "p128x256"
    r, _ = cm.pick(costs, m, n, k, tolerance=0.02)  # 3% apart is no tie at 2%
    assert r.candidate.name == "p128x224"
    with pytest.raises(ValueError):
        cm.pick({}, m, n, k)


def test_the_shipped_cost_table_covers_the_candidates_with_legal_specs():
    doc = cm.family_doc("16bit")  # the reference (H200) calibration's 16-bit family
    costs = cm.parse_costs(doc)
    assert (doc["dtype"], doc["arch"]) == ("16bit", "sm_90a") and set(costs) == set(cm.BY_NAME)
    for name, c in costs.items():
        assert c.ktile_us > 0 and c.launch_us >= 0 and c.tile_us >= 0 and c.off_sector >= 1.0 and c.bandwidth_tbps > 1
        spec = cm.BY_NAME[name].spec()
        assert (spec.bm, spec.bn, spec.cluster.value) == (cm.BY_NAME[name].bm, cm.BY_NAME[name].bn, cm.BY_NAME[name].cluster)


def test_chosen_by_names_the_cost_model_where_it_decides():
    c = choose("bf16", "sm_90a", 2500, 10000, 4000)  # 8 rounds + 4 tiles: the cost model's pick, its last round split
    assert c.chosen_by == "cost-model+stream-k" and c.why.startswith("cost model: ") and "rounds of 132" in c.why
    c = choose("bf16", "sm_90a", 12000, 1000, 6000)
    assert c.chosen_by == "cost-model" and c.why.startswith("cost model: ") and "rounds of 132" in c.why
    c = choose("bf16", "sm_90a", 5000, 5000, 5000)  # rows 16 B past a sector: the ranking takes the off-sector factors
    assert c.chosen_by.startswith("cost-model+off-sector") and c.spec.cluster.value == "2x1" and "128-byte L2 promotion" in c.why
    assert choose("bf16", "sm_90a", 4096, 4096, 4096).chosen_by == "tuned"  # the table's winners stay
    assert choose("bf16", "sm_90a", 16, 4096, 4096).chosen_by == "swap-ab"  # and the small-M rules
    assert choose("bf16", "sm_90a", 16, 4096, 4096, allow_swap=False).chosen_by == "split-k"
    assert choose("bf16", "sm_90a", 128, 20000, 4096).chosen_by == "nearest-fit"  # bandwidth-bound: outside its range
    assert choose("bf16", "sm_90a", 513, 9929, 64).chosen_by == "nearest-fit"  # one K-tile: outside its range
    assert choose("e4m3", "sm_90a", 2500, 10000, 4096).chosen_by.startswith("cost-model")  # e4m3: its own table


def test_the_cost_model_switch_is_a_control(monkeypatch):
    monkeypatch.setattr(choose_mod, "COST_MODEL", False)
    assert choose("bf16", "sm_90a", 2500, 10000, 4000).chosen_by == "nearest-fit"
    assert choose("bf16", "sm_90a", 5000, 5000, 5000).chosen_by == "nearest-fit+off-sector"


def test_the_pick_is_the_ranked_argmin_up_to_the_tolerance():
    _, costs = cm.shipped_costs()
    big = {k: v for k, v in costs.items() if not cm.BY_NAME[k].narrow}
    for m, n, k in [(2500, 10000, 4000), (5000, 5000, 5000), (3000, 7000, 5000), (12000, 1000, 6000), (7000, 9000, 1152)]:
        off = (2 * k) % 32 != 0
        r, ranked = cm.pick(big, m, n, k, off_sector=off, stream_k=True)  # as the chooser ranks (STREAM_K_RULE on)
        assert r.predicted_us <= ranked[0].predicted_us * (1 + cm.TIE_TOLERANCE)
        spec = choose("bf16", "sm_90a", m, n, k).spec
        assert (spec.bm, spec.bn, spec.cluster.value) == (r.candidate.bm, r.candidate.bn, r.candidate.cluster)
        assert spec.stream_k == (r.streamk.splits if r.streamk else 1)


# -- e4m3: its own cost table (runs/2026-12-01-fp8-shapes), BK = 128 -------------------------------------------------
def test_a_k_tile_is_128_bytes_of_k_for_either_input_size():
    assert (candidates.stage_k(2), candidates.stage_k(1)) == (64, 128)
    for k in range(1, 1200):
        assert cm.k_tiles(k, 2) == -(-2 * k // 128) and cm.k_tiles(k, 1) == -(-k // 128)
    c = cm.BY_NAME["p128x256"]  # the same constants: e4m3 at K = 128 j predicts as 16-bit inputs at K = 64 j
    for j in (1, 7, 40):
        assert cm.time_terms_us(c, NO_FLOOR, 4096, 4096, 128 * j, element_bytes=1)[0] == cm.time_terms_us(
            c, NO_FLOOR, 4096, 4096, 64 * j)[0]
    assert cm.predict_us(c, NO_FLOOR, 4096, 4096, 4097, element_bytes=1) > cm.predict_us(c, NO_FLOOR, 4096, 4096, 4096,
                                                                                            element_bytes=1)


def test_the_e4m3_candidates_are_legal_specs_with_bk_128():
    for c in cm.CANDIDATES:
        s = c.spec("e4m3")
        assert (s.bm, s.bn, s.bk, s.dtype.value, s.out_dtype.value, s.cluster.value) == (c.bm, c.bn, 128, "e4m3", "bf16",
                                                                                          c.cluster)
        assert c.spec("bf16").bk == 64 and c.spec("f16").out_dtype.value == "f16"


def test_the_shipped_e4m3_cost_table_covers_the_big_candidates():
    doc = cm.family_doc("e4m3")
    costs = cm.parse_costs(doc)
    assert (doc["dtype"], doc["arch"]) == ("e4m3", "sm_90a") and cm.shipped_costs("e4m3")[0] == ("e4m3", "sm_90a")
    assert set(costs) == {c.name for c in cm.CANDIDATES if not c.narrow}  # the narrow tiles stay with small-m / split-k
    for c in costs.values():
        assert c.ktile_us > 0 and c.launch_us >= 0 and c.tile_us >= 0 and c.off_sector >= 1.0 and c.bandwidth_tbps > 1
    assert cm.shipped_costs("s8") is None  # no table: no cost-model rule


def _synthetic_points(truth: dict, element_bytes: int) -> list[dict]:
    """Calibration points made from chosen constants with the formula (rows on a sector; off-sector ones scaled)."""
    dtype = {1: "e4m3", 2: "bf16"}[element_bytes]
    pts = []
    for name, (launch, tile, ktile, off) in truth.items():
        c = cm.BY_NAME[name]
        for m, n, k in [(3072, 6144, 2048), (6144, 4096, 6144), (1536, 10240, 4096), (7168, 3584, 1024),
                        (2304, 7168, 3072), (1024, 8192, 8192), (3584, 6144, 3088), (6144, 2560, 4496)]:
            r = cm.rounds(cm.tile_grid(m, n, c.bm, c.bn, c.cluster_m), 132)
            kt = -(-k * element_bytes // 128)
            factor = off if (k * element_bytes) % 32 else 1.0
            pts.append({"cand": name, "dtype": dtype, "m": m, "n": n, "k": k, "ok": True, "ours_tbps": 1.0,
                        "ours_us": launch + r * tile + r * kt * ktile * factor})
    return pts


def test_the_fit_recovers_e4m3_constants_and_counts_its_k_tiles_in_128(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "tools"))
    import fit_cost

    truth = {"p128x256": (4.0, 1.5, 0.68, 1.27), "p128x192c2": (4.5, 1.1, 0.51, 1.08)}
    path = tmp_path / "cal.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in _synthetic_points(truth, 1)))
    doc = fit_cost.fit(str(path))
    assert doc["dtype"] == "e4m3"
    for name, (launch, tile, ktile, off) in truth.items():
        got = doc["kernels"][name]
        assert got["launch_us"] == pytest.approx(launch, abs=0.02) and got["tile_us"] == pytest.approx(tile, abs=0.002)
        assert got["ktile_us"] == pytest.approx(ktile, abs=2e-4) and got["off_sector"] == pytest.approx(off, abs=2e-3)
    # control: the same times read as 16-bit points (K-tiles of 64, other rows off a sector) give other constants
    bf16 = [dict(p, dtype="bf16") for p in _synthetic_points(truth, 1)]
    path.write_text("".join(json.dumps(p) + "\n" for p in bf16))
    wrong = fit_cost.fit(str(path))["kernels"]["p128x256"]
    assert wrong["ktile_us"] != pytest.approx(truth["p128x256"][2], abs=2e-4)
    mixed = _synthetic_points(truth, 1)[:3] + _synthetic_points(truth, 2)[:3]
    path.write_text("".join(json.dumps(p) + "\n" for p in mixed))
    with pytest.raises(SystemExit):  # one input family per fit
        fit_cost.fit(str(path))


def test_e4m3_chosen_by_names_the_cost_model_where_it_decides(monkeypatch):
    c = choose("e4m3", "sm_90a", 3008, 7008, 5008)  # rows 5008 B: 16 past a sector
    assert c.chosen_by.startswith("cost-model+off-sector") and c.spec.cluster.value == "2x1" and c.spec.bk == 128
    assert "K-tiles of 128" in c.why and "128-byte L2 promotion" in c.why
    c = choose("e4m3", "sm_90a", 4096, 4096, 4096)
    assert c.chosen_by == "cost-model" and c.spec.dtype.value == "e4m3" and c.spec.out_dtype.value == "bf16"
    assert choose("e4m3", "sm_90a", 8192, 8192, 8192).chosen_by == "tuned"
    assert choose("e4m3", "sm_90a", 2512, 10000, 4000).chosen_by == "nearest-fit+stream-k"  # rows 32 B past a line
    assert choose("e4m3", "sm_90a", 336, 8192, 8192).chosen_by == "nearest-fit"  # compute under 1.25 x the floor
    assert choose("e4m3", "sm_90a", 16, 4096, 4096).chosen_by == "swap-ab"
    assert choose("e4m3", "sm_90a", 128, 20000, 4096).chosen_by == "nearest-fit"  # M <= 128: never the cost model
    # the same rows through views with 128-byte-aligned pitches: no off-sector factor, no mid-line hand-back
    assert choose("e4m3", "sm_90a", 3008, 7008, 5008, lda=5120, ldb=5120).chosen_by.startswith("cost-model")
    assert "off-sector" not in choose("e4m3", "sm_90a", 3008, 7008, 5008, lda=5120, ldb=5120).chosen_by
    assert choose("e4m3", "sm_90a", 2512, 10000, 4000, lda=4096, ldb=4096).chosen_by.startswith("cost-model")
    monkeypatch.setattr(choose_mod, "COST_MODEL", False)  # control: the switch turns the rule off for e4m3 too
    assert choose("e4m3", "sm_90a", 3008, 7008, 5008).chosen_by == "nearest-fit"
    assert choose("e4m3", "sm_90a", 4096, 4096, 4096).chosen_by == "nearest-fit"


def test_the_e4m3_pick_is_the_ranked_argmin_up_to_the_tolerance():
    _, costs = cm.shipped_costs("e4m3")
    for m, n, k in [(5120, 5120, 5008), (3008, 7008, 5008), (1504, 9008, 3024), (12000, 1008, 6000), (8192, 8192, 1024),
                    (4096, 4096, 5008), (6144, 6144, 6144)]:
        off = k % 32 != 0
        r, ranked = cm.pick(costs, m, n, k, off_sector=off, element_bytes=1, stream_k=True, whole_first=True)  # as chosen
        assert r.predicted_us <= ranked[0].predicted_us * (1 + cm.TIE_TOLERANCE)
        spec = choose("e4m3", "sm_90a", m, n, k).spec
        assert (spec.bm, spec.bn, spec.cluster.value, spec.consumers.value) == (
            r.candidate.bm, r.candidate.bn, r.candidate.cluster, r.candidate.consumers)
        assert spec.stream_k == (r.streamk.splits if r.streamk else 1)


# -- swap-AB with a tile that fits M (costmodel.swap_tiles / best_swap; choose's cost-model+swap-ab) ------------------
def _swap_tile_violations(fn, ms=range(129, 700)):
    """Where ``fn(m)`` is not, for every tile count t, the least multiple of 8 BN' with t x BN' >= M, where that BN' lies
    within SWAP_MIN_BN..SWAP_MAX_BN, fewest tiles first: brute force over t and every multiple of 8."""
    bad = []
    for m in ms:
        want = []
        for t in range(1, m + 1):
            bn = next(b for b in range(8, 8 * m + 8, 8) if t * b >= m)
            if cm.SWAP_MIN_BN <= bn <= cm.SWAP_MAX_BN and bn not in [b for b, _ in want]:
                want.append((bn, -(-m // bn)))
        if fn(m) != want:
            bad.append((m, fn(m), want))
    return bad


def test_swap_tiles_are_the_least_multiples_of_8_that_cover_m():
    assert _swap_tile_violations(cm.swap_tiles) == []
    assert cm.swap_tiles(333) == [(168, 2), (112, 3)]  # one tile would be 336 wide; 4 tiles of 88: under SWAP_MIN_BN
    assert cm.swap_tiles(200) == [(200, 1), (104, 2)]
    assert cm.swap_tiles(700) == [(240, 3), (176, 4), (144, 5), (120, 6), (104, 7)]


def test_control_a_wrong_tile_rule_is_caught():
    wrong_round = lambda m: [(176 if bn == 168 else bn, t) for bn, t in cm.swap_tiles(m)]  # noqa: E731 - 2 x 176, not the least
    assert _swap_tile_violations(wrong_round, ms=[333])
    assert _swap_tile_violations(lambda m: cm.swap_tiles(m)[1:], ms=[333, 700])  # a tile count dropped


def test_swap_prediction_counts_ctas_and_rounds_and_scales_the_k_loop_by_bn():
    p = cm.predict_swap(NO_FLOOR, 192, 333, 8192, 8192, 168)
    assert (p.m_tiles, p.ctas, p.rounds) == (2, 128, 1)
    assert p.predicted_us == pytest.approx(5.0 + 1.0 + 128 * 0.5 * 168 / 192)
    assert cm.predict_swap(NO_FLOOR, 192, 333, 8448, 8192, 168).rounds == 1  # 66 x 2 = 132 CTAs: still one round
    assert cm.predict_swap(NO_FLOOR, 192, 333, 8449, 8192, 168).rounds == 2  # 67 x 2 = 134 CTAs
    assert cm.predict_swap(NO_FLOOR, 192, 333, 8448, 8192, 168).ctas == 132
    off = cm.predict_swap(NO_FLOOR, 192, 333, 8192, 8192, 168, off_sector=True)
    assert off.predicted_us > p.predicted_us
    b = cm.best_swap(NO_FLOOR, 192, 333, 8192, 8192)
    assert (b.bn, b.m_tiles) == (168, 2)  # 333 > 256: no one-tile form
    assert cm.best_swap(NO_FLOOR, 192, 96, 8192, 8192) is None  # M < SWAP_MIN_BN: no swapped tile here


def test_the_shipped_table_has_the_swapped_familys_constants():
    c = cm.shipped_swap_costs("16bit")
    assert c is not None and c.launch_us > 0 and c.ktile_us > 0
    assert cm.shipped_swap_costs("e4m3") is None  # not measured in e4m3: the rule does not apply there


@pytest.mark.parametrize("m,n,k,bn", [(333, 8192, 8192, 168), (300, 8192, 8192, 152), (400, 8192, 6144, 200),
                                      (200, 8192, 8192, 104), (331, 8200, 8192, 168)])
def test_the_swap_rule_takes_a_tile_that_fits_m_where_128_row_tiles_pad_it(m, n, k, bn):
    c = choose("bf16", "sm_90a", m, n, k)
    assert c.chosen_by == "cost-model+swap-ab" and c.swap_ab
    assert (c.spec.bm, c.spec.bn, c.spec.d_major.value, c.spec.schedule.value, c.spec.epilogue.value) == (128, bn, "m", "tile", "tma")  # swaprules.SWAP_TMA_STORE
    assert "swap-AB" in c.why and f"of {bn} cover M = {m}" in c.why


@pytest.mark.parametrize("m,n,k", [(450, 6144, 8192), (250, 10240, 8192), (350, 16384, 4096), (333, 8192, 4096),
                                   (333, 8192, 1024), (205, 8192, 8200), (1209, 2048, 8192), (5000, 5000, 5000),
                                   (4096, 4096, 4096), (128, 8192, 8192)])
def test_the_swap_rule_declines_where_the_tile_arithmetic_says_no(m, n, k):
    """Fewer CTAs for a wider tile (450 x 6144, 250 x 10240: measured slower, run 1), two rounds (350 x 16384: measured
    slower), the swapped family's larger fixed cost at a shorter K (4096, 1024), rows off a sector (K = 8200: not
    measured swapped), more than two tiles over M (1209 rows: not measured), large M, M <= 128."""
    assert "swap" not in choose("bf16", "sm_90a", m, n, k).chosen_by


def test_control_the_swap_rule_switch_and_the_callers_that_cannot_swap(monkeypatch):
    assert choose("bf16", "sm_90a", 333, 8192, 8192, allow_swap=False).chosen_by == "tuned"
    assert choose("e4m3", "sm_90a", 336, 8192, 8192).chosen_by != "cost-model+swap-ab"  # measured on bf16 only
    monkeypatch.setattr(choose_mod, "SWAP_FIT_RULE", False)
    assert choose("bf16", "sm_90a", 333, 8192, 8192).chosen_by == "tuned"
    assert choose("bf16", "sm_90a", 300, 8192, 8192).chosen_by == "cost-model"
    monkeypatch.undo()
    monkeypatch.setattr(cm.CostModel, "swap_costs", lambda self, dtype, arch: None)  # no swap entry in the table: no rule
    assert choose("bf16", "sm_90a", 333, 8192, 8192).chosen_by == "tuned"


def test_e4m3_ties_go_to_whole_kernels_before_stream_k_forms(monkeypatch):
    """3008 x 7008 x 5008 e4m3: run 1 and 3 of 2026-12-01-swapab-small-m measured the 128 x 192 2x1 kernel whole faster
    than the 128 x 256 2x1 kernel's stream-K form (166.7 / 163.4 against 174.1 / 166.2 us); since the split round's fixed
    cost (costmodel.STREAMK_FIXUP_US) the model ranks it first there by itself. At 2488 x 7008 x 5008 the two are still
    predicted within the tolerance: the table order alone takes the stream-K form (control), the rule the whole one."""
    _, costs = cm.shipped_costs("e4m3")
    r, ranked = cm.pick(costs, 2488, 7008, 5008, off_sector=True, element_bytes=1, stream_k=True)
    assert r.streamk is not None  # control: the table order alone takes the stream-K form
    w, _ = cm.pick(costs, 2488, 7008, 5008, off_sector=True, element_bytes=1, stream_k=True, whole_first=True)
    assert w.streamk is None and w.predicted_us <= ranked[0].predicted_us * (1 + cm.TIE_TOLERANCE)
    assert (r.candidate.name, w.candidate.name) == ("p128x256c2", "p128x192c2")
    c = choose("e4m3", "sm_90a", 3008, 7008, 5008)
    assert c.spec.stream_k == 1 and (c.spec.bm, c.spec.bn) == (128, 192)
    assert choose("e4m3", "sm_90a", 2488, 7008, 5008).spec.stream_k == 1
    monkeypatch.setattr(choose_mod, "STREAM_K_WHOLE_FIRST", ())
    assert choose("e4m3", "sm_90a", 2488, 7008, 5008).spec.stream_k > 1


def test_the_swapped_stream_k_prediction_by_hand_and_the_rule_that_takes_it(monkeypatch):
    """400 x 10000 x 6000 on the H100's swapped constants (launch 28.4, per tile 8.003, per K-tile 0.261 us of a 128 x
    192 tile): 128 x 200 tiles, 79 x 2 = 158 for 132 SMs, 26 in the last round; 94 K-tiles; split min(5, 132 // 26, 94 // 4)
    = 5 ways: 28.4 + (8.003 + 94 x 0.261 x 200 / 192) + (8.003 + 19 x 0.261 x 200 / 192 + 128 x 200 x 4 B x 5 / 100 B/ns
    + the split round's fixed 3.0 us, costmodel.STREAMK_FIXUP_US).
    The rule takes that form over the unswapped kernels (cost-model+swap-ab, persistent, streamk5); controls: the switch
    off, or stream-K not asked, and the swapped kernel does not fit one round: no swap."""
    from ptxgen.runtime.choose import Problem, choose, rules
    from ptxgen.runtime.choose.calibration import shipped
    from ptxgen.runtime.choose.costmodel import predict_swap_streamk

    cal = shipped()["h100-80gb-hbm3"]
    sw = cal.families["16bit"].swap
    assert (sw.launch_us, sw.tile_us, sw.ktile_us) == (28.4, 8.003, 0.261)
    per_k = 0.261 * 200 / 192
    by_hand = 28.4 + (8.003 + 94 * per_k) + (8.003 + 19 * per_k + 128 * 200 * 4 * 5 / 100e3 + 3.0)
    p = predict_swap_streamk(sw, 192, 400, 10000, 6000, 200, 5)
    assert (p.ctas, p.splits) == (158, 5) and abs(p.predicted_us - by_hand) < 1e-9
    assert predict_swap_streamk(sw, 192, 400, 10000, 6000, 200, 16).splits == 5  # capped by 132 // 26
    c = choose(Problem("bf16", "sm_90a", 400, 10000, 6000), cal.device)
    assert (c.chosen_by, c.swap_ab, c.spec.bn, c.spec.stream_k, c.spec.schedule.value) == (
        "cost-model+swap-ab", True, 200, 5, "persistent")
    monkeypatch.setattr(rules, "SWAP_STREAM_K", False)
    assert not choose(Problem("bf16", "sm_90a", 400, 10000, 6000), cal.device).swap_ab
