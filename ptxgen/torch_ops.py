"""``torch.ops.ptxgen.gemm``: ptxgen.gemm as a torch operator, so that ``torch.compile(fullgraph=True)`` traces
through it (a fake implementation gives the output's shape, dtype and strides without running anything).

Registered by :func:`register_torch_ops`: by ``import ptxgen`` when torch is already imported, by the first use
of ``ptxgen.api`` when torch is imported by then, or by calling ``ptxgen.register_torch_ops()``. This module
imports nothing heavy (the implementation loads ``ptxgen.api`` at its first call) and never imports torch.

    torch.ops.ptxgen.gemm(a, b, out_dtype=None) -> Tensor      # a @ b.T, as ptxgen.gemm(a, b, out_dtype=...)

Functional (no ``out``): the result is a new tensor, M x N with rows padded to 16 bytes (strides (ldd, 1)),
or B x M x N contiguous for a B x M x K ``a``. No autograd formula is registered (inference only).
"""

from __future__ import annotations

import sys
import threading

SCHEMA = "gemm(Tensor a, Tensor b, str? out_dtype=None) -> Tensor"
# ptxgen.attention as an operator (functional: a new output shaped and strided like q)
ATTENTION_SCHEMA = "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor"
_LOCK = threading.Lock()
_STATE: dict = {}

# input dtype name (torch's, without "torch.") -> default output; out_dtype tokens -> torch dtype names
_DEFAULT_OUT = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float8_e4m3fn": "bfloat16",
                "float8_e5m2": "bfloat16", "int8": "int32", "uint8": "int32"}
_OUT_TOKENS = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "s32": "int32"}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


def out_dtype_name(in_dtype: str, out_dtype: str | None) -> str:
    """The torch dtype name (no prefix) that ``gemm`` returns for these inputs."""
    if out_dtype is not None:
        if out_dtype not in _OUT_TOKENS:
            raise ValueError(f"out_dtype {out_dtype!r}: one of {', '.join(_OUT_TOKENS)}")
        return _OUT_TOKENS[out_dtype]
    if in_dtype not in _DEFAULT_OUT:
        raise TypeError(f"ptxgen.gemm takes {', '.join(_DEFAULT_OUT)} tensors, not {in_dtype}")
    return _DEFAULT_OUT[in_dtype]


def _impl(a, b, out_dtype=None):
    from .api import gemm

    return gemm(a, b, out_dtype=out_dtype)


def _fake(a, b, out_dtype=None):
    torch = sys.modules["torch"]
    name = out_dtype_name(str(a.dtype).removeprefix("torch."), out_dtype)
    dt = getattr(torch, name)
    n = b.shape[0]
    if a.dim() == 3:
        return a.new_empty((a.shape[0], a.shape[1], n), dtype=dt)
    q = 16 // _ITEMSIZE[name]
    ldd = -(-n // q) * q
    if ldd < q:
        ldd = q
    return a.new_empty_strided((a.shape[0], n), (ldd, 1), dtype=dt)


def _attention_impl(q, k, v, causal=False, scale=None):
    from .attention.launch import attention

    return attention(q, k, v, causal=causal, scale=scale)


def _attention_fake(q, k, v, causal=False, scale=None):
    return sys.modules["torch"].empty_like(q)


def register_torch_ops(only_if_imported: bool = False) -> bool:
    """Define ``torch.ops.ptxgen.gemm`` (once per process). ``only_if_imported``: do nothing unless torch is
    already imported. True when the operator is (now) registered."""
    if _STATE.get("done"):
        return True
    torch = sys.modules.get("torch")
    if torch is None:
        if only_if_imported:
            return False
        import torch
    with _LOCK:
        if _STATE.get("done"):
            return True
        lib = torch.library.Library("ptxgen", "DEF")
        lib.define(SCHEMA)
        lib.impl("gemm", _impl, "CUDA")
        torch.library.register_fake("ptxgen::gemm", _fake, lib=lib)
        lib.define(ATTENTION_SCHEMA)
        lib.impl("attention", _attention_impl, "CUDA")
        torch.library.register_fake("ptxgen::attention", _attention_fake, lib=lib)
        _STATE["lib"] = lib  # the registration lives as long as the Library object
        _STATE["done"] = True
    return True
