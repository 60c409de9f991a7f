"""The tile spec and the whole plan of one kernel: the spec's fields (``fields``), the spec and its parser (``spec``),
its legality rules (``rules``, ``rules_operand`` for each operand, ``rules_scaled`` for the block-scaled kinds), the derived value with its formula and
reason (``derived``), the composer of everything derived for a spec (``layout``), the frozen plan of a kernel
(``kernel``), its ABI (``abi``) and the human-readable explanation (``explain``)."""
