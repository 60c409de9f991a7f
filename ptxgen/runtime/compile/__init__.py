"""A rendered kernel to checked machine code: NVRTC and the CUDA binary tools (``toolchain``), other CUDA compilers
(``toolchains``), the on-disk cubin cache (``cache``), the build memo (``buildmemo``), the SASS and PTX-order checks
(``sass``, ``ptxorder``), a kernel's files (``artifacts``) and a post-compile SASS patch (``ffma_yield``).

Needs no GPU; imports nothing of ``runtime.launch``, ``runtime.check`` or ``runtime.choose``."""
