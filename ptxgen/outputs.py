"""Output files every command writes: refused early if they cannot be written, then written all at once."""

from __future__ import annotations

import os
from pathlib import Path


def check_output_path(path: str) -> None:
    """Refuse (ValueError) an output file that could not be written, before any work is done."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ValueError(f"{path}: is a directory, expected a file name")
    if p.exists() and not p.is_file():
        raise ValueError(f"{path}: exists and is not a regular file")
    if not parent.is_dir():
        raise ValueError(f"{path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{path}: no permission to write it")


def write_text_atomic(path: str, text: str) -> None:
    """A temporary file beside ``path``, then a rename: never a half-written file."""
    tmp = Path(f"{path}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
