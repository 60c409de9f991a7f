"""The legality rules of a tile spec: every PTX rule (and every limit of what ptxgen generates) a TileSpec must meet.

:func:`validate` raises :class:`~ptxgen.isa.types.SpecError` naming the field, the value, the rule, the legal
values and the PTX ISA section for the first rule a spec breaks. ``TileSpec.__post_init__`` calls it, so this
module takes the spec as an argument and does not import :mod:`ptxgen.derive.tile.spec`. The block-scaled kinds' rules
(scale-factor types, shapes, the padded 6-/4-bit operands) are in :mod:`ptxgen.derive.tile.rules_scaled`, the rules of
each operand (A x B types, swizzle and majorness) in :mod:`ptxgen.derive.tile.rules_operand`.
"""

from __future__ import annotations

from ...isa.ptxref import cite
from ...isa.shapes import (REGISTER_RESERVE, consumer_register_budget, legal_bm, setmaxnreg_consumer_registers, legal_bn,
                           uses_setmaxnreg, wgmma_accumulator_registers)
from ...isa.types import (ACC_DTYPES, INPUT_DTYPES, LEGAL_ACC, Arch, Batch, Cluster, Consumers, DType, Epilogue, Grouping, Loader, Major,
                         Schedule, SpecError, legal_values)
from ...isa.epiops import Fp8Blocks, Fp8Overlap, Fp8ScaleLoad, Fp8Stagger
from ..scaled.bfp8cols import plan_recipe
from ..scaled.bfp8slabs import PARTIAL_FRAGMENTS, check_consumer_slabs
from ..roles.epiorder import check_epilogue_order
from ..store.fusion import check_chain
from ..scaled.sfa_tma import check_sfa_tma
from ..store.output import check_d_major
from .rules_scaled import validate_block_scaled
from .rules_promote import check_promote
from .rules_operand import validate_b_dtype, validate_operand
from ..operands.smem import SMEM_LIMIT_BYTES
from ..operands.smem_layout import operand_stage
from ..operands.tma import split_copies


# Columns of one TMA-store epilogue chunk: a 128-byte swizzle row of 16-bit outputs (derive.store.epilogue).
STORE_CHUNK_COLS = 64
FP8_STORE_CHUNK_COLS = 128  # e4m3 outputs: one 128-byte staging row holds 128 of them (wgmma only; derive.store.epilogue)
F32_STORE_CHUNK_COLS = 32  # f32 outputs: one 128-byte staging row holds 32 of them (wgmma only; derive.store.epilogue)
STORE_BUFFERS = 2  # staging buffers per storer: one is written while the TMA store of the other reads it
# M-major D (--d-major m) through the TMA store: a chunk is C kernel columns (rows of the user's D) x the slab's 64 kernel
# rows (one 128-byte swizzle row of 16-bit outputs per column); C the largest multiple of 8 (one stmatrix matrix) that
# divides BN and is at most this (a 16 KB buffer). derive.store.epilogue.
M_MAJOR_MAX_CHUNK_COLS = 128
M_MAJOR_CHUNK_STEP = 8  # columns of one 8x8 stmatrix matrix


def m_major_chunk_cols(bn: int) -> int:
    """Kernel columns per staging chunk of an M-major D: the largest multiple of 8 dividing ``bn``, at most 128.

    >>> [m_major_chunk_cols(bn) for bn in (16, 104, 168, 192, 256)]
    [16, 104, 56, 96, 128]
    """
    return max(c for c in range(M_MAJOR_CHUNK_STEP, min(bn, M_MAJOR_MAX_CHUNK_COLS) + 1, M_MAJOR_CHUNK_STEP) if bn % c == 0)


def validate(t: "TileSpec") -> None:
    """Raise SpecError for the first rule ``t`` breaks (the checks run in this order)."""
    _validate_copy(t)
    _validate_types(t)
    _validate_recipes(t)
    check_consumer_slabs(t)
    check_promote(t, REGISTER_RESERVE)
    _validate_fp8_options(t)
    _validate_output(t)
    _validate_cta_group(t)
    _validate_split_k(t)
    check_d_major(t)
    _validate_stream_k(t)
    check_epilogue_order(t)
    _validate_mma_shape(t)
    _validate_ranges(t)
    for name in ("a", "b"):
        validate_operand(t, name)
    _validate_consumers(t)
    _validate_epilogue(t)
    _validate_cluster(t)
    _validate_grouped(t)
    _validate_batch(t)
    _validate_memory(t)


def _shapes_ref(t: "TileSpec") -> str:
    return cite("shapes") if t.arch is Arch.SM100A else cite("wgmma_shapes")


