"""A kernel of your own with ptxgen's public authoring layer: a dual GEMM with a SwiGLU epilogue on Hopper,

    out[M, N] = silu(x[M, K] . W1[N, K]^T) * (x[M, K] . W3[N, K]^T)      (bf16 in and out, f32 accumulation)

warp-specialized: one TMA producer warpgroup, two wgmma consumer warpgroups (one m64 slab of x each), a 4-stage
mbarrier ring. Everything the template needs (descriptors per K step, tensor maps, stage offsets, barrier roles,
register budgets) comes from ptxgen.author; the template is examples/dual_gemm.cu.j2.

    python examples/custom_kernel.py --compile-only   # no GPU needed: NVRTC + the SASS check (exit 1 if it fails)
    python examples/custom_kernel.py                  # on an H100/H200: runs it and checks it against numpy

Exit codes: 0 passed, 1 a check failed (SASS or numerics), 3 no usable GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ptxgen.author import DeviceArray, Kernel, Operand, Param, Ring, SassGateError, build, wgmma

BM, BN, BK, STAGES = 128, 64, 64, 4
TEMPLATE = Path(__file__).resolve().with_name("dual_gemm.cu.j2")


def make_kernel() -> Kernel:
    # 1. The operands: x is the MMA's A (M side, read in m64 slabs), W1 and W3 its B (N side); all K-major, 128-byte swizzle.
    x = Operand("X", major="k", swizzle="sw128", dtype="bf16", mn=BM, k=BK, mma_role="a").plan()
    w1 = Operand("W1", major="k", swizzle="sw128", dtype="bf16", mn=BN, k=BK).plan()
    w3 = Operand("W3", major="k", swizzle="sw128", dtype="bf16", mn=BN, k=BK).plan()
    # 2. The ring: each stage holds one tile of each; two consumer warpgroups release a stage.
    ring = Ring(stages=STAGES, operands=(x, w1, w3), consumer_warpgroups=2).plan()
    # 3. The MMA: m64 x n64 x k16, both operands in shared memory.
    mma, mma3 = wgmma(x, w1), wgmma(x, w3)
    params = (Param("tmap_x", "tensormap", operand=x), Param("tmap_w1", "tensormap", operand=w1),
              Param("tmap_w3", "tensormap", operand=w3), Param("out", "ptr", dtype="bf16", const=False),
              Param("M", "i32"), Param("N", "i32"), Param("K", "i32"))
    # 4. The SASS gate: 4 K steps x 2 GEMMs = 8 HGMMA in the kernel (the K loop is not unrolled).
    steps = len(mma.steps)
    return Kernel("dual_gemm_swiglu", TEMPLATE, params, block=(ring.threads, 1, 1), shared_bytes=ring.dynamic_smem_bytes,
                  expect_sass={mma.sass_opcode: 2 * steps}, context=dict(X=x, W1=w1, W3=w3, ring=ring, mma=mma, mma3=mma3))


def reference(x: np.ndarray, w1: np.ndarray, w3: np.ndarray) -> np.ndarray:
    h1, h3 = x @ w1.T, x @ w3.T
    return h1 / (1.0 + np.exp(-h1)) * h3


def run_on_gpu(built, m: int, n: int, k: int, seed: int = 0) -> tuple[bool, float]:
    from ptxgen.isa.numerics import decode, random_codes
    from ptxgen.runtime.launch.gpu import synchronize

    rng = np.random.default_rng(seed)
    xc, w1c, w3c = (random_codes("bf16", shape, rng) for shape in ((m, k), (n, k), (n, k)))
    xd, w1d, w3d = (DeviceArray.from_codes(c, "bf16") for c in (xc, w1c, w3c))
    out = DeviceArray((m, n), "bf16")
    out.buffer.fill_u16(0x7FC1)  # a NaN: an element the kernel does not write fails the check
    built(xd, w1d, w3d, out, m, n, k, grid=(-(-n // BN), -(-m // BM), 1))
    synchronize(built.name)
    got = decode(out.codes(), "bf16")
    want = reference(decode(xc, "bf16"), decode(w1c, "bf16"), decode(w3c, "bf16"))
    scale = np.abs(decode(xc, "bf16")) @ np.abs(decode(w1c, "bf16")).T * (np.abs(decode(xc, "bf16")) @ np.abs(decode(w3c, "bf16")).T)
    err = float(np.max(np.abs(got - want) / (scale + 1e-30)))
    ok = bool(np.all(np.isfinite(got))) and err < 2e-2
    return ok, err


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="compile and check the SASS; no GPU needed")
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--n", type=int, default=704)
    ap.add_argument("--k", type=int, default=520)
    args = ap.parse_args(argv)
    try:
        built = build(make_kernel())
    except SassGateError as e:
        print(f"SASS check: FAIL: {e}")
        return 1
    print(f"SASS check: ok: {built.sass.summary()}")
    if args.compile_only:
        return 0
    from ptxgen.runtime.launch.gpu import NoGPU

    try:
        ok, err = run_on_gpu(built, args.m, args.n, args.k)
    except NoGPU as e:
        print(f"no usable GPU: {e}")
        return 3
    print(f"M={args.m} N={args.n} K={args.k}: max error / (|x|.|W1|^T * |x|.|W3|^T) = {err:.2e}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
