"""An independent model of the K-grouped GEMM (``torch._grouped_mm``'s 2-D x 2-D form): which K rows each output
element reads per group, and what the K tail's zeroing must leave in a shared-memory stage.

Imports nothing from ptxgen but its sibling :mod:`ptxgen.model.layouts.tmamodel` (the TMA writer's own model). The
convention it checks against: group g owns K indices ``offs[g - 1] .. offs[g] - 1`` (``offs[-1] = 0``) and
``out[g] = a[:, K of g] @ b[:, K of g]^T`` (G x M x N); an empty group's ``out[g]`` is zero.

* :func:`k_rows_read`: given a group's K-tiles as the kernel takes them (box start k0, and the window [lo, hi) of
  box offsets kept) and the tile depth BK, the K indices whose A and B values enter ``out[g]``: a TMA box reads
  ``k0 .. k0 + BK - 1``, zeros past K_total; offsets outside the window are zeroed (``masked=False``: the box left as
  TMA wrote it, the control).
* :func:`check_k_walk`: every group reads each of its K indices exactly once and nothing else.
* :func:`simulate`: the product on small integer matrices through those boxes, to compare with per-group products.
* :func:`check_tail_zeroing`: a stage written by the TMA model from a tensor of distinct element codes, then zeroed by
  ``zero_fn`` (the rendered C, run on the CPU): exactly the elements of K offset outside [lo, hi) are gone. 16-bit
  elements carry their code in one stage; 8-bit (FP8) ones in two, one byte of the code each, zeroed alike.

The walk with a cluster (``--cluster 2x1`` or ``1x2``), the CTAs of each work item:

* :func:`check_cluster_walk`: the active CTAs cover every tile of every group's out exactly once; the CTAs of one
  work item belong to one group (the same K range, so the same K-tiles in the same ring slots) and read the same tile
  of the operand they share (2x1: B, the same tile column; 1x2: A, the same tile row), an inactive CTA a real tile of
  that group.

The TMA-store epilogue (``--epilogue tma``), what a store writes:

* :func:`tma_store_writes`: the element offsets (from the map's base) one tile-mode TMA store of a box writes, for a
  map of any rank given by its extents and strides: box element i at coordinate + i is written only where every
  coordinate lies inside its own extent, and along the inner dimension on to the next 16-byte boundary (as measured
  on an H200 where a row's length is not a multiple of 16 B);
* :func:`check_tile_writes`: every tile's stores write exactly its part of ``out[g]`` (rows < M, columns < N of group
  g, at ``g M ldd + row ldd + column``), each element once, and nothing of another group.

The row-wise FP8 form (``torch._scaled_grouped_mm``'s 2-D x 2-D, PyTorch's ``test_scaled_grouped_gemm_2d_2d``): each
group's reference is ``torch._scaled_mm(a[:, K of g], b[:, K of g].t(), scale_a[g m:(g + 1) m].view(-1, 1),
scale_b[g n:(g + 1) n].view(1, -1))``, so ``out[g][r, c]`` reads the r-th element of group g's slice of scale_a and
the c-th of its slice of scale_b:

* :func:`torch_scale_slices` / :func:`check_scale_reads`: which scale_a and scale_b element each output element reads
  (``read(g, r, c)``: the derivation's or the rendered C's), element by element;
* :func:`reference_scaled`: the per-group scaled products by those slices (float64).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

import numpy as np

from . import tmamodel


def torch_k_ranges(offs: Sequence[int]) -> list[range]:
    """torch's K ranges for non-decreasing offs: group g is [offs[g - 1], offs[g])."""
    out, lo = [], 0
    for end in offs:
        out.append(range(lo, int(end)))
        lo = int(end)
    return out


def k_rows_read(blocks: Sequence[tuple[int, int, int]], k_total: int, bk: int, masked: bool = True) -> Counter:
    """How many times each K index enters the group's product (a box row past K_total reads zero: not counted)."""
    seen: Counter = Counter()
    for k0, lo, hi in blocks:
        for r in range(bk):
            k = k0 + r
            if k < 0 or k >= k_total or (masked and not lo <= r < hi):
                continue
            seen[k] += 1
    return seen


