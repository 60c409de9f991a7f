"""Few-row class: the chooser's pick, swapped 192-row tiles (3 consumer warpgroups; a 1x2 pair and alone) and the
pick without its cluster, against cuBLAS in one process: one call alone between events, median of 15 alternating
rounds; outputs checked (relative error against torch's)."""
import sys, dataclasses, torch
sys.path.insert(0, ".exp")
from types import SimpleNamespace
from swap192 import specs, SHAPES
from ptxgen.isa.types import Cluster
from ptxgen.runtime.check.bench import _Case
dev = SimpleNamespace(name=torch.cuda.get_device_name(0), sm_count=torch.cuda.get_device_properties(0).multi_processor_count, ordinal=0)
def alone(f):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True); torch.cuda.synchronize(); s.record(); f(); e.record(); e.synchronize()
    return s.elapsed_time(e) * 1e3
import os
LIST = [tuple(int(x) for x in t.split("x")) for t in os.environ["SHAPE_LIST"].split(",")] if os.environ.get("SHAPE_LIST") else SHAPES
for m, n, k in LIST[:int(os.environ.get("SHAPES", len(LIST)))]:
    sp, swap = specs(m, n, k, dev)
    if sp["pick"].cluster is Cluster.C1X2:
        sp["pick_c1x1"] = dataclasses.replace(sp["pick"], cluster=Cluster.C1X1)
    cases = {}
    for name, s in sp.items():
        try:
            cases[name] = _Case(torch, s, m, n, k, 0, dev.sm_count, swap)
            cases[name].ours(); torch.cuda.synchronize()
            print(f"{m}x{n}x{k} {name} {s.kernel_name} err {cases[name].error(torch):.2e}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{m}x{n}x{k} {name} FAILED {type(e).__name__}: {e}", flush=True); cases.pop(name, None)
    base = cases["pick"].baseline
    t = {nm: [] for nm in list(cases) + ["cublas"]}
    for _ in range(15):
        for nm, c in cases.items():
            t[nm].append(alone(c.ours))
        t["cublas"].append(alone(base))
    med = {nm: sorted(v)[len(v) // 2] for nm, v in t.items()}
    print(f"TIME {m}x{n}x{k} " + ", ".join(f"{nm} {v:.1f} us ({med['cublas'] / v:.3f})" for nm, v in med.items()), flush=True)
