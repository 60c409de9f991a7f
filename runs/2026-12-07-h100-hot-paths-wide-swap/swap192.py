"""Swapped 192-row tiles (three consumer warpgroups of 64 weight rows each) for the few-row class, where 128-row tiles
take 1.5 rounds: the candidates' specs (importable: SPECS(m, n, k, device))."""
import dataclasses
from ptxgen.api.select import select_choice
from ptxgen.isa.types import Cluster, Schedule, SpecError

SHAPES = [(300, 12288, 6000), (384, 12288, 6000), (260, 8192, 6000), (400, 10000, 6000), (333, 8192, 8192)]

def specs(m, n, k, dev):
    pick, why, swap = select_choice("bf16", "sm_90a", m, n, k, device=dev)
    out = {"pick": pick}
    bn = -(-(-(-m // 2)) // 8) * 8  # two tiles over M, BN a multiple of 8
    for stages in (5, 4, 3):
        try:
            s = dataclasses.replace(pick, bm=192, bn=bn, stages=stages, schedule=Schedule.TILE, stream_k=1, cluster=Cluster.C1X2)
            out[f"s192x{bn}c2"] = s
            out[f"s192x{bn}"] = dataclasses.replace(s, cluster=Cluster.C1X1)
            break
        except SpecError as e:
            err = e
    return out, swap

if __name__ == "__main__":
    from types import SimpleNamespace
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.cache import compile_cached
    dev = SimpleNamespace(name="NVIDIA H100 80GB HBM3", sm_count=132, ordinal=-1)
    for shp in SHAPES:
        sp, swap = specs(*shp, dev)
        for name, s in sp.items():
            print(shp, name, s.kernel_name, s.stages, swap)