def _validate_copy(t: "TileSpec") -> None:
    if t.copy_bytes not in (16, 8, 4):
        raise SpecError("--copy-bytes", t.copy_bytes, "cp.async copies 4, 8 or 16 bytes", "16, 8, 4", cite("cp_async"))
    if t.copy_bytes != 16 and t.loader is not Loader.CP_ASYNC:
        raise SpecError("--copy-bytes", t.copy_bytes, "copies narrower than 16 B are the cp.async loader's (TMA moves whole "
                        "boxes from 16-byte aligned rows)", "--loader cp.async, or --copy-bytes 16", cite("cp_async"))


def _validate_types(t: "TileSpec") -> None:
    """Input, accumulator and B types."""
    shapes = _shapes_ref(t)
    if t.block_scaled:
        validate_block_scaled(t)
    elif t.dtype not in INPUT_DTYPES:
        extra = " (e2m1 is a block-scaled type: add --scale ue8m0 or --scale ue4m3)" if t.dtype is DType.E2M1 else ""
        raise SpecError("--dtype", t.dtype.value, "not an MMA input type" + extra, legal_values(d.value for d in INPUT_DTYPES))
    if not t.block_scaled and (t.acc not in ACC_DTYPES or t.acc not in LEGAL_ACC[t.dtype]):
        raise SpecError(
            "--acc",
            t.acc.value,
            f"{t.dtype.value} inputs accumulate only in {'/'.join(d.value for d in LEGAL_ACC[t.dtype])}",
            legal_values(d.value for d in LEGAL_ACC[t.dtype]),
            shapes,
        )
    if not t.block_scaled:
        validate_b_dtype(t)


def _validate_recipes(t: "TileSpec") -> None:
    """What grouped kernels combine with."""
    kgrouped_c = t.grouped is Grouping.OFFS_K and t.fp8_blocks is Fp8Blocks.COLUMNS  # its own rule on --fuse (c only)
    if t.grouped is not Grouping.NONE and t.fuse is not None and not kgrouped_c:
        raise SpecError("--grouped", t.grouped.value, "grouped kernels have no fused epilogue yet (but --fuse c on the "
                        "K-grouped 1D1D kernel)", "leave out --fuse")
    if t.grouped is Grouping.OFFS_ROWWISE and t.fp8_blocks is not Fp8Blocks.NONE:
        raise SpecError("--grouped", t.grouped.value, "one scale recipe per kernel: row-wise scales (offs_rowwise) or "
                        "DeepSeek block scales (--fp8-blocks 1x128x128 with --grouped offs)", "--grouped offs")


def _validate_fp8_options(t: "TileSpec") -> None:
    """The block-scaled FP8 kernel's options, each only with the kernel it shapes."""
    if t.fp8_blocks is not Fp8Blocks.NONE:
        check_block_fp8_spec(t)
    if t.fp8_stagger is not Fp8Stagger.NONE and (t.fp8_blocks is Fp8Blocks.NONE or t.consumers is not Consumers.COOPERATIVE
                                                 or t.consumer_warpgroups != 2):
        raise SpecError("--fp8-stagger", t.fp8_stagger.value, "orders the two cooperative consumer warpgroups of a "
                        "block-scaled FP8 kernel", "--fp8-blocks 1x128x128 --bm 128 --consumers cooperative, or none")
    staggered = t.fp8_stagger is not Fp8Stagger.NONE and t.fp8_overlap is Fp8Overlap.HALVES
    if t.fp8_overlap is not Fp8Overlap.NONE and (t.fp8_blocks is Fp8Blocks.NONE or staggered or t.bn % 16
                                                 or t.grouped is not Grouping.NONE):
        raise SpecError("--fp8-overlap", t.fp8_overlap.value, "splits a dense block-scaled FP8 tile into two column halves "
                        "of a multiple of 8 columns (wgmma N); halves without --fp8-stagger (not built for grouped kernels)",
                        "--fp8-blocks 1x128x128, BN a multiple of 16, no --grouped, halves with --fp8-stagger none; or none")
    if t.fp8_scale_load is not Fp8ScaleLoad.AUTO and t.fp8_blocks is Fp8Blocks.NONE:
        raise SpecError("--fp8-scale-load", t.fp8_scale_load.value, "is how a block-scaled FP8 kernel's scales reach its "
                        "consumers", "--fp8-blocks 1x128x128, or leave it out")
    if t.fp8_scale_load is Fp8ScaleLoad.AHEAD and t.fp8_overlap is not Fp8Overlap.NONE:
        raise SpecError("--fp8-scale-load", t.fp8_scale_load.value, "loads the scales one K block ahead in the one-partial "
                        "consumer loop (not built with --fp8-overlap halves or interleave)", "block or smem, or --fp8-overlap none")
    if t.fp8_scale_load in (Fp8ScaleLoad.SMEM, Fp8ScaleLoad.CPASYNC) and (t.grouped.along_m or t.consumers is not Consumers.COOPERATIVE):
        raise SpecError("--fp8-scale-load", t.fp8_scale_load.value, "the producer's scale warp walks the dense cooperative "
                        "kernel's tiles and the K-grouped walk (not built for M-grouped or ping-pong kernels)", "ahead or block")
    if t.fp8_scale_load is Fp8ScaleLoad.TMA:
        check_sfa_tma(t)


