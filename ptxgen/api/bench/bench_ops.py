"""``ptxgen bench --api --op OP``: every door of ptxgen as a torch user calls it, against torch's equivalent in the same
process, on the same inputs (``--op gemm`` is ``bench_api``'s own row).

| op | ptxgen call | torch's equivalent |
|---|---|---|
| fused | ``gemm(a, w, out, bias=b, activation="gelu_tanh")`` | ``F.gelu(torch.addmm(b, a, w.t()), approximate="tanh")`` |
| batched | ``gemm(a, b, out)``, ``a`` 8 x M x K, ``b`` 8 x N x K | ``torch.bmm(a, b.transpose(1, 2), out=o)`` |
| grouped | ``grouped_gemm(a, b, offs, out)``, 8 groups of M / 8 rows | ``torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)`` |
| scaled_grouped | ``ptxgen.scaled_grouped_gemm`` (e4m3, row-wise scales) | ``torch._scaled_grouped_mm`` |
| bfp8 | ``ptxgen.api.fp8blocks.gemm`` (1 x 128 / 128 x 128 scales) | blockwise ``torch._scaled_mm`` |

Each row: host µs per call of both sides (``host_us``: loops without synchronisation, the sides interleaved
round by round), ``single_call_ratio`` (one call alone between events, torch's time / ours) and ``back_to_back_ratio``
(``runtime.check.bench.alternate``), outputs checked against torch's (relative error at most 1e-2; FP8 sides against torch's
FP8 result, which reads the same quantised inputs).
"""

from __future__ import annotations

import statistics
import time

CALLS = 100  # host-timed calls per loop
HOST_ROUNDS = 9
SINGLE_ROUNDS = 30
OPS = ("gemm", "fused", "batched", "grouped", "scaled_grouped", "bfp8")
BATCH = 8
GROUPS = 8


def _fused(torch, m, n, k, gen):
    from ..dispatch import gemm

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) * k ** -0.5
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    gelu, wt = torch.nn.functional.gelu, w.t()
    return (lambda: gemm(a, w, out, bias=bias, activation="gelu_tanh"), lambda: out,
            lambda: gelu(torch.addmm(bias, a, wt), approximate="tanh"))


def _batched(torch, m, n, k, gen):
    from ..dispatch import gemm

    a = torch.randn(BATCH, m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(BATCH, n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    out, o = (torch.empty(BATCH, m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    bt = b.transpose(1, 2)
    return lambda: gemm(a, b, out), lambda: out, lambda: torch.bmm(a, bt, out=o)


def _offsets(torch, m):
    rows = [m // GROUPS] * GROUPS
    rows[-1] += m - sum(rows)
    return torch.tensor(rows, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)


def _grouped(torch, m, n, k, gen):
    from ...grouped import grouped_gemm

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(GROUPS, n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    offs, out, bt = _offsets(torch, m), torch.empty(m, n, device="cuda", dtype=torch.bfloat16), b.transpose(-2, -1)
    return (lambda: grouped_gemm(a, b, offs, out), lambda: out,
            lambda: torch._grouped_mm(a, bt, offs=offs, out_dtype=torch.bfloat16))


def _scaled_grouped(torch, m, n, k, gen):
    from ...grouped import scaled_grouped_gemm

    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(GROUPS, n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    sa = torch.rand(m, device="cuda", generator=gen) + 0.5
    sb = torch.rand(GROUPS, n, device="cuda", generator=gen) + 0.5
    offs, out, bt = _offsets(torch, m), torch.empty(m, n, device="cuda", dtype=torch.bfloat16), b.transpose(-2, -1)
    return (lambda: scaled_grouped_gemm(a, b, sa, sb, offs, out), lambda: out,
            lambda: torch._scaled_grouped_mm(a, bt, sa, sb, offs=offs, out_dtype=torch.bfloat16))


def _bfp8(torch, m, n, k, gen):
    """torch's blockwise layouts: scale_a M x Kb outer-dim-major, scale_b Kb x Nb as ``s.t()`` of a row-major Nb x Kb4
    array (the K blocks padded to a multiple of 4, as cuBLAS allocates it)."""
    from .. import fp8blocks

    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    kb, nb = -(-k // 128), -(-n // 128)
    sa = (torch.rand(kb, m, device="cuda", generator=gen) + 0.5).t()
    sb = (torch.rand(nb, -(-kb // 4) * 4, device="cuda", generator=gen) + 0.5).t()[:kb]
    out, bt = torch.empty(m, n, device="cuda", dtype=torch.bfloat16), b.t()
    return (lambda: fp8blocks.gemm(a, b, sa, sb, out), lambda: out,
            lambda: torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))


def host_us(torch, calls: dict, n: int = CALLS, rounds: int = HOST_ROUNDS) -> dict:
    """Median µs per call of each of ``calls`` (name -> fn): per round, a loop of ``n`` calls of each in turn."""
    samples: dict = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            samples[name].append((t1 - t0) / n * 1e6)
    torch.cuda.synchronize()
    return {name: statistics.median(s) for name, s in samples.items()}


def single_ms(torch, fn) -> float:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()  # the GPU idle before the call
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def single_ratio(torch, ours, base, rounds: int = SINGLE_ROUNDS) -> float:
    times: tuple[list, list] = ([], [])
    for _ in range(3):
        single_ms(torch, ours)
        single_ms(torch, base)
    for r in range(rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[side].append(single_ms(torch, (ours, base)[side]))
    return statistics.median(times[1]) / statistics.median(times[0])


_SETUP = {"fused": _fused, "batched": _batched, "grouped": _grouped, "scaled_grouped": _scaled_grouped, "bfp8": _bfp8}


def bench_op_shape(torch, op: str, m: int, n: int, k: int, seed: int = 0, rounds: int = 30) -> dict:
    """One row of ``--op OP`` (not gemm): host µs, single-call and back-to-back ratios, the output checked."""
    from ...runtime.check.bench import alternate

    gen = torch.Generator(device="cuda").manual_seed(seed)
    ours, result, base = _SETUP[op](torch, m, n, k, gen)
    ours()
    kernel = op
    if op == "fused":  # the kernel the door chose: its prepared launch, the newest in the table
        from ..fused import _HOT

        kernel = next(reversed(_HOT.values())).name
    ref = base().float()
    norm = max(float(torch.linalg.norm(ref)), 1e-30)
    check = lambda: float(torch.linalg.norm(result().float() - ref)) / norm  # noqa: E731
    err = check()
    host = {name: round(us, 2) for name, us in host_us(torch, {"ptxgen": ours, "torch": base}).items()}
    single = single_ratio(torch, ours, base)
    ours_ms, base_ms, worst = alternate(torch, ours, base, check, rounds, 5)
    return {"op": op, "m": m, "n": n, "k": k, "kernel": kernel, "host_us": host, "single_call_ratio": round(single, 4),
            "back_to_back_ratio": round(base_ms / ours_ms, 4), "_rel_error": max(err, worst), "_ms": (ours_ms, base_ms)}


def line(row: dict) -> str:
    h = row["host_us"]
    return (f"{row['op']} {row['m']}x{row['n']}x{row['k']}: host us/call ptxgen {h['ptxgen']:.2f}, torch {h['torch']:.2f} "
            f"(ratio {h['ptxgen'] / h['torch']:.2f}); single call ratio {row['single_call_ratio']:.3f}, back-to-back ratio "
            f"{row['back_to_back_ratio']:.3f} (torch time / ptxgen time; ms {row['_ms'][0]:.4f} vs {row['_ms'][1]:.4f}); "
            f"rel error {row['_rel_error']:.1e}")
