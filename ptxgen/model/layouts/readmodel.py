"""An independent model of what one MMA reads from shared memory through a matrix descriptor.

This module is the check on everything else, so it shares no code with the writer side
(``ptxgen.layout``, ``ptxgen.descriptors``): it imports nothing from ptxgen. It decodes the 64-bit
descriptor from its own transcription of the PTX field table, forms the byte address of every element
from the PTX canonical layouts (in elements and bytes, not in the writer's 16-byte cells and atom
strides), applies the swizzle the way the PTX "Swizzling modes" pictures draw it (16-byte chunks of
each 128-byte line permuted by the line index), and reads the shared-memory image.

Facts it relies on (PTX ISA 9.1, checked on an H200 for wgmma; see docs/hardware-layout.md):
  * K-major, no swizzle: core matrices of 8 rows x 16 B, rows 16 B apart; the 2 core matrices along
    K are LBO apart, consecutive 8-row groups along MN are SBO apart.
  * K-major, swizzle S: rows S bytes apart inside an 8-row atom; 8-row groups SBO apart; one MMA's
    K slice (32 B) lies inside one atom row, so LBO is not used.
  * MN-major, no swizzle: 16 B of MN contiguous, 8 K rows 16 B apart (a core matrix); core matrices
    along MN are SBO apart, groups of 8 K rows LBO apart.
  * MN-major, swizzle S: S bytes of MN contiguous, K rows S bytes apart; S-byte atoms along MN are
    LBO apart, groups of 8 K rows SBO apart (4 K rows for 128B_base32B).
  * The XOR is applied to the final byte address, keyed on its bits 7 and up minus the base offset.

>>> import numpy as np
>>> img = np.arange(2048, dtype=np.uint16).view(np.uint8)      # element value = its 2-byte slot
>>> d = 0x8000402000010000   # tcgen05, K-major SW64, SBO 512 (the seed's A, K-step 0)
>>> m = read("sm_100a", d, "k", 64, "f16", img)
>>> m.shape, m[2, :8].tolist(), m[2, 8:].tolist()   # row 2: its two 16-B chunks trade places
((64, 16), [72, 73, 74, 75, 76, 77, 78, 79], [64, 65, 66, 67, 68, 69, 70, 71])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
                # kind::mxf4/mxf4nvf4: two e2m1 a byte, no padding (PTX 'Packing format used for matrix A and B by
                # .kind::mxf4 and .kind::mxf4nvf4 in Shared Memory'); element k of a row in bits 4*(k % 2) of byte k // 2
                "e2m1": 4,
                # kind::mxf8f6f4's 6- and 4-bit types take one byte of shared memory each, in their own form (below)
                "e2m1_unpacksmem": 8, "e2m3_unpacksmem": 8, "e3m2_unpacksmem": 8}
MMA_K_BITS = 256  # one dense MMA consumes 256 bits of every A/B row
# PTX 'Packing format used for matrix A and B by .kind::mxf8f6f4 in Shared Memory': "The 4-bit and 6-bit floating
# point elements in shared memory must be contiguously packed along with padding": along K, every 16 consecutive
# elements fill one 16-byte cell, packed from its first byte (element j of the cell at bits w*j .. w*j + w - 1,
# little-endian; the rest of the cell is padding). Value bits per element:
UNPACKED_VALUE_BITS = {"e2m1_unpacksmem": 4, "e2m3_unpacksmem": 6, "e3m2_unpacksmem": 6}
UNPACKED_CELL_ELEMENTS = 16

# (lo, width) of each field; address fields hold bytes >> 4.
_FIELDS = {
    "sm_100a": {"start": (0, 14), "lbo": (16, 14), "sbo": (32, 14), "base_offset": (49, 3), "mode": (61, 3)},
    "sm_90a": {"start": (0, 14), "lbo": (16, 14), "sbo": (32, 14), "base_offset": (49, 3), "mode": (62, 2)},
}
START_FIELD_LIMIT = 1 << _FIELDS["sm_100a"]["start"][1]  # the start field holds address >> 4 in 14 bits (both families)


def moved(desc: int, offset: int) -> int:
    """``desc`` with ``offset`` bytes added to its start address (the start field must not overflow)."""
    start = (desc & (START_FIELD_LIMIT - 1)) + (offset >> 4)
    assert offset % 16 == 0 and start < START_FIELD_LIMIT, (hex(desc), offset)
    return desc + (offset >> 4)


_MODES = {
    "sm_100a": {0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"},
    "sm_90a": {0: "none", 1: "128B", 2: "64B", 3: "32B"},
}
_ROW_BYTES = {"none": 16, "32B": 32, "64B": 64, "128B": 128, "128B_base32B": 128}

# What the base-offset field does to the XOR key. Measured on an H200 (wgmma, 2026-11-30, `ptxgen probe`,
# docs/hardware-layout.md): the key is (address >> 7) - base_offset, for all 448 probe cases with a non-zero
# field and every swizzle; "ignored", "added" and "start-relative" each failed most of them. So a base
# offset of (P >> 7) & 7 anchors the pattern at P, as PTX's formula implies. Other values: "ignored",
# "add" (hypotheses the probe rejected), "unmeasured" (refuse to model a non-zero field).
BASE_OFFSET_RULE = "subtract"


class Unmodelled(ValueError):
    """A descriptor whose reading the model does not claim to know."""


@dataclass(frozen=True)
class Decoded:
    start: int
    lbo: int
    sbo: int
    base_offset: int
    mode: str


def decode(arch: str, desc: int) -> Decoded:
    f = {name: (desc >> lo) & ((1 << w) - 1) for name, (lo, w) in _FIELDS[arch].items()}
    mode = _MODES[arch].get(f["mode"])
    if mode is None:
        raise Unmodelled(f"layout type {f['mode']} is reserved on {arch}")
    return Decoded(f["start"] << 4, f["lbo"] << 4, f["sbo"] << 4, f["base_offset"], mode)


def swizzle(mode: str, addr: np.ndarray, base_offset: int = 0, rule: str | None = None) -> np.ndarray:
    """The address the swizzle maps ``addr`` to (PTX 'Swizzling modes' pictures).

    Within every 128-byte line, the 16-byte chunk ``c`` of line ``L`` moves to chunk ``c ^ (L mod n)``,
    with n = 2, 4, 8 for 32B, 64B, 128B swizzling; for 128B with 32-byte atomicity the 32-byte chunk
    ``c`` of line ``L`` moves to ``c ^ (L mod 4)``.
    """
    if mode == "none":
        return addr
    rule = BASE_OFFSET_RULE if rule is None else rule
    line = addr >> 7
    if base_offset:
        if rule == "ignored":
            pass
        elif rule == "subtract":
            line = line - base_offset
        elif rule == "add":
            line = line + base_offset
        else:
            raise Unmodelled(f"base offset {base_offset} with {mode} swizzling: rule {rule!r}")
    return xor_by_line(mode, addr, line)


def xor_by_line(mode: str, addr: np.ndarray, line: np.ndarray) -> np.ndarray:
    """Permute the chunks of each 128-byte line of ``addr`` by ``line`` (the XOR key), per the PTX pictures."""
    if mode == "128B_base32B":
        chunk = (addr >> 5) & 3
        return (addr & ~np.int64(0x60)) | ((chunk ^ (line & 3)) << 5)
    n = {"32B": 2, "64B": 4, "128B": 8}[mode]
    chunk = (addr >> 4) & 7
    return (addr & ~np.int64(0x70)) | ((chunk ^ (line & (n - 1))) << 4)


def gather(smem: np.ndarray, addr: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian elements of ``dtype`` starting at the byte addresses ``addr``."""
    esize = ELEMENT_BITS[dtype] // 8
    img = np.asarray(smem, dtype=np.uint8)
    out = np.zeros(addr.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32}[esize])
    for byte in range(esize):
        out |= img[addr + byte].astype(out.dtype) << (8 * byte)
    return out


