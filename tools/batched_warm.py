"""Compile every batched kernel (and grouped N-major kernel) that the gpu tests of tests/test_batched.py,
tests/test_grouped_nmajor.py and tools/bench_batched.py reach, in parallel processes, into the on-disk cache
($PTXGEN_CACHE_DIR), so that the GPU steps only load cubins. The specs are those ptxgen.gemm picks for the tests'
arrays (api.select.batched_spec_for_arrays on ``arch``, default sm_90a). Usage: python tools/batched_warm.py [processes]"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPES = [(300, 200, 264), (129, 136, 72), (7, 9, 24), (1000, 520, 1000), (257, 131, 200), (100, 72, 128),
          (1024, 1024, 1024), (512, 512, 512), (2048, 2048, 256)]


def specs(arch: str = "sm_90a") -> list[dict]:
    from ptxgen.api.select import batched_spec_for_arrays
    from ptxgen.grouped import grouped_spec
    from ptxgen.runtime.launch.arrays import ArrayInfo

    def info(name, shape, strides):
        return ArrayInfo(name, 0x100000, shape, strides, "bf16", 2, (2, 0), "torch", "torch")

    out = {}
    for m, n, k in SHAPES:
        for batch in (1, 3):
            for shared in (False, True):
                a = info("a", (batch, m, k), (m * k, k, 1))
                b = info("b", (n, k), (k, 1)) if shared else info("b", (batch, n, k), (n * k, k, 1))
                s, _ = batched_spec_for_arrays(a, b, None, None, arch)
                out[s.kernel_name] = s.to_json()
    a = info("a", (3, 264, 200), (200 * 264, 1, 264))  # M-major / N-major views
    b = info("b", (3, 136, 200), (200 * 136, 1, 136))
    s, _ = batched_spec_for_arrays(a, b, None, None, arch)
    out[s.kernel_name] = s.to_json()
    for small in (False, True):
        s = grouped_spec("bf16", "bf16", arch, small=small, b_major="mn")
        out[s.kernel_name] = s.to_json()
    return list(out.values())


def build(fields: dict) -> str:
    from ptxgen.api import compile, make_spec

    t = time.perf_counter()
    k = compile(make_spec(**fields))
    return f"{k.name}: {'cache hit' if k.cache_hit else 'compiled'} in {time.perf_counter() - t:.1f} s"


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    todo = specs()
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else min(8, len(todo))) as pool:
        for line in pool.map(build, todo):
            print(line, flush=True)
