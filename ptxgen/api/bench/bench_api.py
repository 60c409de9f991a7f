"""``ptxgen bench --api``: what a PyTorch user sees when calling ptxgen, against torch in the same process.

Per shape (bf16, K-major A and B, ``out`` given to every side):

* host µs per call of ``ptxgen.gemm(a, b, out)``, of the compiled kernel ``k(a, b, out)`` (the kernel gemm chose)
  and of ``torch.mm(a, b.t(), out=o)``: ``CALLS`` calls in a loop without synchronisation (fewer than the
  launch queue holds, so the loop measures the host, not the GPU), the median of ``HOST_ROUNDS`` loops, the three
  sides' loops interleaved round by round (the host's speed drifts: torch.mm's host time moved between 11 and 22 µs
  within one run, runs/2026-12-01-torch-metadata; loops of one side after the other's put that drift into the ratio);
* ``single_call_ratio``: one call alone between two CUDA events, the GPU idle before it (synchronised), so the
  host's time to launch is in the measurement; medians over alternating rounds (ours, torch, torch, ours, ...);
  torch's time / ours (above 1: ptxgen is faster), against ``torch.matmul(a, b.t(), out=o)``;
* ``back_to_back_ratio``: many calls back to back between events (``runtime.check.bench.alternate``), the same ratio.

Every side's output is checked against ``torch.mm`` in float32 (relative error below 1e-2) before timing.
"""

from __future__ import annotations

from ...status import clipped
from .bench_ops import host_us as _host_us
from .bench_ops import single_ratio as _single_ratio


def bench_api_shape(torch, m: int, n: int, k: int, seed: int = 0, rounds: int = 30) -> dict:
    from ...runtime.check.bench import alternate
    from ..dispatch import gemm, kernel_for
    from ..select import gemm_spec

    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    out_k = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    out_t = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    spec, why = gemm_spec(a, b, out)
    kern = kernel_for(spec)
    bt = b.t()
    calls = {
        "gemm": lambda: gemm(a, b, out),
        # an M-major D is the swap-ab rule's kernel: D^T = B A^T into out_k's memory
        "kernel": (lambda: kern(b, a, out_k.t())) if spec.d_major.value == "m" else (lambda: kern(a, b, out_k)),
        "torch": lambda: torch.mm(a, bt, out=out_t),
    }
    for fn in calls.values():
        fn()
    ref = a.float() @ b.float().t()
    norm = torch.linalg.norm(ref)
    torch.cuda.synchronize()
    errors = {name: float(torch.linalg.norm(x.float() - ref) / norm) for name, x in (("gemm", out), ("kernel", out_k), ("torch", out_t))}
    host = {name: round(us, 2) for name, us in _host_us(torch, calls).items()}
    matmul = lambda: torch.matmul(a, bt, out=out_t)  # noqa: E731
    single = _single_ratio(torch, calls["gemm"], matmul)
    ours_ms, base_ms, worst = alternate(torch, calls["gemm"], matmul,
                                        lambda: float(torch.linalg.norm(out.float() - ref) / norm), rounds, 5)
    worst = max(worst, errors["gemm"], errors["kernel"])
    return {
        "op": "gemm", "m": m, "n": n, "k": k, "kernel": spec.kernel_name,
        "host_us": host,
        "single_call_ratio": round(single, 4),
        "back_to_back_ratio": round(base_ms / ours_ms, 4),
        "_rel_error": worst, "_why": why, "_ms": (ours_ms, base_ms),
    }


PUBLIC_KEYS = ("op", "m", "n", "k", "kernel", "host_us", "single_call_ratio", "back_to_back_ratio")


def public(row: dict) -> dict:
    """The row as ``--json`` prints it (exactly PUBLIC_KEYS)."""
    return {key: row[key] for key in PUBLIC_KEYS}


def line(row: dict) -> str:
    h = row["host_us"]
    return (f"{row['m']}x{row['n']}x{row['k']} {row['kernel']}: host us/call gemm {h['gemm']:.2f}, kernel {h['kernel']:.2f}, "
            f"torch.mm {h['torch']:.2f} (gemm/torch {h['gemm'] / h['torch']:.2f}, kernel/torch {h['kernel'] / h['torch']:.2f}); "
            f"single call ratio {row['single_call_ratio']:.3f}, back-to-back ratio {row['back_to_back_ratio']:.3f} "
            f"(torch.matmul time / ptxgen.gemm time; ms {row['_ms'][0]:.4f} vs {row['_ms'][1]:.4f}); rel error {row['_rel_error']:.1e}")


def run(shapes: list[tuple[int, int, int]], iters: int, as_json: bool, op: str = "gemm") -> int:
    """``ptxgen bench --api [--op OP]`` after its usage checks (``cli``): exit 0, 1 when an output check failed, 3
    without a GPU or torch. ``op``: which door (``bench_ops.OPS``; gemm: this module's row)."""
    import json
    import sys

    from ...runtime.launch.gpu import NoGPU, require_gpu
    from ...status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK

    try:
        import torch
    except ImportError:
        print("ptxgen bench --api: needs torch (the calls it times are torch's and ptxgen's on torch tensors)", file=sys.stderr)
        return EXIT_NO_GPU
    try:
        dev = require_gpu()
        if not torch.cuda.is_available():
            raise NoGPU("torch sees no CUDA device")
        from ...runtime.launch.fastlaunch import compiled_module

        mod = compiled_module()
        launcher = "compiled" if mod is not None else "ctypes"
        print(f"launch path: {'the compiled launcher ' + mod.__file__ if mod is not None else 'ctypes (no compiled launcher)'}",
              file=sys.stderr if as_json else sys.stdout, flush=True)
        reader = "none"
        if mod is not None:  # the steady state: the metadata reader loaded (or built, once) before anything is timed
            from ...runtime.launch import torchmeta

            reader = torchmeta.start(torch, mod, wait=True)
            built = torchmeta.build_seconds()
            print(f"metadata reader: {reader}" + (f" (built in {built:.1f} s)" if built is not None else ""),
                  file=sys.stderr if as_json else sys.stdout, flush=True)
        rows = []
        from . import bench_ops

        for m, n, k in shapes:
            if op == "gemm":
                row = bench_api_shape(torch, m, n, k, rounds=iters)
            else:
                row = bench_ops.bench_op_shape(torch, op, m, n, k, rounds=iters)
            rows.append(row)
            print((line if op == "gemm" else bench_ops.line)(row), file=sys.stderr if as_json else sys.stdout, flush=True)
    except NoGPU as e:
        print(f"ptxgen bench --api: {clipped(e)}", file=sys.stderr)
        return EXIT_NO_GPU
    if as_json:
        print(json.dumps({"op": op, "device": dev.name, "launcher": launcher, "meta_reader": reader.split(" ")[0].rstrip(":"), "shapes": [public(r) for r in rows]}))
    failed = [r for r in rows if not r["_rel_error"] <= 1e-2]
    for r in failed:
        print(f"ptxgen bench --api: {r['m']}x{r['n']}x{r['k']} output check FAILED (rel error {r['_rel_error']:.2e})",
              file=sys.stderr)
    return EXIT_CHECK_FAILED if failed else EXIT_OK
