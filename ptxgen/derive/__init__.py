"""Pure-Python plans derived from a tile spec (imports only ``ptxgen.isa``), in five packages: ``tile`` (the spec, its
rules, the composer and the whole frozen plan), ``operands`` (shared-memory layouts, descriptors, TMA), ``roles`` (warp
roles, barriers, scheduling, the CTA pair), ``store`` (epilogues, the fused chain, split-K, stream-K) and ``scaled``
(block-scaled FP8 and the tcgen05 scale factors)."""
