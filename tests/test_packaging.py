"""Every package of ptxgen/ is in pyproject.toml's list, so `pip install .` (not editable, as CI installs) ships it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def listed_packages(text: str) -> set[str]:
    m = re.search(r"^packages = \[(.*?)\]", text, re.M | re.S)
    return set(re.findall(r'"([\w.]+)"', m.group(1))) if m else set()


def unlisted(pkg_root: Path, listed: set[str]) -> list[str]:
    found = {".".join(p.parent.relative_to(pkg_root.parent).parts) for p in pkg_root.rglob("__init__.py")}
    return sorted(found - listed)


def test_every_package_is_installed():
    assert unlisted(ROOT / "ptxgen", listed_packages((ROOT / "pyproject.toml").read_text())) == []


def test_control_a_missing_package_is_named():
    listed = listed_packages((ROOT / "pyproject.toml").read_text()) - {"ptxgen.nn"}
    assert unlisted(ROOT / "ptxgen", listed) == ["ptxgen.nn"]
