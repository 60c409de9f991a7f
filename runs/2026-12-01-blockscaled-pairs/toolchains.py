"""The CTA-pair kernels added by s3-bspairs (block-scaled pairs, pair TMA-store epilogues: every such ci-grid
configuration) through the SASS gate under every installed NVRTC (ptxgen.runtime.toolchains) and the pinned one.

    PTXGEN_TOOLCHAINS=/tmp/tcroot python runs/2026-12-01-s3-bspairs/toolchains.py
"""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxgen.isa.types import Epilogue  # noqa: E402
from ptxgen.runtime import toolchains  # noqa: E402
from ptxgen.sweep import load_grid  # noqa: E402

specs = [s for s in load_grid("ci").specs if s.pair and (s.block_scaled or s.epilogue is Epilogue.TMA)]
tcs = toolchains.installed() + [toolchains.Toolchain("pinned", None)]
print(f"{len(specs)} kernels x {len(tcs)} toolchains")
failed = 0
for tc in tcs:
    t = time.time()
    results = toolchains.compile_and_check(tc, specs, Path("/tmp/ptxgen-bspairs-tc") / tc.name)
    bad = [r for r in results if r.problems]
    failed += len(bad)
    print(f"{tc.name:>6} (NVRTC {results[0].version}): {len(results) - len(bad)}/{len(results)} pass the SASS gate, "
          f"{sum(r.local_instructions for r in results)} LDL/STL, {max(r.stack_bytes for r in results)} B stack at most, "
          f"{time.time() - t:.0f} s")
    for r in bad:
        print(f"   {r.kernel}: {'; '.join(r.problems)[:300]}")
sys.exit(1 if failed else 0)
