"""Attention forward (FlashAttention-style) on Hopper, built on ptxgen's operand derivations.

The package is itself callable: ``ptxgen.attention(q, k, v, *, causal=False, scale=None, out=None,
return_lse=False)`` in scaled_dot_product_attention's (B, H, S, D) layout (ptxgen.attention.launch.attention).
Pieces: spec (the checked choices), plan (layouts, descriptors, P's register path from ptxgen.derive), render and
templates/attention_sm90.cu.j2 (the kernel from macro pieces), build (NVRTC and the SASS gate), args and launch
(the runtime entry), cli (``ptxgen build --kind attention``). docs/attention.md.
"""

from __future__ import annotations

import sys
import types

from .spec import AttentionSpec

__all__ = ["AttentionSpec", "attention", "plan_attention", "build"]


def attention(q, k, v, *, causal=False, scale=None, out=None, return_lse=False):
    from .launch import attention as run

    return run(q, k, v, causal=causal, scale=scale, out=out, return_lse=return_lse)


def __getattr__(name):  # the plan and compiler load on first use (start-up time of `import ptxgen`)
    if name == "plan_attention":
        from .plan import plan_attention

        return plan_attention
    if name == "build":
        from .build import build

        return build
    raise AttributeError(name)


class _CallableModule(types.ModuleType):
    def __call__(self, q, k, v, *, causal=False, scale=None, out=None, return_lse=False):
        return attention(q, k, v, causal=causal, scale=scale, out=out, return_lse=return_lse)


sys.modules[__name__].__class__ = _CallableModule
