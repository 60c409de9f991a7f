"""Every docstring example in the package runs and prints what it says (the examples are the first thing a reader
copies). Modules that need an optional dependency this environment lacks (torch) are skipped by name."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ptxgen

OPTIONAL = ("torch", "cupy", "jax")


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(ptxgen.__path__, "ptxgen.") if not m.name.endswith("__main__"))


def _failures(name: str) -> tuple[int, int]:
    try:
        mod = importlib.import_module(name)
    except ImportError as e:
        if e.name in OPTIONAL:
            pytest.skip(f"{name} needs {e.name}")
        raise
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    return result.failed, result.attempted


def test_every_module_is_walked():
    names = _modules()
    assert "ptxgen.derive.operands.operand" in names and "ptxgen.derive.store.epilogue" in names and len(names) > 150


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    failed, _ = _failures(name)
    assert failed == 0, f"{name}: {failed} docstring example(s) print something else (doctest's report above)"


def test_a_wrong_example_fails(tmp_path, monkeypatch):
    """Control: a module whose example claims a wrong value fails the same check."""
    (tmp_path / "ptxgen_doctest_control.py").write_text('"""\n>>> 1 + 1\n3\n"""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    failed, attempted = _failures("ptxgen_doctest_control")
    assert (failed, attempted) == (1, 1)
