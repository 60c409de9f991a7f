"""ptxgen: derive, explain, emit and check tensor-core GEMM tiles (tcgen05 on sm_100a, wgmma on sm_90a).

Layers, each importing only those before it (tests/test_layering.py; docs/design.md draws them):
  isa      ptxgen.isa: hardware facts and encodings (types, shapes, descriptor bit tables, tensor maps)
  derive   ptxgen.derive: pure-Python plans from a spec, in tile (spec, rules, the composer, the frozen kernel plan,
           explain), operands (layouts, descriptors, TMA), roles (warp roles, barriers, schedule, grouped walks),
           store (epilogues, fused chain, split-K, stream-K) and scaled (block FP8, scale factors)
  model    ptxgen.model: independent checks in layouts, numerics and sim, fed the derived plans by bridges
  emit     ptxgen.emit: jinja2 rendering (views: a context per template piece), generated/, pictures (SVG)
  runtime  ptxgen.runtime: compile (NVRTC, cache, SASS), launch (driver, parameters, tensor maps), check, choose
  top      ptxgen.api (arrays, launch, bench), .author, .attention, .grouped, .kgrouped, .scaled, .ops (the torch
           operators), .sweep, .nn, .cli and .plancli (the command; .cliargs its tile-spec flags)
Leaf modules any layer may import: ptxgen.version, .status, .cachedir, .outputs, .interrupt, .ctrlc.

The Python API (``ptxgen.api``, loaded on first use so that ``import ptxgen`` stays fast):
  compile(spec) -> CompiledKernel, callable on device arrays: out = a @ b.T
  make_spec(...), gemm(a, b), NoGPU, ArgumentError, ProblemError
  register_torch_ops(): torch.ops.ptxgen.gemm for torch.compile (done by ``import ptxgen`` when torch is
  already imported, and by the first use of the API when torch is imported by then)
  ptxgen.nn: Linear and GroupedLinear, torch modules with autograd (docs/training.md)
  grouped_gemm(a, b, offs), compile_grouped(spec)  (``ptxgen.grouped``: mixture-of-experts layers; FP8:
  scaled_grouped_gemm (row-wise scales), blockscaled_grouped_gemm (DeepSeek block scales)); grouped_gemm_k(a, b, offs)
  (``ptxgen.kgrouped``: torch._grouped_mm's 2-D x 2-D form, groups along K, out G x M x N)
  scaled_gemm(a, b, scale_a, scale_b, out_dtype=, bias=)  (``ptxgen.scaled``: dense FP8, torch._scaled_mm's row-wise
  scales)
"""

from .ctrlc import take_over_while_loading as _take_over_while_loading

_take_over_while_loading()  # first: as the command, Ctrl-C from here on exits 130 with no traceback (ptxgen.ctrlc)

import sys as _sys  # noqa: E402

from .version import __version__  # noqa: E402

_API = ("compile", "gemm", "make_spec", "NoGPU", "CompiledKernel", "ArgumentError", "ProblemError")
_GROUPED = ("grouped_gemm", "compile_grouped", "scaled_grouped_gemm", "blockscaled_grouped_gemm")
_SCALED = ("scaled_gemm",)
_KGROUPED = ("grouped_gemm_k", "blockscaled_grouped_gemm_k")
__all__ = ["__version__", "register_torch_ops", *_API, *_GROUPED, *_SCALED, *_KGROUPED]


def register_torch_ops() -> bool:
    """Define ``torch.ops.ptxgen.gemm`` (imports torch); see ``ptxgen.ops.torch_ops``."""
    from .ops.torch_ops import register_torch_ops as register

    return register()


def __getattr__(name: str):
    if name in _API:
        from . import api

        _register_if_torch()
        value = getattr(api, name)
        globals()[name] = value
        return value
    if name in _KGROUPED:
        from . import kgrouped

        value = getattr(kgrouped, name)
        globals()[name] = value
        return value
    if name in _SCALED:
        from . import scaled

        value = getattr(scaled, name)
        globals()[name] = value
        return value
    if name == "nn":  # ptxgen.nn.Linear after a plain `import ptxgen` (imports torch)
        import importlib

        return importlib.import_module(".nn", __name__)
    if name == "api":  # ptxgen.api.gemm_spec after a plain `import ptxgen`
        import importlib

        module = importlib.import_module(".api", __name__)
        _register_if_torch()
        return module
    if name == "attention":  # the package is callable: ptxgen.attention(q, k, v, causal=..., ...)
        import importlib

        module = importlib.import_module(".attention", __name__)
        _register_if_torch()
        return module
    if name in _GROUPED:
        from . import grouped

        value = getattr(grouped, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ptxgen' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_API, *_GROUPED, *_SCALED, *_KGROUPED, "api", "nn"})


def _register_if_torch() -> None:
    """torch.ops.ptxgen.gemm when torch is already imported (never imports torch)."""
    if "torch" in _sys.modules:
        from .ops.torch_ops import register_torch_ops as register

        register(only_if_imported=True)


_register_if_torch()  # torch imported first: the operator is there for torch.compile at once
