"""ptxgen inside torch.distributed: tests/distributed_train.py (DDP and FSDP2 training with ptxgen's GEMMs against the
same model on torch's ops) launched with torchrun.

CPU tier: the script's argument handling and exit codes, and its harness on CPU (gloo, two ranks, torch's ops on both
sides, ``--cpu-selfcheck``: the process group, DDP/FSDP2 wrapping, the loss averaging, the comparisons and a control
that a perturbed run is caught; nothing about ptxgen's kernels). ``gpu`` tier: the real runs, one rank per visible GPU
(NCCL), eager and under torch.compile.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "distributed_train.py"


def _script():
    spec = importlib.util.spec_from_file_location("distributed_train", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _torchrun() -> list[str]:
    exe = Path(sys.executable).with_name("torchrun")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def test_arguments():
    mod = _script()
    args = mod.parse_args(["--modes", "fsdp", "--compile", "on", "--steps", "3"])
    assert args.modes == ("fsdp",) and args.compile == "on" and args.steps == 3
    assert mod.parse_args([]).modes == ("ddp", "fsdp")
    assert mod.parse_args(["--cpu-selfcheck", "--compile", "both"]).compile == "off"
    for bad in (["--modes", "ddp,zero3"], ["--modes", ","], ["--steps", "1"], ["--batch", "12"], ["--width", "100"],
                ["--compile", "maybe"]):
        with pytest.raises(SystemExit) as e:
            mod.parse_args(bad)
        assert e.value.code == 2


def test_exit_codes_without_torchrun():
    run = lambda *a: subprocess.run([sys.executable, str(SCRIPT), *a], capture_output=True, text=True, env=_env(),  # noqa: E731
                                    timeout=120)
    r = run("--modes", "zero3")
    assert r.returncode == 2 and "--modes" in r.stderr and "Traceback" not in r.stderr
    r = run("--cpu-selfcheck")  # no RANK in the environment: not started by torchrun
    assert r.returncode == 2 and "torchrun" in r.stderr and "Traceback" not in r.stderr


def test_compare_catches_what_it_must():
    """The comparison itself (no process group): agreement passes; a loss off by 3%, a weight off by more than the
    tolerance, a loss that does not fall, weights that did not move: each caught."""
    torch = pytest.importorskip("torch")

    mod = _script()
    init = {"w": torch.zeros(4, 4)}
    ref = {"w": torch.full((4, 4), 0.5)}
    losses = [1.0, 0.9, 0.8]
    assert mod.compare(losses, losses, ref, ref, init) == []
    assert "step 1" in mod.compare([1.0, 0.9 * 1.03, 0.8], losses, ref, ref, init)[0]
    assert "did not fall" in " ".join(mod.compare([1.0, 1.0], [1.0, 1.0], ref, ref, init))
    off = {"w": ref["w"] + 0.02}
    assert "max |difference|" in " ".join(mod.compare(losses, losses, off, ref, init))
    assert "moved" in " ".join(mod.compare(losses, losses, ref, ref, ref))


def test_harness_on_cpu_with_two_ranks():
    pytest.importorskip("torch")
    cmd = [*_torchrun(), "--standalone", "--nproc_per_node=2", str(SCRIPT), "--cpu-selfcheck", "--steps", "4"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 rank(s), gloo" in r.stdout
    for line in ("PASS ddp:", "PASS fsdp:", "PASS control"):
        assert line in r.stdout, r.stdout


@pytest.mark.gpu
def test_ddp_and_fsdp_training_on_every_gpu(gpu, artifact_dir):
    """One rank per visible GPU (NCCL): DDP and FSDP2, eager and compiled, loss within bf16 tolerance of torch's at
    every step and the final weights too; every ptxgen module on the rank's own device."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    n = torch.cuda.device_count()
    cmd = [*_torchrun(), "--standalone", f"--nproc_per_node={n}", str(SCRIPT), "--modes", "ddp,fsdp", "--compile", "both"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1800, cwd=ROOT)
    (artifact_dir / f"distributed_train_{n}gpu.log").write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert f"{n} rank(s), nccl" in r.stdout
    for line in ("PASS ddp:", "PASS ddp compiled:", "PASS fsdp:", "PASS fsdp compiled:"):
        assert line in r.stdout, r.stdout

