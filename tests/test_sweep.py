"""ptxgen sweep: grids, sharding, the JSON report, and the ci grid itself (compile + SASS, no GPU)."""

import json
import os
import subprocess
import sys
import time

import pytest

from ptxgen.sweep import FULL_SIZE, full_grid, load_grid, run_sweep, shard, summary_table

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


def test_ci_grid_covers_both_loaders():
    """Every product runs with TMA and with cp.async: the same tiles, each loader with every swizzle and major
    on both archs, and off-boundary rings (where the two loaders' base-offset rules differ)."""
    by_loader = {}
    for s in CI:
        by_loader.setdefault(s.loader.value, set()).add(s.kernel_name.replace("_cpasync", ""))
    assert set(by_loader) == {"tma", "cp.async"}
    assert by_loader["tma"] == by_loader["cp.async"] and len(by_loader["tma"]) * 2 == len(CI)
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


def test_full_grid_is_every_legal_config_of_its_domain():
    g = full_grid()
    assert len(g.specs) == FULL_SIZE and g.dropped > 0
    assert len({s.kernel_name for s in g.specs}) == len(g.specs)
    tma = sum(s.loader.value == "tma" for s in g.specs)
    assert tma * 2 == len(g.specs)  # every legal tile with both loaders


def test_sweep_reports_a_failing_check(monkeypatch):
    """Control: a model check that finds a problem makes the configuration, and the summary, fail."""
    import ptxgen.model.verify

    specs = [s for s in CI if s.bm == 128 and s.bn == 128][:2]
    ok = run_sweep(specs, jobs=1, compile=False, run=False, progress=False)
    assert ok["summary"] == {"total": 2, "passed": 2, "failed": 0, "skipped": 0}
    monkeypatch.setattr(ptxgen.model.verify, "check_tile", lambda t, **kw: ["planted problem"])
    bad = run_sweep(specs, jobs=1, compile=False, run=False, progress=False)
    assert bad["summary"]["failed"] == 2 and all(c["error"] == "planted problem" for c in bad["configs"])
    assert "FAIL " in summary_table(bad) and "FAIL " not in summary_table(ok)


def test_sweep_list_and_no_compile_cli(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--list"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(CI) and sum("--loader cp.async" in line for line in lines) * 2 == len(CI)
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
                    'b = ["kmajor-sw32", "mnmajor-sw256"]\nloader = ["tma", "cp.async"]\n')
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", str(grid), "--json", str(out), "--jobs", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r = json.loads(out.read_text())
    assert r["summary"] == {"total": 4, "passed": 4, "failed": 0, "skipped": 0}
    c = r["configs"][0]
    assert set(c) == {"kernel_name", "spec", "checks", "seconds", "error"}
    assert c["checks"] == {"model": "pass", "compile": "pass", "sass": "pass", "run": "skipped"}
    assert sorted(c["spec"]["loader"] for c in r["configs"]) == ["cp.async", "cp.async", "tma", "tma"]
    assert all(("_cpasync" in c["kernel_name"]) == (c["spec"]["loader"] == "cp.async") for c in r["configs"])
    assert "cp.async" in proc.stdout and "tma" in proc.stdout  # the summary table has a row per loader
    assert "illegal combinations dropped" in proc.stderr


@pytest.mark.slow
def test_ci_sweep_passes_without_a_gpu(tmp_path):
    """The whole ci grid: read model, NVRTC and SASS for every configuration, in under 10 minutes."""
    out = tmp_path / "ci.json"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", "ci", "--jobs", str(min(2, os.cpu_count() or 1)),
                           "--json", str(out)], capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = json.loads(out.read_text())
    assert r["summary"]["failed"] == 0 and r["summary"]["total"] == len(CI)
    assert elapsed < 600, elapsed
