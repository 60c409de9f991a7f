"""Layers point down only: isa -> derive -> (model checks) -> emit -> runtime -> api / cli, and no module
imports itself back through others (no import cycle, not even through an import inside a function).

* ``ptxgen.isa``: hardware facts and encodings; imports nothing else of ptxgen.
* ``ptxgen.derive``: pure-Python plans from a spec; imports only ``isa``.
* ``ptxgen.model``: the independent readers (``layouts``, ``numerics``, ``sim``: read model, TMA write model, pipeline
  simulation, ...) import nothing from ptxgen but each other; ``model.bridges`` feeds them the derived plans.
* ``ptxgen.emit``: templates and files; never the runtime, never CUDA.
* ``ptxgen.cliargs``: the tile-spec flags shared by ``cli`` and ``runtime.commands``; imports only ``derive``.
* ``ptxgen.version``, ``.status``, ``.outputs``, ``.cachedir``, ``.interrupt``, ``.ctrlc``: leaf modules any layer may import.
* ``ptxgen.runtime``: four packages by responsibility, ranked (``RUNTIME_RANKS``): ``compile`` and ``launch``
  (neither imports the other) -> ``check`` -> ``choose`` -> ``commands``.
* Every folder of ptxgen (itself included) holds at most 15 modules and 3,000 lines: derive, model, emit and api are
  split into packages by responsibility as runtime is.
* ``ptxgen.author``: the public authoring layer, beside the API: it may use isa, derive, emit, runtime and the API's
  stream and launch helpers, never the CLI; nothing below it imports it.
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
    for path in (PKG / "isa").rglob("*.py"):
        bad = {m for m in _ptxgen_imports(path) if not m.startswith("ptxgen.isa")}
        assert not bad, (path.name, bad)


def test_derive_imports_only_isa_and_derive():
    for path in (PKG / "derive").rglob("*.py"):
        bad = {m for m in _ptxgen_imports(path) if not m.startswith(("ptxgen.isa", "ptxgen.derive"))}
        assert not bad, (path.name, bad)
        assert not {m for m in imports(path) if m.startswith(("jinja2", "cuda"))}, path.name


INDEPENDENT_MODELS = ("readmodel", "tmamodel", "pipesim", "pipesim_state", "pipesim_agents", "mbarrier", "fragmodel",
                      "sfmodel", "groupmodel", "chainref", "mxref", "attnmodel", "splitkmodel")


MODEL_PACKAGES = ("ptxgen.model", "ptxgen.model.layouts", "ptxgen.model.numerics", "ptxgen.model.sim")


def model_path(name: str) -> Path:
    """The file of one module of ptxgen/model (its packages: layouts, numerics, sim, bridges)."""
    [path] = (PKG / "model").rglob(f"{name}.py")
    return path


def _module_name(path: Path) -> str:
    return ".".join(("ptxgen", *path.relative_to(PKG).with_suffix("").parts))


def test_independent_models_import_nothing_from_ptxgen():
    """The independent models import nothing from ptxgen but each other (the pipeline simulation is four modules)."""
    own = {_module_name(model_path(n)) for n in INDEPENDENT_MODELS}
    for name in INDEPENDENT_MODELS:
        path = model_path(name)
        bad = {m for m in imports(path) if m.startswith("ptxgen") and m not in MODEL_PACKAGES
               and not any(m == o or m.startswith(o + ".") for o in own)}
        assert not bad, (name, bad)


def test_pair_model_imports_only_the_read_model():
    """The CTA-pair model reuses the independent read model (two CTAs, one descriptor each) and nothing else."""
    path = model_path("pairmodel")
    assert _ptxgen_imports(path) <= {"ptxgen.model.layouts", "ptxgen.model.layouts.readmodel"}, _ptxgen_imports(path)


def test_epilogue_model_imports_only_the_fragment_model():
    """The fused epilogue's model reuses the independent fragment maps and nothing else."""
    for name in ("epimodel", "bfp8model"):
        path = model_path(name)
        assert _ptxgen_imports(path) <= {"ptxgen.model.layouts", "ptxgen.model.layouts.fragmodel"}, (name, _ptxgen_imports(path))


def test_emit_does_not_import_runtime_or_cuda():
    for path in (PKG / "emit").rglob("*.py"):
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


