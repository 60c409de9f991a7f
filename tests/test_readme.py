"""What README.md says that a test can check: it is short, it shows exactly the commands CI runs, every command and
flag it names exists, its links resolve, it says near the top which commands need a GPU and that .ci/run installs a
browser through apt, and the version it and CHANGELOG.md name is the one ptxgen prints."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
# documents whose links must resolve (the README and the pages written with it)
LINKED = ["README.md", "CHANGELOG.md", "docs/reference.md", "tools/README.md", "runs/README.md"]
GPU_COMMANDS = {"validate", "probe", "selftest", "bench", "tune"}


def readme() -> str:
    return README.read_text()


def code_lines(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S) for line in block.splitlines()]


def test_the_readme_is_short():
    assert len(readme().splitlines()) <= 200


def test_the_readme_shows_the_two_commands_ci_runs():
    """The quick start's build and test commands are the ones .ci/run runs (its build writes to --out gen)."""
    ci = CI.read_text()
    build = re.search(r"ptxgen build (--bm [^&]*?) --out gen", ci)
    assert build and re.search(r"^python -m pytest -n auto$", ci, re.M)
    code = code_lines(readme())
    assert any(line.endswith(f"ptxgen build {build.group(1)}") for line in code), build.group(1)
    assert any(line.endswith("python -m pytest -n auto") for line in code)


def cli() -> dict:
    from ptxgen.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(getattr(a, "choices", None), dict)).choices
    return {name: {s for a in p._actions for s in a.option_strings} for name, p in subs.items()}


def unknown_commands(text: str, commands: dict) -> list[str]:
    """`ptxgen SUB --flag` in the first cell of a table row, with SUB or a flag the command line does not have."""
    bad = []
    for line in text.splitlines():
        m = re.match(r"\| `ptxgen ([\w-]+)([^`]*)`", line)
        if not m or m.group(1) == "--version":
            continue
        sub, rest = m.group(1), m.group(2)
        if sub not in commands:
            bad.append(sub)
            continue
        bad += [f"{sub} {f}" for f in re.findall(r"(--[a-z][\w-]*)", rest) if f not in commands[sub]]
    return bad


def test_every_command_and_flag_of_the_readme_exists():
    text, commands = readme(), cli()
    named = re.findall(r"^\| `ptxgen ([\w-]+)", text, re.M)
    assert len(named) >= 12
    assert unknown_commands(text, commands) == []
    assert set(commands) <= set(named), f"commands the README's table leaves out: {set(commands) - set(named)}"


def test_the_command_check_catches_a_made_up_command():
    """Control: a subcommand and a flag that do not exist are reported."""
    bad = unknown_commands("| `ptxgen frobnicate` | x |\n| `ptxgen build <spec> --no-such-flag` | y |\n", cli())
    assert bad == ["frobnicate", "build --no-such-flag"]


def slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def broken_links(doc: Path) -> list[str]:
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{doc.name}: {target}")
        elif anchor and dest.suffix == ".md":
            if anchor not in {slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}:
                bad.append(f"{doc.name}: {target} (no such heading)")
    return bad


@pytest.mark.parametrize("doc", LINKED)
def test_links_resolve(doc):
    assert broken_links(ROOT / doc) == []


def test_the_link_check_catches_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n[ok](a.md#top) [gone](missing.md) [bad anchor](a.md#nowhere) [web](https://x.y)\n")
    assert broken_links(tmp_path / "a.md") == ["a.md: missing.md", "a.md: a.md#nowhere (no such heading)"]


def test_the_top_says_which_commands_need_a_gpu_and_what_ci_installs():
    top = "\n".join(readme().splitlines()[:30])
    gpu_part = top.split("**What needs a GPU.**", 1)[1]
    cpu_sentence, gpu_sentence = gpu_part.split("need an", 1)[0].split(" run on any machine", 1)
    def names(sentence):
        return set(re.findall(r"`(?:ptxgen )?([a-z]+)`", sentence))

    assert GPU_COMMANDS <= names(gpu_sentence) and not GPU_COMMANDS & names(cpu_sentence)
    assert set(cli()) - GPU_COMMANDS <= names(cpu_sentence)
    ci = CI.read_text()
    assert "apt-get install" in ci and "chromium" in ci  # what the README says .ci/run does
    assert "`.ci/run`" in top and "`apt-get`" in top and "Chromium" in top


def test_one_version_everywhere():
    from ptxgen.version import __version__

    pyproject = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    changelog = re.search(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "--version"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"ptxgen {__version__}"
    assert pyproject == changelog == __version__
    assert f"`ptxgen --version` | prints `ptxgen {__version__}`" in readme()


def test_no_statement_a_later_one_contradicts():
    """The sentences the 0.1.0 README had to take back: a feature "not run" that a later paragraph reports at L3."""
    for doc in ("README.md", "docs/reference.md"):
        text = (ROOT / doc).read_text()
        assert "had not run when this was written" not in text
        for feature in ("grouped", "fused", "block FP8"):
            for para in text.split("\n\n"):
                if feature in para and "**L3**" in para:
                    assert not re.search(r"\bnever run\b|\bnot (?:yet )?run\b", para), (doc, feature, para[:200])
