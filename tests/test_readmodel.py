"""The read model on its own: hand-computed addresses from the PTX canonical layouts, and its independence."""

import ast
from pathlib import Path

import numpy as np

from ptxgen.model.layouts import readmodel

ROOT = Path(__file__).resolve().parent.parent


def test_read_model_imports_nothing_from_ptxgen():
    tree = ast.parse((ROOT / "ptxgen" / "model" / "layouts" / "readmodel.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("ptxgen"), ast.dump(node)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("ptxgen") for a in node.names)


def _desc(arch, start, lbo, sbo, mode, bo=0):
    code = {"sm_100a": {"none": 0, "32B": 6, "64B": 4, "128B": 2, "128B_base32B": 1},
            "sm_90a": {"none": 0, "32B": 3, "64B": 2, "128B": 1}}[arch][mode]
    d = (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | bo << 49
    if arch == "sm_100a":
        return d | 1 << 46 | code << 61
    return d | code << 62


def test_kmajor_sw128_addresses_by_hand():
    # row r of an 8-row atom is r*128 B; its 16-B chunk c lands at chunk c ^ r (PTX 128B swizzle picture)
    a = readmodel.element_addresses("sm_90a", _desc("sm_90a", 0, 16, 1024, "128B"), "k", 64, "f16")
    for r in range(8):
        for c in range(2):  # one MMA reads 32 B = 2 chunks of K
            assert a[r, 8 * c] == r * 128 + ((c ^ r) * 16)
    assert a[8, 0] == 1024 and a[9, 0] == 1024 + 128 + 16  # next 8-row group: + SBO


def test_mnmajor_none_addresses_by_hand():
    # MN-major, no swizzle: 8 elements of MN contiguous (16 B), K rows 16 B apart; MN core matrices SBO apart,
    # groups of 8 K rows LBO apart
    a = readmodel.element_addresses("sm_100a", _desc("sm_100a", 256, 2048, 128, "none"), "mn", 64, "f16")
    assert a[0, 0] == 256 and a[1, 0] == 258 and a[8, 0] == 256 + 128 and a[0, 1] == 256 + 16
    assert a[0, 8] == 256 + 2048


def test_mnmajor_sw64_and_b32_by_hand():
    a = readmodel.element_addresses("sm_100a", _desc("sm_100a", 0, 512, 4096, "64B"), "mn", 64, "f16")
    assert a[32, 0] == 512  # second 64-B atom along MN: + LBO
    assert a[0, 1] == 64  # K row 1 is 64 B down, still in 128-B line 0: no XOR
    assert a[0, 2] == 128 + 16  # K row 2 starts line 1: its chunk 0 moves to chunk 1
    assert a[0, 7] == 3 * 128 + 64 + 3 * 16  # K row 7: line 3, chunk 4 -> 4 ^ 3 = 7
    b = readmodel.element_addresses("sm_100a", _desc("sm_100a", 0, 512, 2048, "128B_base32B"), "mn", 64, "tf32")
    assert b[32, 0] == 512 and b[0, 4] == 2048  # next 128-B atom along MN; next group of 4 K rows
    assert b[0, 1] == 128 + 32  # K row 1 (line 1): 32-byte granule 0 -> 1


def test_unknown_and_reserved():
    import pytest

    with pytest.raises(readmodel.Unmodelled):
        readmodel.decode("sm_100a", 5 << 61)
    with pytest.raises(readmodel.Unmodelled):
        readmodel.element_addresses("sm_100a", _desc("sm_100a", 0, 16, 512, "128B_base32B"), "k", 64, "tf32")
    img = np.zeros(1024, dtype=np.uint8)
    with pytest.raises(IndexError):
        readmodel.read("sm_90a", _desc("sm_90a", 0, 16, 1024, "128B"), "k", 64, "f16", img)
