"""A user's kernel: a jinja2 template plus plans -> rendered, compiled by NVRTC (cached), SASS-gated, launchable.

:class:`Kernel` is the declaration (name, template text or file, parameters, block, shared memory, the SASS counts
to expect, the plans the template reads); :func:`build` renders it with the project's jinja2 environment
(``StrictUndefined``: a misspelt name is an error, not an empty string; ``{% import "author/pieces.cuh.j2" %}``
works), compiles it through the project's compile cache (ptxgen.runtime.compile.cache), checks the SASS
(ptxgen.runtime.compile.sass.check_counts) and returns a :class:`BuiltKernel`. Launching goes through the project's
launch pieces: the pre-packed parameter block and tensor-map slots (ptxgen.runtime.launch.params), the driver's
cuLaunchKernel and cuTensorMapEncodeTiled (ptxgen.runtime.launch.fastlaunch), the array readers (ptxgen.runtime.launch.arrays).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ..emit.env import environment
from ..isa.types import Arch, SpecError
from ..runtime.compile.sass import CountReport
from .launch import Binder
from .operand import OperandPlan

PARAM_KINDS = ("tensormap", "ptr", "i32", "u32", "f32", "u64")
C_TYPES = {"bf16": "unsigned short", "f16": "unsigned short", "f32": "float", "s32": "int", "u8": "unsigned char",
           "s8": "signed char", "e4m3": "unsigned char", "e5m2": "unsigned char"}
SCALAR_C = {"i32": "int", "u32": "unsigned", "f32": "float", "u64": "unsigned long long"}


class AuthorError(SpecError):
    """A refused kernel declaration: names the field, the value and the rule (a SpecError: the CLI exits 2)."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter. ``tensormap``: the TMA map of ``operand``'s global tensor (passed as an array: the
    map is built from its shape and row stride); ``ptr``: an array of ``dtype``; scalars: i32, u32, f32, u64."""

    name: str
    kind: str
    operand: OperandPlan | None = None
    dtype: str | None = None
    const: bool = True

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise AuthorError(f"param {self.name}.kind", self.kind, "a kernel parameter is a tensor map, a pointer or a scalar", ", ".join(PARAM_KINDS))
        if (self.kind == "tensormap") != (self.operand is not None):
            raise AuthorError(f"param {self.name}.operand", self.operand, "a tensormap parameter names its operand plan (and only it)", "an OperandPlan")
        if self.kind == "ptr" and self.dtype not in C_TYPES:
            raise AuthorError(f"param {self.name}.dtype", self.dtype, "a pointer parameter names its element type", ", ".join(C_TYPES))

    @property
    def decl(self) -> str:
        if self.kind == "tensormap":
            return f"const __grid_constant__ TmaMap {self.name}"
        if self.kind == "ptr":
            return f"{'const ' if self.const else ''}{C_TYPES[self.dtype]}* __restrict__ {self.name}"
        return f"{SCALAR_C[self.kind]} {self.name}"


@dataclass(frozen=True)
class Kernel:
    name: str
    template: str | Path  # template text, or a Path to a template file
    params: tuple[Param, ...]
    block: tuple[int, int, int]
    shared_bytes: int
    expect_sass: dict  # opcode -> count in the whole kernel, e.g. {"HGMMA": 8}
    context: dict = field(default_factory=dict)  # frozen plans and values the template reads, by name
    arch: Arch = Arch.SM90A
    options: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.name.isidentifier():
            raise AuthorError("name", self.name, "the kernel's name is its C entry point", "a C identifier")
        if isinstance(self.arch, str):
            object.__setattr__(self, "arch", Arch(self.arch))
        if not self.expect_sass or not all(isinstance(n, int) and n >= 0 for n in self.expect_sass.values()):
            raise AuthorError("expect_sass", self.expect_sass, "the SASS gate needs the MMA instruction counts to expect",
                              'e.g. {"HGMMA": 8}')
        for key, value in self.context.items():
            if not _frozen(value):
                raise AuthorError(f"context[{key!r}]", type(value).__name__, "templates receive frozen values only (frozen "
                                  "dataclasses, tuples, numbers, strings, enums): no layout math or mutable state in a template",
                                  "a plan from ptxgen.author, a tuple, a number or a string")
        object.__setattr__(self, "context", MappingProxyType(dict(self.context)))
        object.__setattr__(self, "expect_sass", MappingProxyType(dict(self.expect_sass)))

    @property
    def signature(self) -> str:
        """The parameter list, rendered: ``{{ kernel.signature }}`` in the template."""
        return ", ".join(p.decl for p in self.params)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def template_text(self) -> str:
        if isinstance(self.template, Path):
            try:
                return self.template.read_text()
            except OSError as e:
                raise AuthorError("template", str(self.template), f"the template file cannot be read ({e.strerror})", "a readable file") from None
        return self.template

    def render(self) -> str:
        import jinja2

        try:
            return environment().from_string(self.template_text()).render(kernel=self, **self.context)
        except jinja2.UndefinedError as e:
            raise AuthorError("template", self.name, f"it uses a name the kernel does not provide ({e.message})",
                              "the names of Kernel.context, `kernel`, and the macros it imports") from None
        except jinja2.TemplateSyntaxError as e:
            raise AuthorError("template", f"{self.name} line {e.lineno}", f"jinja2 syntax: {e.message}", "a valid template") from None


def _frozen(v) -> bool:
    if isinstance(v, (str, int, float, bool, enum.Enum, type(None))):
        return True
    if isinstance(v, tuple):
        return all(_frozen(x) for x in v)
    return dataclasses.is_dataclass(v) and not isinstance(v, type) and v.__dataclass_params__.frozen


class BuiltKernel:
    """A user's kernel, compiled and SASS-checked: ``source``, ``ptx``, ``cubin``, ``sass`` (a CountReport),
    ``cache_hit``. Call it as ``k(*args, grid=(x, y, z), stream=None)`` with one argument per Param, in order."""

    def __init__(self, kernel: Kernel, source: str, compiled, sass: CountReport, cache_hit: bool):
        self.kernel = kernel
        self.name = kernel.name
        self.source = source
        self.ptx: str = compiled.ptx
        self.cubin: bytes = compiled.cubin
        self.log: str = compiled.log
        self.sass = sass
        self.cache_hit = cache_hit
        self._binder = Binder(kernel.name, kernel.params, kernel.arch, self.cubin, kernel.block, kernel.shared_bytes)

    def __call__(self, *args, grid: tuple[int, int, int], stream=None):
        return self._binder.launch(args, grid, stream)

    def __repr__(self) -> str:
        return f"<BuiltKernel {self.name}: {self.kernel.arch.value}, {self.kernel.threads} threads, {self.kernel.shared_bytes} B shared>"


class SassGateError(RuntimeError):
    """The compiled kernel's SASS is not what its author said it must be (exit 1 in the CLI and the example)."""

    def __init__(self, report: CountReport):
        self.report = report
        super().__init__(f"SASS check failed for {report.kernel}: " + "; ".join(report.problems))


def build(kernel: Kernel, *, cache: bool = True, gate: bool = True) -> BuiltKernel:
    """Render, compile (NVRTC through the compile cache unless ``cache`` is False) and SASS-check ``kernel``.
    ``gate``: raise SassGateError when the check fails (False: return the kernel with its failing report)."""
    from ..runtime.compile.cache import CacheResult, compile_cached, sass_dumps
    from ..runtime.compile.sass import check_counts
    from ..runtime.compile.toolchain import compile_cuda

    source = kernel.render()
    if cache:
        res = compile_cached(source, kernel.name, kernel.arch.value, tuple(kernel.options))
    else:
        res = CacheResult(compile_cuda(source, kernel.name, kernel.arch.value, tuple(kernel.options)), "", False, None)
    dump, resources = sass_dumps(res)
    report = check_counts(kernel.name, dict(kernel.expect_sass), dump, resources)
    if gate and not report.ok:
        raise SassGateError(report)
    return BuiltKernel(kernel, source, res.compiled, report, res.hit)
