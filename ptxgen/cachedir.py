"""Where ptxgen keeps its caches (compiled kernels, compiled templates, the toolchain's versions): a leaf module.

``$PTXGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptxgen``, else ``~/.cache/ptxgen``; ``PTXGEN_NO_CACHE=1`` (or
true/yes/on) turns every cache off. ptxgen.runtime.cache (kernels) and ptxgen.emit.env (jinja2's template
bytecode) both ask here.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("PTXGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptxgen"


def enabled() -> bool:
    """False when ``PTXGEN_NO_CACHE`` says yes (1, true, yes, on); empty, 0, false, no or off keep the cache."""
    return os.environ.get("PTXGEN_NO_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")