def check_k_walk(blocks_of: Sequence[Sequence[tuple[int, int, int]]], offs: Sequence[int], k_total: int, bk: int,
                 masked: bool = True) -> list[str]:
    """Everything wrong with the groups' K-tiles (empty: each group reads exactly its K indices, once)."""
    problems = []
    want = torch_k_ranges(offs)
    if len(blocks_of) != len(want):
        return [f"{len(blocks_of)} groups of K-tiles for {len(want)} groups"]
    for g, (blocks, rng) in enumerate(zip(blocks_of, want)):
        got = k_rows_read(blocks, k_total, bk, masked)
        expect = Counter(rng)
        if got != expect:
            extra = sorted(set(got) - set(expect))[:4]
            missing = sorted(set(expect) - set(got))[:4]
            twice = sorted(k for k, c in got.items() if c > 1)[:4]
            problems.append(f"group {g} (K {rng.start}..{rng.stop - 1}): reads extra K {extra}, misses {missing}, twice {twice}")
    return problems


def simulate(a: np.ndarray, b: np.ndarray, blocks_of: Sequence[Sequence[tuple[int, int, int]]], bk: int,
             masked: bool = True) -> np.ndarray:
    """out[g] = sum over group g's boxes of A_box @ B_box^T, each box BK K rows from k0 (zeros past K_total; offsets
    outside [lo, hi) zeroed when ``masked``). ``a``: M x K_total, ``b``: N x K_total (integers: exact)."""
    m, k_total = a.shape
    out = np.zeros((len(blocks_of), m, b.shape[0]), dtype=np.int64)
    for g, blocks in enumerate(blocks_of):
        for k0, lo, hi in blocks:
            keep = np.array([0 <= k0 + r < k_total and (not masked or lo <= r < hi) for r in range(bk)])
            idx = np.clip(np.arange(k0, k0 + bk), 0, k_total - 1)
            ab, bb = a[:, idx] * keep, b[:, idx] * keep
            out[g] += ab.astype(np.int64) @ bb.astype(np.int64).T
    return out


def reference(a: np.ndarray, b: np.ndarray, offs: Sequence[int]) -> np.ndarray:
    """Per-group products by torch's convention (integers)."""
    return np.stack([a[:, r].astype(np.int64) @ b[:, r].astype(np.int64).T for r in
                     (np.arange(x.start, x.stop) for x in torch_k_ranges(offs))])


def _codes_at(images: list[np.ndarray], element_bytes: int) -> np.ndarray:
    """The element codes of a stage held in ``images`` (one per byte of the code for 8-bit elements), per element."""
    if element_bytes == 2:
        return images[0].view(np.uint16).astype(np.uint32)
    return images[0].astype(np.uint32) | (images[1].astype(np.uint32) << 8)


def check_tail_zeroing(tma: dict, k_major: bool, mn: int, bk: int, lo: int, hi: int,
                       zero_fn: Callable[[np.ndarray, int, int, int], None], stage_address: int = 1024,
                       anchor: str = "address", element_bytes: int = 2) -> list[str]:
    """One operand stage of ``mn`` x ``bk`` 16-bit (``element_bytes`` 2) or 8-bit (1) elements (K-major: global
    [mn, k]; MN-major: global [k, mn]) written by the TMA model from distinct element codes, then ``zero_fn(image,
    stage_address, lo, hi)``: the codes left must be exactly those of K offset in [lo, hi), each once. 8-bit elements:
    the codes' low and high bytes in two stage images, each written and zeroed the same way."""
    code = 1 + np.arange(mn * bk, dtype=np.uint32).reshape(mn, bk)  # code of (mn, k): 1 + mn bk + k
    if code.max() >= 1 << 16:
        raise ValueError("the tile has more elements than 16-bit codes")
    if element_bytes not in (1, 2):
        raise ValueError(f"element size {element_bytes} B: the K-grouped kernels read 16-bit or 8-bit operands")
    parts = [code.astype(np.uint16)] if element_bytes == 2 else [(code & 0xFF).astype(np.uint8), (code >> 8).astype(np.uint8)]
    images = []
    for part in parts:
        image = np.zeros(stage_address + 4 * mn * bk + 1024, dtype=np.uint8)
        tmamodel.write(tma, element_bytes, stage_address, (0, 0), part if k_major else part.T.copy(), image, anchor=anchor)
        images.append(image)
    before = set(_codes_at(images, element_bytes).tolist()) - {0}
    if before != set(code.ravel().tolist()):
        return [f"the TMA model wrote {len(before)} of {mn * bk} codes"]
    for image in images:
        zero_fn(image, stage_address, lo, hi)
    words = _codes_at(images, element_bytes)
    left = Counter(words[words != 0].tolist())
    want = set(code[:, lo:hi].ravel().tolist())
    problems = []
    gone = sorted(c for c in want if left.get(c, 0) != 1)
    kept = sorted(c for c in left if c not in want)
    if gone:
        problems.append(f"{len(gone)} elements of K offset in [{lo}, {hi}) were lost or duplicated (codes {gone[:4]})")
    if kept:
        problems.append(f"{len(kept)} elements of K offset outside [{lo}, {hi}) were not zeroed (first at K offset "
                        f"{(kept[0] - 1) % bk}, row {(kept[0] - 1) // bk})")
    return problems