# ---- the whole import graph: layer order and cycles ----------------------------------------------
# Every import statement counts: top-level, inside a function (lazy), under ``if TYPE_CHECKING:``.
LAYERS = {  # first component under ptxgen -> rank; a module may import only modules of equal or lower rank
    "version": 0, "status": 0, "outputs": 0, "cachedir": 0, "interrupt": 0, "ctrlc": 0,
    "isa": 1,
    "derive": 2, "cliargs": 2,
    "model": 3,
    "emit": 4,
    "runtime": 5, "grids": 5, "tuning": 5,
    "api": 6, "sweep": 6, "ops": 6, "grouped": 6, "kgrouped": 6, "author": 6, "attention": 6, "scaled": 6,
    "nn": 7,
    "cli": 7, "plancli": 7,
    "__main__": 8,
    "": 9,  # ptxgen/__init__.py (loads the API on first use)
}


def module_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports, from every import statement in its file."""
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        files[".".join((package, *parts))] = path
    graph = {}
    for name, path in files.items():
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    up = pkg[: len(pkg) - (node.level - 1)]
                    mod = ".".join((*up, *([mod] if mod else [])))
                for a in node.names:  # `from pkg import module` names a module; `from module import name` the module
                    target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod
                    if target in files:
                        out.add(target)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in files}
        out.discard(name)
        graph[name] = out
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = module_graph(PKG, "ptxgen")
    assert sum(map(len, graph.values())) > 200  # the graph was read (a broken resolver would find no edges)
    assert "ptxgen.derive.tile.spec" in graph["ptxgen.derive.tile.layout"]
    assert "ptxgen.runtime.launch.gpu" in graph["ptxgen.runtime.commands"]  # imported inside functions only
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_planted_cycle(tmp_path):
    """Control: two modules that import each other, one of them only inside a function, are a cycle; a third
    that both import is not part of it."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "leaf.py").write_text("X = 1\n")
    (pkg / "sub" / "a.py").write_text("from ..leaf import X\n\ndef f():\n    from . import b\n    return b\n")
    (pkg / "sub" / "b.py").write_text("from pkg.leaf import X\nfrom .a import f\n")
    graph = module_graph(pkg, "pkg")
    assert graph["pkg.sub.a"] == {"pkg.leaf", "pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.leaf", "pkg.sub.a"}
    assert cycles(graph) == [["pkg.sub.a", "pkg.sub.b"]]
    (pkg / "sub" / "a.py").write_text("from ..leaf import X\n")
    assert cycles(module_graph(pkg, "pkg")) == []


def _layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else ""
    assert key in LAYERS, f"{module}: new top-level module or package; give it a rank in LAYERS"
    return LAYERS[key]


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return [(m, t) for m, targets in sorted(graph.items()) for t in sorted(targets) if _layer(t) > _layer(m)]


def test_imports_point_down_the_layers():
    assert upward_imports(module_graph(PKG, "ptxgen")) == []


def test_the_layer_check_finds_an_upward_import():
    """Control: an import from a lower layer to a higher one is reported, a downward one is not."""
    graph = {"ptxgen.derive.tile.spec": {"ptxgen.emit.render", "ptxgen.isa.types"}, "ptxgen.runtime.launch.launch": {"ptxgen.cli"}}
    assert upward_imports(graph) == [("ptxgen.derive.tile.spec", "ptxgen.emit.render"), ("ptxgen.runtime.launch.launch", "ptxgen.cli")]


# ---- ptxgen.runtime: four packages by responsibility, imports between them point down -----------------------------
RUNTIME = "ptxgen.runtime"
RUNTIME_RANKS = {  # a runtime module imports, of the other runtime packages, only those of a lower rank
    "compile": 0, "launch": 0,  # rank 0 twice: compiling and launching never import each other
    "check": 1,  # validate, probes, selftest, bench: compile and launch
    "choose": 2,  # the chooser (tune and calibrate compile, launch and bench)
    "commands": 3,  # the GPU commands' CLI glue over all four
    "": 4,  # ptxgen/runtime/__init__.py
}


def _runtime_part(module: str) -> str:
    name = module[len(RUNTIME) + 1:].split(".")[0] if module != RUNTIME else ""
    assert name in RUNTIME_RANKS, f"{module}: a new module or package of ptxgen/runtime; give it a rank in RUNTIME_RANKS"
    return name


