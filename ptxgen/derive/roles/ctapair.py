"""The CTA pair of ``--cta-group 2``: who holds, loads, issues and signals what.

With ``tcgen05.mma.cta_group::2`` two CTAs of a cluster whose ``%cluster_ctarank`` differ only in the last bit
(PTX 'CTA Pair') compute one BM x BN tile together; BM is the pair's MMA M (128 or 256). One thread of the
even CTA (the leader, rank 0 here: the cluster is exactly the pair) issues every MMA; the instruction takes one
A and one B descriptor and reads the same shared::cta offsets in both CTAs:

* A: CTA r holds rows r x BM/2 .. r x BM/2 + BM/2 - 1 of the tile (CUTLASS SM100_MMA_*_2x1SM_SS ALayout
  ``(2,(M/2,K)):(M/2,(1,M))``: CTA index stride M/2 along M);
* B: CTA r holds rows r x BN/2 .. of B, i.e. columns of D (BLayout ``(2,(N/2,K)):(N/2,(1,N))``);
* D: CTA r's Tensor Memory holds rows r x BM/2 .. of D, every column (CLayout ``(2,(M/2,N)):(M/2,(1,M))``);
  M=256 is data-path Layout A (128 rows per CTA, row m in lane m); M=128 is Layout B, '2x2': 64 rows per
  CTA, columns [0, N/2) in lanes 0-63 and [N/2, N) in lanes 64-127 (CUTLASS tmem_frg<..,2> M_MMA=64 atom
  ``(64,(N/2,2)):(1,(128,64))``).

So each CTA's stages, descriptors and tensor maps are derived for its own half (``TileSpec.mn_extent``), with
the same offsets in both CTAs; the instruction descriptor carries the pair's M and N.

Signalling (CUTLASS PipelineTmaUmmaAsync / umma_arrive_multicast_2x1SM; DeepGEMM sm100 2-CTA kernels):
* each CTA's producer loads its own halves; its copies complete the LEADER's ``full[s]``
  (``cp.async.bulk.tensor .cta_group::2`` with the barrier address mapped to rank 0 by ``mapa``); only the
  leader's producer arms it, with ``expect_tx`` = both CTAs' bytes;
* the leader's MMA thread waits ``full[s]``, issues the MMAs, and ``tcgen05.commit.cta_group::2 ...
  .multicast::cluster`` with ctaMask 0b11 arrives on ``empty[s]`` of BOTH CTAs (each producer waits its own);
  after a tile's last K-tile the same multicast commit arrives on both CTAs' ``acc_full``;
* each CTA's epilogue reads its own TMEM rows and arrives on the LEADER's ``acc_empty`` (8 arrivals: 4 warps x 2
  CTAs, remote ones through ``mapa``), which the MMA thread waits before reusing the accumulator;
* TMEM: warp 0 of EACH CTA runs ``tcgen05.alloc.cta_group::2`` (the pair allocates together, the same columns
  in both), after a relaxed cluster barrier (the peer must be running before a pair allocates), and, at the end,
  ``tcgen05.dealloc.cta_group::2``; a cluster barrier after the allocation (barriers
  initialised, TMEM allocated in both CTAs before any remote signal) and at the end (no CTA leaves while its
  peer may still signal it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.ptxref import cite
from ...isa.shapes import TCGEN05_EPILOGUE_WARPS
from ...isa.types import Major
from ..tile.derived import Derived
from ..tile.spec import TileSpec

CTAS = 2
LEADER_RANK = 0
COMMIT_MASK = 0b11  # tcgen05.commit .multicast::cluster ctaMask: bit r = CTA rank r of the cluster
EPILOGUE_WARPS = TCGEN05_EPILOGUE_WARPS
CUTLASS_REF = "CUTLASS include/cute/atom/mma_traits_sm100.hpp (SM100_MMA_F16BF16_2x1SM_SS: ThrID, ALayout, BLayout, CLayout)"
PIPE_REF = "CUTLASS include/cutlass/pipeline/sm100_pipeline.hpp (PipelineTmaUmmaAsync, umma_arrive_multicast_2x1SM)"


@dataclass(frozen=True)
class CtaShare:
    """What CTA ``rank`` of the pair holds: the first row of its share of each operand and of D, within the tile."""

    rank: int
    a_row0: int  # first M row of A (and of D) this CTA holds
    b_row0: int  # first N row of B (= column of D) this CTA holds

    def origin(self, name: str) -> int:
        return self.a_row0 if name == "a" else self.b_row0


@dataclass(frozen=True)
class CtaPairPlan:
    bm: int  # the pair's MMA M
    bn: int  # the pair's MMA N
    a_rows: int  # rows of A in each CTA's stage (BM/2)
    b_rows: int  # rows of B in each CTA's stage (BN/2)
    d_rows: int  # rows of D in each CTA's Tensor Memory
    shares: tuple[CtaShare, ...]
    cluster: tuple[int, int, int]
    leader_rank: int
    commit_mask: int
    expect_tx_bytes: int  # leader's full[s]: both CTAs' A + B bytes of one stage
    cta_stage_bytes: int  # one CTA's A + B bytes of one stage
    acc_empty_arrivals: int  # leader's acc_empty: epilogue warps of both CTAs
    tmem_layout: str  # "A" (M=256) or "B" (M=128, 2x2)
    tmem_columns: int  # allocated per CTA (tcgen05.alloc.cta_group::2, the same in both)
    epilogue_col_split: int  # columns each epilogue warp reads: BN (Layout A) or BN/2 (Layout B)
    # What epilogue warp ``warp`` (0-3), ``lane``, reading TMEM lane 32 x warp + lane at column c0, holds: D row
    # (within this CTA's rows) and D column (within the tile). Integer expressions in the common subset of C and
    # Python (``/`` is integer division in C; ptxgen.model.bridges.verify_pair evaluates them with //); the kernel renders
    # these strings.
    epi_row_expr: str
    epi_col_expr: str
    derivation: tuple[Derived, ...]
    # Block-scaled pairs: each CTA's scale factors arrive by cp.async.bulk, which (unlike cp.async.bulk.tensor
    # .cta_group::2) signals only an mbarrier of the CTA it writes to. The leader's copies complete the leader's
    # full[s] (inside expect_tx_bytes); the peer's complete the PEER's full[s] (peer_expect_tx_bytes a stage), and
    # the peer's otherwise idle MMA thread waits that barrier and relays it with one remote arrive on the leader's
    # full[s], whose count is then 2 (full_arrivals_leader).
    sf_relay: bool = False
    peer_expect_tx_bytes: int = 0
    full_arrivals_leader: int = 1

    def to_json(self) -> dict:
        """The ``cta_pair`` object of ``explain --json``."""
        return {
            "ctas": CTAS,
            "cluster": list(self.cluster),
            "leader_rank": self.leader_rank,
            "mma_m": self.bm,
            "mma_n": self.bn,
            "a_rows_per_cta": self.a_rows,
            "b_rows_per_cta": self.b_rows,
            "d_rows_per_cta": self.d_rows,
            "a_row0": [s.a_row0 for s in self.shares],
            "b_row0": [s.b_row0 for s in self.shares],
            "commit_mask": self.commit_mask,
            "expect_tx_bytes": self.expect_tx_bytes,
            "acc_empty_arrivals": self.acc_empty_arrivals,
            **({"sf_relay": {"peer_expect_tx_bytes": self.peer_expect_tx_bytes, "leader_full_arrivals": self.full_arrivals_leader}}
               if self.sf_relay else {}),
            "tmem_layout": self.tmem_layout,
            "tmem_columns_per_cta": self.tmem_columns,
            "epilogue": {"row": self.epi_row_expr, "col": self.epi_col_expr, "cols_per_warp": self.epilogue_col_split},
        }


SF_PAIR_REF = ("CUTLASS include/cutlass/gemm/collective/sm100_blockscaled_mma_warpspecialized.hpp (TileShape_SF, "
               "SM100_UTCCP_4x32dp128bit_2cta, SFTransactionBytes) and include/cute/atom/mma_traits_sm100.hpp "
               "(SM100_MMA_*_2x1SM_SS: ScaleFactorDuplicated4by1 at M = 256)")


def _sf_relay_derivation(spec: TileSpec, cta_bytes: int, sf_bytes: int) -> tuple[Derived, ...]:
    a, b = spec.sf_stage_bytes("a"), spec.sf_stage_bytes("b")
    return (
        Derived("sf_split", f"SFA rows r x {spec.cta_rows}.. in CTA r; all {spec.bn} SFB rows in both",
                f"CTA r loads SFA of its own {spec.cta_rows} rows of A ({a} B a stage) and SFB of the whole tile ({b} B a "
                "stage), at the same shared-memory offsets in both CTAs",
                "with M = 256 each CTA computes its 128 rows of D against all BN columns, so its Tensor Memory needs its "
                "rows' SFA and every SFB row (the 4x1 data path: the single-CTA M = 128 placement in each CTA); CUTLASS "
                "partitions SFA like A and loads the whole SFB tile into both CTAs (there as two multicast halves)",
                SF_PAIR_REF),
        Derived("sf_tcgen05_cp", "tcgen05.cp.cta_group::2 by the leader's MMA thread",
                "one copy per atom, at the same shared-memory and TMEM addresses as one CTA's",
                "with .cta_group::2 the copy reads the shared memory of each CTA of the pair and writes that CTA's Tensor "
                "Memory, so one issue fills both CTAs' scale-factor columns (each with its own SFA); the MMA's scale "
                "addresses are the same in both CTAs", f"{cite('tcgen05_cp')}; {SF_PAIR_REF}"),
        Derived("sf_relay", f"leader full[s]: 2 arrivals, expect_tx {CTAS * cta_bytes + sf_bytes} B; peer full[s]: 1, {sf_bytes} B",
                f"leader: 2 x (A + B) = {CTAS * cta_bytes} + its own SF {sf_bytes}; the peer's producer arms the PEER's full[s] "
                f"with its SF bytes, its MMA thread waits that barrier and arrives on mapa(full[s], 0)",
                "cp.async.bulk (the scale factors' copy) signals an mbarrier in the CTA it writes to only; only "
                "cp.async.bulk.tensor has .cta_group::2 to reach the peer's barrier (CUTLASS loads SF with 2-SM TMA instead). "
                "The relay orders the peer's SF bytes (and its zeroing of chunks past K, fence.proxy.async) before the "
                "leader's tcgen05.cp: complete_tx -> wait (acquire) -> arrive.release.cluster -> the leader's "
                "acquire.cluster wait", f"{cite('bulk_copy')}; {cite('tma_cta_group')}"),
    )


def _tx_bytes(spec: TileSpec, name: str) -> int:
    """The bytes one CTA's copies of operand ``name`` deliver a stage: its stage, except for a 6-/4-bit kind::mxf8f6f4
    operand, which TMA unpacks from packed global rows and counts packed (rows x BK x bits / 8; CUTLASS's
    ABTmaTransactionBytes, as for one CTA in derive.operands.operand_tma)."""
    if spec.unpacked(name):
        return spec.mn_extent(name) * spec.bk * spec.operand_dtype(name).bits // 8
    return spec.stage_bytes(name)


def plan_cta_pair(spec: TileSpec) -> CtaPairPlan | None:
    """The pair's plan, or None for cta_group 1."""
    if not spec.pair:
        return None
    bm, bn = spec.bm, spec.bn
    a_rows, b_rows = spec.mn_extent("a"), spec.mn_extent("b")
    shares = tuple(CtaShare(r, r * a_rows, r * b_rows) for r in range(CTAS))
    tx_a, tx_b = _tx_bytes(spec, "a"), _tx_bytes(spec, "b")
    cta_bytes = tx_a + tx_b  # what one CTA's A and B copies deliver a stage
    sf_bytes = spec.sf_stage_bytes("a") + spec.sf_stage_bytes("b")  # one CTA's scale factors a stage (0: dense)
    layout = "A" if bm == 256 else "B"
    cols_per_warp = bn if layout == "A" else bn // 2
    a_maj = "M-major" if spec.a.major is Major.MN else "K-major"
    D = (
        Derived("cluster", "(2, 1, 1)", "__cluster_dims__(2, 1, 1): the cluster is one CTA pair, ranks 0 and 1",
                "a CTA pair is 2 CTAs of a cluster whose %cluster_ctarank differ in the last bit only", cite("cta_pair")),
        Derived("leader", f"rank {LEADER_RANK}", "%cluster_ctarank == 0 (the even CTA)",
                "cta_group::2 .mma and .commit are issued by a single thread of the pair; ptxgen lets the even CTA's MMA "
                "thread issue them (CUTLASS: the 'leader' CTA, DeepGEMM: is_leader_cta)", cite("issue_granularity")),
        Derived("idesc_m", bm, f"M = BM = {bm} over the pair ({bm // 2} rows in each CTA)",
                "the instruction descriptor carries the pair's whole M; the hardware splits it between the two CTAs", cite("idesc")),
        Derived("a_share", f"rows {shares[0].a_row0}.. and {shares[1].a_row0}..",
                f"CTA r holds A rows r x {a_rows} .. r x {a_rows} + {a_rows - 1} ({a_maj}), {spec.stage_bytes('a')} B a stage",
                "the pair MMA reads A's first M/2 rows from the even CTA and the rest from the odd one, through one "
                "descriptor at the same shared::cta offsets in both", CUTLASS_REF + ": ALayout (2,(M/2,K)):(M/2,(1,M))"),
        Derived("b_share", f"rows {shares[0].b_row0}.. and {shares[1].b_row0}..",
                f"CTA r holds B rows (D columns) r x {b_rows} .. r x {b_rows} + {b_rows - 1}, {spec.stage_bytes('b')} B a stage",
                "B is split along N between the two CTAs, so each CTA loads half of B as well as half of A",
                CUTLASS_REF + ": BLayout (2,(N/2,K)):(N/2,(1,N))"),
        Derived("descriptors", "one pair of descriptors for both CTAs",
                f"derived for one CTA's {a_rows} x {spec.bk} A and {b_rows} x {spec.bk} B stage, at offsets equal in both CTAs",
                "the leader's a_desc / b_desc addresses are shared::cta offsets; the MMA applies them to each CTA's own "
                "shared memory, so the peer must keep its stages at exactly the leader's offsets (same kernel, same plan)",
                cite("tcgen05_mma")),
        Derived("d_share", f"{bm // 2} rows per CTA, data-path Layout {layout}",
                ("M=256: CTA r's TMEM lane m holds D row r x 128 + m, column n in TMEM column n" if layout == "A" else
                 f"M=128 ('2x2'): CTA r's D rows r x 64 + m sit in lane m (columns 0..{bn // 2 - 1}) and lane 64 + m "
                 f"(columns {bn // 2}..{bn - 1}, at TMEM column n - {bn // 2})"),
                "the accumulator rows live where the A rows that produce them were", cite("tmem_layout")),
        Derived("tmem_alloc", f"{spec.tmem_alloc_columns} columns in each CTA",
                f"{spec.accumulator_stages} accumulator stage(s) x {spec.tmem_columns} columns (power of two >= "
                f"{spec.acc_columns} used columns); tcgen05.alloc.cta_group::2 by warp 0 of each CTA",
                "with cta_group::2 one warp of each CTA of the pair performs the allocation together; every tcgen05 "
                "instruction of the kernel uses the same .cta_group", cite("tmem_alloc")),
        Derived("full_barrier", f"the leader's full[s], expect_tx {2 * cta_bytes + sf_bytes} B",
                f"2 CTAs x ({tx_a} + {tx_b}) B = {2 * cta_bytes}"
                + (" (6-/4-bit operands count their packed bytes, not the padded stage)" if cta_bytes != spec.stage_bytes("a")
                   + spec.stage_bytes("b") else "")
                + (f" + the leader's own scale factors {sf_bytes} B (sf_relay)" if sf_bytes else "")
                + "; the peer's A and B copies name mapa(full[s], 0)",
                "only the leader's MMA thread waits for a stage, so both CTAs' copies must complete its barrier: "
                "cp.async.bulk.tensor .cta_group::2 may signal an mbarrier in the peer CTA", cite("tma_cta_group")),
    ) + (_sf_relay_derivation(spec, cta_bytes, sf_bytes) if sf_bytes else ()) + (
        Derived("commit_mask", f"{COMMIT_MASK:#04b}",
                "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster [empty[s]], 0b11",
                "one commit arrives on the barrier at the same offset in every CTA of the mask: both producers learn the "
                "stage is free, both epilogues that their accumulator rows are final", cite("tcgen05_commit")),
        Derived("acc_empty", f"the leader's, {EPILOGUE_WARPS * CTAS} arrivals",
                f"{EPILOGUE_WARPS} epilogue warps x {CTAS} CTAs; the peer's arrive remotely (mbarrier.arrive.shared::cluster "
                "on mapa(acc_empty, 0))",
                "the MMA thread may overwrite an accumulator only after BOTH CTAs have read their rows out", PIPE_REF),
        Derived("alloc_sync", "barrier.cluster.arrive.relaxed + wait, before tcgen05.alloc.cta_group::2",
                "every thread of both CTAs, before warp 0 allocates",
                "the pair's allocation needs the peer CTA running: its issuing warp must make sure of it first (CUTLASS "
                "sm100_gemm_tma_warpspecialized.hpp: pipeline_init_arrive_relaxed / pipeline_init_wait before "
                "tmem_allocator.allocate; DeepGEMM sm100_bf16_gemm.cuh: cluster_sync_with_relaxed_arrive 'before 2-CTA "
                "TMEM allocation'); relaxed: it orders no memory, the next barrier does", cite("tmem_alloc")),
        Derived("cluster_sync", "barrier.cluster.arrive.release + wait.acquire, after the allocation and at the end",
                "after the barriers are initialised and TMEM allocated; again before tcgen05.dealloc",
                "no CTA may signal its peer's barriers before they exist, nor leave while its peer can still signal it",
                cite("barrier_cluster")),
        Derived("grid", "2 CTAs per pair-tile",
                "tile: grid = 2 x tiles; persistent: grid = 2 x min(tiles, SMs / 2); pair p = blockIdx.x / 2 takes tiles "
                "p, p + grid / 2, ...", "both CTAs of a pair step through the same tiles together", PIPE_REF),
    )
    return CtaPairPlan(
        bm=bm, bn=bn, a_rows=a_rows, b_rows=b_rows, d_rows=bm // 2, shares=shares, cluster=(CTAS, 1, 1),
        leader_rank=LEADER_RANK, commit_mask=COMMIT_MASK, expect_tx_bytes=CTAS * cta_bytes + sf_bytes, cta_stage_bytes=cta_bytes,
        acc_empty_arrivals=EPILOGUE_WARPS * CTAS, tmem_layout=layout, tmem_columns=spec.tmem_alloc_columns,
        sf_relay=sf_bytes > 0, peer_expect_tx_bytes=sf_bytes, full_arrivals_leader=2 if sf_bytes else 1,
        epilogue_col_split=cols_per_warp,
        epi_row_expr="warp * 32 + lane" if layout == "A" else "(warp % 2) * 32 + lane",
        epi_col_expr="c0" if layout == "A" else f"(warp / 2) * {bn // 2} + c0",
        derivation=D,
    )
