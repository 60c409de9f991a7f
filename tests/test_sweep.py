"""ptxgen sweep: grids, sharding, the JSON report, and the ci grid itself (compile + SASS, no GPU)."""

import json
import os
import subprocess
import sys
import time

import pytest

from ptxgen.isa.shapes import REGISTER_RESERVE, consumer_register_budget
from ptxgen.sweep import FULL_SIZE, full_grid, load_grid, run_sweep, shard
from ptxgen.sweep.report import summary_table

CI = load_grid("ci").specs


def test_ci_grid_coverage():
    assert len(CI) >= 200
    assert {s.arch.value for s in CI} == {"sm_100a", "sm_90a"}
    for op in ("a", "b"):
        for arch in ("sm_100a", "sm_90a"):
            combos = {(s.operand(op).major.value, s.operand(op).swizzle.value) for s in CI if s.arch.value == arch}
            for major in ("k", "mn"):
                for swz in ("none", "sw32", "sw64", "sw128"):
                    assert (major, swz) in combos, (arch, op, major, swz)
        assert {s.operand(op).order.value for s in CI} == {"mn", "k"}
    assert {"f16", "bf16", "tf32", "e4m3"} <= {s.dtype.value for s in CI}
    assert len({s.bm for s in CI}) >= 3 and len({s.bn for s in CI}) >= 4 and len({s.bk for s in CI}) >= 3
    assert len({s.stages for s in CI}) >= 3
    assert any(s.smem_offset for s in CI)


def one_loader_only(s) -> bool:
    """Features that exist with one loader, by the spec's rules: block scaling, CTA pairs, grouped GEMM, fused
    epilogue chains, block FP8, split-K and batched GEMM (3-D maps) load with TMA; 8-/4-byte copies are cp.async's;
    ping-pong tiles whose accumulators need the setmaxnreg budget (TMA's producer gives registers back, cp.async's
    cannot) exist with TMA."""
    wide = (s.consumers.value == "pingpong"
            and s.consumer_accumulator_registers + REGISTER_RESERVE > consumer_register_budget(s.consumer_warpgroups))
    return (s.block_scaled or s.cta_group == 2 or s.grouped.value != "none" or s.fuse is not None
            or s.fp8_blocks.value != "none" or s.split_k > 1 or s.copy_bytes != 16 or s.batch.value != "none" or wide)


def test_ci_grid_covers_the_newer_features():
    """Split-K, grouped GEMM (plain, FP8 row-wise, K-grouped plain and FP8 row-wise), fused chains (FP8 output too), block
    FP8 and 8-/4-byte copies."""
    assert {s.split_k for s in CI} >= {1, 2, 4}
    assert {s.grouped.value for s in CI} == {"none", "offs", "offs_rowwise", "offs_k", "offs_k_rowwise"}
    assert {s.fp8_blocks.value for s in CI} == {"none", "1x128x128", "1x128x1x128"}
    assert {s.copy_bytes for s in CI} == {16, 8, 4}
    assert {(s.arch.value, s.batch.value) for s in CI if s.batch.value != "none"} == {
        (arch, b) for arch in ("sm_90a", "sm_100a") for b in ("a", "ab")}
    fused = [s for s in CI if s.fuse is not None]
    assert {s.arch.value for s in fused} == {"sm_90a", "sm_100a"} and {s.epilogue.value for s in fused} == {"direct", "tma"}
    assert any(s.out_dtype.value == "e4m3" for s in fused)
    assert {s.loader.value for s in CI if s.copy_bytes != 16} == {"cp.async"}


def test_ci_grid_covers_both_loaders():
    """Every product runs with TMA and with cp.async: the same tiles, each loader with every swizzle and major
    on both archs, and off-boundary rings (where the two loaders' base-offset rules differ). What exists with one
    loader only (CTA pairs, block scaling, the newer features: ``one_loader_only``) is counted apart."""
    by_loader = {}
    dense = [s for s in CI if not one_loader_only(s)]
    assert {s.loader.value for s in CI if s.block_scaled} == {"tma"}
    assert {s.mma_kind for s in CI if s.block_scaled} == {"mxf8f6f4", "mxf4", "mxf4nvf4"}
    pairs = [s for s in CI if s.cta_group == 2]
    for s in dense:
        by_loader.setdefault(s.loader.value, set()).add(s.kernel_name.replace("_cpasync", ""))
    assert set(by_loader) == {"tma", "cp.async"}
    assert by_loader["tma"] == by_loader["cp.async"] and len(by_loader["tma"]) * 2 == len(dense)
    assert pairs and {s.loader.value for s in pairs} == {"tma"} and {s.bm for s in pairs} == {128, 256}
    for loader in ("tma", "cp.async"):
        specs = [s for s in CI if s.loader.value == loader]
        for op in ("a", "b"):
            for arch in ("sm_100a", "sm_90a"):
                combos = {(s.operand(op).major.value, s.operand(op).swizzle.value) for s in specs if s.arch.value == arch}
                assert {(m, z) for m in ("k", "mn") for z in ("none", "sw32", "sw64", "sw128")} <= combos, (loader, arch, op)
        assert {s.arch.value for s in specs if s.smem_offset} == {"sm_100a", "sm_90a"}, loader
        assert {"f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8"} <= {s.dtype.value for s in specs}, loader


