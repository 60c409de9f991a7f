"""runs/ explains itself: each folder is named <date>-<topic>, runs/README.md lists exactly the folders there with the
documents that cite them (and each does), and every runs/ path a document or a source file names exists."""

import datetime
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs"
NAME = re.compile(r"^(\d{4}-\d\d-\d\d)-([a-z0-9]+(?:-[a-z0-9]+)*)$")
ROW = re.compile(r"^\| `([^`/]+)/` \| (.+?) \| (.*) \|$")
# where a runs/ path may be cited: the documents and the sources (comments, docstrings, data provenance)
CITING = ["README.md", "CHANGELOG.md", "docs/*.md", "tools/README.md", "runs/README.md", "runs/*/README.md",
          "ptxgen/**/*.py", "ptxgen/**/*.json", "tests/*.py", "tools/**/*.py"]
PATH = re.compile(r"runs/(\d{4}-\d\d-\d\d-[a-z0-9-]*[a-z0-9])((?:/[\w.-]+)*)")


def folders(runs: Path = RUNS) -> set[str]:
    return {p.name for p in runs.iterdir() if p.is_dir()}


def index(text: str) -> dict[str, list[str]]:
    """folder -> the documents its row of runs/README.md cites it from (the link targets, relative to the root)."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = [t.removeprefix("../") for t in re.findall(r"\]\(([^)]+)\)", m.group(3))]
    return rows


def uncited(rows: dict[str, list[str]], root: Path = ROOT) -> list[str]:
    """Rows whose documents are missing, or do not name the folder."""
    bad = []
    for folder, docs in rows.items():
        if not docs:
            bad.append(f"{folder}: cited by no document")
        for d in docs:
            p = root / d
            if not p.is_file() or not re.search(re.escape(folder) + r"(?![\w-])", p.read_text()):
                bad.append(f"{folder}: {d} does not cite it")
    return bad


def test_folders_are_named_by_date_and_topic():
    for name in folders():
        m = NAME.match(name)
        assert m, f"runs/{name}: not <YYYY-MM-DD>-<topic>"
        datetime.date.fromisoformat(m.group(1))


def test_the_index_lists_every_folder_and_nothing_else():
    rows = index((RUNS / "README.md").read_text())
    assert set(rows) == folders(), (f"not in runs/README.md: {sorted(folders() - set(rows))}; "
                                    f"listed but absent: {sorted(set(rows) - folders())}")


def test_every_folder_is_cited_where_the_index_says():
    bad = uncited(index((RUNS / "README.md").read_text()))
    assert not bad, "\n".join(bad)


def test_the_index_check_catches_an_uncited_folder(tmp_path):
    """Control: a row citing a document that does not name the folder, and a folder the index lacks."""
    (tmp_path / "doc.md").write_text("measured in runs/2026-12-02-real-topic/run1\n")
    rows = index("| `2026-12-02-real-topic/` | x | [doc.md](../doc.md) |\n| `2026-12-02-other/` | y | [doc.md](../doc.md) |\n")
    assert uncited(rows, tmp_path) == ["2026-12-02-other: doc.md does not cite it"]
    (tmp_path / "runs" / "2026-12-02-real-topic").mkdir(parents=True)
    (tmp_path / "runs" / "2026-12-03-planted").mkdir()
    assert folders(tmp_path / "runs") - set(rows) == {"2026-12-03-planted"}
    assert not NAME.match("s10-final") and not NAME.match("2026-12-02_tiles") and not NAME.match("2026-12-02-Tiles")


def cited_paths() -> list[tuple[str, str, str]]:
    """(citing file, folder, rest of the path) for every runs/ path named in a document or a source file (a range such
    as ``run1..run4`` or a placeholder ``runN/`` names no one file: only its folder is checked)."""
    out = []
    for pattern in CITING:
        for p in sorted(ROOT.glob(pattern)):
            if p.name in ("test_runs.py", "test_vocabulary.py"):  # their planted examples
                continue
            for m in PATH.finditer(p.read_text(encoding="utf-8", errors="replace")):
                out.append((str(p.relative_to(ROOT)), m.group(1), m.group(2)))
    return out


def test_every_cited_run_path_exists():
    bad = []
    for src, folder, rest in cited_paths():
        target = RUNS / folder / rest.lstrip("/")
        if not (RUNS / folder).is_dir():
            bad.append(f"{src}: runs/{folder} does not exist")
        elif rest and "." in Path(rest).name and ".." not in rest and "/runN/" not in rest and not target.exists():
            bad.append(f"{src}: runs/{folder}{rest} does not exist")
    assert not bad, "\n".join(sorted(set(bad)))
    assert len(cited_paths()) > 100  # the scan reads the documents (a control against an empty glob)
