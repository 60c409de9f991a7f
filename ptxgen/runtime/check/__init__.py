"""What runs on a GPU to check or measure a kernel: ``validate`` (with ``vresult``, the block-scaled ``bsvalidate``
and the hang-safe ``batch``), the descriptor and TMA probes (``probe``, ``probe_tma``), ``selftest`` (the truth ladder
in order) and ``bench`` (against cuBLAS).

Uses ``runtime.compile`` and ``runtime.launch``; never ``runtime.choose``."""
