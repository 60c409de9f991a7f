"""One shape of tests/test_streamk_api.py's GPU tier, run in its own process (the test gives it a timeout, so a stream-K
wait that never ends fails the test instead of hanging the run): ``python tests/streamk_api_gpu_case.py M N K``.

``ptxgen.gemm`` (bf16, tight K-major rows, no tile flags) on M x N x K, where the chooser picks a stream-K kernel:
1. the pick is stream-K and ``gemm_spec``'s why says so;
2. three calls into NaN-filled outputs, bit-identical, within bf16 rounding of a float64 reference;
3. two streams at once (three calls each, interleaved, no synchronisation between them): bit-identical to 2, each
   stream with its own workspace, every flag zero afterwards;
4. a CUDA graph captured once and replayed twice, inputs refilled between the replays: each replay bit-identical to
   eager calls on the same inputs (and the two replays' results different, so the replay recomputed);
5. the flags of every eager workspace zero at the end (the kernel left them as it found them);
6. ``__cuda_array_interface__`` arrays (not torch's) on a fresh stream: a cuMemAlloc workspace, bit-identical, its flags
   zero after.
CompiledKernel's own call is checked with step 2.
Prints one JSON line per step and a last one with ``passed``; exit 1 on the first failed check.
"""

from __future__ import annotations

import json
import sys


