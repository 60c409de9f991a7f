"""Launching a generated GEMM: problem checks, argument marshalling from the kernel ABI, grid and block.

Shared by both architectures and loaders: the parameters, grid, block and shared-memory bytes all come
from the kernel's ABI (``ptxgen.derive.tile.abi``), declared once. Everything here but ``encode`` (the
driver's tensor-map encoder) runs on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...derive.tile.abi import SFA_MAP
from ...derive.tile.kernel import KernelPlan
from ...derive.tile.spec import TileSpec
from ...derive.operands.tma import l2_promotion_for_rows
from ...isa.types import DMajor, Loader, Major
from .errors import ProblemError
from .gpu import KernelArgs


ROW_ALIGN_BYTES = 16  # TMA's rule for global rows, and cp.async's 16-byte copies; D's vector stores too
MAX_DIM = (1 << 31) - 1  # int parameters


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldd: int
    # a batched GEMM (spec.batch): batch count and the elements between batches of A, B (0: shared) and D;
    # a grouped kernel's N-major B: batch = G and ldb_batch its group stride (the map's third dimension)
    batch: int = 1
    lda_batch: int = 0
    ldb_batch: int = 0
    ldd_batch: int = 0

    @classmethod
    def tight(cls, spec: TileSpec, m: int, n: int, k: int) -> "Problem":
        """Leading dimensions equal to the contiguous extents (rows 16-byte aligned only if those are)."""
        lda = k if spec.a.major is Major.K else m
        ldb = k if spec.b.major is Major.K else n
        return cls(m, n, k, lda, ldb, n if spec.d_major is DMajor.N else m)

    @classmethod
    def padded(cls, spec: TileSpec, m: int, n: int, k: int) -> "Problem":
        """Leading dimensions rounded up so that every row starts 16-byte aligned: any M, N, K >= 1."""
        t = cls.tight(spec, m, n, k)

        def up(ld: int, bits: int) -> int:
            q = ROW_ALIGN_BYTES * 8 // bits  # elements per 16 bytes (32 for packed e2m1)
            return -(-ld // q) * q

        def up_operand(name: str, ld: int) -> int:
            if spec.unpacked(name):  # 6-/4-bit mxf8f6f4 operands: rows a multiple of 32 B and of 128 elements
                return -(-ld // UNPACKED_LD_MULTIPLE) * UNPACKED_LD_MULTIPLE
            return up(ld, spec.operand_dtype(name).container_bits)

        return cls(m, n, k, up_operand("a", t.lda), up_operand("b", t.ldb), up(t.ldd, 8 * spec.out_dtype.bytes))

    def value(self, name: str) -> int:
        return {"M": self.m, "N": self.n, "K": self.k, "lda": self.lda, "ldb": self.ldb, "ldd": self.ldd, "batch": self.batch,
                "G": self.batch, "lda_batch": self.lda_batch, "ldb_batch": self.ldb_batch, "ldb_group": self.ldb_batch,
                "ldd_batch": self.ldd_batch}[name]


def global_shape(spec: TileSpec, name: str, p: Problem) -> tuple[int, int]:
    """(rows, leading dimension) of operand ``name`` in global memory: K-major A is M x K, MN-major A
    is K x M, K-major B is N x K, MN-major B is K x N; rows are ``ld`` elements apart."""
    op = spec.operand(name)
    mn = p.m if name == "a" else p.n
    ld = p.lda if name == "a" else p.ldb
    return (mn, ld) if op.major is Major.K else (p.k, ld)


BLOCK_SCALED_BENCH_REFUSAL = (
    "block-scaled kernels (--scale) are not timed: ptxgen bench has no scale-factor arrays and no baseline for them "
    "(ptxgen validate runs them, with scale factors in CUTLASS's layout, on compute capability 10.x)"
)


# kind::mxf8f6f4's 6-/4-bit operands load through the unpacking tensor maps (16U6_ALIGN16B / 16U4_ALIGN16B), which count
# elements of a packed global tensor: globalDim[0] (K) a multiple of 128 and row strides multiples of 32 B
# (cuTensorMapEncodeTiled; ptxgen.isa.tensormap). A row stride of 128 elements (96 B of fp6, 64 B of fp4) meets both.
UNPACKED_LD_MULTIPLE = 128


def packed_per_byte(spec: TileSpec, name: str) -> int:
    """Elements of operand ``name`` per byte of its tensor map's elements: 2 for packed e2m1 under kind::mxf4/mxf4nvf4 (its
    map counts bytes, K / 2), else 1 (the unpacking maps of kind::mxf8f6f4's 6-/4-bit operands count elements)."""
    if spec.unpacked(name):
        return 1
    bits = spec.operand_dtype(name).container_bits
    return 8 // bits if bits < 8 else 1


def problem_errors(spec: TileSpec, p: Problem) -> list[str]:
    """Why the kernel cannot run problem ``p`` (empty if it can), each naming its rule."""
    errs = []
    for dim, size in (("M", p.m), ("N", p.n), ("K", p.k)):
        if not 1 <= size <= MAX_DIM:
            errs.append(f"{dim}={size} must be in 1..{MAX_DIM}")
    align = spec.operand_row_align_bytes
    rule = "TMA's rule for global rows" if spec.loader is Loader.TMA else f"the {align}-byte cp.async copies"
    for name, ld in (("a", p.lda), ("b", p.ldb)):
        op = spec.operand(name)
        inner = p.k if op.major is Major.K else (p.m if name == "a" else p.n)
        inner_name = "K" if op.major is Major.K else ("M" if name == "a" else "N")
        if ld < inner:
            errs.append(f"ld{name}={ld} is smaller than its contiguous extent {inner_name}={inner}")
        per_byte = packed_per_byte(spec, name)
        if spec.unpacked(name):
            dt = spec.operand_dtype(name)
            if p.k % UNPACKED_LD_MULTIPLE:
                errs.append(f"K={p.k} is not a multiple of {UNPACKED_LD_MULTIPLE}: {dt.value} operand {name.upper()} loads through "
                            f"an unpacking tensor map (16U{dt.bits}_ALIGN16B), whose globalDim[0] must be a multiple of 128 "
                            "(cuTensorMapEncodeTiled)")
            if ld % UNPACKED_LD_MULTIPLE:
                errs.append(f"ld{name}={ld} is not a multiple of {UNPACKED_LD_MULTIPLE} {dt.value} elements: the unpacking "
                            "tensor map's row stride must be a multiple of 32 B (cuTensorMapEncodeTiled)")
        elif per_byte > 1:
            if p.k % per_byte:
                errs.append(f"K={p.k} is odd: packed {spec.operand_dtype(name).value} travels as bytes of {per_byte} elements "
                            "(the tensor map's K is K / 2 bytes), so K must be even")
            if ld % (per_byte * align):
                errs.append(f"ld{name}={ld} packed {spec.operand_dtype(name).value} elements = {ld / per_byte:g} B is not a "
                            f"multiple of {align} B: every row must start {align}-byte aligned ({rule})")
        elif ld * spec.operand_dtype(name).bytes % align:
            esize = spec.operand_dtype(name).bytes
            errs.append(f"ld{name}={ld} x {esize} B is not a multiple of {align} B: every row must start {align}-byte aligned ({rule})")
    if spec.d_major is DMajor.M:  # M-major D (derive.store.output): columns ldd elements apart, one store per element
        if p.ldd < p.m:
            errs.append(f"ldd={p.ldd} is smaller than M={p.m} (D is M-major: element (i, j) at j x ldd + i)")
        elif spec.epilogue.value == "tma" and p.ldd * spec.out_dtype.bytes % ROW_ALIGN_BYTES:
            errs.append(f"ldd={p.ldd} x {spec.out_dtype.bytes} B is not a multiple of 16 B (the TMA store's tensor map over "
                        "D: its rows, the kernel's columns, must start 16-byte aligned)")
    elif p.ldd < p.n:
        errs.append(f"ldd={p.ldd} is smaller than N={p.n}")
    elif p.ldd * spec.out_dtype.bytes % ROW_ALIGN_BYTES:
        errs.append(f"ldd={p.ldd} x {spec.out_dtype.bytes} B is not a multiple of 16 B (the epilogue stores 16-byte vectors)")
    if spec.batch.value != "none":
        errs += _batch_errors(spec, p)
    tiles = -(-p.m // spec.bm) * -(-p.n // spec.bn) * (p.batch if spec.batch.value != "none" else 1)
    if tiles * spec.cta_group > MAX_DIM:
        errs.append(f"{tiles} output tiles of {spec.bm} x {spec.bn} ({spec.cta_group} CTA(s) each) are more than a 1D grid holds ({MAX_DIM})")
    return errs


def _batch_errors(spec: TileSpec, p: Problem) -> list[str]:
    """A batched problem's own rules: the batch count, and batch strides that keep the batches apart and 16-byte aligned
    (the 3-D maps' globalStrides[1]; D's batches are addressed by the kernel)."""
    errs = []
    if not 1 <= p.batch <= MAX_DIM:
        errs.append(f"batch={p.batch} must be in 1..{MAX_DIM}")
    esize = spec.dtype.bytes
    for name in ("a", "b", "d"):
        if not spec.batch.batched(name):
            continue
        ld, stride = p.value(f"ld{name}"), p.value(f"ld{name}_batch")
        rows = p.m if name == "d" else global_shape(spec, name, p)[0]
        size = spec.out_dtype.bytes if name == "d" else esize
        if p.batch > 1 and stride < rows * ld:
            errs.append(f"ld{name}_batch={stride} is smaller than {rows} rows x ld{name}={ld}: the batches overlap")
        if stride * size % ROW_ALIGN_BYTES:
            why = "every batch of D must start 16-byte aligned" if name == "d" else "the 3-D tensor map's batch stride"
            errs.append(f"ld{name}_batch={stride} x {size} B is not a multiple of 16 B ({why})")
    return errs


def check_problem(spec: TileSpec, p: Problem) -> None:
    errs = problem_errors(spec, p)
    if errs:
        raise ProblemError(f"{spec.kernel_name} cannot run M={p.m} N={p.n} K={p.k}: " + "; ".join(errs))


def launch_geometry(plan: KernelPlan, p: Problem, sm_count: int = 132, kernel=None) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory bytes), from the ABI (``sm_count``: the device's multiprocessors).

    A persistent kernel with a cluster: the SMs do not always pair up (clusters live inside one GPC), so with
    ``kernel`` (a loaded ptxgen.runtime.launch.gpu.Kernel) the grid holds at most the clusters the driver says fit at once."""
    abi = plan.abi
    return abi.grid(p.m, p.n, cluster_sm_count(plan, sm_count, kernel), p.batch), abi.block, abi.dynamic_smem_bytes


def cluster_sm_count(plan: KernelPlan, sm_count: int, kernel=None) -> int:
    """The SMs a persistent grid may fill: all of them, or with a cluster and a loaded ``kernel`` no more than the
    clusters the driver says fit at once (cuOccupancyMaxActiveClusters) times their size."""
    abi = plan.abi
    size = abi.cluster[0] * abi.cluster[1] * abi.cluster[2]
    if size > 1 and abi.persistent and kernel is not None:
        return min(sm_count, size * kernel.max_active_clusters(size, abi.block))
    return sm_count


def gemm_args(plan: KernelPlan, a_ptr: int, b_ptr: int, d_ptr: int, p: Problem, encode=None, extra: dict | None = None) -> KernelArgs:
    """The kernel's arguments in ABI order. ``encode`` turns tensor-map arguments into the 128-byte map
    (default: the driver's encoder, ptxgen.runtime.launch.tensormap.encode). ``extra``: the fused epilogue's arguments
    by ABI name (alpha, beta, C, ldc, BIAS, RES, ldr, SCALE, AMAX; ptxgen.derive.store.fusion.chain_params), block-scaled
    FP8's (SFA, SFB, lds_a, lds_b) and the block-scaled kinds' (SFA, SFB: ptxgen.runtime.check.bsvalidate)."""
    extra = extra or {}
    own = {"A", "B", "D", "M", "N", "K", "lda", "ldb", "ldd", "batch", "ldd_batch"}
    missing = [q.name for q in plan.abi.params if q.kind != "tensormap" and q.name not in own and q.name not in extra]
    if missing:
        raise ProblemError(f"{plan.spec.kernel_name} needs the arguments {', '.join(missing)} (gemm_args(..., extra=): the fused "
                           "epilogue's or the block scales'; ptxgen.api.fused, ptxgen.api.fp8blocks)")
    for name, ptr in (("A", a_ptr), ("B", b_ptr), ("D", d_ptr)):
        if ptr % 16:
            raise ProblemError(f"{name} at {ptr:#x} is not 16-byte aligned")
    pointers = {"A": a_ptr, "B": b_ptr, "D": d_ptr}
    values = []
    for param in plan.abi.params:
        if param.kind == "tensormap" and param.name == C_MAP:  # --fuse c=tma: C's map, from extra's C and ldc
            values.append(("tensormap", _c_tensor_map(plan, extra["C"], extra["ldc"], p, encode)))
        elif param.kind == "tensormap" and param.name == SFA_MAP:  # --fp8-scale-load tma: scale_a's, from SFA and lds_a
            values.append(("tensormap", (encode or _driver_encode())(sfa_map_args(plan, extra["SFA"], extra["lds_a"], p))))
        elif param.kind == "tensormap":
            values.append(("tensormap", _tensor_map(plan, param.name[-1], pointers[param.name[-1].upper()], p, encode)))
        elif param.name in extra:
            values.append(("ptr" if param.kind == "wptr" else param.kind, extra[param.name]))
        elif param.kind == "ptr":
            values.append(("ptr", pointers[param.name]))
        else:
            values.append((param.kind if param.kind == "u64" else "i32", p.value(param.name)))
    return KernelArgs(values)


def map_args(plan: KernelPlan, operand: str, ptr: int, p: Problem):
    """The encode arguments of tensor-map parameter ``tmap_<operand>`` for problem ``p`` (every launch path builds
    its maps here): the plan's map, with the operands' L2 promotion following their row pitch
    (derive.operands.tma.l2_promotion_for_rows)."""
    from .tensormap import tensormap_args

    tma = plan.tma_plan(operand)
    dims, lds = tuple(p.value(d) for d in tma.global_dims), tuple(p.value(x) for x in tma.stride_names)
    per_byte = packed_per_byte(plan.spec, operand) if operand in ("a", "b") and tma.data_type.name == "UINT8" else 1
    if per_byte > 1:  # packed e2m1: the map's elements are bytes (K / 2 of them a row; problem_errors: K even)
        dims = tuple(v // per_byte if d == "K" else v for d, v in zip(tma.global_dims, dims))
        lds = tuple(x // per_byte for x in lds)
    args = tensormap_args(tma, ptr, dims, lds if tma.batched else lds[0])
    if operand in ("a", "b"):
        args = replace(args, l2_promotion=l2_promotion_for_rows(args.global_strides[0]))
    return args


def _tensor_map(plan: KernelPlan, operand: str, ptr: int, p: Problem, encode) -> bytes:
    from .tensormap import encode as driver_encode

    return (encode or driver_encode)(map_args(plan, operand, ptr, p))


def _driver_encode():
    from .tensormap import encode

    return encode


def sfa_map_args(plan: KernelPlan, ptr: int, lds_a: int, p: Problem):
    """--fp8-scale-load tma: the encode arguments of scale_a's map (derive.scaled.sfa_tma): dims (M, ceil(K / 128)), rows
    ``lds_a`` floats apart. Raises ProblemError when TMA cannot take it (scale_a not 16-byte aligned, lds_a x 4 B not a
    multiple of 16 B: M % 4 != 0 in torch's layout), before any launch."""
    from ...derive.scaled.blockfp8 import BLOCK_K
    from .tensormap import tensormap_args

    tma = plan.tma_plan("sfa")
    try:
        return tensormap_args(tma, ptr, (p.m, -(-p.k // BLOCK_K)), lds_a)
    except ProblemError as e:
        raise ProblemError(f"{plan.spec.kernel_name} (--fp8-scale-load tma) loads scale_a by TMA: it must be 16-byte aligned "
                           f"with lds_a (= {lds_a}) a multiple of 4, i.e. M % 4 == 0 in torch's layout; use "
                           f"--fp8-scale-load smem (any M). {e}") from None


C_MAP = "tmap_c"  # the fused epilogue's C read through TMA (derive.store.fusion.chain_params)


def c_map_args(plan: KernelPlan, ptr: int, ldc: int, p: Problem):
    """The encode arguments of C's tensor map (--fuse c=tma, derive.store.cload): M x N, rows ``ldc`` elements apart, at ``ptr``."""
    from .tensormap import tensormap_args

    return tensormap_args(plan.tma_plan("c"), ptr, (p.n, p.m), ldc)


def _c_tensor_map(plan: KernelPlan, ptr: int, ldc: int, p: Problem, encode) -> bytes:
    from .tensormap import encode as driver_encode

    return (encode or driver_encode)(c_map_args(plan, ptr, ldc, p))


# ----------------------------------------------------------------------------------------------
# Workspaces: split-K's tile counters and partial tiles, stream-K's flags and partial tiles (one launch either way)
# ----------------------------------------------------------------------------------------------
def workspace_bytes(plan: KernelPlan, p: Problem, sm_count: int = 132) -> int:
    """Bytes of workspace the launch needs: split-K's counters and partial tiles (every tile x split), or stream-K's
    flags and partial tiles for any grid the launch may take on ``sm_count`` SMs (0 for neither)."""
    if plan.split is not None:
        return plan.split.workspace_bytes(plan.abi.grid(p.m, p.n, sm_count, p.batch)[0])
    if plan.stream_k is not None:
        size = plan.stream_k.cluster_size
        clusters = plan.abi.grid(p.m, p.n, sm_count)[0] // size
        return plan.stream_k.workspace_bound(streamk_items(plan, p), clusters, p.k)
    return 0


def streamk_items(plan: KernelPlan, p: Problem) -> int:
    """The work items a stream-K kernel's persistent loop walks: tiles, or 2-CTA cluster tiles."""
    cm, cn = plan.schedule.cluster
    return -(-(-(-p.m // plan.spec.bm)) // cm) * -(-(-(-p.n // plan.spec.bn)) // cn)


def workspace_zero_bytes(plan: KernelPlan) -> int:
    """Bytes at the start of a split-K or stream-K workspace that must be zero before the first launch (the counters,
    the flags: each launch leaves them zero)."""
    from ...derive.store.streamk import FLAG_REGION_BYTES

    return FLAG_REGION_BYTES if plan.stream_k is not None or plan.split is not None else 0


def check_workspace_launch(plan: KernelPlan, grid: tuple[int, int, int], w_ptr: int, sm_count: int) -> None:
    """The rules of a launch with a workspace: stream-K's grid all resident (its owners wait), split-K's tiles within
    the counter region (nobody waits), the workspace 128-byte aligned."""
    if plan.stream_k is not None:  # the owners wait for other CTAs: every CTA of the grid must be resident at once
        from ...derive.store.streamk import MAX_GRID_CTAS

        if not plan.abi.persistent or grid[0] > min(sm_count, MAX_GRID_CTAS):
            raise ProblemError(f"{plan.spec.kernel_name}: a stream-K grid of {grid[0]} CTAs on {sm_count} SMs could "
                               "wait on CTAs that are not resident")
    if plan.split is not None and grid[0] > plan.split.max_tiles:
        raise ProblemError(f"{plan.spec.kernel_name}: {grid[0]} output tiles, but a split-K launch counts its splits on "
                           f"at most {plan.split.max_tiles} tile counters (derive.store.splitk); use a larger tile or "
                           "split_k=1 at this size")
    if w_ptr % 128:
        raise ProblemError(f"the workspace at {w_ptr:#x} is not 128-byte aligned")


def gemm_launches(plan: KernelPlan, kernel, a_ptr: int, b_ptr: int, d_ptr: int, w_ptr: int, p: Problem,
                  sm_count: int = 132, encode=None, extra: dict | None = None) -> list:
    """The launch one GEMM takes, as a list of one (loaded kernel, grid, block, KernelArgs): split-K and stream-K
    kernels take the workspace at ``w_ptr`` (W, zeroed counters: workspace_zero_bytes). ``extra``: the kernel's other
    arguments by ABI name (gemm_args; a block-scaled kernel's SFA and SFB)."""
    grid, block, _ = launch_geometry(plan, p, sm_count, kernel)
    if plan.split is not None or plan.stream_k is not None:
        check_workspace_launch(plan, grid, w_ptr, sm_count)
        extra = {**(extra or {}), "W": w_ptr}
    return [(kernel, grid, block, gemm_args(plan, a_ptr, b_ptr, d_ptr, p, encode, extra))]
