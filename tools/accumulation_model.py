"""What the tensor core's f32 accumulation predicts for a long float32 product computed as 3xTF32 (CPU only, numpy).

The model: each wgmma K-step of 8 (tf32) sums its 8 products exactly and adds that sum to the f32 accumulator, the
addition rounded either to nearest (``rn``) or toward zero (``rz``); the operands are read as tf32 (the low 13 bits of
each f32 dropped) after ptxgen's 3xTF32 split ([a_small | a_big | a_big] against [b_big | b_small | b_big],
``ptxgen.api.arrays.precision``). Beside it: torch's float32 GEMM as a sequential f32 multiply-add rounded to nearest
(``simt``), and two ways to shorten the rounded chains: K split S ways (each split's own accumulator, the partial sums
added to nearest) and a fresh accumulator per run of K added to nearest (``promote K``, as block-FP8 kernels do every 128
of K and ptxgen's 3xTF32 kernels (``--promote 4``) every 4 K-tiles of 32).

The inputs are those of PyTorch's ``test_cublas_addmm[float32, size]``: values uniform in [-9, 9]. On the H100
(runs/2026-12-06-h100-new-forms) at size 10000 ptxgen's 3xTF32 result was 0.38 from float64 at worst, torch's 0.031;
the model gives (400 outputs, seed 0): rz 0.30, rn 0.009, simt 0.033, split 16 0.047, and with a promotion every 32, 64,
128, 256, 512 of the 3 K columns 0.0035, 0.0038, 0.0040, 0.0067, 0.014 (a model, L1: no GPU result).

    python tools/accumulation_model.py --k 10000 --outputs 400
    python tools/accumulation_model.py --promote-k 32,64,128,256,512
    python tools/accumulation_model.py --probe      # GPU: 1.0, then 100 K-steps of 0.75 of f32's spacing at 1.0
"""

from __future__ import annotations

import argparse

import numpy as np

KEEP_TF32 = np.uint32(0xFFFFE000)  # the 19 bits a tf32 operand keeps (sign, 8 exponent bits, 10 mantissa bits)
STEP_K = 8  # K of one tf32 wgmma
TILE_K = 32  # K of one pipeline stage of a tf32 kernel (128 bytes)


