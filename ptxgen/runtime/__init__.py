"""Everything that needs NVRTC or a GPU, in four packages that import downwards only (tests/test_layering.py):

* ``compile``: a rendered kernel to checked machine code (NVRTC and the other toolchains, the cubin cache, the build
  memo, the SASS and PTX-order checks, a kernel's files);
* ``launch``: running compiled code (the driver layer, problem checks and arguments from the ABI, tensor maps,
  parameter blocks, the compiled launcher ``launch._launcher``, array and torch metadata readers);
* ``check``: what runs on a GPU to check or measure a kernel (validate, the probes, selftest, bench); uses compile and
  launch;
* ``choose``: which kernel runs a problem on a device; may use the three above.

``commands`` is the CLI glue of the GPU commands (validate, probe, selftest, bench, tune) over all four.
"""
