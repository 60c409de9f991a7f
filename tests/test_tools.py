"""tools/ explains itself: tools/README.md lists exactly what the folder holds, every maintained Python tool answers
``--help`` without a GPU, and tools/gpu_run.sh's steps name tools and flags that exist, exit 2 on an unknown step, and
pack their logs into at most 8 files (what a device call brings back). CPU only; each case a few seconds at most."""

import ast
import functools
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
README = TOOLS / "README.md"
LIBRARY_MODULES = {"ref/deepgemm_configs.py"}  # imported by other tools and tests; no command line of its own


def folder_entries(tools: Path = TOOLS) -> set[str]:
    """What tools/README.md must list: each file, each folder with a README.md of its own as ``name/``, and the files
    of a folder without one as ``folder/file``."""
    out = set()
    for p in tools.iterdir():
        if p.name in ("README.md", "__pycache__") or p.name.startswith("."):
            continue
        if p.is_dir():
            if (p / "README.md").exists():
                out.add(p.name + "/")
            else:
                out |= {f"{p.name}/{q.name}" for q in p.iterdir() if q.is_file() and q.name != "README.md"}
        else:
            out.add(p.name)
    return out


def listed_entries(text: str) -> set[str]:
    """The names in the first column of every table of a tools/README.md text (every backticked name there)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return names


def removed_entries(text: str) -> set[str]:
    section = text.split("## Removed in 0.2.0", 1)[1] if "## Removed in 0.2.0" in text else ""
    return set(re.findall(r"`([\w.]+\.(?:py|sh))`", section))


def test_the_readme_lists_every_tool_and_nothing_else():
    listed, present = listed_entries(README.read_text()), folder_entries()
    assert not present - listed, f"in tools/ but not in tools/README.md: {sorted(present - listed)}"
    assert not listed - present, f"in tools/README.md but not in tools/: {sorted(listed - present)}"


def test_the_list_check_catches_a_tool_the_readme_lacks(tmp_path):
    """Control: a planted tool (and a listed one that is gone) make the comparison above fail."""
    (tmp_path / "new_tool.py").write_text('"""x"""\n')
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "a.py").write_text("")
    text = "| `ref/a.py` | a | `x` |\n| `gone.py` | b | `y` |\n"
    assert folder_entries(tmp_path) - listed_entries(text) == {"new_tool.py"}
    assert listed_entries(text) - folder_entries(tmp_path) == {"gone.py"}


def test_removed_tools_are_gone():
    removed = removed_entries(README.read_text())
    assert removed, "the README's 'Removed in 0.2.0' section names no tool"
    assert not {r for r in removed if (TOOLS / r).exists()}


def python_tools() -> list[str]:
    return sorted(str(p.relative_to(TOOLS)) for p in TOOLS.rglob("*.py")
                  if "__pycache__" not in p.parts and str(p.relative_to(TOOLS)) not in LIBRARY_MODULES)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


@functools.lru_cache(maxsize=None)
def help_text(tool: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, str(TOOLS / tool), "--help"], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("tool", python_tools())
def test_each_python_tool_answers_help_without_a_gpu(tool):
    source = (TOOLS / tool).read_text()
    if re.search(r"^(?:import|from) torch\b", source, re.M):  # imported at the top: a GPU benchmark's dependency
        pytest.importorskip("torch", reason=f"tools/{tool} imports torch at the top (pip install '.[bench]')")
    rc, out = help_text(tool)
    assert rc == 0, f"tools/{tool} --help exited {rc}:\n{out[-2000:]}"
    doc = ast.get_docstring(ast.parse((TOOLS / tool).read_text()))
    first = (doc or "").strip().splitlines()[0] if doc else ""
    assert "usage:" in out or (first and first in out), f"tools/{tool} --help printed neither a usage nor its docstring"


def test_the_block_fp8_api_bench_refuses_a_bad_shape_and_no_gpu():
    """tools/bench_blockfp8_api.py: a shape that is not MxNxK exits 2 naming it, before any GPU work; with no GPU the
    tool exits 3 with one line, no traceback (a good shape gets past the parser to that check)."""
    env = {**_env(), "CUDA_VISIBLE_DEVICES": ""}  # no device, on a GPU machine too
    run = lambda *a: subprocess.run([sys.executable, str(TOOLS / "bench_blockfp8_api.py"), *a], cwd=ROOT, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    bad = run("--columns", "4096x7168")
    assert bad.returncode == 2 and "'4096x7168' is not MxNxK" in bad.stderr and "Traceback" not in bad.stderr
    good = run("--columns", "64x128x128", "--rounds", "1")
    assert good.returncode == 3 and "no usable NVIDIA GPU" in good.stderr and "Traceback" not in good.stderr


def test_the_cublas_kernel_lister_refuses_a_bad_shape_and_no_gpu():
    """tools/cublas_kernels.py: a shape that is not dtype:MxNxK exits 2 naming it, before any GPU work; with no GPU it
    exits 3 with one line, no traceback."""
    env = {**_env(), "CUDA_VISIBLE_DEVICES": ""}
    run = lambda *a: subprocess.run([sys.executable, str(TOOLS / "cublas_kernels.py"), *a], cwd=ROOT, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    bad = run("bf16:4096x7168")
    assert bad.returncode == 2 and "'bf16:4096x7168'" in bad.stderr and "Traceback" not in bad.stderr
    assert run("f32:64x64x64").returncode == 2
    good = run("e4m3:64x128x128")
    assert good.returncode == 3 and "no usable GPU" in good.stderr and "Traceback" not in good.stderr


@pytest.mark.parametrize("module", sorted(LIBRARY_MODULES))
def test_library_modules_import(module):
    proc = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(TOOLS / module)!r})"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---- tools/gpu_run.sh ----------------------------------------------------------------------------------------------

def gpu_run(*args, env=None, timeout=60):
    return subprocess.run(["bash", str(TOOLS / "gpu_run.sh"), *args], cwd=ROOT, env={**_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def steps() -> list[str]:
    proc = gpu_run("--list")
    assert proc.returncode == 0, proc.stderr
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def test_gpu_run_lists_its_steps_and_each_has_a_body():
    text = (TOOLS / "gpu_run.sh").read_text()
    names = steps()
    assert {"tests", "selftest", "bench-gemm", "bench-fused", "bench-blockfp8", "bench-grouped"} <= set(names)
    for name in names:
        assert f"step_{name.replace('-', '_')}()" in text, f"step {name} has no function"


def test_gpu_run_refuses_an_unknown_step_before_any_work(tmp_path):
    proc = gpu_run("tests", "no-such-step", env={"OUT": str(tmp_path / "out")})
    assert proc.returncode == 2 and "unknown step 'no-such-step'" in proc.stderr
    assert not (tmp_path / "out").exists()
    assert gpu_run().returncode == 2


def _cli_subcommands() -> set[str]:
    from ptxgen.cli import build_parser

    parser = build_parser()
    return {name for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict) for name in a.choices}


def test_gpu_run_dry_run_names_tools_and_flags_that_exist():
    """Every command of every step, printed by DRY_RUN=1: each tools/X.py exists and takes the --flags given to it
    (argparse tools: its --help names them); each `python3 -m ptxgen SUB` is a subcommand."""
    proc = gpu_run(*steps(), env={"DRY_RUN": "1"})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(lines) >= len(steps())
    subcommands = _cli_subcommands()
    for line in lines:
        for tool in re.findall(r"tools/([\w/]+\.py)", line):
            assert (TOOLS / tool).exists(), line
            if "python3 tools/" + tool not in line:
                continue  # a tool run under compute-sanitizer takes no flags here
            rc, help_out = help_text(tool)
            if "usage:" not in help_out:
                continue
            args = line.split("tools/" + tool, 1)[1].split(" > ")[0]
            for flag in re.findall(r"(?<!\S)(--[a-z][\w-]*)", args):
                assert flag in help_out, f"{line}\n  tools/{tool} has no {flag}"
        for sub in re.findall(r"python3 -m ptxgen (\w+)", line):
            assert sub in subcommands, line


def _fake_bin(tmp_path: Path, rc: int) -> Path:
    """python3, nvidia-smi and compute-sanitizer stand-ins: each prints its arguments and exits ``rc``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "nvidia-smi", "compute-sanitizer"):
        f = bin_dir / name
        f.write_text(f'#!/bin/sh\necho "{name} $*"\nexit {rc}\n')
        f.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("rc", [0, 1])
def test_gpu_run_packs_its_logs_into_two_files_and_reports_failures(tmp_path, rc):
    """With stand-ins for the GPU's commands: the logs come back as gpu_run.tgz and summary.txt (a device call brings
    back at most 8 files), every command's log is in the archive, and the exit status says whether one failed."""
    out = tmp_path / "out"
    env = {"OUT": str(out), "LOGS": str(tmp_path / "logs"), "PATH": f"{_fake_bin(tmp_path, rc)}:{os.environ['PATH']}"}
    proc = gpu_run("bench-fused", "bench-grouped", env=env, timeout=120)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["gpu_run.tgz", "summary.txt"] and len(files) <= 8
    with tarfile.open(out / "gpu_run.tgz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"bench_epilogue.log", "bench_grouped.log", "bench_grouped_blockfp8.log", "bench_batched.log", "env.txt"} <= names
    summary = (out / "summary.txt").read_text()
    assert f"bench_epilogue.log exit {rc}" in summary and "python3 tools/bench_epilogue.py" in summary
