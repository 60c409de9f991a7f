"""The GitHub Actions workflow: it parses, its jobs are the ones CI needs, and every ptxgen command it runs exists
and works (on the ci grid without compiling, instead of the full grid)."""

import glob
import re
import shlex
from pathlib import Path

import pytest

from ptxgen.cli import build_parser, main

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "ci.yml"
TEXT = WORKFLOW.read_text(encoding="utf-8")


def _load():
    try:
        import yaml
    except ImportError:
        return None
    return yaml.safe_load(TEXT)


def test_workflow_is_well_formed_yaml():
    assert "\t" not in TEXT, "tabs are not allowed in YAML indentation"
    for n, line in enumerate(TEXT.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, f"line {n}: odd indentation"
    doc = _load()
    if doc is not None:
        assert set(doc["jobs"]) == {"test", "full-grid", "merge"}
        assert doc["jobs"]["merge"]["needs"] == "full-grid"


def test_workflow_jobs():
    for needle in ("runs-on: ubuntu-latest", 'python-version: "3.11"', "run: bash .ci/run", "actions/upload-artifact@v4",
                   "actions/download-artifact@v4", "needs: full-grid"):
        assert needle in TEXT, needle


def _shards() -> list[int]:
    m = re.search(r"shard: \[([0-9, ]+)\]", TEXT)
    return [int(x) for x in m.group(1).split(",")]


def _ptxgen_commands(shard: int = 1) -> list[list[str]]:
    """Each ``ptxgen ...`` line the workflow runs, as an argv for ptxgen.cli.main, with the matrix value filled in."""
    lines = [line.strip().removeprefix("run:").strip() for line in TEXT.splitlines()]
    return [shlex.split(line.replace("${{ matrix.shard }}", str(shard)))[1:] for line in lines if line.startswith("ptxgen ")]


def test_shard_count_matches_the_matrix():
    shards = _shards()
    assert shards == list(range(1, len(shards) + 1))
    sweep = [c for c in _ptxgen_commands() if "--shard" in c]
    assert sweep and all(c[c.index("--shard") + 1].endswith(f"/{len(shards)}") for c in sweep)


def test_every_workflow_command_parses():
    cmds = _ptxgen_commands()
    assert len(cmds) == 2
    for argv in cmds:
        build_parser().parse_args(argv)  # SystemExit on an unknown flag


@pytest.mark.slow
def test_workflow_commands_run_on_the_ci_grid(tmp_path, monkeypatch):
    """The shard commands (ci grid, no compile, instead of the full grid with compile), then the merge."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    merge_cmd = _ptxgen_commands()[1]
    for i in _shards():
        argv = _ptxgen_commands(i)[0]
        argv[argv.index("full")] = "ci"
        assert main(argv + ["--no-compile"]) == 0
    merge = merge_cmd[: merge_cmd.index("reports/*.json")] + sorted(glob.glob("reports/*.json")) + \
        merge_cmd[merge_cmd.index("reports/*.json") + 1 :]
    assert main(merge) == 0
    assert (tmp_path / "merged.json").exists()
    Path("reports/shard-3.json").unlink()
    assert main(merge_cmd[:2] + sorted(glob.glob("reports/*.json"))) == 1
