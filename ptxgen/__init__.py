"""ptxgen: derive, explain, emit and check tensor-core GEMM tiles (tcgen05 on sm_100a, wgmma on sm_90a).

Layers, each importing only those before it:
  core     ptxgen.types, .spec, .smem, .bits, .descriptors, .layout, .readmodel, .numerics, .explain
  emit     ptxgen.emit (jinja2 templates, naming, generated/, SVG pictures)
  runtime  ptxgen.runtime (NVRTC, SASS checks, launching on a GPU)

The Python API (``ptxgen.api``, loaded on first use so that ``import ptxgen`` stays fast):
  compile(spec) -> CompiledKernel, callable on device arrays: out = a @ b.T
  make_spec(...), gemm(a, b), NoGPU, ArgumentError, ProblemError
"""

__version__ = "0.1.0"

_API = ("compile", "gemm", "make_spec", "NoGPU", "CompiledKernel", "ArgumentError", "ProblemError")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ptxgen' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_API})