def _validate_output(t: "TileSpec") -> None:
    """The fused chain and the output type an accumulator converts to."""
    outs = (DType.S32,) if t.acc is DType.S32 else (DType.F32, DType.F16, DType.BF16)
    if t.fuse is not None:
        check_chain(t.fuse, t.arch, t.acc, t.out_dtype, t.epilogue, t.bm, t.bn, t.pair, t.block_scaled)
        if t.fuse.c_tma and t.loader is not Loader.TMA:
            raise SpecError("--fuse", t.fuse.token, "C through TMA is issued with the TMA loader's copy helpers", "--loader tma")
        if t.fuse.c_tma and t.fp8_blocks is not Fp8Blocks.NONE:
            raise SpecError("--fuse", t.fuse.token, "C through TMA is not derived for block-scaled FP8 kernels", "--fuse c")
        outs += (DType.E4M3,)
    if t.out_dtype not in outs:
        words = [d.value for d in outs]
        to = words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" or {words[-1]}"
        raise SpecError("--out-dtype", t.out_dtype.value, f"a {t.acc.value} accumulator converts to {to}", legal_values(words))


def _validate_mma_shape(t: "TileSpec") -> None:
    """BM, BN and BK against the MMA instruction's shapes."""
    shapes = _shapes_ref(t)
    bms = legal_bm(t.arch, t.cta_group)
    if t.bm not in bms:
        rule = (
            f"tcgen05.mma.cta_group::{t.cta_group} has M = {' or '.join(map(str, bms))}"
            if t.arch is Arch.SM100A
            else "wgmma has M = 64; ptxgen runs one warpgroup per 64 rows, at most four"
        )
        raise SpecError("--bm", t.bm, rule, legal_values(bms), shapes)
    ns = legal_bn(t.arch, t.dtype, t.b.major, t.cta_group)
    if t.bn not in ns:
        family = f"tcgen05 kind::{t.dtype.kind}" if t.arch is Arch.SM100A else f"wgmma .{t.dtype.value}"
        step = "8, 16, 24, 32, then steps of 16" if t.dtype.kind == "i8" else "8..256 in steps of 8"
        if len(ns) and ns[0] == 16 and t.dtype.kind != "i8":
            step = "16..256 in steps of 16 (8-bit N-major B)"
        if t.pair:
            family += ".cta_group::2"
            step = f"{ns[0]}..256 in steps of {ns[1] - ns[0]}" + (" (8-bit N-major B)" if t.dtype.bits == 8 and t.b.major is Major.MN else "")
        raise SpecError("--bn", t.bn, f"{family} N is {step}", legal_values(ns), shapes)

    k = t.k_per_mma
    if t.bk <= 0 or t.bk % k:
        raise SpecError(
            "--bk",
            t.bk,
            f"one {t.dtype.value} MMA consumes K={k} (256 bits of each row); BK must be a multiple",
            f"{k}, {2 * k}, {3 * k}, ...",
            shapes,
        )


def _validate_ranges(t: "TileSpec") -> None:
    if t.smem_offset < 0 or t.smem_offset % 128 or t.smem_offset >= 1024:
        raise SpecError(
            "--smem-offset",
            t.smem_offset,
            "the descriptor's base offset counts whole 128-byte lines of the swizzle pattern (3 bits), so a "
            "pattern can start only on a 128-byte line, and 1024 or more is the same phase as 0",
            "0, 128, 256, ..., 896",
            cite("base_offset"),
        )
    if not 1 <= t.raster_group <= 64:
        raise SpecError("--raster-group", t.raster_group, "a raster group is 1 to 64 tile rows", "1..64")
    if not 1 <= t.stages <= 16:
        raise SpecError("--stages", t.stages, "the shared-memory ring holds 1 to 16 stages", "1..16")


