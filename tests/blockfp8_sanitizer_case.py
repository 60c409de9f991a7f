"""One block-FP8 GEMM against the float64 recipe in a process of its own, for compute-sanitizer
(tests/test_epilogue_ops.py::test_block_fp8_compute_sanitizer_clean):

    compute-sanitizer --tool memcheck python tests/blockfp8_sanitizer_case.py '{"fp8_stagger": "none"}' 1500 3000 400

Prints one line and exits 0 when every output is within the recipe's bound (the check of the gpu tests)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ptxgen.api.fp8blocks  # noqa: E402
from test_epilogue_ops import _block_fp8_against_recipe  # noqa: E402


def main(variant: dict, m: int, n: int, k: int) -> int:
    out_dtype = variant.pop("out_dtype", "bf16")
    spec = ptxgen.api.fp8blocks.default_spec(out_dtype, **variant)
    _block_fp8_against_recipe(m, n, k, 5, spec, out_dtype)
    print(json.dumps({"kernel": spec.kernel_name, "shape": [m, n, k], "passed": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1]), *map(int, sys.argv[2:5])))