def runtime_violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs inside ptxgen.runtime where a module imports another runtime package of its own rank
    or higher (its own package excepted)."""
    bad = []
    for m, targets in sorted(graph.items()):
        if not m.startswith(RUNTIME + ".") and m != RUNTIME:
            continue
        here = _runtime_part(m)
        for t in sorted(x for x in targets if x == RUNTIME or x.startswith(RUNTIME + ".")):
            there = _runtime_part(t)
            if there != here and RUNTIME_RANKS[there] >= RUNTIME_RANKS[here]:
                bad.append((m, t))
    return bad


def test_the_runtime_packages_import_down():
    graph = module_graph(PKG, "ptxgen")
    parts = {_runtime_part(m) for m in graph if m.startswith(RUNTIME + ".") or m == RUNTIME}
    assert parts == set(RUNTIME_RANKS), parts  # every part of ptxgen/runtime is ranked, and each rank is in use
    assert "ptxgen.runtime.launch.gpu" in graph["ptxgen.runtime.check.validate"]  # the edges were read
    assert runtime_violations(graph) == []


def test_the_runtime_check_finds_an_import_across_or_up():
    """Control: compile importing launch (same rank), launch importing check (up) and check importing choose (up) are
    reported; check importing launch, choose importing compile and a package importing its own modules are not."""
    graph = {f"{RUNTIME}.compile.cache": {f"{RUNTIME}.launch.gpu", f"{RUNTIME}.compile.toolchain"},
             f"{RUNTIME}.launch.launch": {f"{RUNTIME}.check.bench"},
             f"{RUNTIME}.check.bench": {f"{RUNTIME}.launch.gpu", f"{RUNTIME}.choose.tune"},
             f"{RUNTIME}.choose.tune": {f"{RUNTIME}.compile.cache"}}
    assert runtime_violations(graph) == [(f"{RUNTIME}.check.bench", f"{RUNTIME}.choose.tune"),
                                         (f"{RUNTIME}.compile.cache", f"{RUNTIME}.launch.gpu"),
                                         (f"{RUNTIME}.launch.launch", f"{RUNTIME}.check.bench")]


MAX_MODULES, MAX_LINES = 15, 3000


def oversized(folder: Path, name: str | None = None) -> list[str]:
    """What makes a folder more than one can hold in the head: over MAX_MODULES Python modules (``__init__.py``
    included) or over MAX_LINES lines of them."""
    files = list(folder.glob("*.py"))
    lines = sum(len(f.read_text().splitlines()) for f in files)
    return [f"{name or folder.name}: {what}" for what, over in ((f"{len(files)} modules", len(files) > MAX_MODULES),
                                                                (f"{lines} lines", lines > MAX_LINES)) if over]


def python_folders(root: Path) -> list[Path]:
    """``root`` and every folder under it that holds a Python module."""
    return sorted({root, *(p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts)})


def oversized_tree(root: Path) -> list[str]:
    """Every folder of ``root`` (itself included) over the size, named by its path under ``root``'s parent."""
    return [o for f in python_folders(root) for o in oversized(f, f.relative_to(root.parent).as_posix())]


def test_the_runtime_folders_are_a_size_one_can_hold():
    """ptxgen/runtime and each of its folders hold at most 15 Python modules and 3,000 lines of them (the C launcher's
    sources in runtime/launch are not counted)."""
    folders = [PKG / "runtime", *sorted(p for p in (PKG / "runtime").iterdir() if (p / "__init__.py").is_file())]
    assert {f.name for f in folders} >= {"runtime", "compile", "launch", "check", "choose"}
    assert [o for f in folders for o in oversized(f)] == []


def test_every_folder_of_ptxgen_is_a_size_one_can_hold():
    """ptxgen itself and every folder of it (derive, model, emit, api and their packages, runtime's, the rest) hold at
    most 15 Python modules and 3,000 lines of them."""
    folders = python_folders(PKG)
    names = {f.relative_to(PKG.parent).as_posix() for f in folders}
    assert {"ptxgen", "ptxgen/derive/tile", "ptxgen/model/bridges", "ptxgen/emit/views", "ptxgen/api/launch",
            "ptxgen/runtime/choose", "ptxgen/sweep"} <= names, names  # the walk reaches every depth
    assert oversized_tree(PKG) == []


