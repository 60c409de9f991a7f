"""Bit tables: one declaration of a packed hardware word that both encodes and decodes.

>>> t = BitTable("demo", 16, (BitField("addr", 0, 8, unit_bytes=16), BitField("mode", 8, 3), BitField("rsvd", 11, 5, fixed=0)))
>>> hex(t.encode(addr=0x200, mode=4))
'0x420'
>>> t.decode(0x420)
{'addr': 512, 'mode': 4, 'rsvd': 0}
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BitField:
    """``width`` bits starting at bit ``lo``.

    ``unit_bytes``: the field stores ``value // unit_bytes`` (16 for the descriptors' address fields,
    whose 4 low bits are implied zero; 8 for the instruction descriptor's N >> 3).
    ``fixed``: a reserved or constant field that must hold this value.
    """

    name: str
    lo: int
    width: int
    unit_bytes: int = 1
    fixed: int | None = None
    units: str = ""
    doc: str = ""

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lo

    @property
    def bits_label(self) -> str:
        hi = self.lo + self.width - 1
        return f"{self.lo}" if hi == self.lo else f"{self.lo}-{hi}"

    def raw(self, word: int) -> int:
        return (word >> self.lo) & ((1 << self.width) - 1)


class BitTable:
    """A packed word made of non-overlapping fields."""

    def __init__(self, name: str, width_bits: int, fields: tuple[BitField, ...]):
        self.name = name
        self.width_bits = width_bits
        self.fields = fields
        used = 0
        for f in fields:
            if f.lo + f.width > width_bits:
                raise ValueError(f"{name}.{f.name} runs past bit {width_bits - 1}")
            if used & f.mask:
                raise ValueError(f"{name}.{f.name} overlaps another field")
            used |= f.mask
        self.covered_mask = used
        self.by_name = {f.name: f for f in fields}

    def encode(self, **values: int) -> int:
        """Pack field values (in their own units: bytes for address fields)."""
        unknown = set(values) - set(self.by_name)
        if unknown:
            raise KeyError(f"{self.name}: no field(s) {sorted(unknown)}")
        word = 0
        for f in self.fields:
            value = values.get(f.name, f.fixed if f.fixed is not None else 0)
            if value % f.unit_bytes:
                raise ValueError(f"{self.name}.{f.name}={value} is not a multiple of {f.unit_bytes}")
            stored = value // f.unit_bytes
            if not 0 <= stored < (1 << f.width):
                raise ValueError(
                    f"{self.name}.{f.name}={value} does not fit in {f.width} bits"
                    + (f" of {f.unit_bytes}-byte units" if f.unit_bytes > 1 else "")
                )
            word |= stored << f.lo
        return word

    def decode(self, word: int) -> dict[str, int]:
        """Field values in their own units (address fields come back in bytes)."""
        if word < 0 or word >> self.width_bits:
            raise ValueError(f"{self.name}: {word:#x} is wider than {self.width_bits} bits")
        return {f.name: f.raw(word) * f.unit_bytes for f in self.fields}

    def fixed_violations(self, word: int) -> list[tuple[BitField, int]]:
        """Fields whose raw value differs from the value the hardware requires."""
        return [(f, f.raw(word)) for f in self.fields if f.fixed is not None and f.raw(word) != f.fixed]

    def uncovered_bits(self, word: int) -> int:
        return word & ~self.covered_mask & ((1 << self.width_bits) - 1)
