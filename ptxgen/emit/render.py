"""Render kernels from the jinja2 templates: compose the template pieces' contexts into one KernelView.

The templates receive frozen views (:class:`KernelView` and its parts) built from the frozen
:class:`~ptxgen.derive.tile.kernel.KernelPlan`: derived numbers and C expressions rendered from the plan. Each
template piece's context is built next to the others of its kind (``loader_view``, ``pipeline_view``,
``mma_view``, ``epilogue_view``, ``schedule_view``); this module only composes them. All layout math stays in
ptxgen.derive; ``kernel_view`` is the complete interface between them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..derive.store.cload import BARRIER as C_BARRIER
from ..derive.tile.kernel import KernelPlan, plan_kernel
from ..derive.tile.layout import TileLayout
from ..derive.roles.pipeline import Parity, PipelinePlan, WarpRole
from ..derive.operands.smem import MBARRIER_BYTES, SmemPlan
from ..derive.tile.spec import TileSpec
from ..isa.descriptors import SmemDescriptor
from ..isa.shapes import WARPGROUP_THREADS
from ..isa.types import Arch, Loader
from .views import grouped_view as cgrouped
from .views import kgrouped_view as ckgrouped
from .views.blockfp8 import BlockFp8View, PromoteView, block_fp8_view, promote_view
from .views.chain import FULL_WARP_MASK, ChainView, CLoadView, c_load_view, chain_view
from .env import environment
from .views.epilogue_view import EpilogueView, StoreView, store_view, tcgen05_epilogue_view, wgmma_epilogue_view
from .views.loader_view import OperandView, operand_view
from .views.order_view import OrderView, order_view
from .views.mma_view import (KStepView, MmaView, ScaleView, SlabView, half_mma_view, k_step_views, scale_view, slab_views, tcgen05_mma_view,
                       wgmma_mma_view)
from .views.pipeline_view import BarrierView, other_barrier_views, parity_c_expr
from .views.schedule_view import (BATCH, ClusterView, PairView, batched_d_base_c, batched_tile_coords_c, cluster_tile_coords_c, cluster_view,
                            grid_doc, tile_coords_c)
from .sources import generated_line
from .views.splitk_view import SplitView, k0_c, k_range_prologue_c, split_view
from .views.streamk_view import LOOP as STREAMK_LOOP
from .views.streamk_view import StreamKView, streamk_view, unit_c


@dataclass(frozen=True)
class KernelView:
    """What a GEMM template receives: the frozen plan pieces and rendered C for each template piece."""

    name: str
    generated_line: str
    cli: str
    family_line: str
    spec: TileSpec
    smem: SmemPlan
    pipe: PipelinePlan
    producer: WarpRole
    mma_warp: int
    tma: bool
    signature: str
    abi_doc: tuple[str, ...]
    operands: tuple[OperandView, ...]
    producer_threads: int
    producer_parity: str
    consumer_parity: str
    acc_full_parity: str
    acc_empty_parity: str
    tile_coords: tuple[str, ...]
    slabs: tuple[SlabView, ...]
    order_parity: str
    grid_doc: str
    level_line: str
    base_mask: int
    mbar_bytes: int
    extra_barriers: tuple[BarrierView, ...]
    k_steps: tuple[KStepView, ...]
    a_start_expr: str
    b_start_expr: str
    mma: MmaView
    epi: EpilogueView
    store: StoreView | None
    scales: ScaleView | None = None
    chain: ChainView | None = None  # the fused epilogue chain (ptxgen.emit.views.chain)
    bfp8: BlockFp8View | None = None  # block-scaled FP8 on wgmma (ptxgen.emit.views.blockfp8)
    promote: PromoteView | None = None  # --promote G: a fresh partial per G K-tiles added to the accumulator (views.blockfp8)
    cta_group: int = 1
    pair: "PairView | None" = None
    tile_first: str = "static_cast<int>(blockIdx.x)"  # the first work item of this CTA (pair)
    tile_step: str = "static_cast<int>(gridDim.x)"
    tma_bar: str = "full"  # the barrier the TMA copies complete
    mma_issuer: str = "lane == 0"
    full_init_count: str = ""  # C: the count full[s] is initialised with (a block-scaled pair: the leader's differs)
    sf_relay: bool = False  # a block-scaled pair: the peer's MMA thread relays its SF barrier to the leader's full[s]
    cluster: "ClusterView | None" = None
    release_fn: str = "mbar_arrive"  # how a consumer releases a stage: its own CTA's empty barrier, or every CTA's
    grouped: "cgrouped.GroupedView | None" = None  # a grouped GEMM's walk (ptxgen.emit.views.grouped_view)
    row_limit: str = "M"  # the epilogue stores rows below this: M, or a grouped tile's group end
    k_range: tuple[str, ...] = ()  # C statements defining num_k_tiles (and, split-K, kt_first and the workspace slice)
    k0_expr: str = ""  # the first K element of the kt-th K-tile this CTA loads
    split: SplitView | None = None  # split-K: the last arrival's fixed-order reduction before the epilogue
    streamk: StreamKView | None = None  # stream-K for the last wave (ptxgen.emit.views.streamk_view)
    loop_var: str = "tile"  # the persistent loop's variable: the tile, or (stream-K) the work entry
    order: OrderView | None = None  # --epilogue-order alternate (ptxgen.emit.views.order_view)
    c_load: "CLoadView | None" = None  # --fuse c=tma: C through TMA into the store staging (ptxgen.emit.views.chain)
    narrow_copy: int = 0  # cp.async copies of this many bytes (8 or 4) instead of 16; 0: 16-byte copies
    num_tiles_expr: str = "tiles_m * tiles_n"  # the work items (a batched kernel: times the batch count)
    num_cluster_tiles_expr: str = "clusters_m * clusters_n"  # a cluster's work items (K-grouped: times the group count)
    d_base: str = "D"  # the byte address of this tile's D (a batched kernel: its batch's D)
    # wgmma: the thread's warpgroup, warp-uniform to ptxas (__shfl_sync): what derives from it (the A descriptor's start)
    # stays in uniform registers, with no R2UR before each wgmma (2026-12-02, tools/probe_loop.py: tensor pipe 85.6% -> 87.3%)
    wg_expr: str = f"__shfl_sync({FULL_WARP_MASK}, tid / {WARPGROUP_THREADS}, 0)"
    tma3d: bool = False  # some operand has a 3-D tensor map (tma_load_3d)
    kgrouped: "ckgrouped.KGroupedView | None" = None  # --grouped offs_k(_rowwise): the K tail's zeroing (ptxgen.emit.views.kgrouped_view)
    row_scales: "cgrouped.RowScalesView | None" = None  # --grouped offs_rowwise / offs_k_rowwise: the scales on the accumulator


def _level_line(plan: KernelPlan) -> str:
    """How far up the truth ladder this kernel's design has climbed (the kernel's header comment)."""
    s, kg, pair = plan.spec, plan.kgrouped, plan.layout.pair
    if s.block_scaled:
        return ("L1/L2 only: the scale-factor plan checked by an independent model, compiled and SASS-checked; block-scaled "
                "tcgen05 kernels have never run (no Blackwell GPU was available; L2 only for what the hardware does).")
    if s.arch is Arch.SM100A:
        return ("L2 only: compiled and SASS-checked; tcgen05 kernels have never run (no Blackwell GPU was available)."
                + (" The CTA pair (cta_group::2) is checked at L1 (ptxgen.model.layouts.pairmodel) and L2 only." if pair is not None else ""))
    if kg is None:
        return ("L3: wgmma kernels of this design run on an H200 (docs/validation.md lists which specs)."
                + (" The grouped walk is checked at L1 (ptxgen.model.layouts.groupmodel); docs/grouped.md says what ran." if plan.grouped else ""))
    if kg.k_block:
        return ("L1/L2 only: the K-grouped walk (ptxgen.model.layouts.kgroupmodel) and the 128-blocks each group's K-tiles "
                "read (ptxgen.model.numerics.kgroupbfp8model) are checked by independent models, the kernel compiled and "
                "SASS-checked; it has not run on a GPU (docs/block-fp8.md).")
    return ("L1/L2: the K-grouped walk and K tail" + (" and the scales each element reads" if kg.rowwise else "")
            + " are checked by an independent model (ptxgen.model.layouts.kgroupmodel), the kernel "
            "compiled and SASS-checked; docs/training.md says what ran on a GPU.")


def _tile_coords(plan: KernelPlan) -> tuple[str, ...]:
    """The C lines that turn a work item into its tile (and, K-grouped, its group's K range)."""
    s, kg = plan.spec, plan.kgrouped
    unit = unit_c() if plan.stream_k else ()
    if plan.grouped is not None:
        return unit + cgrouped.tile_coords_c(plan.grouped)
    if kg:
        return unit + batched_tile_coords_c(plan.schedule, s.bm, s.bn) + ckgrouped.tile_k_c(kg)
    if s.batch.value != "none":
        return unit + batched_tile_coords_c(plan.schedule, s.bm, s.bn)
    if plan.schedule.cluster_size == 1:
        return unit + tile_coords_c(plan.schedule, s.bm, s.bn, pair=plan.layout.pair)
    return unit + cluster_tile_coords_c(plan.schedule, s.bm, s.bn)


def kernel_view(plan: KernelPlan) -> KernelView:
    s, t, pipe = plan.spec, plan.layout, plan.pipeline
    cli = s.cli_args()
    producer = pipe.role("producer")
    tma = s.loader is Loader.TMA
    pair = t.pair
    pv = None
    if pair is not None:
        pv = PairView(", ".join(map(str, pair.cluster)), pair.leader_rank, f"{pair.commit_mask:#x}",
                      "bit r = cluster rank r: both CTAs of the pair", pair.a_rows, pair.b_rows)
    if s.arch is Arch.SM100A:
        mma, epi = tcgen05_mma_view(plan), tcgen05_epilogue_view(plan)
        family = t.scales.mma_opcode if t.scales is not None else f"tcgen05.mma.cta_group::{s.cta_group}.kind::{s.dtype.kind}"
        mma_warp = pipe.role("mma").first_warp
    else:
        mma, epi = wgmma_mma_view(plan), wgmma_epilogue_view(plan)
        family, mma_warp = t.wgmma.opcode, -1
    extra = other_barrier_views(plan)
    gv = None if plan.grouped is None else cgrouped.grouped_view(plan.grouped)
    store = store_view(plan.store, epi.chunk)
    batched = s.batch.value != "none"

    def batch_coord(op) -> str:
        if op.tma is None or not op.tma.batched:
            return ""
        return BATCH if batched else gv.group

    kg = plan.kgrouped
    if kg is not None and pipe.role("consumer").first_warp != 0:
        raise AssertionError("the K tail's zeroing numbers the consumer threads from tid 0")
    kgv = None if kg is None else ckgrouped.kgrouped_view(kg, t.a, t.b, t.smem.a_stage_bytes, t.smem.b_stage_bytes,
                                                         pipe.role("consumer").warps * 32, s.dtype.bytes, pipe.pingpong)
    if kg is not None and store is not None and plan.store.tma.batched:  # out[g] through the (N, M, G) map
        store = replace(store, group_coord=BATCH)
    if gv is not None and store is not None:
        store = replace(store, use_tma_expr=f"({cgrouped.store_condition_c(plan.grouped)}) && ({store.use_tma_expr})")
    return KernelView(
        name=s.kernel_name,
        generated_line=generated_line(cli),
        cli=cli,
        family_line=family,
        spec=s,
        smem=t.smem,
        pipe=pipe,
        producer=producer,
        mma_warp=mma_warp,
        tma=tma,
        signature=", ".join(p.c_decl for p in plan.abi.params),
        abi_doc=tuple(plan.abi.doc_lines()),
        operands=(operand_view(t.a, producer.threads, pair is not None, copy_bytes=s.copy_bytes, batch_coord=batch_coord(t.a)),
                  operand_view(t.b, producer.threads, pair is not None, "n0" if gv is None or batch_coord(t.b) else gv.b_row0,
                               s.copy_bytes, batch_coord(t.b))),
        tma3d=bool(batch_coord(t.a) or batch_coord(t.b)),
        num_tiles_expr="tiles_m * tiles_n * batch" if batched else "tiles_m * tiles_n * G" if kg else "tiles_m * tiles_n",
        num_cluster_tiles_expr="clusters_m * clusters_n * G" if kg else "clusters_m * clusters_n",
        d_base=batched_d_base_c(s.out_dtype.bytes) if batched else ckgrouped.d_base_c(s.out_dtype.bytes) if kg else "D",
        kgrouped=kgv,
        row_scales=cgrouped.row_scales_view(plan.grouped) if plan.grouped is not None
        else ckgrouped.row_scales_view(kg) if kg is not None else None,
        narrow_copy=0 if s.copy_bytes == 16 else s.copy_bytes,
        full_init_count=(f"(cluster_ctarank() == {pair.leader_rank}u ? {pair.full_arrivals_leader}u : {pipe.peer_full_arrivals}u)"
                         if pair is not None and pair.sf_relay else f"{pipe.full_arrivals}"),
        producer_threads=producer.threads,
        producer_parity=parity_c_expr(pipe.producer_parity, "it"),
        consumer_parity=parity_c_expr(pipe.consumer_parity, "it"),
        acc_full_parity=parity_c_expr(pipe.acc_full_parity, "lt"),
        acc_empty_parity=parity_c_expr(pipe.acc_empty_parity, "lt"),
        tile_coords=_tile_coords(plan),
        slabs=slab_views(plan),
        level_line=_level_line(plan),
        grid_doc=grid_doc(plan),
        order_parity=parity_c_expr(Parity(1, 0), "(j + wg - 1)"),
        base_mask=t.smem.base_alignment - 1,
        mbar_bytes=MBARRIER_BYTES,
        extra_barriers=extra,
        k_steps=k_step_views(t),
        a_start_expr=SmemDescriptor.start_field_c_expr(s.arch, "a_stage"),
        b_start_expr=SmemDescriptor.start_field_c_expr(s.arch, "b_stage"),
        mma=mma,
        epi=epi,
        store=store,
        scales=scale_view(plan),
        chain=chain_view(plan.chain, ckgrouped.c_offset_c(plan.chain.aux.bytes) if kg and plan.chain and plan.chain.chain.c else ""),
        c_load=c_load_view(plan.c_load, plan.store, t.smem.barrier_offset(C_BARRIER) if plan.c_load else 0, epi.chunk),
        bfp8=block_fp8_view(plan.block_fp8, s.mmas_per_k_tile, s.fp8_stagger.value, s.consumer_warpgroups,
                            "" if gv is None else gv.group, half_mma_view(plan), t.smem,
                            k_first="kt_first" if plan.stream_k else ckgrouped.k_block_first_c(kg) if kg else "",
                            sfa_tma=plan.sfa_tma, slabs=plan.slabs),
        promote=promote_view(s, pipe.consumer_parity),
        cluster=cluster_view(plan),
        release_fn="release_stage" if plan.schedule.cluster_size > 1 else "mbar_arrive",
        grouped=gv,
        row_limit="M" if gv is None else gv.row_limit,
        k_range=(f"const int k_tiles_total = (K + {s.bk - 1}) / {s.bk};",) if plan.stream_k else () if kg
        else k_range_prologue_c(plan.split, s.bk),
        k0_expr=f"(kt_first + kt) * {s.bk}" if plan.stream_k else ckgrouped.k0_c(kg) if kg else k0_c(plan.split, s.bk),
        split=split_view(plan),
        streamk=streamk_view(plan, "num_tiles" if plan.schedule.cluster_size == 1 else "num_cluster_tiles"),
        loop_var=STREAMK_LOOP if plan.stream_k else "tile",
        order=order_view(plan.epi_order),
        **({} if pair is None else dict(
            cta_group=2,
            pair=pv,
            tile_first="static_cast<int>(blockIdx.x) / 2",
            tile_step="static_cast<int>(gridDim.x) / 2",
            tma_bar="full_signal",
            mma_issuer="lane == 0 && leader",
            sf_relay=pair.sf_relay,
        )),
    )


TEMPLATES = {Arch.SM90A: "gemm_sm90.cu.j2", Arch.SM100A: "gemm_sm100.cu.j2"}


def render_kernel(plan: KernelPlan | TileLayout) -> str:
    if isinstance(plan, TileLayout):
        plan = plan_kernel(plan.spec, plan)
    return environment().get_template(TEMPLATES[plan.spec.arch]).render(k=kernel_view(plan))
