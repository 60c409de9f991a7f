"""tools/exp_candidates.py and tools/exp_candidates_run.py: the tasks and kernels of the candidate run (issue 35's weak
shapes), what the cost model predicts for them, the rows and the verdicts a run writes, the worker's restarts, and
(gpu) one small task on the GPU present. CPU cases take seconds; the compile case builds three kernels."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import exp_candidates as plan  # noqa: E402
import exp_candidates_run as runner  # noqa: E402
from heldout_shapes import heldout30, heldout_shapes  # noqa: E402

H100 = plan.device_for("h100")


def test_no_task_is_a_held_out_shape_and_the_shapes_fit_their_baselines():
    shapes = [(t["m"], t["n"], t["k"]) for t in plan.tasks()]
    assert not set(shapes) & (set(heldout30()) | set(heldout_shapes()))
    assert len(set(map(plan.task_id, plan.tasks()))) == len(plan.tasks())  # each task once
    for m, n, k in plan.large_random():
        assert 2000 <= m <= 16000 and 2000 <= n <= 16000 and 2000 <= k <= 16000 and n % 8 == 0 and k % 8 == 0
    assert {(k * 2) % 32 for _, _, k in plan.large_random()} == {0, 16}  # both row phases among the random shapes
    for t in plan.tasks():
        if t["dtype"] == "e4m3":  # torch._scaled_mm takes N and K multiples of 16 only
            assert t["n"] % 16 == 0 and t["k"] % 16 == 0, t
    assert [t["kind"] for t in plan.tasks()].count("fused") == 3


@pytest.mark.parametrize("task", [t for t in plan.tasks() if t["kind"] == "gemm"], ids=plan.task_id)
def test_each_gemm_task_times_the_chooser_pick_first_and_every_kernel_once(task):
    from ptxgen.runtime.choose import Problem, choose

    cands, choice, refused = plan.gemm_candidates(task["dtype"], task["m"], task["n"], task["k"], H100)
    assert cands[0].label == "pick" and cands[0].spec == choice.spec and cands[0].swap_ab == choice.swap_ab
    assert choice.spec == choose(Problem(task["dtype"], "sm_90a", task["m"], task["n"], task["k"]), H100).spec
    keys = [(c.spec.kernel_name, c.swap_ab) for c in cands]
    assert len(keys) == len(set(keys))
    assert len({c.label for c in cands}) == len(cands)
    assert all(c.spec.arch.value == "sm_90a" and c.spec.dtype.value == task["dtype"] for c in cands)
    sources = {c.source for c in cands}
    assert {"pick", "table", "extra"} <= sources
    assert len(cands) >= 25 and not [r for r in refused if r["label"] == "few-wave"]


def test_the_stream_k_sweep_times_only_splits_the_kernel_takes_differently():
    from ptxgen.runtime.choose.candidates import BY_NAME, k_tiles
    from ptxgen.runtime.choose.costmodel import streamk_cap, tile_grid

    cands, _, _ = plan.gemm_candidates("bf16", 3000, 7000, 5000, H100)
    c = BY_NAME["p128x256c2"]
    items = tile_grid(3000, 7000, c.bm, c.bn, 2) // 2
    effective = [streamk_cap(items, min(items, 66), k_tiles(5000), x.splits)[0] for x in cands
                 if x.family == "p128x256c2" and x.splits > 1 and x.source == "stream-k"]
    assert len(effective) >= 3 and len(effective) == len(set(effective)) and min(effective) > 1


def test_few_wave_tasks_add_split_k_and_swapped_kernels_and_large_ones_do_not():
    cands, choice, _ = plan.gemm_candidates("bf16", 333, 8192, 8192, H100)
    few = {c.label for c in cands}
    # the swapped 128 x 168 kernel: a candidate of its own, or the pick itself (then timed once, as the pick)
    assert "t128x256/split2" in few and ("swap128x168" in few or (choice.swap_ab and choice.spec.bn == 168))
    big = {c.label for c in plan.gemm_candidates("bf16", 8192, 8192, 8192, H100)[0]}
    assert not any("split" in x or x.startswith("swap") for x in big)


def test_a_single_partial_round_sweeps_its_splits_on_the_grid_the_kernel_launches():
    """838 x 1309 x 8000: 42 tiles of 128 x 256, one partial round. A stream-K kernel's grid is every SM
    (KernelABI.fills_sms), so its 42 tiles split 2 or 3 ways (3 = 132 // 42); the sweep lists both. Control: on the
    grid of one CTA a tile (min(tiles, SMs), the grid before 2026-12-07) no split is left to sweep."""
    from ptxgen.runtime.choose.costmodel import streamk_cap

    cands, _, _ = plan.gemm_candidates("bf16", 838, 1309, 8000, H100)
    assert {"p128x256+sk2", "p128x256+sk3"} <= {c.label for c in cands}
    assert streamk_cap(42, 132, 125, 16)[0] == 3 and streamk_cap(42, 42, 125, 16)[0] == 1


def test_swapped_kernels_with_a_partial_last_round_add_their_stream_k_forms():
    """400 x 10000 x 6000: 128 x 200 tiles over N x M are 79 x 2 = 158 on 132 SMs (26 in a second round): split 2, 3, 4
    ways; 128 x 104 (316 tiles, 52 last) takes at most 2 (132 / 52); 128 x 136 (237, 105 last) none. 333 x 8192 x 8192's
    128 tiles of 128 x 168 fill one round: no stream-K form."""
    cands, _, _ = plan.gemm_candidates("bf16", 400, 10000, 6000, H100)
    by = {c.label: c for c in cands}
    model = plan.cost_model(H100)
    for s in (2, 3, 4):
        c = by[f"swap128x200+sk{s}"]
        assert c.swap_ab and c.spec.stream_k == s and c.spec.schedule.value == "persistent" and c.spec.d_major.value == "m"
        assert (c.spec.bm, c.spec.bn, c.spec.epilogue) == (128, 200, by["swap128x200"].spec.epilogue)
        # the swapped family's constants with the stream-K terms (costmodel.predict_swap_streamk), below the whole kernel
        assert plan.predicted_us(c, "bf16", 400, 10000, 6000, model) < plan.predicted_us(by["swap128x200"], "bf16", 400, 10000, 6000, model)
    assert "swap128x104+sk2" in by and "swap128x104+sk3" not in by and not any(x.startswith("swap128x136+") for x in by)
    cands, choice, _ = plan.gemm_candidates("bf16", 333, 8192, 8192, H100)
    few = {c.label for c in cands}
    assert "swap128x168" in few or (choice.swap_ab and choice.spec.bn == 168 and choice.spec.stream_k == 1)
    assert not any(x.startswith("swap128x168+") for x in few)


def test_swapped_kernels_over_two_tiles_of_rows_add_their_1x2_cluster_forms():
    """300 x 12288 x 6000: 128 x 152 swapped tiles are 96 x 2 over N x M, two over M: the pair as one 1x2 cluster
    (swap.paired) beside the lone tiles, and its stream-K forms; 400 x 10000 x 6000's 128 x 104 tiles are four over M:
    no pair."""
    from ptxgen.derive.tile.spec import Cluster

    by = {c.label: c for c in plan.gemm_candidates("bf16", 300, 12288, 6000, H100)[0]}
    assert by["swap128x152"].spec.cluster is Cluster.C1X1
    pair = by["swap128x152c1x2"]
    assert pair.swap_ab and pair.spec.cluster is Cluster.C1X2 and pair.spec.bn == 152
    # its stream-K form: a candidate of its own, or the pick itself (timed once, as the pick)
    assert any(x.startswith("swap128x152c1x2+sk") for x in by) or (
        by["pick"].spec.cluster is Cluster.C1X2 and by["pick"].spec.bn == 152 and by["pick"].spec.stream_k > 1)
    assert "swap128x200c1x2+sk2" in {c.label for c in plan.gemm_candidates("bf16", 400, 10000, 6000, H100)[0]}
    four = {c.label for c in plan.gemm_candidates("bf16", 400, 10000, 6000, H100)[0]}
    assert "swap128x104" in four and "swap128x104c1x2" not in four


def test_only_keeps_the_tasks_one_of_its_texts_names():
    ids = [plan.task_id(t) for t in plan.tasks()]
    assert [i for i in ids if runner._wanted(i, "260x8192,e4m3:8192")] == ["gemm:bf16:260x8192x6000", "gemm:e4m3:8192x8192x8192"]
    assert [i for i in ids if runner._wanted(i, None)] == ids
    assert not [i for i in ids if runner._wanted(i, "no-such-shape")]


@pytest.mark.parametrize("task", [t for t in plan.tasks() if t["kind"] == "gemm"], ids=plan.task_id)
def test_the_cost_model_pick_is_the_least_predicted_kernel_within_the_tie_tolerance(task):
    """The predictions the rows carry agree with the chooser: where the cost model picked, no ranked kernel (whole or
    stream-K) is predicted faster than the pick by more than the tie tolerance; a kernel with no term has none."""
    from ptxgen.runtime.choose.costmodel import STREAMK_MIN_GAIN, TIE_TOLERANCE

    m, n, k, dt = task["m"], task["n"], task["k"], task["dtype"]
    cands, choice, _ = plan.gemm_candidates(dt, m, n, k, H100)
    model = plan.cost_model(H100)
    pred = {c.label: plan.predicted_us(c, dt, m, n, k, model) for c in cands}
    assert all(pred[c.label] is None for c in cands if c.source == "extra")
    assert all(pred[c.label] is not None for c in cands if c.source in ("table", "stream-k"))
    if choice.chosen_by.startswith("cost-model") and "swap" not in choice.chosen_by:
        # a stream-K form counts where it is predicted STREAMK_MIN_GAIN faster than its kernel whole (costmodel._ranked)
        whole = {c.family: pred[c.label] for c in cands if c.source in ("table", "pick")}
        ranked = [pred[c.label] for c in cands if c.source == "table" or (
            c.source == "stream-k" and pred[c.label] < whole.get(c.family, float("inf")) * (1 - STREAMK_MIN_GAIN))]
        assert pred["pick"] <= min(ranked) * (1 + TIE_TOLERANCE) + 1e-9, (choice.chosen_by, pred["pick"], min(ranked))


def test_the_fused_task_runs_the_door_pick_whole_with_each_chain():
    cands, choice = plan.fused_candidates(2048, 11008, 4096, H100)
    by = {c.label: c for c in cands}
    assert choice.spec.stream_k > 1  # the plain pick splits its last round; the fused kernels keep K whole
    assert by["plain"].spec.stream_k == 1 and by["relu"].spec.stream_k == 1 and by["gelu"].spec.stream_k == 1
    assert by["relu"].spec.fuse.token == "bias=col:bf16,act=relu" and by["gelu"].spec.fuse.token == "bias=col:bf16,act=gelu_tanh"
    assert by["pp/gelu"].spec.consumers.value == "pingpong" and by["pp/plain"].spec.fuse is None


def test_a_few_candidates_compile(tmp_path, monkeypatch):
    """L2: the pick, a kernel the cost table lacks (a 1x2 cluster) and a fused one compile for sm_90a (NVRTC)."""
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    cands, _, _ = plan.gemm_candidates("bf16", 3000, 5000, 7000, H100)
    fused, _ = plan.fused_candidates(3000, 5000, 7000, H100)
    specs = [cands[0].spec, next(c.spec for c in cands if c.label == "p128x256/c1x2"), next(c.spec for c in fused if c.label == "gelu")]
    logs = []
    assert plan.compile_specs(specs, 1, log=logs.append) == [] and "compiled 3 of 3" in logs[0]
    # control: a kernel that cannot be built is reported (the run goes on; its rows say so), not raised
    assert plan._compile_one({**specs[0].to_json(), "bn": 200}).startswith("SpecError")


def _row(label, ratio, predicted=None, ok=True, task="gemm:bf16:1x1x1"):
    return {"task": task, "class": "c", "label": label, "kernel": label, "ratio": ratio, "checked_ok": ok,
            "predicted_us": predicted}


def test_the_verdict_tells_a_mis_rank_from_a_missing_kernel():
    pick = _row("pick", 0.90, 100.0)
    assert plan.verdict([pick, _row("p128x192", 0.99, 110.0), _row("p128x256/c1x2", 0.95)])["verdict"].startswith("mis-rank")
    v = plan.verdict([pick, _row("p128x192", 0.91, 110.0), _row("p128x256/c1x2", 1.00)])
    assert v["verdict"].startswith("missing") and v["best_label"] == "p128x256/c1x2" and v["best_rank"] is None
    assert plan.verdict([pick, _row("p128x192", 0.915, 90.0)])["verdict"].startswith("the pick is within")
    # control: a faster kernel whose output failed its check is no winner
    assert plan.verdict([pick, _row("p128x192", 1.20, 90.0, ok=False)])["best_label"] == "pick"


def test_tile_bytes_count_every_tile_whole_over_the_problem_the_kernel_sees():
    """260 x 8192 x 6000 bf16 by hand: unswapped 128 x 256 tiles are 3 x 32 = 96, each (128 + 256) rows of K = 6016
    (47 stages of 128) x 2 bytes; swapped 128 x 136 over 8192 x 260 are 64 x 2; a cluster or stream-K changes
    nothing; e4m3 is one byte an element."""
    row = {"m": 260, "n": 8192, "k": 6000, "swap_ab": False,
           "spec": {"bm": 128, "bn": 256, "bk": 128, "dtype": "bf16", "cluster": "2x1", "stream_k": 3}}
    assert plan.tile_bytes(row) == 96 * 384 * 6016 * 2
    assert plan.tile_bytes({**row, "swap_ab": True, "spec": {**row["spec"], "bn": 136}}) == 64 * 2 * 264 * 6016 * 2
    assert plan.tile_bytes({**row, "spec": {**row["spec"], "dtype": "e4m3"}}) == 96 * 384 * 6016


def test_the_feed_table_budgets_cublas_time_at_the_best_rate(tmp_path):
    """Two kernels of one task: the faster moves fewer bytes at a lower rate; the budget is cuBLAS's time at the best
    rate of the listed kernels."""
    base = {"task": "gemm:bf16:260x8192x6000", "m": 260, "n": 8192, "k": 6000, "checked_ok": True, "cublas_ms": 0.05}
    rows = [{**base, "label": "a", "swap_ab": False, "ms": 0.064,
             "spec": {"bm": 128, "bn": 256, "bk": 64, "dtype": "bf16"}},
            {**base, "label": "b", "swap_ab": True, "ms": 0.057,
             "spec": {"bm": 128, "bn": 136, "bk": 64, "dtype": "bf16", "cluster": "1x2"}}]
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = plan.feed_text(tmp_path)
    best = max(plan.tile_bytes(r) / (r["ms"] * 1e-3) for r in rows)
    assert f"budget {best * 0.05e-3 / 1e6:.0f} MB at {best / 1e12:.2f} TB/s" in text
    assert text.index("  b ") < text.index("  a ")  # fastest first


def test_after_a_crash_the_worker_restarts_without_the_kernel_or_the_task(tmp_path):
    out = runner.Out(tmp_path)
    for line in ("compiled in 3.0 s", "start gemm:bf16:1x2x3", "probe gemm:bf16:1x2x3 pick", "done gemm:bf16:1x2x3",
                 "start gemm:bf16:4x5x6", "probe gemm:bf16:4x5x6 pick", "probe gemm:bf16:4x5x6 p128x256/c1x2"):
        out.say(line)
    state = {"done": [], "exclude": {}, "compiled": False, "only": None}
    runner._after_failure(out, state, "hung")
    assert state["compiled"] and state["done"] == ["gemm:bf16:1x2x3"]
    assert list(state["exclude"]["gemm:bf16:4x5x6"]) == ["p128x256/c1x2"]
    out.say("start gemm:bf16:4x5x6")
    out.say("timing gemm:bf16:4x5x6 30 entries")
    runner._after_failure(out, state, "exit 139")
    assert "gemm:bf16:4x5x6" in state["done"]
    assert json.loads((tmp_path / "candidates.jsonl").read_text())["error"].startswith("the worker died at 'timing")


class _FakeCase:
    tol = 1e-2

    def __init__(self, torch, spec, m, n, k, seed, sm_count, swap_ab=False, operands=None, extra=None):
        if spec.cluster.value == "1x2":
            raise RuntimeError("a kernel that cannot run this shape")
        self.ours, self.d, self.extra = (lambda: None), operands.ref.clone(), extra

    def error(self, torch):
        return 0.0

    def unload(self):
        pass


class _FakeOperands:
    def __init__(self, torch, spec, m, n, k, seed=0):
        import torch as t

        self.baseline, self.call = (lambda: None), "fake"
        self.ref = t.ones(m, n)


def _fake_gpu(monkeypatch):
    import bench_epilogue

    import ptxgen.runtime.check.bench as bench

    monkeypatch.setattr(bench, "_Case", _FakeCase)
    monkeypatch.setattr(bench, "Operands", _FakeOperands)
    monkeypatch.setattr(runner, "_sync", lambda torch: None)
    monkeypatch.setattr(runner, "DEVICE", "cpu")

    def rotate(torch, fns, rounds, warmup=5, seed=0, batch_ms=1.0):  # kernels of known times: cuBLAS 1 ms, ours 1.25
        ms = {name: 1.0 if name.startswith("cublas") else 1.25 for name in fns}
        return ms, {name: [v] * rounds for name, v in ms.items()}

    monkeypatch.setattr(bench_epilogue, "rotate", rotate)


def test_a_gemm_task_writes_a_row_per_kernel_and_a_control_row(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    _fake_gpu(monkeypatch)
    task = {"kind": "gemm", "class": "issue9", "dtype": "bf16", "m": 64, "n": 64, "k": 7000}
    out = runner.Out(tmp_path)
    runner.run_gemm(torch, task, H100, SimpleNamespace(sm_count=132), out, {"pp64x256": "excluded: test"})
    rows = plan.read_rows(tmp_path / "candidates.jsonl")
    by = {r["label"]: r for r in rows}
    assert by["pick"]["ratio"] == pytest.approx(0.8) and by["pick"]["checked_ok"] and by["pick"]["chosen_by"]
    assert by["p128x256/c1x2"]["error"].startswith("RuntimeError") and by["pp64x256"]["error"] == "excluded: test"
    assert by["control"]["cublas_twin_over_cublas"] == 1.0 and by["control"]["pick_twin_over_pick"] == 1.0
    assert by["p128x256"]["predicted_us"] > 0 and by["p128x256/g4"]["predicted_us"] is None
    runner.run_gemm(torch, task, H100, SimpleNamespace(sm_count=132), out, {})  # a rerun replaces the task's rows
    assert len(plan.read_rows(tmp_path / "candidates.jsonl")) == len([r for r in rows if r["label"] != "pp64x256"]) + 1
    assert "mis-rank" not in plan.summary_text(tmp_path)  # every kernel 0.8: the pick is within 2% of the best


def test_a_fused_task_checks_each_chain_against_its_own_reference(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    _fake_gpu(monkeypatch)
    task = {"kind": "fused", "class": "fused", "dtype": "bf16", "m": 8, "n": 16, "k": 64}
    runner.run_fused(torch, task, H100, SimpleNamespace(sm_count=132), runner.Out(tmp_path), {})
    by = {r["label"]: r for r in plan.read_rows(tmp_path / "fused.jsonl")}
    assert by["plain"]["checked_ok"] and by["plain"]["over_base"] == 1.0
    # the fake kernels write A B^T without the chain: relu(x + bias) and gelu(x + bias) differ from it, so the check fails
    assert not by["relu"]["checked_ok"] and not by["gelu"]["checked_ok"] and by["relu"]["base"] == "plain"
    assert by["pp/gelu"]["base"] == "pp/plain"
    assert "FAILED" in plan.summary_text(tmp_path)


def _tool(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


def test_the_plan_command_counts_the_kernels_and_predict_writes_json_lines():
    proc = _tool("tools/exp_candidates.py", "plan")
    assert proc.returncode == 0, proc.stderr
    assert f"{len(plan.tasks())} tasks" in proc.stdout and "distinct kernels to compile" in proc.stdout
    proc = _tool("tools/exp_candidates.py", "predict", "--json")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and {r["task"] for r in rows} == {plan.task_id(t) for t in plan.tasks() if t["kind"] == "gemm"}
    assert _tool("tools/exp_candidates.py", "plan", "--device", "h300").returncode == 2  # argparse: bad usage


@pytest.mark.gpu
def test_one_task_on_the_gpu(tmp_path):
    proc = _tool("tools/exp_candidates_run.py", "--out", str(tmp_path), "--only", "gemm:bf16:4096x4096x4096", "--budget-s",
                 "150", timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["label"]: r for r in plan.read_rows(tmp_path / "candidates.jsonl")}
    assert rows["pick"]["checked_ok"] and 0.5 < rows["pick"]["ratio"] < 2.0
    assert 0.9 < rows["control"]["cublas_twin_over_cublas"] < 1.1
    assert (tmp_path / "summary.txt").read_text().startswith("GEMM tasks")
    assert json.loads((tmp_path / "env.json").read_text())["device"]["sm_count"] > 0


def test_without_a_gpu_the_run_exits_3(tmp_path):
    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

    try:
        require_gpu()
        pytest.skip("a GPU is present")
    except NoGPU:
        pass
    proc = _tool("tools/exp_candidates_run.py", "--out", str(tmp_path / "out"), "--only", "fused:")
    assert proc.returncode == 3, proc.stdout + proc.stderr


def test_a_kernel_that_breaks_the_context_stops_the_worker_for_a_restart(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    _fake_gpu(monkeypatch)
    monkeypatch.setattr(runner, "_context_ok", lambda torch: False)  # after the 1x2 kernel's failure the context is gone
    task = {"kind": "gemm", "class": "issue9", "dtype": "bf16", "m": 64, "n": 64, "k": 7000}
    out = runner.Out(tmp_path)
    with pytest.raises(SystemExit) as e:
        runner.run_gemm(torch, task, H100, SimpleNamespace(sm_count=132), out, {})
    assert e.value.code == runner.EXIT_STICKY
    assert runner._progress(out)[-1].startswith(f"sticky {plan.task_id(task)} p128x256/c1x2 RuntimeError: a kernel that")
    state = {"done": [], "exclude": {}, "compiled": True, "only": None}
    runner._after_failure(out, state, f"exit {runner.EXIT_STICKY}")
    why = state["exclude"][plan.task_id(task)]["p128x256/c1x2"]
    assert why == "its first launch left the CUDA context unusable (RuntimeError: a kernel that cannot run this shape)"
