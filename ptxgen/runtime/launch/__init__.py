"""Running compiled code: the checked driver layer (``gpu``), problem checks, arguments and grids from the kernel ABI
(``launch``, ``grouped`` for grouped GEMMs, ``kgrouped`` for K-grouped ones), TMA tensor maps (``tensormap``), pre-packed parameter blocks
(``params``), the hot path's driver calls and the compiled launcher (``fastlaunch``; the C extension ``_launcher``
from ``_launcher*.c``), device arrays of any library (``arrays``), torch's tensor metadata (``torchmeta``, from
``_torchmeta.cpp``) and the shared error type (``errors``).

Imports nothing of ``runtime.compile``, ``runtime.check`` or ``runtime.choose``."""
