"""ptxgen: derive, explain, emit and check tensor-core GEMM tiles (tcgen05 on sm_100a, wgmma on sm_90a).

Layers, each importing only those before it:
  core     ptxgen.types, .spec, .smem, .bits, .descriptors, .layout, .readmodel, .numerics, .explain
  emit     ptxgen.emit (jinja2 templates, naming, generated/, SVG pictures)
  runtime  ptxgen.runtime (NVRTC, SASS checks, launching on a GPU)
"""

__version__ = "0.1.0"
