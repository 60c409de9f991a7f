"""The cost model (ptxgen.runtime.costmodel) and the cost-model rule of ptxgen.runtime.choose, on a CPU: pure arithmetic.

What the model predicts was compared with the H200 in runs/2026-12-01-s3-cost (docs/performance.md); these tests
check the arithmetic (wave counting, padding, monotonicity, the tie rule) and which rule names itself, never a time.
"""

import itertools
import json
from importlib import resources

import pytest

from ptxgen.runtime import choose as choose_mod
from ptxgen.runtime import costmodel as cm
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
    doc = json.loads(resources.files("ptxgen.tuning").joinpath(cm.COST_TABLE).read_text())
    costs = cm.parse_costs(doc)
    assert (doc["dtype"], doc["arch"]) == ("16bit", "sm_90a") and set(costs) == set(cm.BY_NAME)
    for name, c in costs.items():
        assert c.ktile_us > 0 and c.launch_us >= 0 and c.tile_us >= 0 and c.off_sector >= 1.0 and c.bandwidth_tbps > 1
        spec = cm.BY_NAME[name].spec()
        assert (spec.bm, spec.bn, spec.cluster.value) == (cm.BY_NAME[name].bm, cm.BY_NAME[name].bn, cm.BY_NAME[name].cluster)


def test_chosen_by_names_the_cost_model_where_it_decides():
    c = choose("bf16", "sm_90a", 2500, 10000, 4000)
    assert c.chosen_by == "cost-model" and c.why.startswith("cost model: ") and "rounds of 132" in c.why
    c = choose("bf16", "sm_90a", 5000, 5000, 5000)  # rows 16 B past a sector: the ranking takes the off-sector factors
    assert c.chosen_by == "cost-model+off-sector" and c.spec.cluster.value == "2x1" and "128-byte L2 promotion" in c.why
    assert choose("bf16", "sm_90a", 4096, 4096, 4096).chosen_by == "tuned"  # the table's winners stay
    assert choose("bf16", "sm_90a", 16, 4096, 4096).chosen_by == "split-k"  # and the small-M rules
    assert choose("bf16", "sm_90a", 128, 16384, 4096).chosen_by == "nearest-fit"  # bandwidth-bound: outside its range
    assert choose("bf16", "sm_90a", 513, 9929, 64).chosen_by == "nearest-fit"  # one K-tile: outside its range
    assert choose("e4m3", "sm_90a", 2500, 10000, 4096).chosen_by == "nearest-fit"  # calibrated on 16-bit inputs only


def test_the_cost_model_switch_is_a_control(monkeypatch):
    monkeypatch.setattr(choose_mod, "COST_MODEL", False)
    assert choose("bf16", "sm_90a", 2500, 10000, 4000).chosen_by == "nearest-fit"
    assert choose("bf16", "sm_90a", 5000, 5000, 5000).chosen_by == "nearest-fit+off-sector"


def test_the_pick_is_the_ranked_argmin_up_to_the_tolerance():
    _, costs = cm.shipped_costs()
    big = {k: v for k, v in costs.items() if not cm.BY_NAME[k].narrow}
    for m, n, k in [(2500, 10000, 4000), (5000, 5000, 5000), (3000, 7000, 5000), (12000, 1000, 6000), (7000, 9000, 1152)]:
        off = (2 * k) % 32 != 0
        r, ranked = cm.pick(big, m, n, k, off_sector=off)
        assert r.predicted_us <= ranked[0].predicted_us * (1 + cm.TIE_TOLERANCE)
        spec = choose("bf16", "sm_90a", m, n, k).spec
        assert (spec.bm, spec.bn, spec.cluster.value) == (r.candidate.bm, r.candidate.bn, r.candidate.cluster)