def test_the_tree_size_check_finds_a_nested_folder_too_big(tmp_path):
    """Control: in a synthetic package, a folder two levels down with 16 modules and the top with 3,001 lines are
    reported by their paths; the folders within the limits, and __pycache__, are not."""
    pkg = tmp_path / "pkg"
    deep = pkg / "sub" / "deep"
    (pkg / "__pycache__").mkdir(parents=True)
    deep.mkdir(parents=True)
    for i in range(16):
        (deep / f"m{i}.py").write_text("x = 1\n")
        (pkg / "__pycache__" / f"m{i}.py").write_text("x = 1\n")
    (pkg / "sub" / "__init__.py").write_text("x = 1\n" * 3000)
    (pkg / "__init__.py").write_text("x = 1\n" * 3001)
    assert oversized_tree(pkg) == ["pkg: 3001 lines", "pkg/sub/deep: 16 modules"]
    (deep / "m15.py").unlink()
    (pkg / "__init__.py").write_text("")
    assert oversized_tree(pkg) == []


def test_the_size_check_finds_a_folder_too_big(tmp_path):
    """Control: 16 modules, or 15 modules of 3,001 lines, are too many; 15 of 3,000 are not."""
    for i in range(15):
        (tmp_path / f"m{i}.py").write_text("x = 1\n" * 200)
    assert oversized(tmp_path) == []
    (tmp_path / "m0.py").write_text("x = 1\n" * 201)
    assert oversized(tmp_path) == [f"{tmp_path.name}: 3001 lines"]
    (tmp_path / "m15.py").write_text("")
    assert oversized(tmp_path) == [f"{tmp_path.name}: 16 modules", f"{tmp_path.name}: 3001 lines"]


# ---- the chooser package (ptxgen.runtime.choose): one entry, its modules in ranks, calls that go down -------------
CHOOSE = "ptxgen.runtime.choose"
CHOOSE_RANKS = {  # a module imports and calls only modules of lower rank in the package
    "rules": 0, "choice": 0, "candidates": 0,
    "calibration": 1,
    "costmodel": 2, "tune": 2,
    "fit": 3, "narrow": 3, "pitch": 3, "swap": 3,
    "walk": 4,
    "calibrate": 5,
    "": 6,  # the package: choose, Choice, Problem, Device
}
CHOOSE_PUBLIC = {"", "tune", "calibrate", "calibration", "costmodel", "choice"}  # what the rest of ptxgen may import


def _choose_rank(module: str) -> int:
    name = module[len(CHOOSE) + 1:] if module != CHOOSE else ""
    assert name in CHOOSE_RANKS, f"{module}: a new module of the chooser; give it a rank in CHOOSE_RANKS"
    return CHOOSE_RANKS[name]


def choose_violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a chooser module imports one of its own rank or higher, or a module outside
    the package imports one of its private modules."""
    bad = []
    for m, targets in sorted(graph.items()):
        for t in sorted(x for x in targets if x == CHOOSE or x.startswith(CHOOSE + ".")):
            if m == CHOOSE or m.startswith(CHOOSE + "."):
                if m != CHOOSE and _choose_rank(t) >= _choose_rank(m):
                    bad.append((m, t))
            elif t[len(CHOOSE) + 1:] not in CHOOSE_PUBLIC:
                bad.append((m, t))
    return bad


def test_the_chooser_package_imports_point_down():
    graph = module_graph(PKG, "ptxgen")
    mods = [m for m in graph if m.startswith(CHOOSE + ".")]
    assert len(mods) == len(CHOOSE_RANKS) - 1, sorted(mods)  # every module of the package is ranked
    assert choose_violations(graph) == []


def test_the_chooser_check_finds_an_upward_import():
    """Control: costmodel importing walk (up), swap importing narrow (same rank) and the API importing walk (private)."""
    graph = {f"{CHOOSE}.costmodel": {f"{CHOOSE}.walk", f"{CHOOSE}.calibration"}, f"{CHOOSE}.swap": {f"{CHOOSE}.narrow"},
             "ptxgen.api.select": {f"{CHOOSE}.walk", CHOOSE}}
    assert choose_violations(graph) == [("ptxgen.api.select", f"{CHOOSE}.walk"), (f"{CHOOSE}.costmodel", f"{CHOOSE}.walk"),
                                        (f"{CHOOSE}.swap", f"{CHOOSE}.narrow")]


def _upward_calls(fn) -> tuple[list[tuple[str, str]], int]:
    """Calls from one chooser module into another of the same or a higher rank while ``fn`` runs, and how many calls
    between chooser modules there were."""
    import sys

    prefix = str(PKG / "runtime" / "choose") + "/"
    up, seen = [], [0]

    def mod(frame):
        f = frame.f_code.co_filename
        if not f.startswith(prefix):
            return None
        name = f[len(prefix):-3]
        return "" if name == "__init__" else name

    def prof(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = mod(frame), mod(frame.f_back)
        if callee is None or caller is None or callee == caller:
            return
        seen[0] += 1
        if CHOOSE_RANKS[callee] >= CHOOSE_RANKS[caller]:
            up.append((caller, callee))

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return up, seen[0]


def test_a_first_choice_walks_down_the_package():
    """A first call (nothing loaded yet: the calibration is read during it) that reaches the cost model, its stream-K
    forms and the swap rule: every call between the package's modules goes to a lower rank."""
    from ptxgen.runtime.choose import calibration, choose

    calibration.shipped.cache_clear()
    for shape in ((2500, 10000, 4000), (333, 8192, 8192), (16, 4096, 4096), (7000, 9000, 1152)):
        up, calls = _upward_calls(lambda: choose("bf16", "sm_90a", *shape))
        assert calls > 0 and up == [], (shape, up)


