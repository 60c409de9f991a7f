"""The independent CPU models that must agree with ``ptxgen.derive`` and share no code with the writers: ``layouts``
(where elements go), ``numerics`` (what values come out) and ``sim`` (the pipeline simulation) import nothing of ptxgen
but each other; ``bridges`` feeds them the derived plans (the L1 checks)."""
