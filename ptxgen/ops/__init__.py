"""The torch operators ``torch.ops.ptxgen.gemm``, ``grouped_gemm`` and ``grouped_gemm_k`` (``torch_ops``: defined with
``torch.library``, with fake implementations for ``torch.compile``), their autograd formulas (``opsgrad``) and their
plain-torch CPU references (``opsref``). Imports torch; ``ptxgen.register_torch_ops()`` is the public door."""
