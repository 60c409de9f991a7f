"""ptxgen sweep: grids, sharding, the JSON report, and the ci grid itself (compile + SASS, no GPU)."""

import json
import os
import subprocess
import sys
import time

import pytest

from ptxgen.sweep import full_grid, load_grid, shard

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


def test_sharding_is_a_deterministic_partition():
    parts = [shard(CI, f"{i}/3") for i in (1, 2, 3)]
    names = [s.kernel_name for p in parts for s in p]
    assert sorted(names) == sorted(s.kernel_name for s in CI) and len(set(names)) == len(names)
    assert [s.kernel_name for s in shard(CI, "2/3")] == [s.kernel_name for s in parts[1]]
    with pytest.raises(ValueError):
        shard(CI, "4/3")


def test_full_grid_is_every_legal_config_of_its_domain():
    g = full_grid()
    assert len(g.specs) > 10000 and g.dropped > 0
    assert len({s.kernel_name for s in g.specs}) == len(g.specs)


def test_sweep_cli_on_a_toml_grid(tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text('[[product]]\narch = ["sm_100a", "sm_90a"]\nbm = 128\nbn = 64\nbk = [32, 48]\na = "kmajor-sw64"\n'
                    'b = ["kmajor-sw32", "mnmajor-sw256"]\n')
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "sweep", "--grid", str(grid), "--json", str(out), "--jobs", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r = json.loads(out.read_text())
    assert r["summary"] == {"total": 2, "passed": 2, "failed": 0, "skipped": 0}
    c = r["configs"][0]
    assert set(c) == {"kernel_name", "spec", "checks", "seconds", "error"}
    assert c["checks"] == {"model": "pass", "compile": "pass", "sass": "pass", "run": "skipped"}
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