def test_sharding_is_a_deterministic_partition():
    parts = [shard(CI, f"{i}/3") for i in (1, 2, 3)]
    names = [s.kernel_name for p in parts for s in p]
    assert sorted(names) == sorted(s.kernel_name for s in CI) and len(set(names)) == len(names)
    assert [s.kernel_name for s in shard(CI, "2/3")] == [s.kernel_name for s in parts[1]]
    with pytest.raises(ValueError):
        shard(CI, "4/3")


@pytest.mark.slow
def test_full_grid_is_every_legal_config_of_its_domain():
    g = full_grid()
    assert len(g.specs) == FULL_SIZE and g.dropped > 0
    assert len({s.kernel_name for s in g.specs}) == len(g.specs)
    tma = sum(s.loader.value == "tma" for s in g.specs)
    assert tma * 2 == len(g.specs)  # every legal tile with both loaders


def test_sweep_reports_a_failing_check(monkeypatch):
    """Control: a model check that finds a problem makes the configuration, and the summary, fail."""
    import ptxgen.model.bridges.verify

    specs = [s for s in CI if s.bm == 128 and s.bn == 128][:2]
    ok = run_sweep(specs, jobs=1, compile=False, run=False, progress=False)
    assert ok["summary"] == {"total": 2, "passed": 2, "failed": 0, "skipped": 0}
    monkeypatch.setattr(ptxgen.model.bridges.verify, "check_tile", lambda t, **kw: ["planted problem"])
    bad = run_sweep(specs, jobs=1, compile=False, run=False, progress=False)
    assert bad["summary"]["failed"] == 2 and all(c["error"] == "planted problem" for c in bad["configs"])
    assert "FAIL " in summary_table(bad) and "FAIL " not in summary_table(ok)