def _validate_consumers(t: "TileSpec") -> None:
    """Ping-pong's conditions and the consumer threads' register budget."""
    if t.consumers is Consumers.PINGPONG and (t.arch is not Arch.SM90A or t.schedule is not Schedule.PERSISTENT or t.bm > 128):
        raise SpecError(
            "--consumers", "pingpong", "ping-pong consumers are wgmma warpgroups taking alternate tiles of a persistent "
            "CTA, each multiplying the whole tile (BM 64 or 128)", "--arch sm_90a --schedule persistent --bm 64|128, or cooperative")
    if t.arch is Arch.SM90A:
        nc = t.consumer_warpgroups
        budget = consumer_register_budget(nc, setmaxnreg=uses_setmaxnreg(t.loader is Loader.TMA, nc))
        raised = budget > consumer_register_budget(nc)  # the setmaxnreg.inc count, past the launch bound
        if t.consumer_accumulator_registers + REGISTER_RESERVE > budget:
            fit = [n for n in legal_bn(t.arch, t.dtype, t.b.major)
                   if t.slabs_per_consumer * wgmma_accumulator_registers(n, t.acc) + REGISTER_RESERVE <= budget]
            raise SpecError(
                "--bn",
                t.bn,
                f"with BM={t.bm} ({nc} consumer warpgroup(s) and a producer warpgroup, {128 * (nc + 1)} threads) a consumer "
                f"thread has at most {budget} registers ({'the setmaxnreg.inc count' if raised else '65536 per SM at launch'}); the m64n{t.bn} {t.acc.value} "
                f"accumulator ({t.slabs_per_consumer} slab(s)) takes {t.consumer_accumulator_registers}, leaving less than the {REGISTER_RESERVE} that addressing "
                "and the pipeline need (ptxas would spill)",
                f"BN <= {max(fit)} at BM={t.bm}, or a smaller BM" if fit else "a smaller BM",
            )


