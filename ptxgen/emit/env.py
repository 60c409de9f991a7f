"""The jinja2 environment of every template (the templates' folder and the "do not edit" line: ptxgen.emit.sources).

Compiling the templates to Python costs more than rendering them (about a third of a warm ``ptxgen build``), so
the environment keeps their compiled bytecode in the ptxgen cache folder (``jinja2/``, see ptxgen.cachedir).
jinja2 checks each template's source checksum and its own and Python's versions before it uses an entry; the
file names also carry a hash of the environment's options, which the bytecode depends on as well.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import jinja2

from ..cachedir import cache_dir, enabled
from .sources import template_dir


OPTIONS = dict(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
               autoescape=False)


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, best effort: an entry that cannot be written costs only the next compile."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    if not enabled():
        return None
    folder = cache_dir() / "jinja2"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    tag = hashlib.sha256(repr(sorted((k, getattr(v, "__name__", v)) for k, v in OPTIONS.items())).encode()).hexdigest()[:12]
    return _BytecodeCache(str(folder), pattern=f"{tag}-%s.cache")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())), bytecode_cache=_bytecode_cache(), **OPTIONS)
