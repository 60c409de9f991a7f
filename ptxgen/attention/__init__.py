"""Attention forward (FlashAttention-style) on Hopper, built on ptxgen's operand derivations.

``ptxgen.attention.attention(q, k, v, causal=False, scale=None, out=None, return_lse=False)`` in
scaled_dot_product_attention's (B, H, S, D) layout; see docs/attention.md.
"""

from __future__ import annotations

from .spec import AttentionSpec

__all__ = ["AttentionSpec", "attention", "plan_attention", "build"]


def __getattr__(name):  # the plan, compiler and launcher load on first use (start-up time of `import ptxgen`)
    if name == "plan_attention":
        from .plan import plan_attention

        return plan_attention
    if name == "build":
        from .build import build

        return build
    if name == "attention":
        from .launch import attention

        return attention
    raise AttributeError(name)
