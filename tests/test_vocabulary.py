"""The repository speaks of the project (versions, dates, what was measured), never of how the work on it was
organised: no labels of work rounds ("s10's sweep", "gpu_s5final.sh", "2026-12-02-s9-probe"), no "session", "closing
run", "callN", "the lead's", "round two" of work, in file names, docs, comments, tool names or run folders.

What is scanned: every file git tracks (its path), and the text of every tracked text file, except
  * generated/: kernels named by their spec (``_s4_`` there is 4 stages), checked by ``ptxgen check``;
  * the raw logs under runs/<folder>/ (kept as they came back from the device; their *names* are scanned, and each
    folder's README.md is scanned as a document);
  * this file, which holds the patterns.
Git history is not scanned.

The patterns are precise on purpose, because the same letters have technical senses here that must stay legal:
``s8`` is the signed 8-bit type (``u8 x s8``), ``s4``/``s5`` in ``n192-s4-tma`` or ``_s4_`` are stage counts,
``scope="session"`` is pytest's fixture scope, a "helper" function is a helper function, pipesim's "agents" are the
pipeline's actors. So a work label ``sN`` is caught only where it is used as one: possessive (``s10's``), after a
preposition (``since s9``), parenthesised (``(s7,``), as a comment tag (``# s9:``), or inside a tool, folder or
archive name (``gpu_s5-waves.sh``, ``2026-12-02-s9-probe``, ``s8final.tgz``). The numbered device runs of
2026-11-30 ("run 14" is ``runs/2026-11-30-14-tuned-bench``) are measurement identifiers that name their folders, not
labels of work, and stay.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LABEL = r"s(?:[3-9]|10)"          # the work labels that were used (s3 .. s10); s1/s2 never were
LABEL_NOT8 = r"s(?:[3-79]|10)"    # s8 is also the signed 8-bit type: only its unambiguous forms are caught

# (name, pattern, a phrase it must catch, a legitimate phrase it must not catch)
PATTERNS = [
    ("session", r"(?<!scope=\")(?<!scope=')\bsessions?\b", "the fifth session's closing run", '@pytest.fixture(scope="session")'),
    ("label possessive", rf"\b{LABEL}'s\b", "fitted to s10's sweep", "the s8 type (u8 x s8)"),
    ("label after a preposition", rf"\b(?:since|before|after|until|during|from|in|over|by) {LABEL_NOT8}\b(?![-\w'])",
     "L3 since s9 (39 gpu tests)", "n192-s4-tma in 4 stages; u8 in s8 out"),
    ("label in parentheses", rf"(?<![\w])\({LABEL_NOT8}[,;:)]", "staging, (s7, measured)", "sum_to_out(s3)"),
    ("s8 as a label in parentheses", r"(?<![\w])\(s8,(?!\s*(?:u8|s8|s32|f16|bf16|tf32|e4m3|e5m2|f32)\b)",
     "On the H200 (s8, runs/2026-12-02-x/run5)", "types (s8, u8)"),
    ("label as a comment tag", rf"#\s*{LABEL}:", "# s9: block-FP8 stream-K launches", "# s8 x u8: kind::i8"),
    ("label in a tool or run name", rf"\b(?:gpu|exp|toolchain)_{LABEL}|\d{{4}}-\d\d-\d\d-{LABEL}-|\b{LABEL}(?:final|extra|last|confirm)\b",
     "tools/gpu_s5-waves.sh and runs/2026-12-02-s9-probe/s9final.tgz", "ptxgen_sm90a_bf16_f32_128x256x64_s4_a_k_sw128"),
    ("closing run", r"\bclosing (?:device )?(?:runs?|calls?)\b", "the closing run of 2026-12-01", "the closing brace"),
    ("callN", r"\bcall\d+\b", "runs/2026-12-02-x/call2", "a call of 2 launches"),
    ("the lead", r"\bthe lead's\b|\(lead\)", "the lead's device calls", "DeepGEMM's measured lead over ours"),
    ("round of work", r"\bround (?:one|two|three|four|five)\b", "review, round two", "alternating rounds, 8 rounds"),
    ("ordinal of work", r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) (?:session|helper)\b",
     "the fourth helper", "the fourth stage"),
]
COMPILED = [(name, re.compile(p)) for name, p, _, _ in PATTERNS]
TEXT_SUFFIXES = {".md", ".py", ".sh", ".toml", ".json", ".txt", ".j2", ".c", ".h", ".cpp", ".cu", ".yml", ".yaml", ".cfg",
                 ".in", ".csv", ""}


def hits(text: str) -> list[tuple[str, str]]:
    """(pattern name, matched text) for every place ``text`` uses working-process vocabulary."""
    return [(name, m.group(0)) for name, rx in COMPILED for m in rx.finditer(text)]


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [f for f in out.splitlines() if f]


def scanned_text(path: str) -> bool:
    if path.startswith("generated/") or path == "tests/test_vocabulary.py":
        return False
    if path.startswith("runs/") and path.count("/") >= 2 and not path.endswith("/README.md"):
        return False
    return Path(path).suffix in TEXT_SUFFIXES


@pytest.mark.parametrize("name,pattern,caught,legal", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_each_pattern_catches_its_example_and_spares_the_technical_sense(name, pattern, caught, legal):
    assert re.search(pattern, caught), f"{name}: misses {caught!r}"
    assert not re.search(pattern, legal), f"{name}: flags the legitimate {legal!r}"


def test_the_checker_catches_a_planted_word():
    """Control: the scan below would report a document with a work label in it."""
    planted = "Measured in s10's sweep (runs/2026-12-02-s10-probe/call2) during the closing run of the session."
    names = {name for name, _ in hits(planted)}
    assert {"label possessive", "label in a tool or run name", "callN", "closing run", "session"} <= names
    assert hits("Block FP8 at 1.13x torch on the H200 (2026-12-02, runs/2026-12-02-blockfp8-tile-model/run2)") == []


def test_no_file_name_uses_it():
    bad = [(f, h) for f in tracked_files() for h in hits(f)]
    assert not bad, "\n".join(f"{f}: {name}: {m!r}" for f, (name, m) in bad)


def test_no_tracked_text_uses_it():
    bad = []
    for f in tracked_files():
        p = ROOT / f
        if not scanned_text(f) or not p.is_file():
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        for name, m in hits(text):
            bad.append(f"{f}: {name}: {m!r}")
    assert not bad, "working-process vocabulary (say the date, the version or what was measured):\n" + "\n".join(bad)
