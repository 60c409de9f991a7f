"""Batched GEMM on the GPU against torch.bmm / torch.matmul, in the same process: per shape, alternating rounds,
medians. Kernel time: back-to-back calls between two events (outputs given, checked against torch first). Host time:
µs per call of ptxgen.gemm and of torch.bmm (many calls, no sync inside the loop). Usage:
python tools/bench_batched.py [--json FILE]"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPES = [(8, 1024, 1024, 1024, False), (8, 1024, 1024, 1024, True), (32, 512, 512, 512, False), (4, 2048, 2048, 256, False)]


def main() -> int:
    import torch

    import ptxgen

    rows = []
    for batch, m, n, k, shared in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(batch + m)
        a = torch.randn(batch, m, k, device="cuda", generator=g).bfloat16()
        b = (torch.randn(n, k, device="cuda", generator=g) if shared else torch.randn(batch, n, k, device="cuda", generator=g)).bfloat16()
        out = torch.empty(batch, m, n, device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        bt = b.transpose(-1, -2)

        def ours():
            ptxgen.gemm(a, b, out)

        def theirs():
            torch.matmul(a, bt, out=ref)

        ours(), theirs()
        torch.cuda.synchronize()
        err = (out.float() - ref.float()).abs().max().item() / max(ref.float().abs().max().item(), 1e-6)
        iters, kern = 20, {"ours": [], "torch": []}
        for _ in range(7):
            for name, fn in (("ours", ours), ("torch", theirs)):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(iters):
                    fn()
                e.record()
                e.synchronize()
                kern[name].append(s.elapsed_time(e) / iters)
        host = {"ours": [], "torch": []}
        for _ in range(5):
            for name, fn in (("ours", ours), ("torch", theirs)):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(200):
                    fn()
                host[name].append((time.perf_counter() - t) / 200 * 1e6)
                torch.cuda.synchronize()
        ms = {x: statistics.median(v) for x, v in kern.items()}
        hu = {x: statistics.median(v) for x, v in host.items()}
        tflops = 2 * batch * m * n * k / ms["ours"] / 1e9
        row = dict(batch=batch, m=m, n=n, k=k, shared_b=shared, rel_err=err, ms=ms, ratio=ms["torch"] / ms["ours"],
                   tflops=tflops, host_us=hu)
        rows.append(row)
        print(f"B={batch} {m}x{n}x{k}{' shared b' if shared else ''}: ptxgen {ms['ours']:.4f} ms, torch {ms['torch']:.4f} ms, "
              f"ratio {row['ratio']:.3f} (torch/ptxgen), {tflops:.0f} TFLOP/s, host {hu['ours']:.1f} us vs torch {hu['torch']:.1f} us, "
              f"max rel err {err:.2e}", flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "--json":
        Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    raise SystemExit(main())
