"""``ptxgen bench`` and ``ptxgen tune``: generated kernels against cuBLAS (through torch), in one process.

Fair by construction: the same inputs in the same global layouts for both sides, alternating rounds
(ours, cuBLAS, cuBLAS, ours, ...) so that clock and power drift hit both, a median over many rounds per
side after warm-up, and every round's output checked against a reference. FP8 (e4m3) is compared with
``torch._scaled_mm``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from ...derive.tile.kernel import plan_kernel
from ...derive.tile.spec import TileSpec
from ...emit.render import render_kernel
from ...isa.types import DType, Major
from ...status import shown
from ..launch.gpu import Kernel, require_gpu
from ..launch.launch import Problem, check_problem, gemm_launches, workspace_bytes
from ..compile.cache import compile_cached

BATCH_MS = 2.0  # each timed sample launches a kernel often enough to take about this long


@dataclass
class BenchResult:
    device: str
    kernel: str
    m: int
    n: int
    k: int
    ours_ms: float
    cublas_ms: float
    ours_tflops: float
    cublas_tflops: float
    ratio: float  # ours / cuBLAS throughput
    rel_error: float  # worst relative error of ours over all rounds, against an f32 torch reference
    iters: int  # timed rounds per side
    cublas_call: str
    checked_ok: bool = True
    ours_tbps: float = 0.0  # A + B + D bytes (each read or written once) per second, TB/s: the bandwidth view
    cublas_tbps: float = 0.0
    chosen_by: str = ""  # which rule picked the kernel (ptxgen.runtime.choose: tuned, small-m, small-n, split-k, cost-model, nearest-fit, default; flags)
    why: str = ""

    def line(self) -> str:
        return (
            f"{self.kernel} M={self.m} N={self.n} K={self.k}: ptxgen {self.ours_tflops:.1f} TFLOP/s ({self.ours_ms:.3f} ms), "
            f"cuBLAS {self.cublas_tflops:.1f} TFLOP/s ({self.cublas_ms:.3f} ms), ratio {self.ratio:.3f}; "
            f"{self.ours_tbps:.2f} vs {self.cublas_tbps:.2f} TB/s; "
            f"worst rel error {self.rel_error:.2e}; median of {self.iters} alternating rounds"
        )

    def to_json(self) -> dict:
        return asdict(self)


class BaselineError(RuntimeError):
    """The baseline library refused the shape (e.g. torch._scaled_mm wants every dimension a multiple of 16): there is
    nothing to compare with, which is not a failure of the kernel."""


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _torch():
    try:
        import torch
    except ImportError:
        raise RuntimeError("ptxgen bench needs torch for its cuBLAS baseline (pip install 'ptxgen[bench]')") from None
    return torch


class Operands:
    """One shape's inputs as both sides read them, the baseline call on them and the f32 reference: built once and shared
    by every kernel timed on the shape (``_Case(..., operands=)``), so that N kernels hold one copy of A, B and the
    reference. ``key``: what a kernel must match to use them (input type, A's and B's majors, M, N, K)."""

    def __init__(self, torch, spec: TileSpec, m: int, n: int, k: int, seed: int = 0):
        check_baseline(spec)
        self.key = operands_key(spec, m, n, k)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        if spec.dtype is DType.E4M3:
            a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
            b = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda", dtype=torch.float32)
            self.baseline = lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            self.call = f"torch._scaled_mm(A[{m}x{k}] e4m3, B[{n}x{k}].t() e4m3, out bf16)"
            self.ga, self.gb = a, b
        else:
            tdt = torch.float16 if spec.dtype is DType.F16 else torch.bfloat16
            a = torch.randn(m, k, device="cuda", dtype=tdt, generator=gen)  # logical M x K
            b = torch.randn(n, k, device="cuda", dtype=tdt, generator=gen)  # logical N x K
            # both sides read the same memory: K-major operands as they are, MN-major ones transposed once
            self.ga = a if spec.a.major is Major.K else a.t().contiguous()
            self.gb = b if spec.b.major is Major.K else b.t().contiguous()
            lhs = self.ga if spec.a.major is Major.K else self.ga.t()
            rhs = self.gb.t() if spec.b.major is Major.K else self.gb
            self.baseline = lambda: torch.matmul(lhs, rhs)
            self.call = (f"torch.matmul on the same {spec.a.major.value}-major A and {spec.b.major.value}-major B, {tdt} out "
                         "(cuBLAS, f32 accumulate)")
        self.ref = a.float() @ b.float().t()
        self.ref_norm = torch.linalg.norm(self.ref)
        self.tol = 2e-2 if spec.dtype is DType.E4M3 else 1e-2


def check_baseline(spec: TileSpec) -> None:
    """ValueError where ``bench`` has no baseline for ``spec``'s input types and layouts."""
    if spec.operand_dtype("b") is not spec.dtype:
        raise ValueError("bench has no cuBLAS baseline for mixed input types (--b-dtype); use ptxgen validate")
    if spec.dtype not in (DType.F16, DType.BF16, DType.E4M3):
        raise ValueError("bench compares against cuBLAS for f16/bf16 and torch._scaled_mm for e4m3 only")
    if spec.dtype is DType.E4M3 and (spec.a.major is not Major.K or spec.b.major is not Major.K):
        raise ValueError("the e4m3 baseline (torch._scaled_mm) needs K-major A and B")


