"""The kernel ABI, declared once: parameters, launch geometry and shared-memory bytes.

The template renders the signature from :attr:`KernelABI.params`, the launcher marshals arguments
from it, and the kernel's header comment documents it. Tensor maps are passed by value as
``const __grid_constant__`` parameters (128 bytes, 64-byte aligned).

Global layouts: A is M x K (K-major, ``lda`` >= K) or K x M (M-major, ``lda`` >= M); B likewise with N;
D is M x N row-major with ``ldd`` >= N. Every row must start 16-byte aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.tensormap import TENSOR_MAP_BYTES
from ...isa.types import Batch, Epilogue, Grouping, Loader, Schedule
from ..store.fusion import chain_params
from ..roles.grouped import GroupedPlan
from .spec import TileSpec


SFA_MAP = "tmap_sfa"  # --fp8-scale-load tma: scale_a's tensor map (derive.scaled.sfa_tma); template, launcher and docs use this name


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensormap", "ptr", "wptr" (written), "i32", "f32"
    doc: str

    @property
    def c_decl(self) -> str:
        return {
            "tensormap": f"const __grid_constant__ TmaMap {self.name}",
            "ptr": f"unsigned char* __restrict__ {self.name}" if self.name == "D" else f"const unsigned char* __restrict__ {self.name}",
            "wptr": f"unsigned char* __restrict__ {self.name}",
            "i32": f"int {self.name}",
            "u64": f"unsigned long long {self.name}",
            "i32_ptr": f"const int* __restrict__ {self.name}",
            "f32_ptr": f"const float* __restrict__ {self.name}",
            "f32": f"float {self.name}",
        }[self.kind]


@dataclass(frozen=True)
class KernelABI:
    name: str
    params: tuple[Param, ...]
    threads: int
    cluster: tuple[int, int, int]
    dynamic_smem_bytes: int
    tile_m: int
    tile_n: int
    persistent: bool
    ctas_per_tile: int = 1  # 2 for a CTA pair (cta_group::2): the cluster of 2 computes one tile
    cluster_tile: tuple[int, int] = (1, 1)  # CTAs of a cluster along M, along N (the launch cluster is 1D: cluster)
    grouped: bool = False  # a grouped GEMM: the grid comes from M, N and the group count (derive.roles.grouped)
    splits: int = 1  # split-K: grid z, one CTA per (tile, split)
    batched: bool = False  # a batched GEMM: the work items are batch x tiles (the tile walk's outer index is the batch)
    # stream-K: a persistent grid of every SM (every SM / cluster-size clusters) even with fewer tiles, so that a launch of
    # one partial round splits its tiles over the idle SMs (derive.store.streamk: S <= C / L; block FP8 since 2026-12-02,
    # every stream-K kernel since 2026-12-07); the other persistent kernels take min(tiles, SMs)
    fills_sms: bool = False

    def num_tiles(self, m: int, n: int) -> int:
        """BM x BN tiles of D, partial tiles included."""
        return -(-m // self.tile_m) * -(-n // self.tile_n)

    def grouped_grid(self, m_total: int, n: int, groups: int, sm_count: int) -> tuple[int, int, int]:
        """A grouped kernel's persistent grid: min(SMs, an upper bound of the work items), at least 1 CTA
        (GroupedPlan.ctas; the host does not know the groups' sizes)."""
        return (GroupedPlan(self.tile_m, self.tile_n, 1).ctas(m_total, groups, n, sm_count), 1, 1)

    def grid(self, m: int, n: int, sm_count: int, batch: int = 1) -> tuple[int, int, int]:
        """A 1D grid: one CTA (or CTA pair) per tile, or (persistent) one per SM and never more than the tiles. With a
        cluster of 2 (``cluster`` = (2, 1, 1), compiled into the kernel as ``__cluster_dims__``): two CTAs per cluster tile
        (a wgmma cluster: a pair of neighbouring tiles; a tcgen05 CTA pair: one tile), a multiple of 2, and (persistent) at
        most SMs / 2 clusters."""
        if m < 1 or n < 1 or sm_count < 1:
            raise ValueError(f"grid for M={m}, N={n} on {sm_count} SMs: M, N and the SM count must be at least 1")
        size = self.cluster[0] * self.cluster[1] * self.cluster[2]
        if size == 1:
            tiles = self.num_tiles(m, n) * (batch if self.batched else 1)
            return ((sm_count if self.fills_sms else min(tiles, sm_count)) if self.persistent else tiles, 1, self.splits)
        cm, cn = self.cluster_tile
        tiles_m, tiles_n = -(-m // self.tile_m), -(-n // self.tile_n)
        items = -(-tiles_m // cm) * -(-tiles_n // cn)  # cluster tiles (pair tiles), partial ones included
        clusters = max(1, sm_count // size)
        return (size * ((clusters if self.fills_sms else min(items, clusters)) if self.persistent else items), 1, 1)

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.threads, 1, 1)

    def doc_lines(self) -> list[str]:
        return [f"{p.c_decl}: {p.doc}" for p in self.params]


def _load_params(spec: TileSpec) -> tuple[Param, ...]:
    """How A and B (and, with the TMA store, D) reach the kernel: tensor maps or pointers."""
    if spec.loader is Loader.TMA:
        loads = (
            Param("tmap_a", "tensormap", f"A's tensor map ({TENSOR_MAP_BYTES} B, encoded on the host by cuTensorMapEncodeTiled)"),
            Param("tmap_b", "tensormap", "B's tensor map"),
        )
    else:
        loads = (Param("A", "ptr", "A in global memory, 16-byte aligned"), Param("B", "ptr", "B in global memory, 16-byte aligned"))
    if spec.epilogue is Epilogue.TMA:
        loads += (Param("tmap_d", "tensormap", "D's tensor map (the TMA-store epilogue writes D's tiles through it)"),)
    return loads


def _problem_params(spec: TileSpec) -> tuple[Param, ...]:
    """D, the problem's extents, and a grouped kernel's offsets and row-wise scales; block-scaled kinds' scale factors."""
    scales = ()
    if spec.block_scaled:
        v = spec.scaled_kind.vec_elements
        scales = (
            Param("SFA", "ptr", f"A's {spec.scale.value} scale factors, one per {v} elements of K, in CUTLASS's "
                  "Sm1xxBlockScaledConfig layout: 512-byte atoms of 128 rows x 4 chunks, K first; rows padded to 128 and "
                  f"K to a multiple of 4V={4 * v} (ceil(K / {4 * v}) atoms along K; the kernel zeroes the chunks past K before the MMA); 16-byte aligned"),
            Param("SFB", "ptr", "B's scale factors, the same layout with N rows"),
        )
    d_doc = "D, M x N row-major, 16-byte aligned" + (" (tiles a TMA store cannot clip exactly)" if spec.epilogue is Epilogue.TMA else "")
    d = Param("D", "ptr", d_doc)
    if spec.grouped.along_k:
        tail = (
            Param("D", "ptr", "D, G x M x N: out[g] at D + g M ldd elements, rows ldd apart, 16-byte aligned"),
            Param("offs", "i32_ptr", "G int32 cumulative K ends (group g owns K indices offs[g-1]..offs[g]-1), read on the GPU only"),
        ) + ((
            Param("scale_a", "f32_ptr", "G x M f32 scales: out[g] row r is multiplied by scale_a[g M + r] (torch._scaled_grouped_mm's "
                  "2-D x 2-D scale_a)"),
            Param("scale_b", "f32_ptr", "G x N f32 scales: out[g] column c by scale_b[g N + c]"),
        ) if spec.grouped.rowwise else ()) + (
            Param("M", "i32", "rows of A and of each out[g]"),
            Param("N", "i32", "rows of B, columns of each out[g]"),
            Param("K", "i32", "K_total: all groups' K indices (the maps' K extent)"),
            Param("G", "i32", "groups: out is G x M x N"),
        )
    elif spec.grouped is not Grouping.NONE:
        tail = (
            d,
            Param("offs", "i32_ptr", "G int32 cumulative row ends (group g owns rows offs[g-1]..offs[g]-1), read on the GPU only"),
        ) + ((
            Param("scale_a", "f32_ptr", "M f32 scales, one per row of A (torch._scaled_grouped_mm's scale_a)"),
            Param("scale_b", "f32_ptr", "G x N f32 scales, one per group and column of D (scale_b)"),
        ) if spec.grouped.rowwise else ()) + (
            Param("M", "i32", "rows of A and D, all groups"),
            Param("N", "i32", "rows of each group's B, columns of D"),
            Param("K", "i32", "the reduction extent"),
            Param("G", "i32", "groups: B is G x N x K (one (G N) x K tensor map)"),
        )
    else:
        tail = scales + (
            d,
            Param("M", "i32", "rows of A and D"),
            Param("N", "i32", "rows of B, columns of D"),
            Param("K", "i32", "the reduction extent"),
        )
    return tail


def _block_fp8_params(spec: TileSpec) -> tuple[Param, ...]:
    """Block-scaled FP8 (ptxgen.derive.scaled.blockfp8): the scales in the layouts torch._scaled_mm takes."""
    if spec.fp8_blocks.value == "none":
        return ()
    cols = spec.fp8_blocks.value == "1x128x1x128"  # derive.scaled.bfp8cols: one B scale per row of B per K block
    params = (Param("SFA", "ptr", "A's scales, f32, M x ceil(K/128), outer-dim-major: (m, kb) at kb x lds_a + m"),
              Param("SFB", "ptr", "B's scales, f32, ceil(K/128) x N, MN-major: (kb, n) at kb x lds_b + n" if cols else
                    "B's scales, f32, ceil(K/128) x ceil(N/128): (kb, nb) at nb x lds_b + kb"),
              Param("lds_a", "i32", "SFA's stride between K blocks (>= M)"),
              Param("lds_b", "i32", "SFB's stride between K blocks (>= N)" if cols else
                    "SFB's stride between 128-row blocks of B (>= ceil(K/128))"))
    if spec.scale_load.value == "tma":  # derive.scaled.sfa_tma: the TMA thread copies each stage's A scales through it
        params += (Param(SFA_MAP, "tensormap", "SFA's tensor map (--fp8-scale-load tma): dims (M, ceil(K/128)), row "
                         "stride lds_a x 4 B (a multiple of 16 B: lds_a % 4 == 0), box (BM, 1) f32, no swizzle"),)
    if spec.grouped.along_m:  # each group's scale_b is the dense array above; the groups' arrays lds_b_group apart
        params += (Param("lds_b_group", "i32", "SFB's stride between groups (>= ceil(N/128) x lds_b): group g's "
                         "(kb, nb) at g x lds_b_group + nb x lds_b + kb"),)
    return params


def _extra_params(spec: TileSpec) -> tuple[Param, ...]:
    """A batched kernel's batch, stream-K's or split-K's workspace, the fused chain's arguments."""
    params: tuple[Param, ...] = ()
    if spec.batch is not Batch.NONE:  # a batched GEMM (derive.operands.tma: A's, and B's unless shared, maps are 3-D)
        params += (Param("batch", "i32", "the batch count: work items are batch x tiles, batch z's D at D + z x ldd_batch"),
                   Param("ldd_batch", "u64", "elements between batches of D (>= M x ldd)"))
    if spec.stream_k > 1:  # stream-K's workspace (ptxgen.derive.store.streamk)
        params += (Param("W", "wptr", "the stream-K workspace: int32 flags (zero before the first launch; each owner resets "
                         "its own), then the f32 partial tiles of the last round's splits; 128-byte aligned"),)
    if spec.split:  # split-K's workspace (ptxgen.derive.store.splitk; stream-K's conventions)
        params += (Param("W", "wptr", f"the split-K workspace: int32 tile counters (zero before the first launch; the last of "
                         f"the {spec.split_k} arrivals resets its own), then the f32 partial tiles of every (tile, split); "
                         "128-byte aligned"),)
    if spec.fuse is not None:  # the fused epilogue chain's arguments (ptxgen.derive.store.fusion)
        params += tuple(Param(*p) for p in chain_params(spec.fuse))
    return params


def kernel_abi(spec: TileSpec, threads: int, dynamic_smem_bytes: int) -> KernelABI:
    grouped = spec.grouped is not Grouping.NONE
    lds = () if spec.loader is Loader.TMA else (Param("lda", "i32", "A's row stride in elements"), Param("ldb", "i32", "B's row stride in elements"))
    params = (_load_params(spec) + _problem_params(spec) + lds + (Param("ldd", "i32", "D's row stride in elements"),)
              + _block_fp8_params(spec) + _extra_params(spec))
    persistent = spec.schedule is Schedule.PERSISTENT
    size = spec.cta_group if spec.pair else spec.cluster.size
    return KernelABI(spec.kernel_name, params, threads, (size, 1, 1), dynamic_smem_bytes, spec.bm, spec.bn, persistent,
                     spec.cta_group, spec.cluster.dims, grouped, spec.split_k, spec.batch is not Batch.NONE,
                     fills_sms=persistent and spec.stream_k > 1)
