"""The one compiled piece of ptxgen: ``ptxgen.runtime.launch._launcher``, the hot path of a prepared launch in C.

Everything else is configured in pyproject.toml. The extension uses only the CPython stable ABI (3.11+) and
no CUDA headers (libcuda is dlopen'ed at first use). It is optional: where no C compiler is found the build
goes on without it and ptxgen launches through ctypes instead (``ptxgen.runtime.launch.fastlaunch``), with the same
results. Set ``PTXGEN_NO_EXTENSION=1`` to leave it out on purpose.
"""

import os
import sys

from setuptools import Extension, setup

# The extension's C files, split by responsibility (_launcher.h says which does what); one module, one .so.
LAUNCHER_SOURCES = [
    "ptxgen/runtime/launch/_launcher.c",
    "ptxgen/runtime/launch/_launcher_type.c",
    "ptxgen/runtime/launch/_launcher_patch.c",
    "ptxgen/runtime/launch/_launcher_driver.c",
    "ptxgen/runtime/launch/_launcher_hot.c",
    "ptxgen/runtime/launch/_launcher_hottypes.c",
]
LAUNCHER_HEADERS = ["ptxgen/runtime/launch/_launcher.h"]

ext_modules = []
if not os.environ.get("PTXGEN_NO_EXTENSION"):
    ext_modules.append(
        Extension(
            "ptxgen.runtime.launch._launcher",
            LAUNCHER_SOURCES,
            depends=LAUNCHER_HEADERS,  # a changed header rebuilds every file; the sdist carries it
            optional=True,
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            libraries=["dl"] if sys.platform.startswith("linux") else [],
            extra_compile_args=["-O2"] if sys.platform != "win32" else [],
        )
    )

setup(ext_modules=ext_modules, options={"bdist_wheel": {"py_limited_api": "cp311"}})
