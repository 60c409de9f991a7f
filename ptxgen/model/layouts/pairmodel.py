"""An independent model of what ``tcgen05.mma.cta_group::2`` reads from a CTA pair and where it writes D.

Like ``readmodel`` this module imports nothing from ptxgen: it transcribes the ISA, not the writer.

Facts it relies on (PTX ISA 9.1 'CTA Pair', 'Issue Granularity', 'Data Path Layout Organization';
CUTLASS include/cute/atom/mma_traits_sm100.hpp, SM100_MMA_F16BF16_2x1SM_SS: ThrID = Layout<_2>,
ALayout (2,(M/2,K)):(M/2,(1,M)), BLayout (2,(N/2,K)):(N/2,(1,N)), CLayout (2,(M/2,N)):(M/2,(1,M))):
  * a CTA pair is two CTAs whose %cluster_ctarank differ in the last bit; one thread issues the MMA with ONE
    A descriptor and ONE B descriptor, which name shared::cta addresses; the hardware reads them in BOTH CTAs;
  * the even CTA (rank bit 0 = 0) supplies rows 0..M/2-1 of A and rows 0..N/2-1 of B (columns of D); the odd
    CTA supplies rows M/2..M-1 of A and N/2..N-1 of B;
  * D rows 0..M/2-1 land in the even CTA's Tensor Memory, M/2..M-1 in the odd CTA's, every column in both;
  * the pair's M and N are the instruction descriptor's (N >> 3 at bits 17-22, M >> 4 at bits 24-28);
  * placement in each CTA's TMEM (CUTLASS tmem_frg<..., 2>): M=256 (Layout A) row m of the CTA's 128 in lane m,
    column n at column n; M=128 (Layout B, '2x2') row m of the CTA's 64 in lane m for columns n < N/2 and in lane
    64 + m at column n - N/2 for the rest. cta_group::1 M=128 (Layout D): row m in lane m, column n at n.

>>> decode_mn(0x10400010)   # M=256, N=256
(256, 256)
>>> d_home(2, 130, 5, 256, 256), d_home(2, 70, 100, 128, 128)
((1, 2, 5), (1, 70, 36))
"""

from __future__ import annotations

import numpy as np

from . import readmodel

CTAS = 2


def decode_mn(idesc: int) -> tuple[int, int]:
    """(M, N) of a kind::f16/tf32/f8f6f4/i8 instruction descriptor (PTX 'Instruction descriptor' table)."""
    n = ((idesc >> 17) & 0x3F) << 3
    m = ((idesc >> 24) & 0x1F) << 4
    return m, n


def pair_operands(arch: str, a_desc: int, b_desc: int, idesc: int, a_major: str, b_major: str, a_dtype: str, b_dtype: str,
                  images: tuple[np.ndarray, ...], cta_group: int = 2, rule: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(A as M x K, B as N x K) that one MMA of the pair reads: CTA r's image supplies A rows r x M/cta_group ..
    and B rows r x N/cta_group .., through the same descriptors. ``images[r]`` is CTA r's shared memory."""
    m, n = decode_mn(idesc)
    if len(images) != cta_group:
        raise ValueError(f"cta_group::{cta_group} reads {cta_group} shared-memory image(s), not {len(images)}")
    if m % cta_group or n % cta_group:
        raise ValueError(f"M={m}, N={n} do not split over {cta_group} CTAs")
    a = [readmodel.read(arch, a_desc, a_major, m // cta_group, a_dtype, img, rule) for img in images]
    b = [readmodel.read(arch, b_desc, b_major, n // cta_group, b_dtype, img, rule) for img in images]
    return np.concatenate(a, axis=0), np.concatenate(b, axis=0)


def d_home(cta_group: int, row: int, col: int, m: int, n: int) -> tuple[int, int, int]:
    """(CTA rank, TMEM lane, TMEM column offset) that hold D[row, col] of an M x N MMA accumulator."""
    if cta_group == 1:
        if m != 128:
            raise ValueError("only cta_group::1 M=128 (Layout D) is modelled here")
        return 0, row, col
    rows = m // CTAS
    cta, r = divmod(row, rows)
    if m == 256:  # Layout A
        return cta, r, col
    if m == 128:  # Layout B
        half = n // 2
        return (cta, r, col) if col < half else (cta, 64 + r, col - half)
    raise ValueError(f"cta_group::2 has M = 128 or 256, not {m}")
