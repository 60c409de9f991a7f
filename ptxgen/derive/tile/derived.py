"""A derived value with its formula, reason and source: what `explain` prints for every field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Derived:
    """One derived value with the formula (numbers put in), the reason and where the rule comes from."""

    name: str
    value: int | str
    formula: str
    reason: str
    ref: str
