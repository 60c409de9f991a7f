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


def template_folders_unshipped(text: str, templates: Path) -> list[str]:
    """Folders of templates/ holding .j2 files whose package (ptxgen.templates[.sub]) is not listed with "*.j2" data: they
    would be left out of a wheel, or shipped only through a parent's glob (setuptools warns 'absent from packages')."""
    listed = listed_packages(text)
    data = dict(re.findall(r'^"([\w.]+)" = \[(.*?)\]', text, re.M))
    out = []
    for folder in sorted({p.parent for p in templates.rglob("*.j2")}):
        pkg = ".".join(("ptxgen", "templates", *folder.relative_to(templates).parts))
        if pkg not in listed or '"*.j2"' not in data.get(pkg, ""):
            out.append(pkg)
    return out


def test_every_template_folder_ships_as_a_package_with_its_templates():
    assert template_folders_unshipped((ROOT / "pyproject.toml").read_text(), ROOT / "templates") == []


def test_control_a_template_folder_shipped_only_by_a_parents_glob_is_named():
    text = (ROOT / "pyproject.toml").read_text()
    old = text.replace(', "ptxgen.templates.author"]', "]").replace('"ptxgen.templates.author" = ["*.j2"]\n', "")
    assert old != text and template_folders_unshipped(old, ROOT / "templates") == ["ptxgen.templates.author"]
