"""Templates and files: the jinja2 environment (``env``, ``sources``), the composition of a kernel's render context
(``render``) from the template pieces' contexts (``views``), the C expressions they share (``cexpr``), the probe
kernels (``probe_render``), the generated/ tree (``generated``) and the pictures (``pictures``). Never the runtime,
never CUDA."""
