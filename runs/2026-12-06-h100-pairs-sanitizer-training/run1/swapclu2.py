"""Few-row shapes the chooser swaps (cost-model+swap-ab, two swapped tiles over M): its pick against the same kernel
with a 1x2 cluster (the two CTAs over M share the weight rows: A multicast), cuBLAS twice, one process."""
import dataclasses, json, sys, zlib
sys.path.insert(0, "tools")
import torch
from bench_epilogue import paired, rotate
from exp_candidates import device_for
from ptxgen.runtime.check.bench import Operands, _Case
from ptxgen.runtime.choose import Problem, choose
from ptxgen.derive.tile.spec import Cluster

dev = device_for(None)
SHAPES = [(260, 8192, 6000), (260, 10000, 8192), (300, 12288, 6000), (333, 10000, 8192), (384, 8192, 8192),
          (384, 12288, 6000), (400, 8192, 6000), (400, 12288, 8192), (400, 10000, 6000), (333, 8192, 8192)]
rows = []
for m, n, k in SHAPES:
    pick = choose(Problem("bf16", "sm_90a", m, n, k), dev)
    base = pick.spec if pick.spec.cluster is Cluster.C1X1 else dataclasses.replace(pick.spec, cluster=Cluster.C1X1)
    specs = {"c1x1": base, "c1x2": dataclasses.replace(base, cluster=Cluster.C1X2)}
    print(m, n, k, "pick", pick.spec.kernel_name, pick.chosen_by, flush=True)
    ops = Operands(torch, base, m, n, k, 0)
    cases = {}
    for lab, spec in specs.items():
        try:
            c = _Case(torch, spec, m, n, k, 0, dev.sm_count, pick.swap_ab, operands=ops)
            c.ours(); torch.cuda.synchronize()
            cases[lab] = c
        except Exception as e:
            print(lab, "FAILED", type(e).__name__, str(e)[:200], flush=True)
    fns = {"cublas": ops.baseline, "cublas_twin": ops.baseline, **{l: c.ours for l, c in cases.items()}}
    ms, times = rotate(torch, fns, 25, warmup=2, seed=zlib.crc32(f"{m}x{n}x{k}".encode()), batch_ms=5.0)
    for l, c in cases.items():
        err = c.error(torch)
        r = dict(m=m, n=n, k=k, label=l, kernel=specs[l].kernel_name, us=ms[l] * 1e3, cublas_us=ms["cublas"] * 1e3,
                 ratio=ms["cublas"] / ms[l], paired=paired(times, "cublas", l), ok=err <= c.tol, err=err,
                 twin=ms["cublas"] / ms["cublas_twin"], chosen_by=pick.chosen_by, pick=pick.spec.kernel_name)
        rows.append(r)
        print(f"{m}x{n}x{k} {l:6} {r['us']:8.1f} us  cuBLAS {r['cublas_us']:7.1f}  ratio {r['ratio']:.3f} paired {r['paired']:.3f} {'ok' if r['ok'] else 'WRONG'}", flush=True)
    if "c1x1" in cases and "c1x2" in cases:
        print(f"{m}x{n}x{k} c1x2/c1x1 {ms['c1x1'] / ms['c1x2']:.3f} paired {paired(times, 'c1x1', 'c1x2'):.3f} twin {ms['cublas'] / ms['cublas_twin']:.3f}", flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
