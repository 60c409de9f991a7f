"""All GPU validation jobs of tests/test_gpu.py in one hang-safe batch; verdicts to stdout, JSON lines to a file.

    python3 tools/gpu_validate.py OUT.jsonl [--timeout S] [--filter SUBSTRING]
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ptxgen.runtime.check.batch import run_batch  # noqa: E402
from ptxgen.runtime.launch.gpu import require_gpu  # noqa: E402
from test_gpu import gpu_jobs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    arch = require_gpu().arch.value
    jobs = [j for j in gpu_jobs(arch) if a.filter in str(j)]
    results = run_batch(jobs, Path(a.out), a.timeout)
    for r in results:
        print(r["verdict"])
    bad = sum(not r["passed"] for r in results)
    tma = [r for r in results if r["job"]["spec"]["loader"] == "tma"]
    print(f"{len(results) - bad} passed, {bad} failed  (TMA: {sum(r['passed'] for r in tma)}/{len(tma)})")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
