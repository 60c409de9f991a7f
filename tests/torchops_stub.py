"""torch with some ``torch.ops.ptxgen`` operators replaced: what a module that reaches torch through its own ``_torch()``
sees when a test puts this in its place (spies and controls of the autograd formulas)."""

from __future__ import annotations


def torch_with_ops(torch, **ops):
    """An object that is ``torch`` except for ``.ops.ptxgen.NAME``, which is ``ops[NAME]`` where given."""

    class _Ptxgen:
        def __getattr__(self, name):
            return ops.get(name) or getattr(torch.ops.ptxgen, name)

    class _Ops:
        ptxgen = _Ptxgen()

    class _Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        ops = _Ops()

    return _Torch()
