"""`ptxgen selftest` (issue 19): exit codes, the order of the ladder and the report, on the CPU (the GPU steps run
on the H200 / a B200: `python3 -m ptxgen selftest`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.runtime.check import selftest
from ptxgen.runtime.launch.gpu import Device

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", "selftest", *args], capture_output=True, text=True, cwd=ROOT)


def test_without_a_gpu_exit_3():
    pytest.importorskip("cuda.bindings")
    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

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
    from ptxgen.runtime import commands
    from ptxgen.runtime.launch import gpu

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


# ---- TMEM contention (issue 37, F2): the arithmetic on the CPU, the hang as a finding -------------------------------
SMEM_PER_SM, RESERVED_PER_BLOCK, THREADS_PER_SM, REGS_PER_SM = 233472, 1024, 2048, 65536  # CUDA guide, cc 10.0


def _fit_by_hand(smem: int, threads: int, regs: int) -> int:
    """CTAs per SM written out here, not through ptxgen.derive.roles.tmemfit: shared memory in 128-byte granules plus the
    1 KB a block reserves, threads, and registers given to warps in 256s."""
    by_smem = SMEM_PER_SM // ((smem + 127) // 128 * 128 + RESERVED_PER_BLOCK)
    warps = (threads + 31) // 32
    by_regs = REGS_PER_SM // (warps * ((regs * 32 + 255) // 256 * 256))
    return min(by_smem, THREADS_PER_SM // threads, by_regs)


def test_the_contention_kernel_asks_for_more_tmem_than_an_sm_has():
    """columns x CTAs per SM > 512 for the selftest's kernel: shared memory and threads from the derived plan, the
    registers from the SASS NVRTC gives (compiled here, on the CPU)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.compile.artifacts import generate

    spec = make_spec(**selftest.CONTENTION)
    plan = plan_kernel(spec)
    regs = generate(spec).sass.registers
    fit = _fit_by_hand(plan.abi.dynamic_smem_bytes, plan.pipeline.threads, regs)
    cols = spec.tmem_alloc_columns
    assert spec.pair and cols * fit > 512, (cols, fit, regs)
    assert selftest.contention_fit(spec, regs) == (cols, fit)
    # control: the kernel the step used before could not contend, whatever its registers (1 a thread: the most CTAs):
    # 128 columns x 3 CTAs = 384
    old = make_spec(**selftest.PAIR)
    old_plan = plan_kernel(old)
    assert old.tmem_alloc_columns * _fit_by_hand(old_plan.abi.dynamic_smem_bytes, old_plan.pipeline.threads, 1) == 384


def test_the_contention_step_refuses_a_kernel_that_cannot_contend(monkeypatch):
    from ptxgen.runtime.compile import artifacts

    class _Art:
        class sass:  # noqa: N801 - a stand-in for the SASS report's register count
            registers = 80

    monkeypatch.setattr(artifacts, "generate", lambda spec: _Art)
    status, detail = selftest._tmem_contention(selftest.PAIR, 4096, 4096, 512, 1)()
    assert status == selftest.FAIL and "cannot contend" in detail and "384" in detail


def test_a_hang_is_reported_as_a_finding():
    status, detail = selftest.run_with_timeout([sys.executable, "-c", "import time; time.sleep(30)"], 1, "a sleeper")
    assert status == selftest.FAIL and "HANG" in detail and "finding" in detail
    assert selftest.run_with_timeout([sys.executable, "-c", "print('ok')"], 30, "x") == (selftest.PASS, "ok")
    status, detail = selftest.run_with_timeout([sys.executable, "-c", "import sys; sys.exit(1)"], 30, "x")
    assert status == selftest.FAIL and "exit 1" in detail