def tf32_round(x: np.ndarray) -> np.ndarray:
    """x rounded to the nearest tf32 value (ties to even), as the 3xTF32 split's big part."""
    bits = x.view(np.uint32).astype(np.uint64)
    return ((bits + ((bits >> 13) & 1) + 0xFFF) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def split_operands(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 3xTF32 operands along K, as the tensor core reads them (low 13 bits dropped)."""
    ab, bb = tf32_round(a), tf32_round(b)
    wide_a = np.concatenate([a - ab, ab, ab], 1)
    wide_b = np.concatenate([bb, b - bb, bb], 1)
    return (wide_a.view(np.uint32) & KEEP_TF32).view(np.float32), (wide_b.view(np.uint32) & KEEP_TF32).view(np.float32)


def chain(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """One accumulator over a's and b's K columns, a K-step of 8 at a time, each addition rounded by ``mode``."""
    acc = np.zeros(a.shape[0], np.float32)
    for k0 in range(0, a.shape[1], STEP_K):
        exact = acc.astype(np.float64) + (a[:, k0:k0 + STEP_K].astype(np.float64) * b[:, k0:k0 + STEP_K]).sum(1)
        near = exact.astype(np.float32)
        if mode == "rz":
            near = np.where(np.abs(near.astype(np.float64)) > np.abs(exact), np.nextafter(near, np.float32(0)), near)
        acc = near
    return acc


def summed(parts) -> np.ndarray:
    """Partial results added in f32, rounded to nearest."""
    total = None
    for p in parts:
        total = p if total is None else (total.astype(np.float64) + p).astype(np.float32)
    return total


def promoted(a: np.ndarray, b: np.ndarray, every_k: int) -> np.ndarray:
    """A fresh rz accumulator over each ``every_k`` columns (a multiple of STEP_K), the partial results added in f32
    rounded to nearest: a promoting kernel with that promotion interval (``--promote G``: every G K-tiles of TILE_K)."""
    assert every_k % STEP_K == 0, every_k
    return summed(chain(a[:, k0:k0 + every_k], b[:, k0:k0 + every_k], "rz") for k0 in range(0, a.shape[1], every_k))


def simt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.zeros(a.shape[0], np.float32)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float64) + a[:, k].astype(np.float64) * b[:, k]).astype(np.float32)
    return acc


# ---- the probe (GPU): which way the accumulator rounds ---------------------------------------------------------------
PROBE_STEPS = 100  # K-steps after the first


def probe_inputs(step_k: int, tiny: float, rows: int = 64) -> tuple[np.ndarray, np.ndarray, float, float]:
    """a (rows x K), b (rows x K) with K = step_k x (1 + PROBE_STEPS): the first K-step adds 1.0, each later one adds
    ``tiny`` (0.75 of the f32 spacing at 1.0, exact in the input type) and nothing else; (a, b, the sum rounded to
    nearest at every addition, the sum rounded toward zero at every addition)."""
    k = step_k * (1 + PROBE_STEPS)
    a = np.zeros((rows, k), np.float32)
    b = np.zeros((rows, k), np.float32)
    a[:, 0] = b[:, 0] = 1.0
    a[:, step_k::step_k] = tiny
    b[:, step_k::step_k] = 1.0
    near = np.float32(1.0)
    for _ in range(PROBE_STEPS):
        near = np.float32(np.float64(near) + tiny)
    return a, b, float(near), 1.0


def verdict(got: float, near: float, zero: float) -> str:
    if got == near:
        return "to nearest"
    if got == zero:
        return "toward zero"
    return f"neither ({got!r}: to nearest gives {near!r}, toward zero {zero!r})"


def probe() -> int:
    """ptxgen.gemm on the GPU with probe_inputs for tf32 (K-step 8) and bf16 (K-step 16): which way each rounds."""
    import torch

    import ptxgen

    spacing = 2.0 ** -23  # of f32 at 1.0
    for name, dtype, step_k in (("tf32", torch.float32, 8), ("bf16", torch.bfloat16, 16)):
        a, b, near, zero = probe_inputs(step_k, 0.75 * spacing)
        ta, tb = (torch.from_numpy(x).to("cuda", dtype) for x in (a, b))
        kw = {"precision": "tf32"} if dtype is torch.float32 else {}
        out = torch.empty(a.shape[0], b.shape[0], device="cuda", dtype=torch.float32)
        ptxgen.gemm(ta, tb, out, **kw)
        torch.cuda.synchronize()
        got = out[0, 0].item()
        same = bool((out == out[0, 0]).all())
        print(f"{name}: accumulator after 1.0 and {PROBE_STEPS} K-steps of 0.75 spacing: {got!r} -> {verdict(got, near, zero)}"
              f"{'' if same else ' (outputs differ)'}")
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=10000, help="K of the float32 product (default 10000)")
    ap.add_argument("--outputs", type=int, default=400, help="output elements simulated (default 400)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="4,16", help="split-K counts to model (default 4,16)")
    ap.add_argument("--promote-k", default=f"{TILE_K},128",
                    help=f"promotion intervals to model, in K columns (multiples of {STEP_K}; default {TILE_K},128: "
                    "ptxgen's --promote 1 and --promote 4, the interval 3xTF32 calls run, block FP8's too)")
    ap.add_argument("--probe", action="store_true", help="GPU: which way ptxgen's tf32 and bf16 kernels' accumulator rounds")
    args = ap.parse_args()
    if args.probe:
        raise SystemExit(probe())
    if args.k < 1 or args.outputs < 1:
        ap.error("--k and --outputs are at least 1")
    rng = np.random.default_rng(args.seed)
    a = rng.uniform(-9, 9, (args.outputs, args.k)).astype(np.float32)
    b = rng.uniform(-9, 9, (args.outputs, args.k)).astype(np.float32)
    ref = (a.astype(np.float64) * b).sum(1)
    wa, wb = split_operands(a, b)

    def report(name, got):
        err = np.abs(got.astype(np.float64) - ref)
        print(f"{name:>14}: max |error| {err.max():.4g}, mean {err.mean():.4g}")

    report("rn", chain(wa, wb, "rn"))
    report("rz", chain(wa, wb, "rz"))
    report("simt", simt(a, b))
    cols = wa.shape[1]
    for s in (int(x) for x in args.splits.split(",") if x):
        edges = [i * cols // s // STEP_K * STEP_K for i in range(s)] + [cols]
        report(f"rz split {s}", summed(chain(wa[:, lo:hi], wb[:, lo:hi], "rz") for lo, hi in zip(edges, edges[1:])))
    for every in (int(x) for x in args.promote_k.split(",") if x):
        if every < STEP_K or every % STEP_K:
            ap.error(f"--promote-k {every}: a multiple of {STEP_K} (one wgmma K-step)")
        report(f"rz promote {every}", promoted(wa, wb, every))


if __name__ == "__main__":
    main()
