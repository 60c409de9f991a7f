"""The compiled launcher's C files (``ptxgen/runtime/launch/_launcher*.c``, ``_launcher.h``) and what builds and ships them.

The extension is one module built from several files (split by responsibility): setup.py must list every one of
them (a file it misses would leave its functions undefined: the module would not load and the ctypes path would
run silently), the sdist must carry the header (MANIFEST.in), and a function one file calls in another must be
declared hidden in the header, so the .so exports only its init function and no call goes through the PLT.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "ptxgen" / "runtime" / "launch"  # the C launcher sits beside fastlaunch, which loads it


def _setup_list(name: str) -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py has no {name}")


def _external_definitions(text: str) -> set[str]:
    """Names of the functions and variables a C file defines at file scope without ``static``."""
    names = set()
    for line in text.splitlines():
        if not line or line[0] in " \t#/*}" or line.startswith(("static ", "typedef ", "PyMODINIT_FUNC")):
            continue
        if "=" in line and ("(" not in line or line.index("=") < line.index("(")):  # a variable set where defined
            names.add(re.findall(r"(\w+)", line.split("=")[0])[-1])
            continue
        if line.rstrip().endswith(";") and "(" not in line:  # variables: every declarator of the line
            declarators = re.sub(r"=[^,;]*", "", line)
            names |= set(re.findall(r"(\w+)\s*(?=[,;\[])", declarators))
            continue
        m = re.match(r"[A-Za-z_][\w \*]*?\**\b(\w+)\s*\(", line)  # a function
        if m:
            names.add(m.group(1))
    return names


def test_setup_builds_every_launcher_file_and_the_sdist_carries_the_header():
    sources = sorted(str(p.relative_to(ROOT)) for p in RUNTIME.glob("_launcher*.c"))
    headers = sorted(str(p.relative_to(ROOT)) for p in RUNTIME.glob("_launcher*.h"))
    assert len(sources) > 1 and headers
    assert sorted(_setup_list("LAUNCHER_SOURCES")) == sources
    assert sorted(_setup_list("LAUNCHER_HEADERS")) == headers
    manifest = (ROOT / "MANIFEST.in").read_text().split()
    assert all(h in manifest for h in headers)


def test_every_cross_file_name_is_declared_hidden_in_the_header():
    declarations = re.findall(r"LAUNCHER_INTERNAL ([^;]*);", (RUNTIME / "_launcher.h").read_text())
    defined = {}
    for path in RUNTIME.glob("_launcher*.c"):
        for name in _external_definitions(path.read_text()):
            defined[name] = path.name
    assert defined, "no file-scope definitions found: the parser no longer reads the files"
    missing = {n: f for n, f in defined.items() if not any(re.search(rf"\b{n}\b", d) for d in declarations)}
    assert not missing, f"defined without static and not declared LAUNCHER_INTERNAL in _launcher.h: {missing}"


def test_the_parser_sees_a_definition_the_header_does_not_declare():
    """Control: a non-static definition that the header lacks is found."""
    text = ("int patch(Launcher *self, const uint64_t want[3]) {\nstatic int quiet(void) {\nPyObject *extra_state = NULL;\n"
            "PyObject *s_one, *s_two;\nunsigned long long count = 1;\nPyObject *table[MAX_PLAIN];\n"
            "PyType_Spec a_spec = {\"a\", sizeof(A), 0,\n")
    assert _external_definitions(text) == {"patch", "extra_state", "s_one", "s_two", "count", "table", "a_spec"}
    assert "extra_state" not in (RUNTIME / "_launcher.h").read_text()


def test_the_built_module_exports_only_its_init():
    mod = pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")
    nm = shutil.which("nm")
    if nm is None or not mod.__file__.endswith(".so"):
        pytest.skip("no nm here, or not an ELF shared object")
    out = subprocess.run([nm, "-D", "--defined-only", mod.__file__], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[1:2] and line.split()[1] in "TtDdBb"}
    assert exported == {"PyInit__launcher"}
