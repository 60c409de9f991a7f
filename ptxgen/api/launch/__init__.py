"""Launching from the API: streams, devices and contexts (``streams``), the prepared launch of one dispatch key, built
once by the slow path and reused by the hot path (``launchplan``), the dispatch keys and the compiled launcher's hot
tables that find it (``hotkeys``), and each door's prepared launches: fused epilogue
(``fusedlaunch``), grouped (``groupedlaunch``), block FP8 (``fp8launch``) and swap-AB (``swapab``)."""
