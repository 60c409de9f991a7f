"""Layers point down only: isa -> derive -> (model checks) -> emit -> runtime.

* ``ptxgen.isa``: hardware facts and encodings; imports nothing else of ptxgen.
* ``ptxgen.derive``: pure-Python plans from a spec; imports only ``isa``.
* ``ptxgen.model``: the independent readers (read model, TMA write model, pipeline simulation) import
  nothing from ptxgen at all; ``model.verify`` is the bridge that feeds them the derived plans.
* ``ptxgen.emit``: templates and files; never the runtime, never CUDA.
"""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "ptxgen"


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against the file's package
                base = ("ptxgen", *path.relative_to(PKG).parts[:-1])
                up = base[: len(base) - (node.level - 1)]
                mod = ".".join((*up, *(mod.split(".") if mod else [])))
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def _ptxgen_imports(path: Path) -> set[str]:
    return {m for m in imports(path) if m.startswith("ptxgen.") and m not in ("ptxgen.version", "ptxgen.version.__version__")}


def test_isa_imports_only_isa():
    for path in (PKG / "isa").glob("*.py"):
        bad = {m for m in _ptxgen_imports(path) if not m.startswith("ptxgen.isa")}
        assert not bad, (path.name, bad)


def test_derive_imports_only_isa_and_derive():
    for path in (PKG / "derive").glob("*.py"):
        bad = {m for m in _ptxgen_imports(path) if not m.startswith(("ptxgen.isa", "ptxgen.derive"))}
        assert not bad, (path.name, bad)
        assert not {m for m in imports(path) if m.startswith(("jinja2", "cuda"))}, path.name


def test_independent_models_import_nothing_from_ptxgen():
    for name in ("readmodel.py", "tmamodel.py", "pipesim.py", "fragmodel.py", "sfmodel.py", "groupmodel.py", "chainref.py"):
        path = PKG / "model" / name
        if path.exists():
            assert not {m for m in imports(path) if m.startswith("ptxgen") or m.startswith(".")}, name
            assert not _ptxgen_imports(path), name


def test_pair_model_imports_only_the_read_model():
    """The CTA-pair model reuses the independent read model (two CTAs, one descriptor each) and nothing else."""
    path = PKG / "model" / "pairmodel.py"
    assert _ptxgen_imports(path) <= {"ptxgen.model", "ptxgen.model.readmodel"}, _ptxgen_imports(path)


def test_epilogue_model_imports_only_the_fragment_model():
    """The fused epilogue's model reuses the independent fragment maps and nothing else."""
    for name in ("epimodel.py", "bfp8model.py"):
        path = PKG / "model" / name
        assert _ptxgen_imports(path) <= {"ptxgen.model", "ptxgen.model.fragmodel"}, (name, _ptxgen_imports(path))


def test_emit_does_not_import_runtime_or_cuda():
    for path in (PKG / "emit").glob("*.py"):
        bad = {m for m in imports(path) if m.startswith(("ptxgen.runtime", "cuda", "ptxgen.sweep", "ptxgen.cli"))}
        assert not bad, (path.name, bad)


def test_descriptor_bits_live_in_one_place():
    """Shifts by descriptor field positions appear only in the bit tables' module and the read model
    (which keeps its own transcription on purpose)."""
    import re

    for path in PKG.rglob("*.py"):
        if path.name in ("descriptors.py", "readmodel.py", "bits.py"):
            continue
        text = path.read_text()
        assert not re.search(r"<<\s*(46|49|52|61|62)\b", text), path