def torch_scale_slices(groups: int, m: int, n: int) -> tuple[list[range], list[range]]:
    """Group g's slice of scale_a and of scale_b as PyTorch's test_scaled_grouped_gemm_2d_2d cuts them:
    ``scale_a[i * m : (i + 1) * m]`` and ``scale_b[i * n : (i + 1) * n]``."""
    return [range(i * m, (i + 1) * m) for i in range(groups)], [range(i * n, (i + 1) * n) for i in range(groups)]


def check_scale_reads(read: Callable[[int, int, int], tuple[int, int]], groups: int, m: int, n: int) -> list[str]:
    """Everything wrong with ``read(g, r, c)`` -> (scale_a element, scale_b element) for every output element of
    every group (empty: each reads the r-th of its group's scale_a slice and the c-th of its scale_b slice)."""
    sa, sb = torch_scale_slices(groups, m, n)
    problems = []
    for g in range(groups):
        for r in range(m):
            for c in range(n):
                got = tuple(read(g, r, c))
                want = (sa[g][r], sb[g][c])
                if got != want:
                    problems.append(f"out[{g}][{r}, {c}] reads scale_a[{got[0]}], scale_b[{got[1]}]; torch's slices give "
                                    f"scale_a[{want[0]}], scale_b[{want[1]}]")
                    if len(problems) >= 4:
                        return problems
    return problems


def reference_scaled(a: np.ndarray, b: np.ndarray, offs: Sequence[int], scale_a: np.ndarray,
                     scale_b: np.ndarray) -> np.ndarray:
    """Per-group scaled products by torch's convention (float64): (a[:, K of g] @ b[:, K of g].T) x scale_a's slice
    of group g (per row) x scale_b's (per column)."""
    m, n = a.shape[0], b.shape[0]
    sa, sb = torch_scale_slices(len(offs), m, n)
    prods = reference(a, b, offs).astype(np.float64)
    return np.stack([prods[g] * scale_a[list(sa[g])][:, None] * scale_b[list(sb[g])][None, :] for g in range(len(offs))])


