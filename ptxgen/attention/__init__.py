"""Attention forward (FlashAttention-style) on Hopper, written with the public authoring layer (ptxgen.author) only.

The package is itself callable: ``ptxgen.attention(q, k, v, *, causal=False, scale=None, out=None,
return_lse=False)`` in scaled_dot_product_attention's (B, H, S, D) layout (ptxgen.attention.launch.attention).
Pieces: spec (the checked choices), plan and plan_sm100 (Q, K, V as ``ptxgen.author`` operands, the ring, the MMA
plans, P's register path), render and templates/attention_sm90.cu.j2 (the ``ptxgen.author.Kernel``), build (the
layer's build and the SASS gate), args and launch (the runtime entry, a ``PreparedLaunch`` per key), cli
(``ptxgen build --kind attention``). tests/test_attention_public.py holds it to what docs/authoring.md documents;
docs/attention.md.
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
