"""Three one-way layers: core -> emit -> runtime. Nothing in a lower layer imports a higher one."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "ptxgen"
CORE = {"types", "spec", "smem", "bits", "descriptors", "layout", "readmodel", "numerics", "explain", "ptxref", "verify", "status"}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against the file's package
                base = path.relative_to(PKG).parts[:-1]
                up = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(("ptxgen", *up, *(mod.split(".") if mod else [])))
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_core_imports_neither_emit_nor_runtime_nor_jinja_nor_cuda():
    for name in CORE:
        mods = imports(PKG / f"{name}.py")
        bad = {m for m in mods if m.startswith(("ptxgen.emit", "ptxgen.runtime", "jinja2", "cuda", "ptxgen.sweep", "ptxgen.cli"))}
        assert not bad, (name, bad)


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
