"""400x10000x6000 (and two more few-row shapes): the pick against swapped kernels with a cluster (multicast of one operand)."""
import dataclasses, json, sys, zlib
sys.path.insert(0, "tools")
import torch
from bench_epilogue import paired, rotate
from ptxgen.runtime.check.bench import Operands, _Case
from ptxgen.runtime.choose import Problem, choose
from ptxgen.runtime.choose.choice import Device
from ptxgen.derive.tile.spec import Cluster
from ptxgen.isa.types import Schedule

from exp_candidates import device_for
dev = device_for(None)
SHAPES = [(400, 10000, 6000), (333, 8192, 8192), (480, 12288, 4096)]

def variants(pick, m):
    s = pick.spec
    out = {}
    def add(name, **kw):
        try:
            out[name] = dataclasses.replace(s, **kw)
        except Exception as e:
            print(name, "illegal:", str(e)[:120])
    bn = -(-(-(-m // 2)) // 16) * 16  # two tiles over M, a multiple of 16 (two equal runs of 8-row atoms)
    for st in (4, 3):
        add(f"swap128x{bn}c2x1s{st}sk{s.stream_k}", bn=bn, cluster=Cluster.C2X1, stages=st)
        add(f"swap128x{bn}c2x1s{st}", bn=bn, cluster=Cluster.C2X1, stages=st, stream_k=1)
        add(f"swap128x{bn}c2x1s{st}tile", bn=bn, cluster=Cluster.C2X1, stages=st, stream_k=1, schedule=Schedule.TILE)
    add(f"swap128x{s.bn}c1x2", cluster=Cluster.C1X2)
    add(f"swap128x{bn}", bn=bn, stages=4)
    return out

rows = []
for m, n, k in SHAPES:
    pick = choose(Problem("bf16", "sm_90a", m, n, k), dev)
    print(m, n, k, "pick", pick.spec.kernel_name, pick.chosen_by, flush=True)
    specs = {"pick": pick.spec}
    if pick.swap_ab:
        specs.update(variants(pick, m))
    ops = Operands(torch, pick.spec, m, n, k, 0)
    cases = {}
    for lab, spec in specs.items():
        try:
            c = _Case(torch, spec, m, n, k, 0, dev.sm_count, pick.swap_ab, operands=ops)
            c.ours(); torch.cuda.synchronize()
            cases[lab] = c
        except Exception as e:
            print(lab, "FAILED", type(e).__name__, str(e)[:200], flush=True)
    fns = {"cublas": ops.baseline, "cublas_twin": ops.baseline, **{l: c.ours for l, c in cases.items()}}
    ms, times = rotate(torch, fns, 21, warmup=2, seed=zlib.crc32(f"{m}".encode()), batch_ms=5.0)
    for l, c in cases.items():
        err = c.error(torch)
        r = dict(m=m, n=n, k=k, label=l, kernel=specs[l].kernel_name, us=ms[l] * 1e3, cublas_us=ms["cublas"] * 1e3,
                 ratio=ms["cublas"] / ms[l], paired=paired(times, "cublas", l), ok=err <= c.tol, err=err)
        rows.append(r)
        print(f"{m}x{n}x{k} {l:28} {r['us']:8.1f} us  cuBLAS {r['cublas_us']:7.1f}  ratio {r['ratio']:.3f} paired {r['paired']:.3f} {'ok' if r['ok'] else 'WRONG'}", flush=True)
    print("twin", ms["cublas"] / ms["cublas_twin"])
json.dump(rows, open(sys.argv[1], "w"), indent=1)