def test_sweep_list_and_no_compile_cli(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--list"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    n_cpasync_apart = sum(one_loader_only(s) and s.loader.value == "cp.async" for s in CI)
    n_apart = sum(one_loader_only(s) for s in CI)
    assert len(lines) == len(CI)
    assert (sum("--loader cp.async" in line for line in lines) - n_cpasync_apart) * 2 == len(CI) - n_apart
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--no-compile", "--shard", "1/41",
                           "--jobs", "1", "--json", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r = json.loads(out.read_text())
    assert r["summary"]["failed"] == 0 and r["summary"]["total"] == len(shard(CI, "1/41"))
    assert {c["spec"]["loader"] for c in r["configs"]} == {"tma", "cp.async"}
    assert all(c["checks"] == {"model": "pass", "compile": "skipped", "sass": "skipped", "run": "skipped"} for c in r["configs"])


def test_sweep_cli_on_a_toml_grid(tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text('[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = 128\nbn = 64\nbk = [32, 48]\na = "kmajor-sw64"\n'
                    'b = ["kmajor-sw32", "kmajor-sw128"]  # kmajor-sw128: rows of 64 or 96 B, illegal here\nloader = ["tma", "cp.async"]\n')
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", str(grid), "--json", str(out), "--jobs", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r = json.loads(out.read_text())
    assert r["summary"] == {"total": 4, "passed": 4, "failed": 0, "skipped": 0}
    c = r["configs"][0]
    assert set(c) == {"kernel_name", "spec", "checks", "seconds", "error", "sha256"}
    assert c["checks"] == {"model": "pass", "compile": "pass", "sass": "pass", "run": "skipped"}
    assert sorted(c["spec"]["loader"] for c in r["configs"]) == ["cp.async", "cp.async", "tma", "tma"]
    assert all(("_cpasync" in c["kernel_name"]) == (c["spec"]["loader"] == "cp.async") for c in r["configs"])
    assert "cp.async" in proc.stdout and "tma" in proc.stdout  # the summary table has a row per loader
    assert "illegal combinations dropped" in proc.stderr


@pytest.mark.slow
def test_ci_sweep_passes_without_a_gpu(tmp_path):
    """The whole ci grid: read model, NVRTC and SASS for every configuration (the slow tier: `pytest -m slow`)."""
    out = tmp_path / "ci.json"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--jobs", str(min(2, os.cpu_count() or 1)),
                           "--json", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = json.loads(out.read_text())
    assert r["summary"]["failed"] == 0 and r["summary"]["total"] == len(CI)


# The everyday run sweeps a sample of the ci grid that holds every value of every spec field on each arch, and every
# value of every field with each loader: the same values as the whole grid, in a few percent of its configurations.
# Every value on each (arch, loader) pair (a 96-configuration cover) is left to the slow tier's whole ci sweep.
def _features(spec) -> set:
    j = {**spec.to_json(), "loader": spec.loader.value}
    arch, loader = j["arch"], j["loader"]
    return {f for k, v in j.items() for f in ((arch, k, str(v)), (loader, k, str(v)))}


def covering_sample(specs) -> list:
    """Greedy set cover of the (arch, [loader,] field, value) features of ``specs``; deterministic."""
    feats = [_features(s) for s in specs]
    need, chosen = set().union(*feats), []
    while need:
        i = max(range(len(specs)), key=lambda j: (len(feats[j] & need), -j))
        chosen.append(i)
        need -= feats[i]
    # greedy can leave a passenger (a pick whose features later picks cover): drop them, latest first
    whole = set().union(*feats)
    for i in reversed(list(chosen)):
        rest = [j for j in chosen if j != i]
        if rest and set().union(*(feats[j] for j in rest)) == whole:
            chosen = rest
    return [specs[i] for i in chosen]


SAMPLE = covering_sample(CI)
CHUNK = 10


def test_the_sample_covers_every_feature_of_the_ci_grid():
    assert set().union(*map(_features, SAMPLE)) == set().union(*map(_features, CI))
    assert len(SAMPLE) < len(CI) / 10
    # control: dropping any sampled configuration loses a feature (the greedy cover has no passengers)
    whole = set().union(*map(_features, CI))
    for i in range(len(SAMPLE)):
        assert set().union(*map(_features, SAMPLE[:i] + SAMPLE[i + 1:])) != whole or len(SAMPLE) == 1


@pytest.mark.parametrize("start", range(0, len(SAMPLE), CHUNK))
def test_ci_sample_sweeps_clean(start):
    """Read model, NVRTC and SASS for a slice of the feature-covering sample (slices spread over xdist workers)."""
    r = run_sweep(SAMPLE[start:start + CHUNK], jobs=1, compile=True, run=False, progress=False)
    bad = [(c["kernel_name"], c["error"]) for c in r["configs"] if c["error"]]
    assert r["summary"]["failed"] == 0, bad


# ------------------------------------------------------------------------------------------------
# CI shards: --merge, --list-dropped, --resume, Ctrl-C, the --json target
from ptxgen.cli import main  # noqa: E402
from ptxgen.sweep.report import seal  # noqa: E402

# the shard/merge tests: two products, so that the shards hold configurations of both (no compile, quick)
MERGE_GRID = ('[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = [64, 128]\nbn = [64, 128, 256]\nbk = [32, 64]\na = "kmajor-sw64"\n'
              'b = ["kmajor-sw128", "mnmajor-sw64"]\nloader = ["tma", "cp.async"]\n')
SMALL = ('[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = 128\nbn = [64, 128]\nbk = [32, 48]\na = "kmajor-sw64"\n'
         'b = ["kmajor-sw32", "kmajor-sw128"]  # kmajor-sw128: rows of 64 or 96 B, illegal here\nloader = ["tma", "cp.async"]\n')


def _shards(tmp_path, n=3):
    paths, grid = [], str(_toml(tmp_path, MERGE_GRID, "merge.toml"))
    for i in range(1, n + 1):
        p = tmp_path / f"shard-{i}.json"
        assert main(["sweep", "--grid", grid, "--no-compile", "--jobs", "1", "--shard", f"{i}/{n}", "--json", str(p)]) == 0
        paths.append(str(p))
    return paths


def test_merge_checks_every_shard_once(tmp_path, capsys):
    paths = _shards(tmp_path)
    size = len(load_grid(str(tmp_path / "merge.toml")).specs)
    r = json.loads(open(paths[0]).read())
    assert r["shard"] == "1/3" and r["grid"] == "merge" and r["grid_size"] == size and not r["partial"]
    assert r["kernel_names"] == sorted(c["kernel_name"] for c in r["configs"])
    capsys.readouterr()
    assert main(["sweep", "--merge", *paths]) == 0
    assert f"total {size}: {size} passed" in capsys.readouterr().out
    assert main(["sweep", "--merge", *paths[:2]]) == 1
    assert "shard 3/3 is missing" in capsys.readouterr().err
    assert main(["sweep", "--merge", paths[0], *paths]) == 1
    assert "shard 1/3 appears 2 times" in capsys.readouterr().err


def test_merge_fails_on_a_failed_config_and_refuses_junk(tmp_path, capsys):
    paths = _shards(tmp_path, 2)
    r = json.loads(open(paths[1]).read())
    r["configs"][0]["checks"]["model"] = "fail"
    r["configs"][0]["error"] = "planted"
    r["configs"][0] = seal(r["configs"][0])  # a failure the sweep recorded (an unsealed edit is refused: test_hostile)
    open(paths[1], "w").write(json.dumps(r))
    assert main(["sweep", "--merge", *paths]) == 1
    assert "FAIL " in capsys.readouterr().out
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert main(["sweep", "--merge", str(junk)]) == 2
    assert "cannot read a sweep report" in capsys.readouterr().err
    other = tmp_path / "other.json"
    assert main(["sweep", "--grid", str(_toml(tmp_path)), "--no-compile", "--jobs", "1", "--json", str(other)]) == 0
    assert main(["sweep", "--merge", paths[0], str(other)]) == 2  # another grid: refused, nothing merged
    assert "its grid_sha256 is" in capsys.readouterr().err


def _toml(tmp_path, text=SMALL, name="small.toml"):
    g = tmp_path / name
    g.write_text(text)
    return g


def test_list_dropped_names_each_reason(tmp_path, capsys):
    assert main(["sweep", "--grid", str(_toml(tmp_path)), "--list-dropped"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == load_grid(str(tmp_path / "small.toml")).dropped > 0
    assert all("is illegal" in line for line in lines)
    assert any("b=kmajor-sw128" in line for line in lines)


def test_resume_skips_what_a_partial_report_has(tmp_path, capsys):
    g = _toml(tmp_path)
    full = tmp_path / "full.json"
    assert main(["sweep", "--grid", str(g), "--no-compile", "--jobs", "1", "--json", str(full)]) == 0
    r = json.loads(full.read_text())
    kept = r["configs"][:3]
    for i, c in enumerate(kept):
        c["error"] = "from the partial run"  # marks the results that were not recomputed
        kept[i] = seal(c)  # as the sweep writes it (an unsealed edit is run again: test_hostile)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({**r, "configs": kept, "partial": True}))
    out = tmp_path / "resumed.json"
    capsys.readouterr()
    assert main(["sweep", "--grid", str(g), "--no-compile", "--jobs", "1", "--resume", str(partial), "--json", str(out)]) == 0
    assert "3 already in" in capsys.readouterr().err
    res = json.loads(out.read_text())
    assert [c["kernel_name"] for c in res["configs"]] == r["kernel_names"] and not res["partial"]
    assert sum(c["error"] == "from the partial run" for c in res["configs"]) == 3


@pytest.mark.parametrize("target, fragment", [("DIR", "is a directory"), ("DIR/missing/r.json", "does not exist")])
def test_bad_json_target_is_refused_before_the_sweep(tmp_path, capsys, monkeypatch, target, fragment):
    import ptxgen.sweep

    def no_sweep(*a, **kw):
        raise AssertionError("the sweep ran before the --json target was checked")

    monkeypatch.setattr(ptxgen.sweep, "run_sweep", no_sweep)
    assert main(["sweep", "--grid", "ci", "--json", target.replace("DIR", str(tmp_path))]) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_json_target_is_refused(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["sweep", "--grid", "ci", "--json", str(ro / "r.json")]) == 2
        assert "no permission" in capsys.readouterr().err
    finally:
        ro.chmod(0o700)


def test_ctrl_c_stops_a_parallel_sweep_and_writes_a_partial_report(tmp_path):
    import signal

    g = tmp_path / "slow.toml"
    g.write_text('[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = [64, 128]\nbn = [64, 128, 256]\nbk = [32, 64]\n'
                 'a = "kmajor-sw64"\nb = "kmajor-sw128"\nloader = ["tma", "cp.async"]\n')
    out = tmp_path / "partial.json"
    env = dict(os.environ, PTXGEN_NO_CACHE="1")  # every config compiles: a warm cubin cache would finish before Ctrl-C
    # SIGINT at its default in the child: a pytest started in the background by a non-interactive shell inherits it
    # ignored, and Python then installs no KeyboardInterrupt handler (the sweep would run to the end and exit 0)
    proc = subprocess.Popen([sys.executable, "-m", "ptxgen", "sweep", "--grid", str(g), "--jobs", "2", "--json", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4)
    assert proc.poll() is None, "the sweep finished before Ctrl-C"
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)  # a guard against a hang, not a measurement
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode in (1, 130), err
    r = json.loads(out.read_text())
    assert r["partial"] is True and len(r["configs"]) < len(r["kernel_names"]) and "interrupted" in err
