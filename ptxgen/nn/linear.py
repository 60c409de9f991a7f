"""``ptxgen.nn.Linear`` and ``ptxgen.nn.GroupedLinear``: torch modules whose products are ``torch.ops.ptxgen``
operators, so that autograd and ``torch.compile(fullgraph=True)`` go through ptxgen's kernels (CUDA tensors) or the
operators' CPU references (CPU tensors)."""

from __future__ import annotations

import math

import torch

from ..ops.opsref import canonical_activation
from ..ops.torch_ops import register_torch_ops

register_torch_ops()

_PRE = "_ptxgen_preactivation"  # attribute of a Linear's output: (z, activation, version), for the next Linear


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _input_preactivation(x: torch.Tensor, rows: int, cols: int):
    """(z, activation) where ``x`` is, unchanged since, the output of a ptxgen Linear with an activation whose
    pre-activation z was saved (``act(z)`` == x): then this layer's dX GEMM computes the gradient of z directly."""
    rec = getattr(x, _PRE, None)
    if rec is None or rec[2] != x._version or tuple(rec[0].shape) != (rows, cols):
        return None
    return rec[0], rec[1]


class Linear(torch.nn.Linear):
    """``y = act(x @ weight.T + bias)`` with nn.Linear's parameters (weight out_features x in_features, bias
    out_features) and the bias and activation fused into the GEMM's epilogue.

    ``activation``: None, "relu", "gelu" (= "gelu_tanh", torch's approximate="tanh"), "gelu_erf" or "silu".
    Training (a gradient will be needed): ``torch.ops.ptxgen.gemm_aux``, one kernel that writes y and the
    pre-activation z (the chain's ``aux``), so the backward recomputes nothing. ``fuse_input_derivative=True``: where
    this layer's input is the output of another ptxgen Linear with an activation (eager mode, the output unchanged
    since), the backward computes that layer's dz in this layer's dX GEMM, the derivative in its epilogue (the chain's
    ``dact``; docs/training.md); off by default, since the element-wise pass measured 0.7-1.3% faster in the 4-layer MLP
    step on the H100 (runs/2026-12-06-h100-new-forms).
    ``save_preactivation=False``: the activation fused without z; the backward recomputes z (one more GEMM).
    Without a gradient (inference, ``torch.no_grad``) bias and activation are fused into one kernel, no z.
    ``x`` may have any leading dimensions (flattened into the GEMM's rows); the output's rows are padded to 16 bytes
    in memory where out_features is not a multiple of 16 bytes (as ptxgen.gemm writes them)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str | None = None,
                 device=None, dtype=None, save_preactivation: bool = True, fuse_input_derivative: bool = False):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = canonical_activation(activation)  # an unknown name fails here, not at the first call
        self.save_preactivation = save_preactivation
        self.fuse_input_derivative = fuse_input_derivative

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation}"

    def _shaped(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The GEMM's M x N output with ``x``'s leading dimensions (a 2-D ``x``: ``y`` itself, no view to
        differentiate)."""
        return y if x.dim() == 2 else y.reshape(*x.shape[:-1], self.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        act = self.activation
        grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, self.weight, self.bias))
        if not (grad and self.save_preactivation):
            y = torch.ops.ptxgen.gemm(x2, self.weight, None, self.bias, None if act == "none" else act)
            return self._shaped(y, x)
        eager = not _compiling()
        pre = _input_preactivation(x, *x2.shape) if eager and self.fuse_input_derivative else None
        if act == "none" and pre is None:
            return self._shaped(torch.ops.ptxgen.gemm(x2, self.weight, None, self.bias, None), x)
        y, z = torch.ops.ptxgen.gemm_aux(x2, self.weight, None, self.bias, act, *(pre or (None, None)))
        y = self._shaped(y, x)
        if eager and act != "none":
            setattr(y, _PRE, (z, act, y._version))
        return y


class GroupedLinear(torch.nn.Module):
    """An expert bank: ``weight`` num_groups x out_features x in_features (each ``weight[g]`` an nn.Linear weight);
    ``forward(x, offs)``: rows of group g of the output are ``x[rows g] @ weight[g].T``, with ``x`` M_total x
    in_features, the groups' rows stacked, and ``offs`` int32 on x's device, the groups' cumulative row ends (as
    ``torch._grouped_mm`` and ``ptxgen.grouped_gemm`` take them; never read on the host). One launch forward.

    Backward: dx through ptxgen's grouped kernel with the weights read N-major (``weight.transpose(1, 2)``), rows past
    the last group get 0; dweight through ``torch.ops.ptxgen.grouped_gemm_k``, the K-grouped product (ptxgen's K-grouped
    kernel; torch's ``torch._grouped_mm`` with ``ptxgen.ops.torch_ops.K_GROUPED_KERNEL`` cleared).
    Output rows past offs[-1] are unspecified.
    No bias (mixture-of-experts layers have none).

    ``fp8="rowwise"``: each forward casts ``x``'s rows and each expert's weight rows to e4m3 with one f32 scale a row
    (dynamic: the row's largest magnitude maps to 448) and runs ``torch.ops.ptxgen.scaled_grouped_gemm`` (ptxgen's
    M-grouped row-wise FP8 kernel); the backward passes the gradient through the casts unchanged, dx and dweight from
    the quantized values by bf16 grouped products (``torch.ops.ptxgen.float8_grouped_linear``, ptxgen.ops.float8). The
    output has ``x``'s dtype. ``fp8_backward=True`` (with ``fp8="rowwise"``): dx and dweight in row-wise FP8 too (dy,
    the weights and x cast along each backward product's K; ptxgen.ops.float8.fp8_backward_grads)."""

    def __init__(self, num_groups: int, in_features: int, out_features: int, device=None, dtype=None,
                 fp8: str | None = None, fp8_backward: bool = False):
        super().__init__()
        if fp8 not in (None, "rowwise"):
            raise ValueError(f"fp8={fp8!r}: None (the input's dtype) or 'rowwise' (e4m3, one scale a row)")
        if fp8_backward and fp8 is None:
            raise ValueError("fp8_backward=True casts the backward products to FP8: it needs fp8='rowwise'")
        self.num_groups, self.in_features, self.out_features = num_groups, in_features, out_features
        self.fp8, self.fp8_backward = fp8, fp8_backward
        self.weight = torch.nn.Parameter(torch.empty((num_groups, out_features, in_features), device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Each expert as nn.Linear initialises its weight (uniform in +-1/sqrt(in_features))."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
        torch.nn.init.uniform_(self.weight, -bound, bound)

    def extra_repr(self) -> str:
        fp8 = f", fp8={self.fp8}" + (", fp8_backward=True" if self.fp8_backward else "") if self.fp8 else ""
        return f"num_groups={self.num_groups}, in_features={self.in_features}, out_features={self.out_features}{fp8}"

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        if self.fp8:
            return torch.ops.ptxgen.float8_grouped_linear(x, self.weight, offs, self.fp8_backward)[0]
        return torch.ops.ptxgen.grouped_gemm(x, self.weight, offs)