def _validate_memory(t: "TileSpec") -> None:
    """Shared memory per block and TMEM columns."""
    plan = t.smem_plan()
    if plan.dynamic_bytes > SMEM_LIMIT_BYTES:
        per_stage = t.stage_bytes("a") + t.stage_bytes("b")
        fit = max(0, (SMEM_LIMIT_BYTES - (plan.dynamic_bytes - t.stages * per_stage)) // per_stage)
        raise SpecError(
            "--stages" if fit else "--bm/--bn/--bk",
            t.stages if fit else f"{t.bm}x{t.bn}x{t.bk}",
            f"{t.stages} stages x ({t.stage_bytes('a')} + {t.stage_bytes('b')}) B plus barriers and alignment slack "
            f"need {plan.dynamic_bytes} B of shared memory per block, more than the {SMEM_LIMIT_BYTES} B limit",
            f"at most {fit} stages for this tile" if fit else "a smaller BM/BN/BK",
            cite("smem_limit"),
        )
    if t.block_scaled and t.tmem_columns + t.sf_tmem_columns > 512:
        per = t.sf_tmem_columns // t.stages
        fit = (512 - t.tmem_columns) // per
        raise SpecError(
            "--stages", t.stages,
            f"the accumulator ({t.tmem_columns} TMEM columns) and {t.stages} stages x {per} scale-factor columns need more than "
            "the 512 TMEM columns", f"at most {fit} stages for this tile" if fit else "a smaller BN or BK", cite("tmem_alloc"))
    if t.arch is Arch.SM100A and t.tmem_columns > 512:
        raise SpecError("--bn", t.bn, "the accumulator needs more than the 512 TMEM columns", "BN <= 512", cite("tmem_alloc"))


def _validate_grouped(t: "TileSpec") -> None:
    if t.grouped is Grouping.NONE:
        return
    g = t.grouped.value
    if t.arch is not Arch.SM90A or t.loader is not Loader.TMA or t.schedule is not Schedule.PERSISTENT:
        raise SpecError("--grouped", g, "grouped kernels are persistent wgmma kernels with the TMA loader: every CTA walks the "
                        "groups' tiles from offs on the GPU (ptxgen.derive.roles.grouped)", "--arch sm_90a --loader tma --schedule persistent")
    if t.grouped.along_k:
        _validate_k_grouped(t)
        return
    if t.a.major is not Major.K:
        raise SpecError("--grouped", g, "grouped kernels read A K-major: the groups' rows are stacked along M, one M_total x K "
                        "tensor map (docs/grouped.md)", "--a kmajor-...")
    if t.cluster is not Cluster.C1X1 or t.block_scaled:
        raise SpecError("--grouped", g, "grouped kernels take neither clusters nor block scaling (not derived)",
                        "--cluster 1x1 without --scale")
    if t.grouped is Grouping.OFFS_ROWWISE and (t.dtype not in (DType.E4M3, DType.E5M2) or t.acc is not DType.F32):
        raise SpecError("--grouped", g, "row-wise scales (torch._scaled_grouped_mm) multiply an FP8 product's f32 accumulator",
                        "--dtype e4m3|e5m2 --acc f32, or --grouped offs")


def _validate_k_grouped(t: "TileSpec") -> None:
    """--grouped offs_k / offs_k_rowwise (derive.roles.kgrouped): 16-bit inputs (offs_k) or FP8 inputs with row-wise
    scales read K-major (offs_k_rowwise), an f32 accumulator, the cooperative walk; direct stores or the TMA store
    through the (N, M, G) map (derive.roles.kgrouped.store_map_derivation)."""
    g = t.grouped.value
    if t.grouped is Grouping.OFFS_K_ROWWISE:
        if t.dtype not in (DType.E4M3, DType.E5M2) or t.acc is not DType.F32 or t.out_dtype not in (DType.BF16, DType.F16, DType.F32):
            raise SpecError("--grouped", g, "row-wise scales (torch._scaled_grouped_mm's 2-D x 2-D form) multiply an FP8 "
                            "product's f32 accumulator; the output is 16-bit or f32",
                            "--dtype e4m3|e5m2 --acc f32 --out-dtype bf16|f16|f32, or --grouped offs_k for 16-bit inputs")
        if t.a.major is not Major.K or t.b.major is not Major.K:
            raise SpecError("--grouped", g, "wgmma reads FP8 operands K-major only (no transpose for .e4m3/.e5m2), so A (M x "
                            "K_total) and B (N x K_total) are K-major: rows contiguous along K, as torch._scaled_grouped_mm "
                            "takes a and b.t()", "--a kmajor-... --b kmajor-...", cite("wgmma"))
    elif t.fp8_blocks is Fp8Blocks.COLUMNS:
        _validate_k_grouped_blocks(t)
    elif t.dtype not in (DType.BF16, DType.F16) or t.acc is not DType.F32 or t.out_dtype not in (DType.BF16, DType.F16, DType.F32):
        raise SpecError("--grouped", g, "the K-grouped kernel is derived for 16-bit inputs with an f32 accumulator and a "
                        "16-bit or f32 output (FP8 inputs: --grouped offs_k_rowwise, or --fp8-blocks 1x128x1x128)",
                        "--dtype bf16|f16 --acc f32 --out-dtype bf16|f16|f32")
    blocks_ok = t.grouped is Grouping.OFFS_K and t.fp8_blocks is Fp8Blocks.COLUMNS
    if t.split or t.stream_k > 1 or t.batch is not Batch.NONE or (t.fp8_blocks.value != "none" and not blocks_ok) \
            or t.consumer_slabs != 1:
        raise SpecError("--grouped", g, "the K-grouped kernel zeroes each group's K tail in shared memory between the "
                        "consumers of a stage (a named barrier) and walks whole tiles (a cluster's CTAs neighbouring tiles "
                        "of one group); other walks are not derived",
                        "--split-k 1 --stream-k 1 --batch none --consumer-slabs 1, no --fp8-blocks (but 1x128x1x128 with "
                        "--grouped offs_k)")


def _validate_k_grouped_blocks(t: "TileSpec") -> None:
    """--grouped offs_k --fp8-blocks 1x128x1x128 (DeepGEMM's k-grouped 1D1D weight gradient): e4m3 operands K-major, the
    1D1D kernel's promotion per K block (derive.scaled.bfp8cols) on the K-grouped walk, direct stores, no C."""
    if t.dtype is not DType.E4M3 or t.b_dtype is not DType.E4M3 or t.out_dtype not in (DType.BF16, DType.F32):
        raise SpecError("--grouped", t.grouped.value, "the K-grouped 1D1D kernel takes e4m3 A and B (the recipe's) and "
                        "writes bf16 or f32", "--dtype e4m3 --out-dtype bf16|f32")
    if t.a.major is not Major.K or t.b.major is not Major.K:
        raise SpecError("--grouped", t.grouped.value, "wgmma reads FP8 operands K-major only: A (M x K_total) and B "
                        "(N x K_total) with rows contiguous along K", "--a kmajor-... --b kmajor-...", cite("wgmma"))
    if t.epilogue is not Epilogue.DIRECT or t.consumers is not Consumers.COOPERATIVE:
        raise SpecError("--grouped", t.grouped.value, "the K-grouped 1D1D kernel is derived with cooperative consumers "
                        "and the direct epilogue", "--consumers cooperative --epilogue direct")
    if t.fuse is not None and (t.fuse.token != "c" or t.fuse.c_tma or t.out_dtype is not DType.F32):
        raise SpecError("--fuse", t.fuse.token, "the K-grouped 1D1D kernel's only chain is C read by the direct stores into "
                        "an f32 out (out[g] = C[g] + the group's product, C's groups M ldc apart: DeepGEMM's accumulating "
                        "weight gradient)", "--fuse c --out-dtype f32, or no --fuse")


def _validate_batch(t: "TileSpec") -> None:
    if t.batch is Batch.NONE:
        return
    b = t.batch.value
    if t.loader is not Loader.TMA:
        raise SpecError("--batch", b, "a batched kernel reads its operands through 3-D tensor maps (the batch the outer "
                        "dimension; out-of-bounds rows and K read zeros, not the next batch)", "--loader tma")
    if (t.epilogue is not Epilogue.DIRECT or t.cluster is not Cluster.C1X1 or t.pair or t.split or t.grouped is not Grouping.NONE
            or t.block_scaled or t.fuse is not None or t.fp8_blocks is not Fp8Blocks.NONE):
        raise SpecError("--batch", b, "batched kernels are derived with the direct epilogue and without a cluster, CTA pair, "
                        "split-K, grouping, block scaling or fused chain",
                        "--epilogue direct --cluster 1x1 --cta-group 1 --split-k 1 --grouped none, no --scale/--fuse/--fp8-blocks")


def check_block_fp8_spec(t: "TileSpec") -> None:
    """--fp8-blocks 1x128x128 or 1x128x1x128: the recipe's rules (derive.scaled.blockfp8, derive.scaled.bfp8cols) and what the kernel
    needs around them."""
    cols = t.fp8_blocks is Fp8Blocks.COLUMNS
    plan = plan_recipe(t.fp8_blocks.value, t.bm, t.bn, t.bk, t.dtype.value if t.b_dtype is t.dtype else "mixed",
                       t.a.major.value, t.b.major.value, t.arch.value,
                       **(dict(stagger=t.fp8_stagger.value, grouped=t.grouped.along_m,
                               overlap=t.fp8_overlap.value, scale_load=t.scale_load.value) if cols else {}))
    if cols and (t.cluster is not Cluster.C1X1 or t.consumer_slabs > 1):
        what = ("--cluster", t.cluster.value) if t.cluster is not Cluster.C1X1 else ("--consumer-slabs", t.consumer_slabs)
        raise SpecError(*what, "--fp8-blocks 1x128x1x128 is built without a cluster or shared-partial slabs (not derived)",
                        "--cluster 1x1 --consumer-slabs 1")
    if t.acc is not DType.F32:
        raise SpecError("--acc", t.acc.value, "the promotion accumulates in f32", "f32")
    if t.loader is not Loader.TMA or (t.cluster is not Cluster.C1X1 and not t.scale_load.staged):
        raise SpecError("--fp8-blocks", t.fp8_blocks.value, "block-scaled FP8 runs with TMA loads, and in a cluster only with "
                        "its scales staged in shared memory (--fp8-scale-load smem)", "--loader tma --cluster 1x1")
    # The consumer branch runs after setmaxnreg.inc: measured with NVRTC 13.5, ptxas allocates it up to that count here
    # (128 x 192 x 128, accumulator + partial = 192 registers: highest register R221, no local memory), not the launch
    # bound that isa.shapes.consumer_register_budget documents for the plain kernels' BM=256 case.
    # --consumer-slabs N > 1: the warpgroup's N slabs share one partial (derive.scaled.bfp8slabs); ping-pong: one per slab.
    budget = setmaxnreg_consumer_registers(t.consumer_warpgroups)
    partials = PARTIAL_FRAGMENTS if t.consumer_slabs > 1 else t.slabs_per_consumer
    need = t.consumer_accumulator_registers + partials * plan.partial_registers + plan.column_scale_registers
    if need + REGISTER_RESERVE > budget:
        raise SpecError("--bn", t.bn, f"the accumulator(s) ({t.slabs_per_consumer} slab(s)) and {partials} K block partial "
                        f"sum(s){' and the per-column B scales' if cols else ''} ({need} registers) leave less than {REGISTER_RESERVE} of the {budget} a consumer thread has",
                        "a smaller BN or fewer slabs per consumer")


MAX_SPLIT_K = 32  # splits of one tile: past this the workspace traffic (S f32 partial tiles) outgrows any K saved


def _validate_split_k(t: "TileSpec") -> None:
    s = t.split_k
    if not 1 <= s <= MAX_SPLIT_K:
        raise SpecError("--split-k", s, f"split-K takes 1 (no split) to {MAX_SPLIT_K} splits of K per output tile",
                        f"1..{MAX_SPLIT_K}")
    if s == 1:
        return
    if t.arch is not Arch.SM90A:
        raise SpecError("--split-k", s, "split-K is generated for the wgmma kernels (sm_90a) only; tcgen05 is not derived",
                        "--arch sm_90a, or --split-k 1")
    if t.schedule is not Schedule.TILE or t.cluster is not Cluster.C1X1:
        raise SpecError("--split-k", s, "a split-K kernel runs one CTA per (output tile, split): grid z is the split, "
                        "so it takes the tile schedule without a cluster", "--schedule tile --cluster 1x1, or --split-k 1")
    if t.epilogue is not Epilogue.DIRECT:
        raise SpecError("--split-k", s, "the last split to arrive writes D from its registers through the direct "
                        "epilogue (the TMA store is not derived with a split)", "--epilogue direct, or --split-k 1")
    if t.acc is not DType.F32:
        raise SpecError("--split-k", s, f"the workspace holds f32 partial sums; a {t.acc.value} accumulator is not split",
                        "--acc f32, or --split-k 1")
    if t.fp8_blocks.value != "none":  # (a fused chain runs once, on the last split's sum: derive.store.splitk)
        raise SpecError("--split-k", s, "block-scaled FP8 promotes per K block in its own consumer loops; they are not "
                        "derived with a split of K (stream-K splits them)", "--split-k 1 with --fp8-blocks")


MAX_STREAM_K = 16  # splits of one last-round tile: each owner adds S - 1 partial tiles of BM x BN floats


def _validate_stream_k(t: "TileSpec") -> None:
    s = t.stream_k
    if not 1 <= s <= MAX_STREAM_K:
        raise SpecError("--stream-k", s, f"stream-K takes 1 (no split) to {MAX_STREAM_K} splits of a last-round tile",
                        f"1..{MAX_STREAM_K}")
    if s == 1:
        return
    if t.arch is not Arch.SM90A or t.schedule is not Schedule.PERSISTENT or t.consumers is not Consumers.COOPERATIVE:
        raise SpecError("--stream-k", s, "stream-K splits the last round of the persistent cooperative wgmma kernel (sm_90a)",
                        "--arch sm_90a --schedule persistent --consumers cooperative, or --stream-k 1")
    if t.bm > 128 and not (t.bm == 192 and t.fp8_blocks is Fp8Blocks.DEEPSEEK):
        raise SpecError("--stream-k", s, "the owner's sum of the partials spills registers with four consumer warpgroups "
                        "(256-row tiles: ptxas, 24 B of stack) and with three beside the 1x128x1x128 recipe's column "
                        "scales (16-24 B, NVRTC 13.5); 192-row tiles are built and run with --fp8-blocks 1x128x128 only",
                        "--bm 64 or 128 (192 with --fp8-blocks 1x128x128), or --stream-k 1")
    # An M-major D (swap-AB) composes: the fix-up sums the f32 accumulator fragments in register order before the
    # owner's normal epilogue, whichever way that epilogue stores D (model.bridges.check_streamk, tests/test_swap_streamk.py).
    if t.acc is not DType.F32 or t.split or t.pair or t.loader is not Loader.TMA:
        raise SpecError("--stream-k", s, "the partial tiles are f32 accumulators of a TMA-loaded kernel without split-K",
                        "--acc f32 --loader tma --split-k 1, or --stream-k 1")
    if t.fuse is not None or t.grouped is not Grouping.NONE or t.batch is not Batch.NONE:
        raise SpecError("--stream-k", s, "not derived with a fused chain, grouping or a batch (the owner would have to sum "
                        "before each of them)", "--stream-k 1")
    # Block-scaled FP8: the splits sum the promoted f32 accumulators (the same fix-up as the dense kernel's); each split
    # promotes with the scales of its own K blocks (derive.scaled.blockfp8.BlockFp8Plan.k_block, checked by
    # model.numerics.bfp8model.check_unit_scale_blocks). The --fp8-stagger protocol is not derived with it.
    if t.fp8_blocks is not Fp8Blocks.NONE and t.fp8_stagger.value != "none":
        raise SpecError("--stream-k", s, "block-scaled FP8 with stream-K is derived for unordered consumer warpgroups only "
                        "(the --fp8-stagger barriers are not checked with split units)", "--fp8-stagger none, or --stream-k 1")


def _validate_cluster(t: "TileSpec") -> None:
    if t.cluster is Cluster.C1X1:
        return
    c = t.cluster.value
    if t.arch is not Arch.SM90A or t.loader is not Loader.TMA:
        raise SpecError("--cluster", c, "clusters with TMA multicast are generated for wgmma kernels with the TMA loader only "
                        "(the multicast is a cp.async.bulk.tensor form)", "--arch sm_90a --loader tma, or --cluster 1x1", cite("tma_multicast"))
    # The shared operand's stage is split between the two CTAs: each loads an equal share of its TMA boxes.
    shared = t.cluster.shared_operand
    if _multicast_halves(t, shared) is None:
        raise SpecError("--cluster", c, f"each CTA of the pair loads half of {shared.upper()}'s stage, so the stage must split into "
                        "two equal runs of swizzle atoms", f"a {'BN' if shared == 'b' else 'BM'} or BK with an even number of atoms along "
                        "one dimension, or --cluster 1x1", cite("tma_multicast"))


def _multicast_halves(t: "TileSpec", name: str):
    """The shared operand's copies split in two (see ptxgen.derive.operands.tma.split_copies), or None when it does not split."""
    dt, op = t.operand_dtype(name), t.operand(name)
    store = operand_stage(op.major, op.swizzle, op.order, t.mn_extent(name), t.bk, dt.per_cell)
    return split_copies(store, dt.per_cell, dt.bytes, t.cluster.size)


def _validate_epilogue(t: "TileSpec") -> None:
    if t.epilogue is not Epilogue.TMA:
        return
    if t.arch is Arch.SM100A and not t.pair and t.bm != 128:
        raise SpecError("--epilogue", "tma", "on tcgen05 the TMA-store epilogue stores the M=128 data path (epilogue warp w: TMEM "
                        "lanes and rows 32w..32w+31); M=64 uses half the lanes", "--bm 128, or --epilogue direct", cite("tmem_layout"))
    fp8 = t.out_dtype is DType.E4M3 and t.fuse is not None and t.arch is Arch.SM90A  # derive.store.epilogue st.shared.b16
    f32 = t.out_dtype is DType.F32 and t.acc is DType.F32  # derive.store.epilogue st.shared.v2.f32 (wgmma, row-major D)
    if f32 and t.arch is not Arch.SM90A:
        raise SpecError(
            "--epilogue", "tma", "the tcgen05 TMA-store epilogue packs f32 accumulators into 16-bit outputs (st.shared.v4 of "
            "b16 pairs); f32 outputs through the TMA store are derived for wgmma (sm_90a) only", "--out-dtype f16|bf16, or "
            "--epilogue direct", cite("tmem_layout"))
    if t.acc is not DType.F32 or (t.out_dtype not in (DType.F16, DType.BF16) and not fp8 and not f32):
        raise SpecError(
            "--epilogue", "tma", "the TMA-store epilogue packs f32 accumulators into 16-bit outputs with stmatrix (8x8 matrices "
            f"of b16), f32 outputs (wgmma) with st.shared.v2.f32, e4m3 outputs of a fused chain with st.shared.b16; here "
            f"{t.acc.value} -> {t.out_dtype.value}", "--acc f32 --out-dtype f16|bf16|f32, or --epilogue direct")
    if t.d_major.value == "m":  # M-major D: chunks of whole 8-column stmatrix matrices (wgmma's N is a multiple of 8;
        return                  # check_d_major has the rest, f32 included: refused there)
    if fp8 and t.bn % FP8_STORE_CHUNK_COLS:
        raise SpecError(
            "--bn", t.bn, f"the TMA-store epilogue stages one 128-byte swizzle row per tile row: {FP8_STORE_CHUNK_COLS} e4m3 "
            "columns a chunk, so BN must be a whole number of them", f"BN a multiple of {FP8_STORE_CHUNK_COLS}, or --epilogue direct")
    if f32:
        if t.bn % F32_STORE_CHUNK_COLS:
            raise SpecError(
                "--bn", t.bn, f"the TMA-store epilogue stages one 128-byte swizzle row per tile row: {F32_STORE_CHUNK_COLS} f32 "
                "columns a chunk, so BN must be a whole number of them", f"BN a multiple of {F32_STORE_CHUNK_COLS}, or --epilogue direct")
        return
    if t.bn % STORE_CHUNK_COLS:
        raise SpecError(
            "--bn", t.bn, f"the TMA-store epilogue stages {STORE_CHUNK_COLS}-column chunks (one 128-byte swizzle row of 16-bit "
            "outputs), so BN must be a whole number of them", f"BN a multiple of {STORE_CHUNK_COLS}, or --epilogue direct")
    if t.pair and t.bm == 128 and (t.bn // 2) % STORE_CHUNK_COLS:
        # cta_group::2 M=128 is data-path Layout B: an epilogue warp holds BN/2 columns of its 32 rows (ctapair.py).
        raise SpecError(
            "--bn", t.bn, f"with --cta-group 2 --bm 128 (data-path Layout B) each epilogue warp holds BN/2 = {t.bn // 2} columns "
            f"of its rows, and the TMA-store epilogue stages {STORE_CHUNK_COLS}-column chunks of them",
            f"BN a multiple of {2 * STORE_CHUNK_COLS} (128, 256), --bm 256, or --epilogue direct", cite("tmem_layout"))


def _validate_cta_group(t: "TileSpec") -> None:
    if t.cta_group not in (1, 2):
        raise SpecError("--cta-group", t.cta_group, "tcgen05 .cta_group is ::1 or ::2", "1, 2", cite("cta_pair"))
    if not t.pair:
        return
    if t.arch is not Arch.SM100A:
        raise SpecError("--cta-group", 2, "a CTA pair issuing one MMA is tcgen05 (sm_100a); wgmma has no cta_group",
                        "--cta-group 1 with --arch sm_90a, or --arch sm_100a",
                        cite("cta_pair"))
    if t.loader is not Loader.TMA:
        raise SpecError(
            "--cta-group", 2, "the pair's MMA waits on the leader CTA's full barrier, which the peer CTA's loads must complete "
            "remotely; only TMA can (cp.async.bulk.tensor .cta_group::2 signals an mbarrier in the peer CTA); ptxgen's "
            "cp.async producer has no such path", "--loader tma with --cta-group 2", cite("tma_cta_group"))
