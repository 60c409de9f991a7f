"""`ptxgen selftest` (issue 19): exit codes, the order of the ladder and the report, on the CPU (the GPU steps run
on the H200 / a B200: `python3 -m ptxgen selftest`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.runtime import selftest
from ptxgen.runtime.gpu import Device

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", "selftest", *args], capture_output=True, text=True, cwd=ROOT)


def test_without_a_gpu_exit_3():
    pytest.importorskip("cuda.bindings")
    from ptxgen.runtime.gpu import NoGPU, require_gpu

    try:
        require_gpu()
        pytest.skip("a GPU is present")
    except NoGPU:
        pass
    r = _run()
    assert r.returncode == 3 and "ptxgen selftest:" in r.stderr and "Traceback" not in r.stderr


def test_the_ladder_climbs_in_order():
    """Probes before GEMMs, simple GEMMs before clusters and pairs, each half on its own."""
    names = [(s.half, s.name) for s in selftest.steps()]
    hopper = [n for h, n in names if h == "hopper"]
    assert hopper[0].startswith("wgmma read model") and hopper[1].startswith("TMA write model")
    assert hopper.index("GEMM f16, one tile per CTA, TMA loads") < next(i for i, n in enumerate(hopper) if "cluster" in n)
    black = [n for h, n in names if h == "blackwell"]
    assert black[0].startswith("TMA write model") and "pair" in " ".join(black[-3:])
    assert [h for h, _ in names] == sorted((h for h, _ in names), key=lambda h: h != "hopper")  # Hopper half first


def _fake(monkeypatch, cc, results):
    """A device of compute capability ``cc`` and step runners that return ``results`` in turn (the runners are
    what the GPU runs; here the report and the exit code are under test)."""
    from ptxgen.runtime import commands, gpu

    dev = Device(0, "Fake GPU", cc, None, None, 132)
    monkeypatch.setattr(gpu, "require_gpu", lambda index=0: dev)
    it = iter(results)
    real = selftest.steps()
    monkeypatch.setattr(selftest, "steps", lambda: [selftest.Step(s.half, s.level, s.name, (lambda: next(it)) if s.run else None,
                                                                 s.why_not) for s in real])
    return commands


def test_on_hopper_the_blackwell_half_needs_10x(monkeypatch, capsys):
    commands = _fake(monkeypatch, (9, 0), [(selftest.PASS, "ok")] * 50)
    rc = commands.cmd_selftest(type("A", (), {"json": None})())
    out = capsys.readouterr().out
    assert rc == 0
    black = [ln for ln in out.splitlines() if "SKIP" in ln]
    assert black and all(selftest.NEEDS_10X in ln for ln in black)
    assert len(black) == sum(s.half == "blackwell" for s in selftest.steps())
    assert "compute capability 9.0" in out and "every step that ran agrees (exit 0)" in out


def test_a_disagreement_is_exit_1(monkeypatch, capsys):
    commands = _fake(monkeypatch, (9, 0), [(selftest.PASS, "ok"), (selftest.FAIL, "3 of 40 copies elsewhere")] + [(selftest.PASS, "ok")] * 50)
    rc = commands.cmd_selftest(type("A", (), {"json": None})())
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL" in out and "3 of 40 copies elsewhere" in out and "DISAGREEMENT" in out


def test_on_blackwell_the_hopper_half_is_skipped_and_missing_runners_are_named(monkeypatch, capsys, tmp_path):
    import json

    commands = _fake(monkeypatch, (10, 0), [(selftest.PASS, "ok")] * 50)
    out_json = tmp_path / "r.json"
    rc = commands.cmd_selftest(type("A", (), {"json": str(out_json)})())
    out = capsys.readouterr().out
    assert rc == 0 and "needs compute capability 9.0" in out and "NOT RUN" not in out
    rep = json.loads(out_json.read_text())
    assert rep["failed"] == 0 and rep["compute_capability"] == "10.0"
    assert {s["status"] for s in rep["steps"] if s["half"] == "blackwell"} == {"PASS"}  # every step has a runner now
