"""Split-K: the K-range of each split, the f32 workspace, and the fixed-order reduction that writes D.

A split-K kernel (``--split-k S``, S > 1) launches S CTAs per output tile (grid z = the split). Split z takes a
run of whole K-tiles of the T = ceil(K / BK) the tile needs, the runs balanced to within one K-tile:

    q = T / S, r = T % S;  split z takes K-tiles [z q + min(z, r), z q + min(z, r) + q + (z < r))

so every K-tile belongs to exactly one split for any K, BK and S (tests/test_splitk.py checks it with hypothesis,
and checks the C the emit layer renders from this plan against it). A split whose run is empty (T < S) stores a
zero tile. Each CTA stores its f32 partial tile into slice z of the workspace (slice z: M rows of ``ld`` floats
starting at float z M ld); a second kernel of the same module sums the S slices of every element in the order
0, 1, ..., S-1 (never atomics: the sum, and so D, is the same on every run), converts it and writes D.

>>> p = plan_split(4, 64)
>>> [p.k_range(z, 1000) for z in range(4)]   # K = 1000: T = 16 K-tiles of 64
[(0, 4), (4, 4), (8, 4), (12, 4)]
>>> [p.k_range(z, 64 * 6) for z in range(4)]  # T = 6: two splits take one more
[(0, 2), (2, 2), (4, 1), (5, 1)]
>>> p.workspace_ld(37), p.workspace_bytes(5, 37)
(40, 3200)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tile.derived import Derived

WORKSPACE_VECTOR = 4  # f32 per 16-byte vector: the reduction reads each slice in 16-byte vectors
WORKSPACE_ELEMENT_BYTES = 4  # f32 partial sums
REDUCE_THREADS = 256  # threads per block of the reduction kernel: one 16-byte vector (4 columns) of one row each


@dataclass(frozen=True)
class SplitPlan:
    """The split of K, the workspace layout and the reduction, for one spec (S = ``splits``, K-tile ``bk``)."""

    splits: int
    bk: int

    # -- the K-range ----------------------------------------------------------------------------------
    def k_tiles(self, k: int) -> int:
        return -(-k // self.bk)

    def k_range(self, z: int, k: int) -> tuple[int, int]:
        """(first K-tile, K-tiles) of split ``z`` for reduction extent ``k``."""
        t = self.k_tiles(k)
        q, r = divmod(t, self.splits)
        return z * q + min(z, r), q + (1 if z < r else 0)

    # -- the workspace --------------------------------------------------------------------------------
    def workspace_ld(self, n: int) -> int:
        """Floats per workspace row: N rounded up to a 16-byte vector, so every row starts 16-byte aligned."""
        return -(-n // WORKSPACE_VECTOR) * WORKSPACE_VECTOR

    def slice_elements(self, m: int, n: int) -> int:
        return m * self.workspace_ld(n)

    def workspace_bytes(self, m: int, n: int) -> int:
        return self.splits * self.slice_elements(m, n) * WORKSPACE_ELEMENT_BYTES

    # -- the reduction --------------------------------------------------------------------------------
    def reduce_vectors(self, m: int, n: int) -> int:
        """16-byte vectors of one slice: one reduction thread each."""
        return m * (self.workspace_ld(n) // WORKSPACE_VECTOR)

    def reduce_grid(self, m: int, n: int) -> tuple[int, int, int]:
        return (max(1, -(-self.reduce_vectors(m, n) // REDUCE_THREADS)), 1, 1)

    @property
    def reduce_block(self) -> tuple[int, int, int]:
        return (REDUCE_THREADS, 1, 1)

    def derivation(self) -> tuple[Derived, ...]:
        s, bk = self.splits, self.bk
        return (
            Derived("split_k", s, f"grid z = {s}: {s} CTAs per output tile",
                    "few tiles (small M, or a last wave that leaves SMs idle) cannot fill the GPU; splitting K gives each tile "
                    f"{s} CTAs that stream disjoint parts of A and B", "CUTLASS GemmSplitKParallel; cuBLAS runs split-K at small M"),
            Derived("k_range", f"T = ceil(K / {bk}); q = T / {s}, r = T % {s}",
                    "split z takes K-tiles [z q + min(z, r), ... + q + (z < r)); k0 = (first + kt) x BK",
                    "whole K-tiles, balanced to within one: every K-tile in exactly one split (the loads past K read zeros as "
                    "without a split)", "tests/test_splitk.py (hypothesis, any K, BK, S)"),
            Derived("workspace", f"{s} slices x M x ld f32, ld = ceil(N / {WORKSPACE_VECTOR}) x {WORKSPACE_VECTOR}",
                    "split z's partial tile goes to floats [z M ld, (z + 1) M ld): the MMA kernel's D is the workspace, "
                    "its ldd is ld",
                    "rows start 16-byte aligned for the reduction's vector loads; f32 so the split adds no rounding before the sum",
                    "ptxgen.derive.store.splitk"),
            Derived("reduction", f"{REDUCE_THREADS} threads a block, one {WORKSPACE_VECTOR}-column vector of one row each; "
                    f"grid = ceil(M x ld / {WORKSPACE_VECTOR} / {REDUCE_THREADS})",
                    f"sum = slice 0 + slice 1 + ... + slice {s - 1}, in that order, then D's type; columns past N are read, "
                    "never written",
                    "a fixed order of f32 additions: D is the same on every run (no atomics whose order changes the sum)",
                    "second kernel of the same module, launched after the MMA kernel on the same stream"),
        )


def plan_split(splits: int, bk: int) -> SplitPlan | None:
    """The plan of a split-K spec; None without a split."""
    return SplitPlan(splits, bk) if splits > 1 else None
