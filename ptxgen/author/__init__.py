"""ptxgen.author: kernels of your own, from the project's derivations (docs/authoring.md is the tutorial).

Describe each MMA operand (:class:`Operand`, or :func:`parse_operand` of a token), read its derived plan
(:class:`OperandPlan`: shared-memory layout, descriptors per K step with their reasons, the TMA tensor map, stage
bytes), lay out a pipeline ring (:class:`Ring` -> :class:`RingPlan`), pick the MMA (:func:`wgmma`, with
:class:`RegisterA` for A from registers), write a jinja2 template that imports ``author/pieces.cuh.j2``, declare
the :class:`Kernel` (parameters :class:`Param`, the SASS counts to expect) and :func:`build` it into a
:class:`BuiltKernel` you can call. Refusals are :class:`~ptxgen.isa.types.SpecError` (:class:`AuthorError`) naming
the rule; a SASS check that fails raises :class:`SassGateError`.
"""

from .device import DeviceArray
from .kernel import AuthorError, BuiltKernel, Kernel, Param, SassGateError, build
from .mma import (RegisterA, Tcgen05Plan, Tcgen05Step, TmemA, TmemLoad, TmemPlan, WgmmaPlan, WgmmaStep, tcgen05,
                  tmem_plan, wgmma)
from .operand import Operand, OperandPlan, parse_operand
from .ring import Buffer, Region, Ring, RingPlan

__all__ = [
    "AuthorError",
    "Buffer",
    "BuiltKernel",
    "DeviceArray",
    "Kernel",
    "Operand",
    "OperandPlan",
    "Param",
    "Region",
    "RegisterA",
    "Ring",
    "RingPlan",
    "SassGateError",
    "Tcgen05Plan",
    "Tcgen05Step",
    "TmemA",
    "TmemLoad",
    "TmemPlan",
    "WgmmaPlan",
    "WgmmaStep",
    "build",
    "parse_operand",
    "tcgen05",
    "tmem_plan",
    "wgmma",
]
