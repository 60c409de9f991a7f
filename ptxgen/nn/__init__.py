"""Drop-in torch modules on ptxgen's kernels, with autograd (docs/training.md).

    ptxgen.nn.Linear(in_features, out_features, bias=True, activation=None)   # nn.Linear's weight layout
    ptxgen.nn.GroupedLinear(num_groups, in_features, out_features)            # an expert bank: (x, offs) -> y

Importing this package imports torch and registers ``torch.ops.ptxgen``.
"""

from .linear import GroupedLinear, Linear

__all__ = ["GroupedLinear", "Linear"]
