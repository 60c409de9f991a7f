"""Where ptxgen keeps its caches (compiled kernels, compiled templates, the toolchain's versions): a leaf module.

``$PTXGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptxgen``, else ``~/.cache/ptxgen``; ``PTXGEN_NO_CACHE=1`` (or
true/yes/on, in any case) turns every cache off; 0/false/no/off or empty keep it; another value is an error.
ptxgen.runtime.compile.cache (kernels) and ptxgen.emit.env (jinja2's template bytecode) both ask here.
"""

from __future__ import annotations

import os
from pathlib import Path

from .status import SettingError, shown


def cache_dir() -> Path:
    env = os.environ.get("PTXGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptxgen"


NO_CACHE_YES = ("1", "true", "yes", "on")
NO_CACHE_NO = ("", "0", "false", "no", "off")


def enabled() -> bool:
    """False when ``PTXGEN_NO_CACHE`` says yes (1, true, yes, on); empty, 0, false, no or off keep the cache; any other
    value is a SettingError (exit 2): ``maybe`` is not silently "on"."""
    raw = os.environ.get("PTXGEN_NO_CACHE", "")
    value = raw.strip().lower()
    if value in NO_CACHE_YES:
        return False
    if value in NO_CACHE_NO:
        return True
    raise SettingError(f"PTXGEN_NO_CACHE={shown(raw)}: not one of {', '.join(NO_CACHE_YES)} (cache off) or "
                       f"{', '.join(v for v in NO_CACHE_NO if v)}, empty (cache on)")
