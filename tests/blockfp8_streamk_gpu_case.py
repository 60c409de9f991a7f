"""One variant of tests/test_blockfp8_streamk.py's GPU tier, run in its own process (the test gives it a timeout, so a
stream-K wait that never ends fails the test instead of hanging the run):
``python tests/blockfp8_streamk_gpu_case.py '<default_spec kwargs as JSON>' M N K [M N K ...]``.

For each shape: ``ptxgen.api.fp8blocks.gemm`` with the block-FP8 stream-K spec (``"fp8_blocks": "1x128x1x128"`` in
the JSON: ``columns_spec``'s recipe, scale_b ceil(K/128) x N) on torch tensors in torch._scaled_mm's scale layouts
(random scales 0.5..1.5, so a split promoting with another split's K blocks is off by far more than the tolerance);
checks
1. the launch splits the last round (the kernel's own StreamKPlan.layout on the grid it launches: S > 1);
2. three calls into NaN-filled outputs, bit-identical, each within 2^-7 (rel.) of the float64 recipe
   (ptxgen.model.numerics.bfp8model.reference), as tests/test_epilogue_ops.py checks the whole-tile kernels;
3. the flags of the stream's workspace zero afterwards (each owner reset its own).
Prints one JSON line per shape and a last one with ``passed``; exit 1 on the first failed check.
"""

from __future__ import annotations

import json
import sys


def main(variant: dict, shapes: list[tuple[int, int, int]]) -> int:
    import numpy as np
    import torch

    import ptxgen.api.fp8blocks
    from ptxgen.api.launch import launchplan
    from ptxgen.api.fused import kernel_for
    from ptxgen.derive.store.streamk import FLAG_REGION_BYTES
    from ptxgen.model.numerics import bfp8model
    from ptxgen.runtime.launch.gpu import require_gpu
    from ptxgen.runtime.launch.launch import Problem, launch_geometry, streamk_items

    out_dtype = variant.pop("out_dtype", "bf16")
    cols = variant.pop("fp8_blocks", None) == "1x128x1x128"  # 1 x 128 scales on both operands: scale_b Kb x N
    spec = (ptxgen.api.fp8blocks.columns_spec if cols else ptxgen.api.fp8blocks.default_spec)(out_dtype, **variant)
    dev = require_gpu()
    kernel = kernel_for(spec)
    ok = True
    for m, n, k in shapes:
        gen = torch.Generator().manual_seed(m + n + k)
        a = (torch.randn(m, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).cuda()
        b = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).cuda()
        kb, nb = -(-k // 128), -(-n // 128)
        sa = (torch.rand(kb, m, generator=gen) + 0.5).cuda().t()
        sb = ((torch.rand(kb, n, generator=gen) + 0.5).cuda() if cols else
              (torch.rand(nb, kb, generator=gen) + 0.5).cuda().t())
        p = Problem(m, n, k, k, k, n)
        grid, _, _ = launch_geometry(kernel.plan, p, dev.sm_count, kernel.load())
        sk = kernel.plan.stream_k
        lay = sk.layout(streamk_items(kernel.plan, p), grid[0] // sk.cluster_size, k)
        torch_dt = {"bf16": torch.bfloat16, "f32": torch.float32}[out_dtype]
        outs = []
        for _ in range(3):
            o = torch.full((m, n), float("nan"), dtype=torch_dt, device="cuda")
            ptxgen.api.fp8blocks.gemm(a, b, sa, sb, o, out_dtype=out_dtype, spec=spec)
            outs.append(o)
        torch.cuda.synchronize()
        f64 = lambda t: t.float().cpu().numpy().astype(np.float64)  # noqa: E731 - float8 -> f32 exactly, then f64
        ref = bfp8model.reference(f64(a), f64(sa), f64(b), f64(sb), per_column=cols)
        got = f64(outs[0])
        bad = bfp8model.outside_bound(got, f64(a), f64(sa), f64(b), f64(sb), 2.0 ** -7,  # per element, its terms' size
                                      per_column=cols)
        same = all(torch.equal(outs[0].view(torch.int16 if out_dtype == "bf16" else torch.int32),
                               o.view(torch.int16 if out_dtype == "bf16" else torch.int32)) for o in outs[1:])
        # the workspaces gemm took (torch memory: it got torch tensors), whichever stream handle it used
        owners = [w[2] for key, w in launchplan._STREAMK_WORKSPACES.items() if key[0] == dev.index and hasattr(w[2], "view")]
        flags_zero = bool(owners) and all(bool((o[:FLAG_REGION_BYTES].view(torch.int32) == 0).all()) for o in owners)
        row = {"kernel": spec.kernel_name, "shape": [m, n, k], "grid": grid[0], "splits": lay.splits,
               "last_items": lay.last_items, "wrong": int(bad.sum()), "of": int(bad.size), "bit_identical": same,
               "flags_zero": flags_zero, "max_rel": float(np.max(np.abs(got - ref)) / max(1e-30, float(np.abs(ref).max())))}
        row["passed"] = lay.splits > 1 and not bad.any() and same and flags_zero is True
        print(json.dumps(row), flush=True)
        ok &= row["passed"]
        if not ok:
            break
    print(json.dumps({"passed": bool(ok), "kernel": spec.kernel_name}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    args = sys.argv[2:]
    sys.exit(main(json.loads(sys.argv[1]), [tuple(map(int, args[i:i + 3])) for i in range(0, len(args), 3)]))