def main(m: int, n: int, k: int) -> int:
    import numpy as np
    import torch

    import ptxgen
    from conftest import use_reference_chooser
    from ptxgen.api.launch import launchplan

    use_reference_chooser()  # the shapes are stream-K picks of the shipped rules; the GPU's own calibration may differ
    from ptxgen.derive.store.streamk import FLAG_REGION_BYTES

    report = {"shape": [m, n, k]}

    def say(step, **kw):
        print(json.dumps({"step": step, **kw}), flush=True)

    def fail(msg):
        report.update(passed=False, failed=msg)
        print(json.dumps(report), flush=True)
        return 1

    dev = torch.device("cuda")
    ldd = -(-n // 8) * 8  # rows of the output 16-byte aligned: the zero-copy path (a view when n is not a multiple of 8)

    def inputs(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return (torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g),
                torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g))

    def nan_out():
        return torch.full((m, ldd), float("nan"), device=dev, dtype=torch.bfloat16)[:, :n]

    def bits(x):
        return x.contiguous().view(torch.int16)

    def rel_err(out, a, b):
        ref = a.double() @ b.double().T
        return float((out.double() - ref).abs().max() / ref.abs().max())

    a, b = inputs(1)
    spec, why = ptxgen.api.gemm_spec(a, b, nan_out())
    report.update(kernel=spec.kernel_name, stream_k=spec.stream_k, why=why)
    say("pick", kernel=spec.kernel_name, stream_k=spec.stream_k, why=why)
    if spec.stream_k < 2 or "stream-K" not in why:
        return fail("the chooser did not pick a stream-K kernel for this shape")

    # 2. three calls, bit-identical, against float64
    outs = [nan_out() for _ in range(3)]
    for o in outs:
        if ptxgen.gemm(a, b, o) is not o:
            return fail("gemm did not return out")
    torch.cuda.synchronize()
    err = rel_err(outs[0], a, b)
    same = [bool(torch.equal(bits(outs[0]), bits(o))) for o in outs[1:]]
    say("eager", rel_err=err, bit_identical=same)
    if not err < 8e-3:  # bf16 output: 2^-8 relative rounding of each element
        return fail(f"max |out - ref| / max |ref| = {err}")
    if not all(same) or bool(torch.isnan(outs[0]).any()):
        return fail("three calls are not bit-identical (or left NaN)")
    want = bits(outs[0])
    # the kernel object itself (CompiledKernel's call: the same prepared launch)
    kern = ptxgen.api.kernel_for(spec)
    ok = nan_out()
    kern(a, b, ok)
    torch.cuda.synchronize()
    same = bool(torch.equal(want, bits(ok)))
    say("kernel", bit_identical=same)
    if not same:
        return fail("CompiledKernel's call differs from gemm's")

    # 3. two streams at once
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    o1, o2 = [nan_out() for _ in range(3)], [nan_out() for _ in range(3)]
    torch.cuda.synchronize()
    for i in range(3):
        with torch.cuda.stream(s1):
            ptxgen.gemm(a, b, o1[i])
        ptxgen.gemm(a, b, o2[i], stream=s2)  # the explicit stream argument
    torch.cuda.synchronize()
    same = [bool(torch.equal(want, bits(o))) for o in o1 + o2]
    ws = launchplan._STREAMK_WORKSPACES
    w1, w2 = ws.get((dev.index or 0, s1.cuda_stream)), ws.get((dev.index or 0, s2.cuda_stream))
    say("streams", bit_identical=same, workspaces=[None if w is None else [w[0], w[1]] for w in (w1, w2)])
    if not all(same):
        return fail("calls on two streams differ from the eager result")
    if w1 is None or w2 is None or w1[0] == w2[0]:
        return fail("the two streams did not get workspaces of their own")

    # 4. a CUDA graph, replayed twice with the inputs refilled
    sa, sb = torch.empty_like(a), torch.empty_like(b)
    sa.copy_(a)
    sb.copy_(b)
    so = nan_out()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream (the key prepared before the capture)
        ptxgen.gemm(sa, sb, so)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ptxgen.gemm(sa, sb, so)
    results = []
    for seed in (2, 3):
        x, y = inputs(seed)
        sa.copy_(x)
        sb.copy_(y)
        so.fill_(float("nan"))
        graph.replay()
        eager = nan_out()
        ptxgen.gemm(x, y, eager)
        torch.cuda.synchronize()
        results.append(bits(so).clone())
        same = bool(torch.equal(bits(so), bits(eager)))
        err = rel_err(so, x, y)
        say("graph", seed=seed, bit_identical_to_eager=same, rel_err=err)
        if not same or not err < 8e-3:
            return fail(f"graph replay (inputs of seed {seed}) differs from the eager call, or rel_err {err}")
    if torch.equal(results[0], results[1]):
        return fail("the two replays gave the same result for different inputs")
    graph.replay()  # once more with the last inputs: still the same bits
    torch.cuda.synchronize()
    if not torch.equal(bits(so), results[1]):
        return fail("a third replay differs")

    # 5. every eager workspace's flags are zero again
    nonzero = {}
    for (d, stream), (addr, size, owner) in list(ws.items()):
        if hasattr(owner, "view"):
            flags = owner[:FLAG_REGION_BYTES].view(torch.int32)
            nonzero[hex(stream)] = int((flags != 0).sum())
    say("flags", nonzero_per_stream=nonzero)
    if any(nonzero.values()) or not nonzero:
        return fail(f"stream-K flags not zero after the launches: {nonzero}")

    # 6. arrays that are not torch's (__cuda_array_interface__ only): a cuMemAlloc workspace
    class Interface:  # built by hand: torch's own interface has no typestr for bfloat16 (ptxgen reads .dtype)
        def __init__(self, t):
            self.dtype = "bfloat16"
            self.__cuda_array_interface__ = {"shape": tuple(t.shape), "typestr": "<f2", "data": (t.data_ptr(), False),
                                             "version": 3, "stream": None, "strides": tuple(2 * x for x in t.stride())}

    oi = nan_out()
    s3 = torch.cuda.Stream()  # a stream no torch call used: its workspace is allocated for these arrays (cuMemAlloc)
    torch.cuda.synchronize()
    ptxgen.gemm(Interface(a), Interface(b), Interface(oi), stream=s3.cuda_stream)
    torch.cuda.synchronize()
    same = bool(torch.equal(want, bits(oi)))
    buffers = [(hex(st), w[2]) for (d, st), w in ws.items() if not hasattr(w[2], "view")]
    flags_left = {h: int((buf.download(np.int32, FLAG_REGION_BYTES // 4) != 0).sum()) for h, buf in buffers}
    say("interface", bit_identical=same, cuMemAlloc_workspaces=flags_left)
    if not same or not buffers or any(flags_left.values()):
        return fail(f"__cuda_array_interface__ arrays: bit-identical {same}, cuMemAlloc workspaces' non-zero flags "
                    f"{flags_left}")
    report["passed"] = True
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(x) for x in sys.argv[1:4])))
