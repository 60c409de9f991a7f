"""An independent model of the K-grouped GEMM with 1 x 128 scales on both operands (DeepGEMM's k-grouped 1D1D weight
gradient, ``--grouped offs_k --fp8-blocks 1x128x1x128``). Imports nothing from ptxgen.

The convention it checks against: group g owns K indices ``offs[g - 1] .. offs[g] - 1`` of the stacked K axis
(``offs[-1] = 0``; non-decreasing offs, as the callers pass them); the scales are one f32 per row and per 128 of that
axis, ``scale_a`` ``ceil(K_total / 128) x M`` and ``scale_b`` ``ceil(K_total / 128) x N`` (MN-major, as the dense
1D1D recipe's); and

    out[g][m, n] = sum over the 128-blocks kb inside group g of  scale_a[kb, m] x scale_b[kb, n] x (a[m, block] . b[n, block])

which is well defined only where every group boundary lies on a block boundary, so that no block is shared by two
groups (DeepGEMM asserts each group's K is a multiple of 128; a group may end at K_total anywhere, the last block being
short). A group that breaks the rule has no defined product: the kernel stores NaN for it, and so does :func:`reference`.

* :func:`group_is_defined`: the rule, for one group;
* :func:`blocks_of`: the 128-blocks each group's product reads (None where the group is not defined);
* :func:`check_blocks`: a kernel's blocks per group (from its plan, or from its rendered C run on the CPU) against them;
* :func:`reference`: the float64 output, G x M x N.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

BLOCK = 128


def group_is_defined(start: int, end: int, k_total: int) -> bool:
    """Whether group [start, end) of K_total has a product under the recipe: empty, or starting on a block and ending on
    one or at K_total."""
    if end <= start:
        return True
    return start % BLOCK == 0 and (end % BLOCK == 0 or end == k_total)


def _ranges(offs: Sequence[int]) -> list[tuple[int, int]]:
    out, lo = [], 0
    for end in offs:
        out.append((lo, int(end)))
        lo = int(end)
    return out


def blocks_of(offs: Sequence[int], k_total: int) -> list[tuple[int, ...] | None]:
    """For each group, the blocks kb (in order) whose rows it reads; () for an empty group, None where it is not
    defined."""
    out: list[tuple[int, ...] | None] = []
    for start, end in _ranges(offs):
        if not group_is_defined(start, end, k_total):
            out.append(None)
        else:
            out.append(tuple(range(start // BLOCK, -(-end // BLOCK))) if end > start else ())
    return out


def check_blocks(kernel_blocks: Callable[[int], tuple[int, ...] | None], offs: Sequence[int], k_total: int) -> list[str]:
    """Everything wrong with the kernel's blocks of each group (``kernel_blocks(g)``: its blocks in order, None for a
    group it marks as not computed)."""
    problems = []
    for g, want in enumerate(blocks_of(offs, k_total)):
        got = kernel_blocks(g)
        if got != want:
            problems.append(f"group {g} (offs {list(offs)}, K_total {k_total}): kernel reads blocks {got}, the recipe {want}")
    return problems


def reference(a: np.ndarray, b: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray, offs: Sequence[int]) -> np.ndarray:
    """float64 out (G x M x N): a M x K_total, b N x K_total, scale_a ceil(K_total / 128) x M, scale_b ceil(K_total /
    128) x N; NaN for a group that is not defined, 0 for an empty one."""
    m, k_total = a.shape
    n = b.shape[0]
    out = np.zeros((len(offs), m, n))
    for g, (start, end) in enumerate(_ranges(offs)):
        if not group_is_defined(start, end, k_total):
            out[g] = np.nan
            continue
        for lo in range(start, end, BLOCK):
            hi = min(lo + BLOCK, end)
            part = a[:, lo:hi].astype(np.float64) @ b[:, lo:hi].astype(np.float64).T
            out[g] += part * scale_a[lo // BLOCK][:, None].astype(np.float64) * scale_b[lo // BLOCK][None, :].astype(np.float64)
    return out
