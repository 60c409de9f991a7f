"""--consumer-slabs N: a cooperative wgmma block-FP8 consumer warpgroup that owns N 64-row slabs and one shared partial.

Until this field every cooperative consumer warpgroup multiplied one 64-row slab of the tile (``consumer_warpgroups =
BM / 64``). DeepGEMM's fastest kernel at 4096x7168x16384 on the H200 (runs/2026-12-02-deepgemm-reference) is 256 x 128 with two
consumer warpgroups, warpgroup w owning rows 128w..128w+127 as two slabs, and one partial fragment that both slabs'
K blocks pass through: per K block the warpgroup issues slab 0's four m64nBNk32 wgmma into the partial, waits, promotes
into slab 0's accumulator, issues slab 1's into the same partial, waits, releases the stage and promotes slab 1. The
registers a consumer thread holds are N accumulators and one partial: N x BN/2 + BN/2 (192 of 232 at BN = 128, N = 2).

Tile slab ``t`` (rows 64t..64t+63 of the tile) belongs to consumer warpgroup ``t // N`` as its slab ``t % N``:
warpgroup wg's slab i starts at tile row ``64 (N wg + i)``, its A rows at ``(N wg + i) x`` the stage's slab stride.

The order of one K block (``shared_partial_steps``; the template renders it, ``ptxgen.model.numerics.slabmodel`` checks it):

    issue 0, scales, wait 0, promote 0, issue 1, wait 0, ..., issue N-1, wait 0, release, promote N-1

``scales`` reads every slab's A rows' and the tile's B scales from the landed stage's slots (``--fp8-scale-load
smem`` / ``tma``) while slab 0's MMAs run; ``release`` follows the last slab's wait (its MMAs read the stage) and the
scale reads (every consumer thread arrives after its own ``ld.shared``, pipeline.release_per_thread). No wgmma group is
in flight while the partial is promoted or at the loop's back edge (a fragment read with a group in flight makes
ptxas serialize every wgmma, C7514; docs/block-fp8.md).

>>> p = plan_consumer_slabs(256, 2)
>>> p.consumer_warpgroups, p.slabs, p.tile_slab(1, 0), p.first_row(1, 1)
(2, 2, 2, 192)
>>> " ".join(s.op + ("" if s.slab < 0 else str(s.slab)) for s in shared_partial_steps(2))
'issue0 scales wait promote0 issue1 wait release promote1'
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.types import Arch, Cluster, Consumers, Grouping, SpecError
from ..tile.derived import Derived

FLAG = "--consumer-slabs"
SLAB_ROWS = 64  # rows of one wgmma D fragment (m64): one slab
MAX_CONSUMER_SLABS = 4
MIN_CONSUMER_WARPGROUPS = 2  # the producer gives its registers to at least two consumer warpgroups (setmaxnreg)
PARTIAL_FRAGMENTS = 1  # one partial per consumer warpgroup, shared by its slabs


@dataclass(frozen=True)
class SlabStep:
    """One operation of a consumer warpgroup's K block, in program order: issue (slab ``slab``'s MMAs of the K block
    into the shared partial, scale-d 0 on the first K-step, one commit group), scales (read the stage's scale slots for
    every slab), wait (wait_group 0), release (the stage back to the producer), promote (slab ``slab``'s accumulator +=
    partial x its rows' A scales x the B scale)."""

    op: str
    slab: int = -1


def shared_partial_steps(slabs: int) -> tuple[SlabStep, ...]:
    """One K block of a warpgroup with ``slabs`` slabs and one partial (module docstring)."""
    out: list[SlabStep] = []
    for i in range(slabs):
        out.append(SlabStep("issue", i))
        out += [SlabStep("scales")] if i == 0 else []
        out.append(SlabStep("wait"))
        out += [SlabStep("release")] if i == slabs - 1 else []
        out.append(SlabStep("promote", i))
    return tuple(out)


@dataclass(frozen=True)
class SlabPlan:
    bm: int
    slabs: int  # 64-row slabs per consumer warpgroup
    steps: tuple[SlabStep, ...]  # one K block (shared_partial_steps)
    derivation: tuple[Derived, ...]

    @property
    def consumer_warpgroups(self) -> int:
        return self.bm // (SLAB_ROWS * self.slabs)

    def tile_steps(self, k_blocks: int) -> tuple[tuple[str, int, int], ...]:
        """(op, K block, slab) of a tile of ``k_blocks`` K blocks in program order: the K loop's steps each iteration
        (ptxgen.model.numerics.slabmodel.check_shared_partial simulates them)."""
        return tuple((st.op, kb, st.slab) for kb in range(k_blocks) for st in self.steps)

    def tile_slab(self, wg: int, slab: int) -> int:
        """The tile's 64-row slab that warpgroup ``wg`` multiplies as its slab ``slab``."""
        return self.slabs * wg + slab

    def first_row(self, wg: int, slab: int) -> int:
        return SLAB_ROWS * self.tile_slab(wg, slab)

    def row_offset_terms(self, slab: int) -> tuple[int, int]:
        """(rows per warpgroup, rows into it) of slab ``slab``: its first tile row is wg x the first + the second."""
        return SLAB_ROWS * self.slabs, SLAB_ROWS * slab

    def slab_stride_terms(self, slab: int, slab_stride_bytes: int) -> tuple[int, int]:
        """(bytes per warpgroup, bytes into it) of slab ``slab``'s A rows from the stage base (one slab = slab_stride_bytes)."""
        return self.slabs * slab_stride_bytes, slab * slab_stride_bytes


def plan_consumer_slabs(bm: int, slabs: int) -> SlabPlan | None:
    """None for one slab per warpgroup (the kernels before this field)."""
    if slabs == 1:
        return None
    wgs = bm // (SLAB_ROWS * slabs)
    steps = shared_partial_steps(slabs)
    D = (Derived("consumer_slabs", f"{slabs} per consumer warpgroup",
                 f"BM / (64 x {slabs}) = {wgs} consumer warpgroups; warpgroup wg owns tile rows {SLAB_ROWS * slabs} wg .. "
                 f"{SLAB_ROWS * slabs} wg + {SLAB_ROWS * slabs - 1} (slab i: rows {SLAB_ROWS * slabs} wg + 64 i ..)",
                 "fewer consumer warpgroups of more rows each: DeepGEMM's 256 x 128 kernel (two warpgroups of two slabs) "
                 "was the fastest at 4096x7168x16384 on the H200 (runs/2026-12-02-deepgemm-reference)",
                 "DeepGEMM sm90_fp8_gemm_1d2d (WGMMA::M x kNumWaves); PTX ISA wgmma .m64nNk32"),
         Derived("shared_partial", f"{PARTIAL_FRAGMENTS} partial fragment per warpgroup for its {slabs} slabs",
                 f"registers a thread: {slabs} accumulators + 1 partial = {slabs + 1} x BN / 2",
                 "per K block: " + ", ".join(s.op + ("" if s.slab < 0 else f" {s.slab}") for s in steps)
                 + "; the partial is overwritten (scale-d 0) only after its promotion, nothing is in flight while it is "
                 "read (C7514) or at the loop's back edge; the stage is released after the last slab's MMAs and the scale reads",
                 "DeepGEMM sm90_fp8_gemm_1d2d; checked by ptxgen.model.numerics.slabmodel.check_shared_partial"))
    return SlabPlan(bm, slabs, steps, D)


def check_consumer_slabs(t) -> None:
    """The rules of --consumer-slabs (``t``: a TileSpec; SpecError, exit 2): what the shared-partial loop is built for."""
    n = t.consumer_slabs
    if not 1 <= n <= MAX_CONSUMER_SLABS:
        raise SpecError(FLAG, n, f"a consumer warpgroup owns 1 to {MAX_CONSUMER_SLABS} slabs of {SLAB_ROWS} rows", "1, 2")
    if n == 1:
        return
    if t.arch is not Arch.SM90A or t.consumers is not Consumers.COOPERATIVE:
        raise SpecError(FLAG, n, "slabs shared by a cooperative wgmma consumer warpgroup (ping-pong warpgroups already "
                        "multiply the whole tile)", "--arch sm_90a --consumers cooperative, or 1")
    if t.fp8_blocks.value == "none":
        raise SpecError(FLAG, n, "built for block-scaled FP8's shared partial only (the plain loop is not derived for it)",
                        "--fp8-blocks 1x128x128, or 1")
    if t.bm % (SLAB_ROWS * n) or t.bm // (SLAB_ROWS * n) < MIN_CONSUMER_WARPGROUPS:
        raise SpecError(FLAG, n, f"BM = 64 x consumer warpgroups x slabs with at least {MIN_CONSUMER_WARPGROUPS} consumer "
                        "warpgroups (the producer's setmaxnreg gives its registers to them)", "--bm 256 --consumer-slabs 2")
    if t.fp8_stagger.value != "none" or t.fp8_overlap.value != "none":
        raise SpecError(FLAG, n, "the shared partial's order (issue, wait, promote per slab) is not derived with "
                        "--fp8-stagger or --fp8-overlap", "--fp8-stagger none --fp8-overlap none")
    if not t.scale_load.staged:
        raise SpecError(FLAG, n, "the scales come from the stage's slots (read once for every slab before the release)",
                        "--fp8-scale-load smem, cpasync or tma")
    if (t.cluster is not Cluster.C1X1 or t.stream_k > 1 or t.grouped is not Grouping.NONE or t.fuse is not None
            or t.split_k > 1):
        raise SpecError(FLAG, n, "not built with --cluster, --stream-k, --grouped, --split-k or --fuse yet",
                        "--cluster 1x1 --stream-k 1, no --grouped/--split-k/--fuse")
