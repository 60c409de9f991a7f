"""``ptxgen validate``: run a generated kernel on the GPU and compare with a float64 numpy reference."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..emit.render import render_kernel
from ..derive.layout import derive
from ..isa.numerics import CODE_DTYPE, decode, poison_code, random_codes, tolerance
from ..derive.spec import TileSpec
from ..isa.types import Major
from .gpu import Buffer, Kernel, NoGPU, require_gpu, synchronize
from .launch import Problem, check_problem, gemm_args, global_shape, launch_geometry
from .toolchain import compile_cuda


def default_problem(spec: TileSpec) -> tuple[int, int, int]:
    """Several tiles in every direction, M != N != K, and enough K-tiles to wrap the stage ring twice."""
    return 3 * spec.bm, 2 * spec.bn, (2 * spec.stages + 1) * spec.bk


@dataclass
class ValidationResult:
    spec: TileSpec
    problem: Problem
    rel_error: float
    max_abs_error: float
    tolerance: float
    unwritten: int
    nonfinite: int
    passed: bool
    seconds: float
    device: str

    @property
    def verdict(self) -> str:
        p = self.problem
        word = "PASS" if self.passed else "FAIL"
        return (
            f"{word} {self.spec.kernel_name} on {self.device}: M={p.m} N={p.n} K={p.k}, "
            f"rel error {self.rel_error:.3e} (tolerance {self.tolerance:.1e}), max abs error {self.max_abs_error:.3e}, "
            f"unwritten {self.unwritten}, non-finite {self.nonfinite}"
        )


def host_operand(spec: TileSpec, name: str, logical: np.ndarray, p: Problem) -> np.ndarray:
    """The global-memory array of operand ``name`` (logical MN x K codes) in the spec's layout."""
    rows, ld = global_shape(spec, name, p)
    g = np.zeros((rows, ld), dtype=logical.dtype)
    if spec.operand(name).major is Major.K:
        g[:, : logical.shape[1]] = logical
    else:
        g[:, : logical.shape[0]] = logical.T
    return g


def validate_spec(spec: TileSpec, m: int | None = None, n: int | None = None, k: int | None = None, seed: int | None = None) -> ValidationResult:
    dev = require_gpu()
    if dev.arch is not spec.arch:
        raise NoGPU(f"the spec targets {spec.arch.value} but the GPU ({dev.name}, {dev.cc[0]}.{dev.cc[1]}) runs {dev.arch.value}")
    dm, dn, dk = default_problem(spec)
    p = Problem.tight(spec, m or dm, n or dn, k or dk)
    check_problem(spec, p)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    t = derive(spec)
    compiled = compile_cuda(render_kernel(t), spec.kernel_name, spec.arch.value)
    a_codes = random_codes(spec.dtype.value, (p.m, p.k), rng)
    b_codes = random_codes(spec.dtype.value, (p.n, p.k), rng)
    ga, gb = host_operand(spec, "a", a_codes, p), host_operand(spec, "b", b_codes, p)
    out_bytes = spec.out_dtype.bytes
    code = CODE_DTYPE[out_bytes]
    poison = poison_code(spec.out_dtype.value)
    kernel = Kernel(compiled.cubin, spec.kernel_name, t.smem.dynamic_bytes)
    with Buffer(ga.nbytes) as da, Buffer(gb.nbytes) as db, Buffer(p.m * p.ldd * out_bytes) as dd:
        da.upload(ga)
        db.upload(gb)
        (dd.fill_u32 if out_bytes == 4 else dd.fill_u16)(poison)
        grid, block, smem = launch_geometry(t, p)
        kernel.launch(grid, block, gemm_args(da.address, db.address, dd.address, p))
        synchronize(spec.kernel_name)
        out = dd.download(code, p.m * p.ldd).reshape(p.m, p.ldd)[:, : p.n]
    kernel.unload()
    ref = decode(a_codes, spec.dtype.value) @ decode(b_codes, spec.dtype.value).T
    got = decode(out, spec.out_dtype.value)
    unwritten = int(np.count_nonzero(out == poison))
    nonfinite = int(np.count_nonzero(~np.isfinite(got)))
    diff = np.where(np.isfinite(got), got - ref, np.inf)
    norm = float(np.linalg.norm(ref)) or 1.0
    rel = float(np.linalg.norm(diff) / norm) if nonfinite == 0 else float("inf")
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    tol = tolerance(spec.dtype.value, spec.acc.value, spec.out_dtype.value)
    passed = unwritten == 0 and nonfinite == 0 and rel <= tol
    return ValidationResult(spec, p, rel, max_abs, tol, unwritten, nonfinite, passed, time.perf_counter() - t0, dev.name)
