"""ptxgen.author: kernels of your own, from the project's derivations (docs/authoring.md is the tutorial).

Describe each MMA operand (:class:`Operand`, or :func:`parse_operand` of a token), read its derived plan
(:class:`OperandPlan`: shared-memory layout, descriptors per K step with their reasons, the TMA tensor map, stage
bytes), lay out a pipeline ring (:class:`Ring` -> :class:`RingPlan`), pick the MMA (:func:`wgmma`, with
:class:`RegisterA` for A from registers), write a jinja2 template that imports ``author/pieces.cuh.j2``, declare
the :class:`Kernel` (parameters :class:`Param`, the SASS counts to expect) and :func:`build` it into a
:class:`BuiltKernel` you can call. Refusals are :class:`~ptxgen.isa.types.SpecError` (:class:`AuthorError`) naming
the rule; a SASS check that fails raises :class:`SassGateError`.
"""

import importlib

# Each name loads its module on first use (``from ptxgen.author import DType`` does not load the compiler): name ->
# the module that defines it, relative to this package.
_WHERE = {
    **dict.fromkeys(("Arch", "DType", "SpecError"), "..isa.types"),
    "CompileError": "..runtime.compile.toolchain",
    **dict.fromkeys(("ArgumentError", "DTypeError"), "..runtime.launch.arrays"),
    **dict.fromkeys(("CudaError", "NoGPU"), "..runtime.launch.gpu"),
    "DeviceArray": ".device",
    **dict.fromkeys(("AuthorError", "BuiltKernel", "Kernel", "Param", "SassGateError", "Values", "build", "generated_line",
                     "parse_sass", "sass_resources", "template_file"), ".kernel"),
    "PreparedLaunch": ".launch",
    **dict.fromkeys(("RegisterA", "Tcgen05Plan", "Tcgen05Step", "TmemA", "TmemLoad", "TmemPlan", "WgmmaPlan", "WgmmaStep",
                     "tcgen05", "tmem_plan", "wgmma"), ".mma"),
    **dict.fromkeys(("Operand", "OperandPlan", "parse_operand"), ".operand"),
    **dict.fromkeys(("Buffer", "Region", "Ring", "RingPlan"), ".ring"),
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'ptxgen.author' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_WHERE})


__all__ = [
    "Arch",
    "ArgumentError",
    "AuthorError",
    "Buffer",
    "BuiltKernel",
    "CompileError",
    "CudaError",
    "DType",
    "DTypeError",
    "DeviceArray",
    "Kernel",
    "NoGPU",
    "Operand",
    "OperandPlan",
    "Param",
    "PreparedLaunch",
    "Region",
    "RegisterA",
    "Ring",
    "RingPlan",
    "SassGateError",
    "SpecError",
    "Tcgen05Plan",
    "Tcgen05Step",
    "TmemA",
    "TmemLoad",
    "TmemPlan",
    "Values",
    "WgmmaPlan",
    "WgmmaStep",
    "build",
    "generated_line",
    "parse_operand",
    "parse_sass",
    "sass_resources",
    "tcgen05",
    "template_file",
    "tmem_plan",
    "wgmma",
]