def test_the_call_check_finds_a_call_back_up(monkeypatch):
    """Control: a cost model that calls back into the rules (once) is reported. The callback is compiled as code of
    costmodel.py (its frames carry that file name), as a real one would be."""
    from ptxgen.runtime.choose import choose, costmodel, walk

    src = ("def calls_back(*a, **k):\n"
           "    if not once:\n"
           "        once.append(1)\n"
           "        walk._retyped_spec(walk.default_spec('bf16', 'sm_90a'), 'f16')\n"
           "    return orig(*a, **k)\n")
    ns = {"once": [], "walk": walk, "orig": costmodel.time_terms_us}
    exec(compile(src, costmodel.__file__, "exec"), ns)
    monkeypatch.setattr(costmodel, "time_terms_us", ns["calls_back"])
    up, _ = _upward_calls(lambda: choose("bf16", "sm_90a", 2500, 10000, 4000))
    assert ("costmodel", "walk") in up


def test_every_rule_the_chooser_names_is_in_its_order():
    """``Choice.chosen_by`` is a rule of ``rules.ORDER``, with the suffixes +off-sector and +stream-k; control: a name
    outside it fails the same check."""
    from ptxgen.runtime.choose import choose, rules

    def known(chosen_by: str) -> bool:
        base = chosen_by.replace("+off-sector", "").replace("+stream-k", "")
        return base in rules.ORDER

    shapes = [(4096, 4096, 4096), (16, 4096, 4096), (100, 100, 100), (1359, 20, 3776), (16, 4096, 512 * 16),
              (2500, 10000, 4000), (5000, 5000, 5000), (333, 8192, 8192), (128, 20000, 4096), (7000, 9000, 1100)]
    names = {choose("bf16", "sm_90a", *s).chosen_by for s in shapes} | {choose("bf16", "sm_90a", 1000, 1000, 1000, []).chosen_by}  # no table: default
    assert len(names) >= 8 and all(map(known, names)), names
    assert not known("cost-model+tiny")


def test_author_sits_beside_the_api():
    """The authoring layer uses the layers below it (and the API's stream and launch helpers), never the CLI or the
    GEMM front ends; no module below rank 6 imports it."""
    graph = module_graph(PKG, "ptxgen")
    author = {m for m in graph if m.startswith("ptxgen.author")}
    assert "ptxgen.author.kernel" in author and "ptxgen.derive.operands.operand" in graph["ptxgen.author.operand"]
    for m in author:
        bad = {t for t in graph[m] if t.startswith(("ptxgen.cli", "ptxgen.sweep", "ptxgen.grouped", "ptxgen.ops.torch_ops"))
               or (t.startswith("ptxgen.api") and t not in ("ptxgen.api", "ptxgen.api.launch.streams", "ptxgen.api.launch.launchplan"))}
        assert not bad, (m, bad)
    for m, targets in graph.items():
        if _layer(m) < 6:
            assert not {t for t in targets if t.startswith("ptxgen.author")}, m
