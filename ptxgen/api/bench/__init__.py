"""``ptxgen bench --api``: what a PyTorch user sees when calling ptxgen, against torch in the same process, for the
plain GEMM (``bench_api``) and for every other door (``bench_ops``, ``--op OP``)."""
