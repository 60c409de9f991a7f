"""The whole frozen plan of one kernel: layouts and descriptors, tensor maps, pipeline, ABI.

This is what the emit layer renders; it holds no C and does no rendering itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.types import Arch, Grouping, Major, Loader
from ...isa.epiops import Fp8Blocks
from .abi import KernelABI, kernel_abi
from ..store.epilogue import StorePlan, plan_store
from ..roles.epiorder import EpilogueOrderPlan, plan_epilogue_order
from ..roles.grouped import GroupedPlan
from ..roles.kgrouped import KGroupedPlan, k_align_of
from ..scaled.blockfp8 import BLOCK_K, BlockFp8Plan
from ..scaled.bfp8cols import plan_recipe
from ..scaled.bfp8slabs import SlabPlan, plan_consumer_slabs
from ..store.cload import CLoadPlan, plan_c_load
from ..store.fusion import ChainPlan, plan_chain
from .layout import TileLayout, derive
from ..store.output import DirectStore, plan_direct_store
from ..roles.pipeline import PipelinePlan, plan_pipeline
from ..roles.schedule import SchedulePlan, plan_schedule
from ..scaled.sfa_tma import plan_sfa_tma
from .spec import TileSpec
from ..store.splitk import SplitPlan, plan_split
from ..operands.tma import TmaPlan
from ..store.streamk import StreamKPlan, plan_stream_k
from ..roles.tmemfit import TmemFit, plan_tmem_fit


@dataclass(frozen=True)
class KernelPlan:
    spec: TileSpec
    layout: TileLayout
    pipeline: PipelinePlan
    schedule: SchedulePlan
    abi: KernelABI
    store: StorePlan | None = None  # the TMA-store epilogue (None: direct stores)
    grouped: GroupedPlan | None = None  # a grouped GEMM's walk over (group, tile) pairs (None: one GEMM)
    chain: ChainPlan | None = None  # the fused epilogue chain (None: D = acc converted)
    block_fp8: BlockFp8Plan | None = None  # block-scaled FP8 on wgmma (None: one accumulator, no promotion)
    split: SplitPlan | None = None  # split-K: K-ranges, workspace, the last arrival's reduction (None: no split)
    c_load: CLoadPlan | None = None  # --fuse c=tma: C through TMA into the store staging (None: C by global loads)
    direct: DirectStore | None = None  # the direct epilogue's address rule for D (row-major or M-major)
    stream_k: StreamKPlan | None = None  # stream-K for the last wave (None: every tile whole)
    sfa_tma: TmaPlan | None = None  # --fp8-scale-load tma: scale_a's tensor map, one BM x 1 box a stage (derive.scaled.sfa_tma)
    epi_order: EpilogueOrderPlan | None = None  # --epilogue-order alternate: the warpgroups' epilogues in turn (derive.roles.epiorder)
    slabs: SlabPlan | None = None  # --consumer-slabs N > 1: N slabs a warpgroup sharing one partial (derive.scaled.bfp8slabs)
    tmem: TmemFit | None = None  # tcgen05: CTAs per SM, their TMEM columns, the shared memory asked for (derive.roles.tmemfit)
    kgrouped: KGroupedPlan | None = None  # --grouped offs_k(_rowwise): groups along K, out G x M x N (derive.roles.kgrouped)

    def tma_plan(self, name: str):
        """The TmaPlan behind tensor-map parameter ``tmap_<name>``: an operand's, D's (TMA-store epilogue), C's, or
        scale_a's (sfa: --fp8-scale-load tma)."""
        if name == "sfa":
            return self.sfa_tma
        if name == "c":
            return self.c_load.tma
        return self.store.tma if name == "d" else self.layout.operand(name).tma


def plan_kernel(spec: TileSpec, layout: TileLayout | None = None) -> KernelPlan:
    t = layout or derive(spec)
    expect = t.a.tma.expect_tx_bytes + t.b.tma.expect_tx_bytes if spec.loader is Loader.TMA else 0
    if t.pair is not None:
        assert t.pair.cta_stage_bytes == expect, (t.pair.cta_stage_bytes, expect)
        # the leader's full barrier counts both CTAs' A and B copies, and (block-scaled) the leader's own SF copies
        expect = t.pair.expect_tx_bytes
        assert t.scales is None or expect == 2 * t.pair.cta_stage_bytes + t.scales.expect_tx_bytes
    elif t.scales is not None:
        expect += t.scales.expect_tx_bytes  # the scale factors' cp.async.bulk copies complete on the same full barrier
    sfa_tma = plan_sfa_tma(spec.bm) if spec.scale_load.value == "tma" else None
    if sfa_tma is not None:  # the A scales' box completes on the same full barrier
        expect += sfa_tma.expect_tx_bytes
    pipe = plan_pipeline(spec, expect)
    tmem = plan_tmem_fit(spec, t.smem.dynamic_bytes, pipe.threads) if spec.arch is Arch.SM100A else None
    abi = kernel_abi(spec, pipe.threads, t.smem.dynamic_bytes if tmem is None else tmem.smem_bytes)
    kgrouped = KGroupedPlan(spec.bm, spec.bn, spec.bk, spec.raster_group, k_align_of(spec),
                            spec.grouped.rowwise, spec.cluster.dims,
                            BLOCK_K if spec.fp8_blocks is Fp8Blocks.COLUMNS else 0) if spec.grouped.along_k else None
    grouped = None if not spec.grouped.along_m else GroupedPlan(spec.bm, spec.bn, spec.raster_group,
                                                                        spec.grouped is Grouping.OFFS_ROWWISE,
                                                                        spec.b.major is Major.MN)
    chain = None if spec.fuse is None else plan_chain(spec.fuse, spec.arch, spec.bm, spec.bn, spec.out_dtype, spec.epilogue)
    bfp8 = None if spec.fp8_blocks.value == "none" else plan_recipe(spec.fp8_blocks.value, spec.bm, spec.bn, spec.bk,
                                                                    stagger=spec.fp8_stagger.value,
                                                                    grouped=spec.grouped.along_m,
                                                                    overlap=spec.fp8_overlap.value,
                                                                    scale_load=spec.scale_load.value)
    store = plan_store(spec)
    return KernelPlan(spec, t, pipe, plan_schedule(spec), abi, store, grouped, chain, bfp8,
                      plan_split(spec.split_k, spec.bk, spec.bm // 64, spec.bm * spec.bn), plan_c_load(spec, store),
                      plan_direct_store(spec.d_major),
                      plan_stream_k(spec.stream_k, spec.bk, spec.cluster.size, spec.bm // 64, spec.bm * spec.bn), sfa_tma,
                      plan_epilogue_order(spec), plan_consumer_slabs(spec.bm, spec.consumer_slabs), tmem, kgrouped)
