"""Launching a generated GEMM: problem-size checks, argument marshalling, grid and block.

Shared by both architectures: the kernels of sm_90a and sm_100a have the same signature
``(A, B, D, M, N, K, lda, ldb, ldd)``, the same global layouts and the same launch geometry, so
everything here is exercised on a CPU (tests) even though only Hopper can run it here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..derive.layout import TileLayout
from ..derive.spec import TileSpec
from ..isa.types import Major
from .gpu import KernelArgs


class ProblemError(ValueError):
    """A problem size or layout the kernel cannot handle."""


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldd: int

    @classmethod
    def tight(cls, spec: TileSpec, m: int, n: int, k: int) -> "Problem":
        """Leading dimensions of densely packed operands in the spec's global layouts."""
        lda = k if spec.a.major is Major.K else m
        ldb = k if spec.b.major is Major.K else n
        return cls(m, n, k, lda, ldb, n)


def global_shape(spec: TileSpec, name: str, p: Problem) -> tuple[int, int]:
    """(rows, leading dimension) of operand ``name`` in global memory: K-major A is M x K, MN-major A
    is K x M, K-major B is N x K, MN-major B is K x N; rows are ``ld`` elements apart."""
    op = spec.operand(name)
    mn = p.m if name == "a" else p.n
    ld = p.lda if name == "a" else p.ldb
    return (mn, ld) if op.major is Major.K else (p.k, ld)


def problem_errors(spec: TileSpec, p: Problem) -> list[str]:
    """Why the kernel cannot run problem ``p`` (empty if it can)."""
    errs = []
    for dim, size, tile in (("M", p.m, spec.bm), ("N", p.n, spec.bn), ("K", p.k, spec.bk)):
        if size <= 0 or size % tile:
            errs.append(f"{dim}={size} must be a positive multiple of the tile's B{dim}={tile} (no partial tiles)")
    esize = spec.dtype.bytes
    for name, ld in (("a", p.lda), ("b", p.ldb)):
        op = spec.operand(name)
        inner = p.k if op.major is Major.K else (p.m if name == "a" else p.n)
        inner_name = "K" if op.major is Major.K else ("M" if name == "a" else "N")
        if ld < inner:
            errs.append(f"ld{name}={ld} is smaller than its contiguous extent {inner_name}={inner}")
        if ld * esize % 16:
            errs.append(f"ld{name}={ld} x {esize} B is not a multiple of 16 B: rows must keep 16-byte copies aligned")
    if p.ldd < p.n:
        errs.append(f"ldd={p.ldd} is smaller than N={p.n}")
    if p.ldd * spec.out_dtype.bytes % 16:
        errs.append(f"ldd={p.ldd} x {spec.out_dtype.bytes} B is not a multiple of 16 B (the epilogue stores 16-byte vectors)")
    if p.m // spec.bm > 65535:
        errs.append(f"M={p.m} needs more than 65535 tiles of BM={spec.bm} (grid y)")
    return errs


def check_problem(spec: TileSpec, p: Problem) -> None:
    errs = problem_errors(spec, p)
    if errs:
        raise ProblemError(f"{spec.kernel_name} cannot run M={p.m} N={p.n} K={p.k}: " + "; ".join(errs))


def launch_geometry(t: TileLayout, p: Problem) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory bytes): one CTA per BM x BN tile of D."""
    s = t.spec
    return (p.n // s.bn, p.m // s.bm, 1), (s.threads, 1, 1), t.smem.dynamic_bytes


def gemm_args(a_ptr: int, b_ptr: int, d_ptr: int, p: Problem) -> KernelArgs:
    for name, ptr in (("A", a_ptr), ("B", b_ptr), ("D", d_ptr)):
        if ptr % 16:
            raise ProblemError(f"{name} at {ptr:#x} is not 16-byte aligned")
    return KernelArgs(
        [
            ("ptr", a_ptr),
            ("ptr", b_ptr),
            ("ptr", d_ptr),
            ("i32", p.m),
            ("i32", p.n),
            ("i32", p.k),
            ("i32", p.lda),
            ("i32", p.ldb),
            ("i32", p.ldd),
        ]
    )