def check_cluster_walk(ctas: Sequence[tuple[int, int, int, int, bool]], groups: int, tiles_m: int, tiles_n: int,
                       cluster: tuple[int, int]) -> list[str]:
    """Everything wrong with a clustered walk: ``ctas`` holds one (work item, group, tile row, tile column, active) per
    CTA of each work item (empty: the checks in the module docstring hold)."""
    problems: list[str] = []
    by_item: dict[int, list[tuple[int, int, int, bool]]] = {}
    for item, group, tm, tn, active in ctas:
        by_item.setdefault(item, []).append((group, tm, tn, active))
    size = cluster[0] * cluster[1]
    covered: Counter = Counter()
    for item, members in sorted(by_item.items()):
        if len(members) != size:
            problems.append(f"item {item}: {len(members)} CTAs, not {size}")
        if len({g for g, _, _, _ in members}) != 1:
            problems.append(f"item {item}: its CTAs are in groups {sorted({g for g, _, _, _ in members})}")
        shared = {tn for _, _, tn, _ in members} if cluster[0] > 1 else {tm for _, tm, _, _ in members}
        if len(shared) != 1:
            problems.append(f"item {item}: its CTAs read {'B tile columns' if cluster[0] > 1 else 'A tile rows'} {sorted(shared)}")
        for g, tm, tn, active in members:
            if not (0 <= g < groups and 0 <= tm < tiles_m and 0 <= tn < tiles_n):
                problems.append(f"item {item}: tile ({tm}, {tn}) of group {g} is outside the {groups} x {tiles_m} x {tiles_n} tiles")
            elif active:
                covered[(g, tm, tn)] += 1
    want = {(g, i, j) for g in range(groups) for i in range(tiles_m) for j in range(tiles_n)}
    missing = sorted(want - set(covered))
    twice = sorted(t for t, c in covered.items() if c > 1)
    if missing:
        problems.append(f"{len(missing)} tiles stored by no CTA, first {missing[0]}")
    if twice:
        problems.append(f"{len(twice)} tiles stored twice, first {twice[0]}")
    return problems


STORE_EDGE_BYTES = 16  # measured (H200): a store crossing the inner extent wrote on to the next 16-byte boundary


def tma_store_writes(dims: Sequence[int], strides: Sequence[int], box: Sequence[int], coord: Sequence[int],
                     element_bytes: int) -> np.ndarray:
    """Offsets (elements, from the map's base) one TMA store of ``box`` at ``coord`` writes. ``dims``: the extents,
    inner first; ``strides``: elements between consecutive indices of dimensions 1.. (dimension 0 is contiguous).
    An element is written when each of its coordinates is inside its dimension; the inner dimension's limit is rounded
    up to 16 bytes."""
    if not len(dims) == len(box) == len(coord) == len(strides) + 1:
        raise ValueError(f"a rank-{len(dims)} map needs {len(dims)} box extents, coordinates and {len(dims) - 1} strides")
    per = STORE_EDGE_BYTES // element_bytes
    limits = [-(-int(dims[0]) // per) * per] + [int(d) for d in dims[1:]]
    axes = [np.arange(c, c + b) for c, b in zip(coord, box)]
    axes = [ax[(ax >= 0) & (ax < lim)] for ax, lim in zip(axes, limits)]
    offset = np.zeros((1,), dtype=np.int64)
    for ax, stride in zip(axes, (1, *strides)):
        offset = (offset[:, None] + ax[None, :].astype(np.int64) * int(stride)).ravel()
    return offset


def check_tile_writes(writes: np.ndarray, group: int, m0: int, n0: int, bm: int, bn: int, m: int, n: int,
                      ldd: int) -> list[str]:
    """Everything wrong with the offsets ``writes`` (all stores of one tile of out[group], elements from out[0]): they
    must be exactly rows m0 .. min(m0 + BM, M) - 1, columns n0 .. min(n0 + BN, N) - 1 of out[group], each once."""
    rows = np.arange(m0, min(m0 + bm, m))
    cols = np.arange(n0, min(n0 + bn, n))
    want = (group * m * ldd + rows[:, None] * ldd + cols[None, :]).ravel()
    got, counts = np.unique(writes, return_counts=True)
    problems = []
    if (counts > 1).any():
        problems.append(f"tile ({group}, {m0}, {n0}): {int((counts > 1).sum())} elements written more than once")
    extra = np.setdiff1d(got, want)
    if extra.size:
        g, rest = np.divmod(extra, m * ldd)
        r, c = np.divmod(rest, ldd)
        problems.append(f"tile ({group}, {m0}, {n0}) wrote {extra.size} elements outside its part of out[{group}], the "
                        f"first at out[{int(g[0])}][{int(r[0])}, {int(c[0])}]")
    missing = np.setdiff1d(want, got)
    if missing.size:
        problems.append(f"tile ({group}, {m0}, {n0}) left {missing.size} elements of out[{group}] unwritten")
    return problems
