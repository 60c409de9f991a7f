"""The command line's shared parsing: the tile-spec flags (one per spec field) and the usage error.

``ptxgen.cli`` and ``ptxgen.runtime.commands`` both build their subcommands from these, so this module sits
below both: it imports only ``derive`` (the field table and the spec parser), never the CLI or the runtime.
"""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """Bad command-line usage that argparse cannot see (exit 2)."""


def int_at_least(low: int):
    """An argparse ``type``: an integer of at least ``low`` (else argparse's exit 2 naming the flag and the bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            from .status import shown

            raise argparse.ArgumentTypeError(f"must be an integer of at least {low}, not {shown(text, 40)}")
        return value

    parse.__name__ = f"integer of at least {low}"
    return parse


def add_spec_flags(p: argparse.ArgumentParser, arch_default: str | None = "sm_100a", required: bool = True) -> None:
    """One flag per spec field (ptxgen.derive.tile.fields.FIELDS). ``required=False``: the tile flags may be left out."""
    from .derive.tile.fields import FIELDS

    g = p.add_argument_group("tile spec")
    for f in FIELDS:
        kw: dict = {"help": f.help, "required": f.required and required}
        if f.is_int:
            kw["type"] = int
        if f.choices:
            kw["choices"] = f.choices
        default = f.default
        if f.name == "arch":
            default = arch_default
            kw["help"] = f.help + (f" (default {arch_default})" if arch_default else " (default: the GPU's)")
        if not f.required:
            kw["default"] = default
        g.add_argument(f.flag, dest=f.name, **kw)


def spec_from_args(args, arch: str | None = None):
    from .derive.tile.fields import FIELDS
    from .derive.tile.spec import make_spec

    values = {f.name: getattr(args, f.name) for f in FIELDS}
    if arch:
        values["arch"] = arch
    return make_spec(**values)
