"""One block-FP8 GEMM against the float64 recipe in a process of its own, for compute-sanitizer
(tests/test_epilogue_ops.py::test_block_fp8_compute_sanitizer_clean):

    compute-sanitizer --tool memcheck python tests/blockfp8_sanitizer_case.py '{"fp8_stagger": "none"}' 1500 3000 400

Prints one line and exits 0 when every output is within the recipe's bound (the check of the gpu tests)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ptxgen.api.fp8blocks  # noqa: E402
from test_epilogue_ops import _block_fp8_against_recipe, _f64, _fp8_inputs  # noqa: E402


def columns_against_recipe(m: int, n: int, k: int, seed: int, spec) -> None:
    """The 1x128 x 1x128 recipe (f32 out): torch's layouts (scale_a M x Kb outer-dim-major, scale_b Kb x N row-major),
    every output within bfp8model.outside_bound of the float64 recipe with per-column B scales."""
    import torch

    from ptxgen.model.numerics import bfp8model

    gen = torch.Generator().manual_seed(seed)
    a, b = _fp8_inputs(m, n, k, gen)
    kb = -(-k // 128)
    sa = (torch.rand(kb, m, generator=gen) + 0.5).cuda().t()
    sb = (torch.rand(kb, n, generator=gen) + 0.5).cuda()
    out = ptxgen.api.fp8blocks.gemm(a, b, sa, sb, out_dtype="f32", spec=spec)
    torch.cuda.synchronize()
    bad = bfp8model.outside_bound(_f64(out), _f64(a), _f64(sa), _f64(b), _f64(sb), 2.0 ** -20, per_column=True)
    assert not bad.any(), f"{bad.sum()} of {bad.size} outputs wrong"


def main(variant: dict, m: int, n: int, k: int) -> int:
    out_dtype = variant.pop("out_dtype", "bf16")
    if variant.pop("fp8_blocks", None) == "1x128x1x128":
        spec = ptxgen.api.fp8blocks.columns_spec("f32", **variant)
        columns_against_recipe(m, n, k, 5, spec)
    else:
        spec = ptxgen.api.fp8blocks.default_spec(out_dtype, **variant)
        _block_fp8_against_recipe(m, n, k, 5, spec, out_dtype)
    print(json.dumps({"kernel": spec.kernel_name, "shape": [m, n, k], "passed": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1]), *map(int, sys.argv[2:5])))