def canonical_addresses(arch: str, desc: int, major: str, mn: int, dtype: str) -> np.ndarray:
    """Byte address of the first byte of every element before the swizzle (row over MN, column over K)."""
    d = decode(arch, desc)
    bits = ELEMENT_BITS[dtype]
    esize = bits // 8
    kmma = MMA_K_BITS // bits
    r = np.arange(mn, dtype=np.int64)[:, None]
    kk = np.arange(kmma, dtype=np.int64)[None, :]
    S = _ROW_BYTES[d.mode]
    if major == "k":
        if d.mode == "128B_base32B":
            raise Unmodelled("128B_base32B has no K-major layout")
        kb = kk * bits // 8  # byte along K inside the 32-byte slice (two packed e2m1 share one)
        if d.mode == "none":
            addr = d.start + (r // 8) * d.sbo + (r % 8) * 16 + (kb // 16) * d.lbo + kb % 16
        else:
            addr = d.start + (r // 8) * d.sbo + (r % 8) * S + kb
    elif major == "mn":
        if bits < 8:
            raise Unmodelled(f"{dtype} is read K-major only (kind::mxf4/mxf4nvf4 cannot transpose)")
        if dtype in UNPACKED_VALUE_BITS:
            raise Unmodelled(f"{dtype}: PTX lists 4- and 6-bit types K-major only (no transposed layout)")
        rb = r * esize  # byte along MN
        if d.mode == "none":
            addr = d.start + (rb // 16) * d.sbo + rb % 16 + (kk // 8) * d.lbo + (kk % 8) * 16
        elif d.mode == "128B_base32B":
            addr = d.start + (rb // 128) * d.lbo + rb % 128 + (kk // 4) * d.sbo + (kk % 4) * 128
        else:
            addr = d.start + (rb // S) * d.lbo + rb % S + (kk // 8) * d.sbo + (kk % 8) * S
    else:
        raise ValueError(f"major must be 'k' or 'mn', not {major!r}")
    return addr


def element_addresses(arch: str, desc: int, major: str, mn: int, dtype: str, rule: str | None = None) -> np.ndarray:
    """Byte address of the first byte of every element (row over MN, column over the MMA's K)."""
    d = decode(arch, desc)
    return swizzle(d.mode, canonical_addresses(arch, desc, major, mn, dtype), d.base_offset, rule)


def read(arch: str, desc: int, major: str, mn: int, dtype: str, smem: np.ndarray, rule: str | None = None) -> np.ndarray:
    """The MN x K matrix (raw element codes) that one MMA reads from the byte image ``smem``.

    ``smem[i]`` is the byte at shared-memory address ``i``: the descriptor's start address is absolute.
    """
    addr = element_addresses(arch, desc, major, mn, dtype, rule)
    bits = ELEMENT_BITS[dtype]
    esize = max(1, bits // 8)
    size = np.asarray(smem).size
    if addr.min() < 0 or addr.max() + esize > size:
        raise IndexError(f"the descriptor reads bytes {addr.min()}..{addr.max() + esize - 1}, outside a {size} B image")
    if dtype in UNPACKED_VALUE_BITS:  # a padded 16-byte cell per 16 elements along K
        w = UNPACKED_VALUE_BITS[dtype]
        k = np.arange(addr.shape[1], dtype=np.int64)
        j = k % UNPACKED_CELL_ELEMENTS
        cell = addr[:, k - j]  # where the cell's first element (its first byte) is: the swizzle moves 16-B cells whole
        byte, shift = cell + (w * j) // 8, (w * j) % 8
        img = np.asarray(smem, dtype=np.uint8)
        pair = img[byte].astype(np.uint16) | (img[np.minimum(byte + 1, size - 1)].astype(np.uint16) << 8)
        return ((pair >> shift) & ((1 << w) - 1)).astype(np.uint8)
    if bits < 8:  # sub-byte: element k of a row sits at bit (k * bits) % 8 of its byte
        shift = (np.arange(addr.shape[1], dtype=np.int64)[None, :] * bits) % 8
        return ((np.asarray(smem, dtype=np.uint8)[addr] >> shift) & ((1 << bits) - 1)).astype(np.uint8)
    return gather(smem, addr, dtype)
