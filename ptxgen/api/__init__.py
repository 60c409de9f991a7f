"""The public Python API: compile a tile spec into a kernel and call it on device arrays.

On a GPU (not run as a doctest)::

    import ptxgen
    k = ptxgen.compile(ptxgen.make_spec(128, 128, 64, a="kmajor-sw128", b="kmajor-sw128",
                                         dtype="bf16", out_dtype="bf16", arch="sm_90a"))
    out = k(a, b)           # a: M x K, b: N x K (torch, CuPy, JAX, ...): out = a @ b.T, M x N
    out = ptxgen.gemm(a, b) # the spec is chosen for you (the tuned table, as ``ptxgen bench``)

Conventions (as everywhere in ptxgen): A is logically M x K and B is N x K, D = A @ B^T is M x N row-major.
``a`` and ``b`` are passed in their logical shapes; their strides say their majorness: a K-major A is a
row-major M x K array (strides ``(lda, 1)``), an M-major A is the transposed view of a row-major K x M array
(``at.t()``: strides ``(1, lda)``). B likewise with N. Every row must start 16-byte aligned.

``compile`` needs no GPU (NVRTC); the module is loaded at the first call. Without a usable GPU, calling a
kernel (or :func:`gemm`) raises :class:`NoGPU` after the arguments have been checked.

Modules: ``kernel`` (CompiledKernel, compile), ``groupedkernel`` (GroupedKernel, what ``ptxgen.compile_grouped``
returns), ``select`` (which spec gemm picks), ``dispatch`` (gemm and its dispatch cache), ``fused`` and ``fp8blocks``
(the fused-epilogue and block-FP8 doors), ``callplan`` (what a call of any op will do, without a GPU: :func:`plan`; its
result types and array reading in ``planbase``, the grouped doors' planners in ``plangrouped``). Packages: ``arrays``
(checking arrays against a spec: ``binding``; batched, grouped and packed arrays; float32 precision, float16 accumulation, the block-FP8
recipe), ``launch`` (streams and contexts: ``streams``; the prepared launch of one dispatch key: ``launchplan``, its
dispatch keys and hot tables: ``hotkeys``; each door's prepared launches), ``bench`` (``ptxgen bench --api``).
``torch.ops.ptxgen.gemm`` is registered by ``ptxgen.ops.torch_ops`` (a layer above this package).
"""

from __future__ import annotations

from ..derive.tile.spec import make_spec
from ..runtime.launch.arrays import ArgumentError, DTypeError
from ..runtime.launch.gpu import NoGPU
from ..runtime.launch.launch import ProblemError
from .arrays.binding import Binding, bind, operand_major
from .dispatch import gemm, kernel_for
from .kernel import CompiledKernel, LaunchConfig, compile
from .callplan import CallPlan, plan
from .select import default_spec, gemm_spec, select_spec
from .launch.streams import stream_handle

__all__ = ["ArgumentError", "Binding", "CallPlan", "CompiledKernel", "DTypeError", "LaunchConfig", "NoGPU", "ProblemError", "bind",
           "compile", "default_spec", "gemm", "gemm_spec", "kernel_for", "make_spec", "operand_major", "plan",
           "select_spec", "stream_handle"]
