"""``ptxgen bench``: the generated kernel against cuBLAS (through torch) in the same process.

Both run on the default stream of the device's primary context, on the same random inputs, timed
with CUDA events after warm-up; each is timed ``iters`` times and the median is reported.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from ..derive.kernel import plan_kernel
from ..emit.render import render_kernel
from ..derive.spec import TileSpec
from ..isa.types import DType, Major
from .gpu import Kernel, require_gpu
from .launch import Problem, check_problem, gemm_args, launch_geometry
from .toolchain import compile_cuda


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
    rel_error: float  # ours against an f32 torch reference
    iters: int
    cublas_call: str

    def line(self) -> str:
        return (
            f"{self.kernel} on {self.device}, M=N=K={self.m}" if self.m == self.n == self.k else f"{self.kernel} M={self.m} N={self.n} K={self.k}"
        ) + (
            f": ptxgen {self.ours_tflops:.1f} TFLOP/s ({self.ours_ms:.3f} ms), cuBLAS {self.cublas_tflops:.1f} TFLOP/s "
            f"({self.cublas_ms:.3f} ms), ratio {self.ratio:.3f}; rel error {self.rel_error:.2e}; median of {self.iters}"
        )

    def to_json(self) -> dict:
        return asdict(self)


def _median_ms(torch, fn, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench_spec(spec: TileSpec, m: int, n: int, k: int, warmup: int = 10, iters: int = 50, seed: int = 0) -> BenchResult:
    try:
        import torch
    except ImportError:
        raise RuntimeError("ptxgen bench needs torch for its cuBLAS baseline (pip install torch)") from None
    if spec.dtype not in (DType.F16, DType.BF16):
        raise ValueError("bench compares against cuBLAS for f16/bf16 inputs only")
    dev = require_gpu()
    p = Problem.tight(spec, m, n, k)
    check_problem(spec, p)
    plan = plan_kernel(spec)
    compiled = compile_cuda(render_kernel(plan), spec.kernel_name, spec.arch.value)
    kernel = Kernel(compiled.cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
    tdt = torch.float16 if spec.dtype is DType.F16 else torch.bfloat16
    odt = {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16}[spec.out_dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=tdt, generator=gen)  # logical M x K
    b = torch.randn(n, k, device="cuda", dtype=tdt, generator=gen)  # logical N x K
    ga = a if spec.a.major is Major.K else a.t().contiguous()
    gb = b if spec.b.major is Major.K else b.t().contiguous()
    d = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
    grid, block, _ = launch_geometry(plan, p, dev.sm_count)
    args = gemm_args(plan, ga.data_ptr(), gb.data_ptr(), d.data_ptr(), p)

    def ours():
        kernel.launch(grid, block, args)

    ours()
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    rel = float(torch.linalg.norm(d.float() - ref) / torch.linalg.norm(ref))
    ours_ms = _median_ms(torch, ours, warmup, iters)
    cublas_ms = _median_ms(torch, lambda: torch.matmul(a, b.t()), warmup, iters)
    kernel.unload()
    flops = 2.0 * m * n * k
    ours_tf, cublas_tf = flops / ours_ms / 1e9, flops / cublas_ms / 1e9
    return BenchResult(
        device=dev.name,
        kernel=spec.kernel_name,
        m=m,
        n=n,
        k=k,
        ours_ms=ours_ms,
        cublas_ms=cublas_ms,
        ours_tflops=ours_tf,
        cublas_tflops=cublas_tf,
        ratio=ours_tf / cublas_tf,
        rel_error=rel,
        iters=iters,
        cublas_call=f"torch.matmul(A[{m}x{k}] {str(tdt)}, B[{n}x{k}].t()) -> {str(tdt)} (cuBLAS, f32 accumulate)",
    )
