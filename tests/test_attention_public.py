"""ptxgen/attention is written with the public authoring layer only: every ptxgen name any of its modules imports
(absolute or relative, at the top or inside a function, or through importlib with a literal name) is one that
docs/authoring.md documents, one of ptxgen.attention's own modules, or one of a few plainly public names the doc
lists. The documented set is read from the doc itself (its "public names" list and the imports of its code blocks),
not copied here; a control shows that an import of ptxgen.derive (or an undocumented ptxgen.author name) is caught.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ptxgen"
DOC = ROOT / "docs" / "authoring.md"
OWN = "ptxgen.attention"
# The CLI's exit statuses: public beside ptxgen.author (README: "Exit codes"), used by ptxgen build --kind attention.
# Allowed only if docs/authoring.md names each of them too.
PLAIN_PUBLIC = frozenset({"ptxgen.status.EXIT_OK", "ptxgen.status.EXIT_CHECK_FAILED", "ptxgen.status.EXIT_USAGE"})


def documented_names(text: str) -> set[str]:
    """``ptxgen.author.X`` for every X of the doc's public-names list and every name its code blocks import from
    ptxgen.author; plus the fully qualified names of its "besides" list."""
    names = set()
    block = text.split("<!-- public names -->")[1].split("<!-- end public names -->")[0]
    names |= {f"ptxgen.author.{n}" for n in re.findall(r"^- `([A-Za-z_]\w*)`", block, re.M)}
    for code in re.findall(r"```python\n(.*?)```", text, re.S):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module == "ptxgen.author":
                names |= {f"ptxgen.author.{a.name}" for a in node.names}
    besides = text.split("<!-- besides -->")[1].split("<!-- end besides -->")[0]
    names |= set(re.findall(r"`(ptxgen\.[\w.]+)`", besides))
    return names


def _resolve(module: str | None, level: int, package: tuple[str, ...]) -> str:
    if not level:
        return module or ""
    base = package[: len(package) - (level - 1)]
    return ".".join((*base, *(module.split(".") if module else [])))


def imported_names(tree: ast.AST, package: tuple[str, ...]) -> set[str]:
    """Every ptxgen name the module imports: ``M.n`` for ``from M import n`` (relative ones resolved against
    ``package``), ``M`` for ``import M``, and the literal name of an ``importlib.import_module`` / ``__import__``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(node.module, node.level, package)
            found |= {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__"):
                pkg = next((k.value.value for k in node.keywords if k.arg == "package" and isinstance(k.value, ast.Constant)), None)
                target = node.args[0].value
                if target.startswith(".") and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    pkg = node.args[1].value
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    target = _resolve(target.lstrip(".") or None, level, tuple((pkg or ".".join(package)).split(".")))
                found.add(target)
    return {n for n in found if n == "ptxgen" or n.startswith("ptxgen.")}


def violations(tree: ast.AST, package: tuple[str, ...], allowed: set[str]) -> set[str]:
    own = {n for n in imported_names(tree, package) if n == OWN or n.startswith(OWN + ".")}
    return imported_names(tree, package) - own - allowed


@pytest.fixture(scope="module")
def allowed() -> set[str]:
    text = DOC.read_text()
    names = documented_names(text)
    besides = {n for n in names if not n.startswith("ptxgen.author.")}
    assert besides <= PLAIN_PUBLIC, f"docs/authoring.md lists names beyond the plainly public ones: {besides - PLAIN_PUBLIC}"
    return names


def modules() -> list[Path]:
    return sorted((PKG / "attention").rglob("*.py"))


def test_the_documented_set_is_read_from_the_doc(allowed):
    import ptxgen.author as author

    public = {n for n in allowed if n.startswith("ptxgen.author.")}
    assert {"ptxgen.author.Operand", "ptxgen.author.Ring", "ptxgen.author.wgmma", "ptxgen.author.build"} <= public
    for name in public:  # a documented name is a real one (a typo in the doc allows nothing that does not exist)
        assert hasattr(author, name.rsplit(".", 1)[1]), name
    assert PLAIN_PUBLIC <= allowed  # each plainly public name the test allows is written in the doc


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.name)
def test_attention_imports_only_the_documented_layer(path, allowed):
    package = ("ptxgen", *path.relative_to(PKG).parts[:-1])
    bad = violations(ast.parse(path.read_text()), package, allowed)
    assert not bad, f"{path.relative_to(ROOT)} imports what docs/authoring.md does not document: {sorted(bad)}"


def test_every_attention_module_is_checked():
    names = {p.stem for p in modules()}
    assert {"spec", "plan", "plan_sm100", "render", "build", "launch", "args", "cli", "__init__"} <= names


CONTROLS = {
    "relative derive": "from ..derive.layout import derive\n",
    "absolute runtime": "import ptxgen.runtime.compile.cache\n",
    "inside a function": "def f():\n    from ..isa.types import DType\n    return DType\n",
    "an undocumented author name": "from ..author.operand import derive_operand\n",
    "a private author module": "from ..author.launch import Binder\n",
    "from the package": "from .. import derive\n",
    "importlib": "import importlib\nm = importlib.import_module('ptxgen.derive.tile.spec')\n",
    "importlib relative": "import importlib\nm = importlib.import_module('..derive.spec', 'ptxgen.attention')\n",
}


@pytest.mark.parametrize("source", CONTROLS.values(), ids=CONTROLS.keys())
def test_control_an_internal_import_is_flagged(source, allowed):
    bad = violations(ast.parse(source), ("ptxgen", "attention"), allowed)
    assert bad and all(n.startswith("ptxgen.") for n in bad), bad


def test_control_public_and_own_imports_pass(allowed):
    src = ("from ..author import Operand, Ring, build as build_kernel\nfrom .spec import AttentionSpec\n"
           "from ..status import EXIT_OK\nimport numpy\n")
    assert violations(ast.parse(src), ("ptxgen", "attention"), allowed) == set()
