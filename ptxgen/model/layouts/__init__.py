"""Independent models of where each element goes (they import nothing of ptxgen but each other): what an MMA reads
through a descriptor (``readmodel``) and from a CTA pair (``pairmodel``), what a TMA copy writes (``tmamodel``), the
register <-> matrix maps of the fragments (``fragmodel``), where the direct stores put D (``outmodel``), where a fused
epilogue's operands come from (``epimodel``), the grouped GEMM's work (``groupmodel``), the K-grouped GEMM's K rows
and K-tail zeroing (``kgroupmodel``), the attention forward's
layouts and orders (``attnmodel``) and which tensor-memory lanes and columns hold its S, P and O on Blackwell
(``tmemmodel``)."""