def operands_key(spec: TileSpec, m: int, n: int, k: int) -> tuple:
    """What ``Operands`` a kernel can share: its input type, A's and B's majors, and the shape."""
    return spec.dtype, spec.a.major, spec.b.major, m, n, k


class _Case:
    """Inputs, our launch and the baseline for one spec and shape, ready to time. ``operands``: another case's inputs
    (``Operands`` of the same key), else its own; ``extra``: the kernel's other arguments by ABI name (a fused chain's
    alpha and BIAS: ``launch.gemm_args``)."""

    def __init__(self, torch, spec: TileSpec, m: int, n: int, k: int, seed: int, sm_count: int, swap_ab: bool = False,
                 operands: Operands | None = None, extra: dict | None = None):
        check_baseline(spec)
        if operands is not None and operands.key != operands_key(spec, m, n, k):
            raise ValueError(f"{spec.kernel_name} on {m}x{n}x{k} cannot share operands made for {operands.key}")
        tight = Problem.tight(spec, m, n, k)  # A and B are dense torch tensors; D's rows are padded to 16 B
        self.p = Problem(m, n, k, tight.lda, tight.ldb, Problem.padded(spec, m, n, k).ldd)
        # swap-AB (runtime.choose): the kernel computes D^T = B A^T, problem N x M x K, and stores it M-major into the same
        # row-major D (its ldd: D's row pitch)
        if swap_ab:  # D stays M x N row-major with its rows padded to 16 B
            q = 16 // spec.out_dtype.bytes
            self.p = Problem(m, n, k, tight.lda, tight.ldb, -(-n // q) * q)
        run_p = Problem(n, m, k, tight.ldb, tight.lda, self.p.ldd) if swap_ab else self.p
        if swap_ab and (spec.a.major is not Major.K or spec.b.major is not Major.K or spec.d_major.value != "m"):
            raise ValueError("swap-AB runs an M-major-D spec (--d-major m) with K-major A and B")
        check_problem(spec, run_p)
        plan = plan_kernel(spec)
        compiled = compile_cached(render_kernel(plan), spec.kernel_name, spec.arch.value).compiled  # precompiled kernels load
        self.kernel = Kernel(compiled.cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
        ops = operands if operands is not None else Operands(torch, spec, m, n, k, seed)
        self.baseline, self.call = ops.baseline, ops.call
        odt = {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16}[spec.out_dtype]
        self.d_full = torch.full((m, self.p.ldd), float("nan"), device="cuda", dtype=odt)
        self.d = self.d_full[:, :n]
        # split-K's and stream-K's workspace, allocated once outside the timing (zeros: the counters and flags start at
        # zero and each launch leaves them zero; its size follows the launched problem)
        ws = workspace_bytes(plan, run_p, sm_count)
        self.workspace = torch.zeros(max(16, ws), device="cuda", dtype=torch.uint8)
        pa, pb = (ops.gb.data_ptr(), ops.ga.data_ptr()) if swap_ab else (ops.ga.data_ptr(), ops.gb.data_ptr())
        launches = gemm_launches(plan, self.kernel, pa, pb, self.d.data_ptr(), self.workspace.data_ptr(), run_p,
                                 sm_count, extra=extra)

        def ours():
            for kern, grid, block, args in launches:
                kern.launch(grid, block, args)

        self.ours = ours
        self.ref, self.ref_norm, self.tol = ops.ref, ops.ref_norm, ops.tol

    def error(self, torch) -> float:
        """Relative error of our output now (poisoned to NaN before the first launch)."""
        return float(torch.linalg.norm(self.d.float() - self.ref) / self.ref_norm)

    def unload(self) -> None:
        self.kernel.unload()


def _batch(torch, fn, reps: int) -> float:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def alternate_medians(torch, fns: dict, rounds: int, batch_ms: float = BATCH_MS, rotate: bool = False) -> dict:
    """Median ms per call of each named ``fns`` entry over ``rounds`` rounds: each entry is timed once a round, in a batch
    of about ``batch_ms`` (its repeat count set once from a 3-call batch), the order reversed every other round
    (``rotate``: rotated by one each round) so that clock and power drift hit every entry alike."""
    reps = {nm: max(1, int(batch_ms / max(1e-3, _batch(torch, f, 3)))) for nm, f in fns.items()}
    times: dict = {nm: [] for nm in fns}
    order = list(fns)
    for r in range(rounds):
        turn = order[r % len(order):] + order[:r % len(order)] if rotate else order if r % 2 == 0 else order[::-1]
        for nm in turn:
            times[nm].append(_batch(torch, fns[nm], reps[nm]))
    return {nm: statistics.median(t) for nm, t in times.items()}


def alternate(torch, ours, base, check, rounds: int, warmup: int) -> tuple[float, float, float]:
    """(ours ms, baseline ms, worst check value): medians over ``rounds`` alternating rounds."""
    for _ in range(warmup):
        ours()
        base()
    torch.cuda.synchronize()
    reps = max(1, int(BATCH_MS / max(1e-3, _batch(torch, ours, 3))))
    times: tuple[list, list] = ([], [])
    worst = check()
    for r in range(rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[side].append(_batch(torch, (ours, base)[side], reps))
        worst = max(worst, check())
    return statistics.median(times[0]), statistics.median(times[1]), worst


def bench_spec(spec: TileSpec, m: int, n: int, k: int, warmup: int = 10, iters: int = 50, seed: int = 0,
               swap_ab: bool = False) -> BenchResult:
    """``swap_ab``: run ``spec`` (an M-major-D kernel) on the swapped problem, as ``runtime.choose``'s swap-ab rule does.
    ``iters`` >= 1 timed rounds (a median of none is no time) and ``warmup`` >= 0, checked before any GPU work."""
    if type(iters) is not int or iters < 1 or type(warmup) is not int or warmup < 0:
        raise ValueError(f"iters={shown(iters, 40)}, warmup={shown(warmup, 40)}: iters must be an integer of at least 1, "
                         "warmup of at least 0")
    torch = _torch()
    dev = require_gpu()
    case = _Case(torch, spec, m, n, k, seed, dev.sm_count, swap_ab)
    case.ours()
    try:
        case.baseline()
    except RuntimeError as e:
        raise BaselineError(f"{m}x{n}x{k}: the baseline cannot run this shape ({str(e).splitlines()[0]})") from None
    torch.cuda.synchronize()
    ours_ms, base_ms, worst = alternate(torch, case.ours, case.baseline, lambda: case.error(torch), iters, warmup)
    case.unload()
    flops = 2.0 * m * n * k
    ours_tf, base_tf = flops / ours_ms / 1e9, flops / base_ms / 1e9
    nbytes = (m * k * spec.dtype.bytes + n * k * spec.operand_dtype("b").bytes + m * n * spec.out_dtype.bytes)
    return BenchResult(dev.name, spec.kernel_name, m, n, k, ours_ms, base_ms, ours_tf, base_tf, ours_tf / base_tf, worst, iters,
                       case.call, checked_ok=worst <= case.tol, ours_tbps=nbytes / ours_ms / 1e9, cublas_tbps=nbytes / base_ms / 1e9)
