"""Build a kernel's files (render, compile, check SASS) and check generated/ against the generator."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ...emit.generated import (
    KERNEL_FILES,
    kernel_dirs,
    layout_json_text,
    ptx_nvrtc_version,
    ptx_text,
    write_kernel_dir,
)
from ...emit.render import render_kernel
from ...outputs import read_text
from ...emit.pictures.svg import layout_svg
from ...derive.tile.layout import TileLayout, derive
from ...derive.tile.spec import TileSpec
from .ptxorder import pair_alloc_order_problems
from .sass import SassReport, check_sass
from .cache import toolchain_id
from .toolchain import Compiled


@dataclass
class Artifacts:
    layout: TileLayout
    files: dict[str, str]
    compiled: Compiled | None = None
    sass: SassReport | None = None


def generate(spec: TileSpec, compile: bool = True, sass: bool = True) -> Artifacts:
    """Every file of the kernel folder, as text (kernel.ptx only when compiling)."""
    t = derive(spec)
    cu = render_kernel(t)
    files = {"kernel.cu": cu, "layout.json": layout_json_text(t), "layout.svg": layout_svg(t)}
    art = Artifacts(t, files)
    if compile:
        from .cache import compile_cached, sass_dumps

        res = compile_cached(cu, spec.kernel_name, spec.arch.value)  # the on-disk cubin cache, as ptxgen.compile
        art.compiled = res.compiled
        files["kernel.ptx"] = ptx_text(t, art.compiled.ptx, toolchain_id()["nvrtc"])
        if sass:
            dump, resources = sass_dumps(res)
            art.sass = check_sass(spec, art.compiled.cubin, dump, resources)
            if spec.pair:  # the order SASS counts cannot show: a cluster barrier before the pair's TMEM allocation
                art.sass.problems += pair_alloc_order_problems(files["kernel.ptx"])
    return art


def build(spec: TileSpec, out_root: Path) -> tuple[Path, Artifacts]:
    art = generate(spec)
    files = {name: art.files[name] for name in KERNEL_FILES}
    return write_kernel_dir(out_root, spec.kernel_name, files), art


@dataclass
class CheckResult:
    checked: list[Path] = field(default_factory=list)
    differing: list[Path] = field(default_factory=list)  # files whose bytes differ from the generator's
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differing and not self.errors


def check_tree(root: Path) -> CheckResult:
    """Regenerate every kernel under ``root`` from its layout.json spec and compare byte for byte."""
    res = CheckResult()
    if not root.is_dir():
        res.errors.append(f"{root}: not a folder" if root.exists() else f"{root}: no such folder")
        return res
    dirs = kernel_dirs(root)
    res.errors += _orphans(root, dirs)
    if not dirs and not res.errors:
        res.errors.append(f"no kernel folders (*/layout.json) under {root}")
    for d in dirs:
        try:
            _check_dir(d, res)
        except (OSError, UnicodeDecodeError) as e:
            res.errors.append(f"{d}: cannot read it: {e}")
    return res


def _orphans(root: Path, dirs: list[Path]) -> list[str]:
    """Folders with kernel files but no layout.json: they cannot be checked, so they are errors."""
    return [
        f"{d}: kernel files without a layout.json (cannot be checked)"
        for d in sorted(root.iterdir())
        if d.is_dir() and d not in dirs and any((d / n).exists() for n in KERNEL_FILES)
    ]


def _read_files(d: Path, res: CheckResult) -> dict[str, str | None] | None:
    """The kernel folder's files as text (None: missing), each a regular file under the input bound; None (and the
    errors noted) when one is not: a FIFO, a link to a device or a huge file is named, never read."""
    texts, ok = {}, True
    for name in KERNEL_FILES:
        path = d / name
        try:
            texts[name] = read_text(path) if os.path.lexists(path) else None
        except ValueError as e:
            res.errors.append(str(e))
            ok = False
    return texts if ok else None


def _check_dir(d: Path, res: CheckResult) -> None:
    """One kernel folder: its spec rebuilt from layout.json, every file regenerated and compared."""
    texts = _read_files(d, res)
    if texts is None:
        return
    try:
        spec = TileSpec.from_json(json.loads(texts["layout.json"])["spec"])
    except Exception as e:  # noqa: BLE001 - a hand-edited spec is a finding, not a crash
        res.errors.append(f"{d}/layout.json: cannot rebuild the spec: {e}")
        return
    if spec.kernel_name != d.name:
        res.errors.append(f"{d}: folder name differs from the spec's kernel name {spec.kernel_name}")
    art = generate(spec, compile=True, sass=False)
    for name in KERNEL_FILES:  # every file, kernel.ptx too, whatever its header says (a header can be edited)
        path, text = d / name, texts[name]
        res.checked.append(path)
        if text != art.files[name]:
            res.differing.append(path)
            recorded = ptx_nvrtc_version(text) if text is not None and name == "kernel.ptx" else None
            if recorded not in (None, toolchain_id()["nvrtc"]):
                res.notes.append(f"{path}: its header says NVRTC {recorded}, this machine has {toolchain_id()['nvrtc']} (pip install "
                                 "the pinned nvidia-cuda-nvrtc to regenerate it)")
    for extra in sorted(set(p.name for p in d.iterdir()) - set(KERNEL_FILES)):
        res.errors.append(f"{d / extra}: not a file ptxgen generates")
