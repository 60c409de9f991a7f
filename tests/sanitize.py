"""compute-sanitizer over a case script in a process of its own (the GPU tier's sanitizer tests share this).

A case script under tests/ runs one kernel against a reference and prints one JSON line with ``"passed": true`` when it
holds; :func:`check_case` runs it under ``tool`` (memcheck, racecheck or synccheck), appends the tail of the output to
``artifact_dir / log_name`` and asserts a clean report."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parent


def check_case(case: str, tool: str, artifact_dir: Path, log_name: str, args: tuple[str, ...] = ()) -> None:
    san = next((p for p in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer")
                if p and Path(p).exists()), None)
    if san is None:
        pytest.skip("compute-sanitizer not installed")
    path = CASES / case
    # --report-api-errors no: cuda-bindings' driver symbol lookup makes host-side cuGetProcAddress errors under memcheck
    # in a torch process (docs/validation.md, the fused flagship); kernel errors are still reported
    cmd = [san, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", "99", sys.executable, str(path), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    with open(artifact_dir / log_name, "a") as f:
        f.write(f"$ {' '.join(cmd[1:5])} {path.name} {' '.join(args)}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}\n"
                f"exit {proc.returncode}\n\n")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert '"passed": true' in proc.stdout
    clean = "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    assert clean in text, text[-3000:]
