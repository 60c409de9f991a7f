"""What ``ptxgen validate`` returns, its default problem, the operands' global arrays and the verdict on a downloaded D:
shared by the dense runner (ptxgen.runtime.check.validate) and the block-scaled one (ptxgen.runtime.check.bsvalidate)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...derive.tile.spec import TileSpec
from ...isa.numerics import decode, input_poison_code
from ...isa.types import Major
from ..launch.gpu import Device, NoGPU
from ..launch.launch import Problem, check_problem, global_shape


def default_problem(spec: TileSpec) -> tuple[int, int, int]:
    """Several tiles in every direction, M != N != K, and enough K-tiles to wrap the stage ring twice. Block-scaled:
    ragged in every direction (M, N not multiples of the 128-row scale-factor atom, K not a multiple of BK, of the
    atom's 4V elements nor of V, and even for packed e2m1), so that the scale factors' padding is in play."""
    if spec.block_scaled:
        k = (2 * spec.stages + 1) * spec.bk
        unpacked = spec.unpacked("a") or spec.unpacked("b")  # the unpacking tensor maps take K in multiples of 128 only
        return 3 * spec.bm - 56, 2 * spec.bn - 24, k if unpacked else k - 40
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
    stray_writes: int  # elements outside M x N that changed
    passed: bool
    seconds: float
    device: str
    notes: str = ""  # what else the run checked (block-scaled: the scale factors' NaN padding)

    @property
    def verdict(self) -> str:
        p = self.problem
        word = "PASS" if self.passed else "FAIL"
        return (
            f"{word} {self.spec.kernel_name} on {self.device}: M={p.m} N={p.n} K={p.k}, "
            f"rel error {self.rel_error:.3e} (tolerance {self.tolerance:.1e}), max abs error {self.max_abs_error:.3e}, "
            f"unwritten {self.unwritten}, non-finite {self.nonfinite}, writes outside M x N {self.stray_writes}"
            + (f"; {self.notes}" if self.notes else "")
        )


def host_operand(spec: TileSpec, name: str, logical: np.ndarray, p: Problem, extra_rows: int = 0) -> np.ndarray:
    """The global-memory array of operand ``name`` (logical MN x K codes) in the spec's layout, with
    ``extra_rows`` rows past the end; padding and extra rows hold the input poison."""
    rows, ld = global_shape(spec, name, p)
    g = np.full((rows + extra_rows, ld), input_poison_code(spec.operand_dtype(name).value), dtype=logical.dtype)
    if spec.operand(name).major is Major.K:
        g[:rows, : logical.shape[1]] = logical
    else:
        g[:rows, : logical.shape[0]] = logical.T
    return g


def device_problem(spec: TileSpec, dev: Device, m: int | None, n: int | None, k: int | None) -> Problem:
    """The problem a run validates on ``dev``: the spec's arch must be the GPU's; M, N, K default to default_problem's,
    rows padded as the spec's layout needs; an illegal problem raises before anything is compiled or allocated."""
    if dev.arch is not spec.arch:
        raise NoGPU(f"the spec targets {spec.arch.value} but the GPU ({dev.name}, {dev.cc[0]}.{dev.cc[1]}) runs {dev.arch.value}")
    dm, dn, dk = default_problem(spec)
    p = Problem.padded(spec, dm if m is None else m, dn if n is None else n, dk if k is None else k)
    check_problem(spec, p)
    return p


def judge(spec: TileSpec, p: Problem, whole: np.ndarray, poison: int, ref: np.ndarray, tol: float, t0: float,
          device: str, notes: str = "") -> ValidationResult:
    """The verdict on D as downloaded (``whole``: every row the kernel could write, ``p.ldd`` codes each): every element
    inside M x N written (no ``poison`` code left) and finite, none outside changed, and the relative Frobenius error
    against the float64 ``ref`` within ``tol``. ``t0``: when the run started (perf_counter)."""
    out = whole[: p.m, : p.n]
    outside = np.ones(whole.shape, dtype=bool)
    outside[: p.m, : p.n] = False
    stray = int(np.count_nonzero(whole[outside] != poison))
    got = decode(out, spec.out_dtype.value)
    unwritten = int(np.count_nonzero(out == poison))
    nonfinite = int(np.count_nonzero(~np.isfinite(got)))
    diff = np.where(np.isfinite(got), got - ref, np.inf)
    norm = float(np.linalg.norm(ref)) or 1.0
    rel = float(np.linalg.norm(diff) / norm) if nonfinite == 0 else float("inf")
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    passed = unwritten == 0 and nonfinite == 0 and stray == 0 and rel <= tol
    return ValidationResult(spec, p, rel, max_abs, tol, unwritten, nonfinite, stray, passed, time.perf_counter() - t0,
                            device, notes)
