"""Sizes and offsets of block-scaled scale factors in CUTLASS's 512-byte atoms (128 rows x 4 K chunks): a leaf module.

The spec asks for the stage bytes and TMEM columns of its scale factors (shared-memory and TMEM budgets);
ptxgen.derive.scaled.scales derives the whole chain from the same numbers. See scales' docstring for the layout.
"""

from __future__ import annotations

from ...isa.blockscale import CP_32X128B_WARPX4

SF_ATOM_ROWS = 128  # rows of A (or B) in one scale-factor atom
SF_ATOM_CHUNKS = 4  # K chunks (scale factors per row) in one atom: 4 bytes = one 32-bit TMEM word
SF_ATOM_BYTES = SF_ATOM_ROWS * SF_ATOM_CHUNKS
SF_CP_ROW_BYTES = 16  # one 128-bit row of tcgen05.cp.32x128b


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def sf_k_atoms(k: int, vec: int) -> int:
    """Atoms along K in the global layout: ceil(K / (4 V))."""
    return ceil_div(k, SF_ATOM_CHUNKS * vec)


def sf_last_block_c_expr(rows: str) -> str:
    """C: the last 128-row block of a scale-factor buffer of ``rows`` rows (CUTLASS pads rows to 128, not to the tile)."""
    return f"(static_cast<size_t>({rows}) + {SF_ATOM_ROWS - 1}) / {SF_ATOM_ROWS} - 1"


def sf_k_atoms_c_expr(vec: int, k: str = "K") -> str:
    """C: :func:`sf_k_atoms` of the kernel's runtime K (CUTLASS pads K to 4V, not to BK)."""
    return f"(static_cast<size_t>({k}) + {SF_ATOM_CHUNKS * vec - 1}) / {SF_ATOM_CHUNKS * vec}"


def sf_k_chunks(k: int, vec: int) -> int:
    """Scale factors a row has along K: ceil(K / V). Chunks from here on (the padding of the last atom, and whole
    atoms a stage holds past the last one) multiply only zero-filled operand elements."""
    return ceil_div(k, vec)


def sf_k_chunks_c_expr(vec: int, k: str = "K") -> str:
    return f"({k} + {vec - 1}) / {vec}"


def sf_global_offset(row: int, chunk: int, k_atoms: int) -> int:
    """Byte of scale factor (row, chunk) in CUTLASS's global layout (see ptxgen.derive.scaled.scales' docstring)."""
    atom = (row // SF_ATOM_ROWS) * k_atoms + chunk // SF_ATOM_CHUNKS
    return SF_ATOM_BYTES * atom + 16 * (row % 32) + 4 * ((row // 32) % 4) + chunk % SF_ATOM_CHUNKS


def sf_global_bytes(rows: int, k: int, vec: int) -> int:
    """Bytes of a rows x ceil(K / V) scale-factor matrix in CUTLASS's layout (rows and chunks padded to atoms)."""
    return ceil_div(rows, SF_ATOM_ROWS) * sf_k_atoms(k, vec) * SF_ATOM_BYTES


def sf_stage_bytes(rows: int, bk: int, vec: int) -> int:
    return ceil_div(rows, SF_ATOM_ROWS) * (bk // (SF_ATOM_CHUNKS * vec)) * SF_ATOM_BYTES


def sf_tmem_columns_per_stage(bm: int, bn: int, bk: int, vec: int) -> int:
    groups = bk // (SF_ATOM_CHUNKS * vec)
    return CP_32X128B_WARPX4.columns * groups * (ceil_div(bm, SF_ATOM_ROWS) + ceil_div(bn, SF_ATOM_ROWS))
