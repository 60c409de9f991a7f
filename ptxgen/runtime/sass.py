"""Check a compiled kernel's SASS against what its spec implies.

* the MMA opcode of the instruction family and type (UTCHMMA/UTCQMMA/UTCIMMA for tcgen05,
  HGMMA/QGMMA/IGMMA for wgmma);
* exactly BK / K_mma of them inside the main loop (the smallest backward branch that encloses every
  MMA), and none outside it;
* tcgen05: the epilogue's LDTM (tcgen05.ld) loads and the commits (UTCBAR);
* the loader: TMA loads (UTMALDG) or cp.async (LDGSTS) with their mbarrier arrivals;
* the pipeline: mbarrier waits (SYNCS.PHASECHK); with setmaxnreg, USETMAXREG and the launch register
  count the budgets assume;
* no local memory: no LDL/STL and zero LOCAL/STACK bytes in the resource usage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..derive.kernel import plan_kernel
from ..derive.spec import TileSpec
from ..isa.types import Arch, Epilogue, Loader
from .toolchain import run_tool

_TCGEN05_OPCODE = {"f16": "UTCHMMA", "tf32": "UTCHMMA", "f8f6f4": "UTCQMMA", "i8": "UTCIMMA"}
_WGMMA_OPCODE = {"f16": "HGMMA", "tf32": "HGMMA", "f8f6f4": "QGMMA", "i8": "IGMMA"}
_MMA_RE = re.compile(r"\b(UTC[A-Z]*MMA|[HQIB]GMMA)\b")
_MMA_FULL_RE = re.compile(r"\b[QI]GMMA\.[\w.]+")  # QGMMA.64x64x32.F32.E4M3.E5M2, IGMMA.64x64x32.U8.S8
_LINE_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_BRA_RE = re.compile(r"\bBRA(?:\.[A-Z.]+)?\s+(?:!?U?P\w+,\s*)?0x([0-9a-f]+)")


def expected_wgmma_types(spec: TileSpec) -> str | None:
    """The ``.A.B`` type suffix every QGMMA/IGMMA of an 8-bit wgmma kernel must carry (e.g. ``.E4M3.E5M2``,
    ``.U8.S8``); None where the SASS mnemonic does not spell both input types (tcgen05: they are in the
    instruction descriptor; 16/32-bit wgmma)."""
    if spec.arch is not Arch.SM90A or spec.dtype.bits != 8:
        return None
    return f".{spec.dtype.value.upper()}.{spec.b_dtype.value.upper()}"


def expected_mma_opcode(spec: TileSpec) -> str:
    table = _TCGEN05_OPCODE if spec.arch is Arch.SM100A else _WGMMA_OPCODE
    return table[spec.dtype.kind]


@dataclass
class SassReport:
    opcode: str
    mma_total: int
    mma_in_loop: int
    expected_per_iteration: int
    ldtm: int
    structure: dict
    registers: int
    local_bytes: int
    stack_bytes: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        s = f"{self.mma_in_loop} x {self.opcode} per main-loop iteration (expected {self.expected_per_iteration})"
        if self.ldtm:
            s += f", {self.ldtm} LDTM"
        s += "".join(f", {n} {name}" for name, n in self.structure.items())
        return s + f", {self.registers} registers, local {self.local_bytes} B"


def parse_instructions(sass: str) -> list[tuple[int, str]]:
    return [(int(m.group(1), 16), m.group(2).strip()) for m in _LINE_RE.finditer(sass)]


def check_sass(
    spec: TileSpec, cubin: bytes, sass: str | None = None, resources: str | None = None, relocatable: bool = False
) -> SassReport:
    """``relocatable``: the cubin came from a linker (nvJitLink), which drops setmaxnreg to keep compilation units
    compatible (ptxas C7504); then setmaxnreg and the launch register count are not required."""
    sass = run_tool("cuobjdump", ["--dump-sass"], cubin) if sass is None else sass
    resources = run_tool("cuobjdump", ["--dump-resource-usage"], cubin) if resources is None else resources
    instrs = parse_instructions(sass)
    want = expected_mma_opcode(spec)
    expected = spec.mmas_per_k_tile * (spec.slabs_per_consumer if spec.arch is Arch.SM90A else 1)
    mmas = [(addr, m.group(1)) for addr, text in instrs for m in [_MMA_RE.search(text)] if m]
    problems = []
    other = sorted({op for _, op in mmas if op != want})
    if other:
        problems.append(f"unexpected MMA opcode(s) {', '.join(other)}; {spec.arch.value} {spec.dtype.value} should use {want}")
    types = expected_wgmma_types(spec)
    if types:
        wrong = sorted({m.group(0) for _, text in instrs for m in [_MMA_FULL_RE.search(text)] if m and not m.group(0).endswith(types)})
        if wrong:
            problems.append(f"MMA input types {', '.join(wrong)}; A {spec.dtype.value} x B {spec.b_dtype.value} should end in {types}")
    in_loop = 0
    if mmas:
        first, last = mmas[0][0], mmas[-1][0]
        loops = []
        for addr, text in instrs:
            b = _BRA_RE.search(text)
            if b:
                target = int(b.group(1), 16)
                if target <= first and addr >= last:
                    loops.append((addr - target, target, addr))
        if loops:
            _, lo, hi = min(loops)
            in_loop = sum(1 for a, op in mmas if lo <= a <= hi and op == want)
        else:
            problems.append("no loop encloses the MMAs: the main loop was not found")
    if in_loop != expected:
        slabs = f" x {spec.slabs_per_consumer} slabs" if expected != spec.mmas_per_k_tile else ""
        problems.append(f"{in_loop} {want} in the main loop, expected BK / K{slabs} = {spec.bk} / {spec.k_per_mma}{slabs} = {expected}")
    if len(mmas) != in_loop:
        problems.append(f"{len(mmas) - in_loop} MMA instruction(s) outside the main loop")
    ldtm = _count(instrs, r"LDTM\b")
    if spec.arch is Arch.SM100A and ldtm == 0:
        problems.append("no LDTM (tcgen05.ld) in the epilogue")
    structure, more = _structure(spec, instrs, relocatable)
    problems += more
    local = sum(1 for _, text in instrs if re.match(r"(@!?U?P\w+\s+)?(LDL|STL)\b", text))
    if local:
        problems.append(f"{local} local-memory instruction(s) (LDL/STL): registers spilled")
    res = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|LOCAL):(\d+)", resources)}
    entry = plan_kernel(spec).pipeline.entry_registers
    if entry and not relocatable and res.get("REG", 0) != entry:
        problems.append(f"{res.get('REG', 0)} registers at launch, but the setmaxnreg budgets assume {entry}")
    if res.get("LOCAL", 0) or res.get("STACK", 0):
        problems.append(f"local memory in use: LOCAL {res.get('LOCAL', 0)} B, STACK {res.get('STACK', 0)} B")
    return SassReport(
        opcode=want,
        mma_total=len(mmas),
        mma_in_loop=in_loop,
        expected_per_iteration=expected,
        ldtm=ldtm,
        structure=structure,
        registers=res.get("REG", 0),
        local_bytes=res.get("LOCAL", 0),
        stack_bytes=res.get("STACK", 0),
        problems=problems,
    )



def _count(instrs: list[tuple[int, str]], opcode_re: str) -> int:
    pat = re.compile(r"(@!?U?P\w+\s+)?" + opcode_re)
    return sum(1 for _, text in instrs if pat.match(text))


# What the warp-specialized structure must show in SASS, per piece: (name, opcode regex, when required).
def _structure(spec: TileSpec, instrs: list[tuple[int, str]], relocatable: bool) -> tuple[dict, list[str]]:
    pipe = plan_kernel(spec).pipeline
    tma = spec.loader is Loader.TMA
    wanted = [
        ("mbarrier waits", r"SYNCS\.PHASECHK", True),
        ("TMA loads", r"UTMALDG", tma),
        ("cp.async copies", r"LDGSTS", not tma),
        ("cp.async mbarrier arrivals", r"ARRIVES\.LDGSTSBAR", not tma),
        ("setmaxnreg", r"USETMAXREG", any(r.registers for r in pipe.roles) and not relocatable),
        ("tcgen05.commit", r"UTCBAR", spec.arch is Arch.SM100A),
        ("stmatrix", r"STSM", spec.epilogue is Epilogue.TMA),
        ("TMA stores", r"UTMASTG", spec.epilogue is Epilogue.TMA),
        # a 2-CTA cluster: the shared operand's share goes out as a multicast (cuobjdump 13: UTMALDG.2D.MULTICAST),
        # and barrier.cluster.arrive/wait show as UCGABAR_ARV / UCGABAR_WAIT
        ("TMA multicast loads", r"UTMALDG\.\w+\.MULTICAST", spec.cluster.size > 1),
        ("cluster barriers", r"UCGABAR_WAIT", spec.cluster.size > 1),
    ]
    found, problems = {}, []
    for name, pattern, required in wanted:
        n = _count(instrs, pattern)
        if required:
            found[name] = n
            if n == 0:
                problems.append(f"no {name} ({pattern.replace(chr(92), '')}) in the SASS")
    return found, problems
