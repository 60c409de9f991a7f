"""``ptxgen.nn.Linear`` and ``ptxgen.nn.GroupedLinear``: torch modules whose products are ``torch.ops.ptxgen``
operators, so that autograd and ``torch.compile(fullgraph=True)`` go through ptxgen's kernels (CUDA tensors) or the
operators' CPU references (CPU tensors)."""

from __future__ import annotations

import math

import torch

from ..ops.opsref import activation as _torch_activation
from ..ops.opsref import canonical_activation
from ..ops.torch_ops import register_torch_ops

register_torch_ops()

_NEEDS_Z = ("gelu_tanh", "gelu_erf", "silu")  # activations whose derivative needs the pre-activation


class Linear(torch.nn.Linear):
    """``y = act(x @ weight.T + bias)`` with nn.Linear's parameters (weight out_features x in_features, bias
    out_features) and the bias and activation fused into the GEMM's epilogue.

    ``activation``: None, "relu", "gelu" (= "gelu_tanh", torch's approximate="tanh"), "gelu_erf" or "silu".
    ``save_preactivation`` (default True): when a gradient will be needed for gelu/silu, the GEMM runs with the bias
    fused and the activation runs in torch, which keeps the pre-activation for the backward pass (one element-wise
    pass over y); False fuses the activation too and the backward recomputes the pre-activation (one more GEMM).
    Without a gradient (inference, ``torch.no_grad``) bias and activation are always fused into one kernel.
    ``x`` may have any leading dimensions (flattened into the GEMM's rows); the output's rows are padded to 16 bytes
    in memory where out_features is not a multiple of 16 bytes (as ptxgen.gemm writes them)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str | None = None,
                 device=None, dtype=None, save_preactivation: bool = True):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = canonical_activation(activation)  # an unknown name fails here, not at the first call
        self.save_preactivation = save_preactivation

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        act = self.activation
        grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, self.weight, self.bias))
        if act in _NEEDS_Z and grad and self.save_preactivation:
            y = _torch_activation(torch.ops.ptxgen.gemm(x2, self.weight, None, self.bias, None), act)
        else:
            y = torch.ops.ptxgen.gemm(x2, self.weight, None, self.bias, None if act == "none" else act)
        return y.reshape(*lead, self.out_features)


class GroupedLinear(torch.nn.Module):
    """An expert bank: ``weight`` num_groups x out_features x in_features (each ``weight[g]`` an nn.Linear weight);
    ``forward(x, offs)``: rows of group g of the output are ``x[rows g] @ weight[g].T``, with ``x`` M_total x
    in_features, the groups' rows stacked, and ``offs`` int32 on x's device, the groups' cumulative row ends (as
    ``torch._grouped_mm`` and ``ptxgen.grouped_gemm`` take them; never read on the host). One launch forward.

    Backward: dx through ptxgen's grouped kernel with the weights read N-major (``weight.transpose(1, 2)``), rows past
    offs[-1] get 0; dweight through ``torch.ops.ptxgen.grouped_gemm_k``, the K-grouped product (ptxgen's K-grouped
    kernel on an sm_90a GPU, reading dy.t() and x.t() MN-major; torch's ``torch._grouped_mm`` for what it refuses).
    Output rows past offs[-1] are unspecified.
    No bias (mixture-of-experts layers have none)."""

    def __init__(self, num_groups: int, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        self.num_groups, self.in_features, self.out_features = num_groups, in_features, out_features
        self.weight = torch.nn.Parameter(torch.empty((num_groups, out_features, in_features), device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Each expert as nn.Linear initialises its weight (uniform in +-1/sqrt(in_features))."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
        torch.nn.init.uniform_(self.weight, -bound, bound)

    def extra_repr(self) -> str:
        return f"num_groups={self.num_groups}, in_features={self.in_features}, out_features={self.out_features}"

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return torch.ops.ptxgen.grouped_gemm(x, self.weight, offs)
