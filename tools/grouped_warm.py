"""Compile every grouped kernel that tests/test_grouped.py (gpu and codegen tests) and tools/bench_grouped.py use, in parallel processes,
into the on-disk cache ($PTXGEN_CACHE_DIR), so that the GPU steps that follow only load cubins (NVRTC, no GPU).
Usage: python tools/grouped_warm.py [processes]"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def specs() -> list[dict]:
    from bench_grouped import CANDIDATES
    from ptxgen.grouped import grouped_spec

    base = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
                stages=4, schedule="persistent", grouped="offs")
    out = [grouped_spec(d).to_json() for d in ("bf16", "f16", "e4m3")]
    out += [grouped_spec("e4m3", rowwise=True).to_json()]
    out += [grouped_spec(d, small=True).to_json() for d in ("bf16", "f16")]  # grouped_gemm's tile for small groups
    out += [dict(base), dict(base, bn=128, consumers="pingpong", epilogue="tma"), dict(base, bm=64, consumers="pingpong")]
    out += [dict(base, dtype="e4m3", bk=128, bn=128, consumers="pingpong", grouped="offs_rowwise")]  # test_grouped's codegen
    out += [{**grouped_spec("bf16").to_json(), **c} for c in CANDIDATES]
    return out


def build(fields: dict) -> str:
    from ptxgen.api import compile, make_spec

    t = time.perf_counter()
    k = compile(make_spec(**fields))
    return f"{k.name}: {'cache hit' if k.cache_hit else 'compiled'} in {time.perf_counter() - t:.1f} s"


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    todo = specs()
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else min(8, len(todo))) as pool:
        for line in pool.map(build, todo):
            print(line, flush=True)
