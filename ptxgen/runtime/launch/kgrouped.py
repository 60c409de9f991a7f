"""Launching a K-grouped GEMM (ptxgen.derive.roles.kgrouped, ``--grouped offs_k`` and ``offs_k_rowwise``): problem checks and the grid.

The problem is a :class:`~ptxgen.runtime.launch.grouped.GroupedProblem` read this way: ``m`` and ``n`` the rows of A
and B (the output of every group is M x N), ``k`` = K_total (the maps' K extent), ``groups`` = G, ``lda`` / ``ldb``
the operands' strides between their outer rows (K-major: between M or N rows; MN-major: between K rows), ``ldd`` the
stride between rows of each out[g] (out[g] at D + g M ldd). The parameter block is ``grouped.build_grouped_params``'
(A and B as plain 2-D maps). Nothing here reads ``offs``. Everything runs on a CPU.
"""

from __future__ import annotations

from ...derive.tile.kernel import KernelPlan
from ...isa.types import Major
from .grouped import GRID_HEADROOM, GroupedProblem, out_errors, refuse
from .launch import MAX_DIM, ROW_ALIGN_BYTES, cluster_sm_count


def kgrouped_problem_errors(plan: KernelPlan, p: GroupedProblem) -> list[str]:
    """Why the K-grouped kernel cannot run ``p`` (empty if it can), each naming its rule."""
    spec = plan.spec
    if not spec.grouped.along_k or plan.kgrouped is None:
        return [f"{spec.kernel_name} is not a K-grouped kernel (compile a spec with grouped='offs_k' or 'offs_k_rowwise')"]
    errs = []
    for dim, size in (("M", p.m), ("N", p.n), ("K", p.k), ("G", p.groups)):
        if not 1 <= size <= MAX_DIM:
            errs.append(f"{dim}={size} must be in 1..{MAX_DIM}")
    items = plan.kgrouped.work_items(p.groups, p.m, p.n)
    if items > MAX_DIM - GRID_HEADROOM:
        errs.append(f"G x ceil(M / {spec.bm}) x ceil(N / {spec.bn}) tiles ({items} work items"
                    f"{', one a cluster of ' + str(spec.cluster.size) if spec.cluster.size > 1 else ''}) must fit in an int")
    esize, osize = spec.dtype.bytes, spec.out_dtype.bytes
    for name, ld, mn, op in (("a", p.lda, p.m, spec.a), ("b", p.ldb, p.n, spec.b)):
        inner, word = (p.k, "K") if op.major is Major.K else (mn, "M" if name == "a" else "N")
        if ld < inner:
            errs.append(f"ld{name}={ld} is smaller than {word}={inner} ({name} is {op.major.value}-major)")
        if ld * esize % ROW_ALIGN_BYTES:
            errs.append(f"ld{name}={ld} x {esize} B is not a multiple of 16 B: every row must start 16-byte aligned (TMA)")
    return errs + out_errors(p, osize)


def check_kgrouped_problem(plan: KernelPlan, p: GroupedProblem) -> None:
    refuse(plan, p, kgrouped_problem_errors(plan, p))


def kgrouped_geometry(plan: KernelPlan, p: GroupedProblem, sm_count: int,
                      kernel=None) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory bytes): min(SMs, G x tiles_m x tiles_n) persistent CTAs; with a cluster,
    whole clusters, and with ``kernel`` (a loaded ptxgen.runtime.launch.gpu.Kernel) no more than the driver says fit
    at once (as launch.launch_geometry)."""
    abi = plan.abi
    return (plan.kgrouped.ctas(p.groups, p.m, p.n, cluster_sm_count(plan, sm_count, kernel)), 1, 1), abi.block, abi.dynamic_smem_bytes
