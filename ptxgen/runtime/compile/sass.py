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

from ...derive.tile.kernel import plan_kernel
from ...derive.tile.spec import TileSpec
from ...isa.types import Arch, Epilogue, Loader
from .toolchain import run_tool

_TCGEN05_OPCODE = {"f16": "UTCHMMA", "tf32": "UTCHMMA", "f8f6f4": "UTCQMMA", "i8": "UTCIMMA",
                   # block-scaled (seen with NVRTC/ptxas of CUDA 13 on sm_100a): the MMA takes two more tmem[] operands,
                   # the scale factors of A and B; kind::mxf4nvf4 .scale_vec::4X prints UTCOMMA.4X
                   "mxf8f6f4": "UTCQMMA", "mxf4": "UTCOMMA", "mxf4nvf4": "UTCOMMA"}
_TMEM_OPERAND_RE = re.compile(r"\btmem\[")
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
    if spec.arch is Arch.SM100A:
        return _TCGEN05_OPCODE[spec.mma_kind]
    return _WGMMA_OPCODE[spec.dtype.kind]


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


def function_resources(resources: str) -> dict[str, dict[str, int]]:
    """cuobjdump --dump-resource-usage, per function: {name: {"REG": .., "STACK": .., "LOCAL": ..}}."""
    out: dict[str, dict[str, int]] = {}
    name = None
    for line in resources.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        if name is not None:
            vals = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|LOCAL):(\d+)", line)}
            if vals:
                out[name] = vals
                name = None
    return out


def parse_instructions(sass: str) -> list[tuple[int, str]]:
    return [(int(m.group(1), 16), m.group(2).strip()) for m in _LINE_RE.finditer(sass)]


def main_loop(instrs: list[tuple[int, str]], mma_addrs: list[int], any_mma: bool = False) -> tuple[int, int] | None:
    """(first, last) address of the main loop: the smallest backward branch's range that encloses every MMA (with
    ``any_mma``, e.g. peeled column halves: the smallest that encloses any), or None."""
    first, last = min(mma_addrs), max(mma_addrs)
    loops = []
    for addr, text in instrs:
        b = _BRA_RE.search(text)
        if b:
            target = int(b.group(1), 16)
            if (any(target <= a <= addr for a in mma_addrs) if any_mma else target <= first and addr >= last):
                loops.append((addr - target, target, addr))
    return min(loops)[1:] if loops else None


def main_loop_instructions(sass: str) -> list[str]:
    """The instructions of the main loop (the smallest loop around every MMA) of ``cuobjdump --dump-sass`` text."""
    instrs = parse_instructions(sass)
    loop = main_loop(instrs, [a for a, t in instrs if _MMA_RE.search(t)])
    if loop is None:
        raise ValueError("no loop encloses the MMAs")
    return [t for a, t in instrs if loop[0] <= a <= loop[1]]


@dataclass(frozen=True)
class _MmaCount:
    """How many MMA instructions the main loop holds (``in_loop``, ``expected`` of them) and how many lie outside it
    (``outside`` expected: K block 0 peeled, or an unrolled loop's remainder)."""

    expected: int
    outside: int
    halves: int  # block FP8 --fp8-overlap: two column halves' MMAs per K block
    unroll: int  # block FP8's K loop unrolled this many times
    group: int  # --promote G: K-tiles of a promotion group unrolled in the loop


def _mma_count(spec: TileSpec) -> _MmaCount:
    expected = spec.mmas_per_k_tile * (spec.slabs_per_consumer if spec.arch is Arch.SM90A else 1)
    bfp8 = plan_kernel(spec).block_fp8
    halves = 1 if bfp8 is None else bfp8.halves
    # --fp8-overlap halves / interleave: two column halves' MMAs per K block; with halves K block 0's issued before
    # the loop (derive.scaled.blockfp8 BlockFp8Plan.peeled)
    expected *= halves
    outside = expected if bfp8 is not None and bfp8.peeled else 0
    # a K loop unrolled u times (derive.scaled.blockfp8 k_loop_unroll): u K-tiles' MMAs in the loop, u - 1 in the remainder
    unroll = 1 if bfp8 is None else bfp8.k_loop_unroll
    # --promote G > 1: a promotion group's G K-tiles unrolled in the loop (templates/mma_blockfp8.cuh.j2), none outside it
    group = max(1, spec.promote)
    outside += expected * (unroll - 1)
    return _MmaCount(expected * unroll * group, outside, halves, unroll, group)


def _mma_problems(spec: TileSpec, n: _MmaCount, instrs: list[tuple[int, str]], want: str) -> tuple[list, int, list[str]]:
    """The MMAs (address, opcode), how many of them the main loop holds, and what is wrong with them: opcode, CTA
    group, input types, block-scale operands, count in and outside the main loop."""
    mmas = [(addr, m.group(1)) for addr, text in instrs for m in [_MMA_RE.search(text)] if m]
    problems = []
    other = sorted({op for _, op in mmas if op != want})
    if other:
        problems.append(f"unexpected MMA opcode(s) {', '.join(other)}; {spec.arch.value} {spec.dtype.value} should use {want}")
    problems += _cta_group_problems(spec, instrs)
    types = expected_wgmma_types(spec)
    if types:
        wrong = sorted({m.group(0) for _, text in instrs for m in [_MMA_FULL_RE.search(text)] if m and not m.group(0).endswith(types)})
        if wrong:
            problems.append(f"MMA input types {', '.join(wrong)}; A {spec.dtype.value} x B {spec.b_dtype.value} should end in {types}")
    problems += _block_scale_problems(spec, instrs)
    in_loop = 0
    if mmas:
        loop = main_loop(instrs, [a for a, _ in mmas], any_mma=bool(n.outside))
        if loop:
            lo, hi = loop
            in_loop = sum(1 for a, op in mmas if lo <= a <= hi and op == want)
        else:
            problems.append("no loop encloses the MMAs: the main loop was not found")
    if in_loop != n.expected:
        slabs = f" x {spec.slabs_per_consumer} slabs" if spec.slabs_per_consumer > 1 and spec.arch is Arch.SM90A else ""
        slabs += " x 2 column halves" if n.halves > 1 else ""
        slabs += f" x {n.unroll} (unrolled)" if n.unroll > 1 else ""
        slabs += f" x {n.group} K-tiles per promotion" if n.group > 1 else ""
        problems.append(f"{in_loop} {want} in the main loop, expected BK / K{slabs} = {spec.bk} / {spec.k_per_mma}{slabs} = {n.expected}")
    if len(mmas) - in_loop != n.outside:
        problems.append(f"{len(mmas) - in_loop} MMA instruction(s) outside the main loop"
                        + (f", expected {n.outside} (K block 0 peeled, or the unrolled loop's remainder)" if n.outside else ""))
    return mmas, in_loop, problems


def _resource_problems(spec: TileSpec, instrs: list[tuple[int, str]], resources: str, relocatable: bool) -> tuple[dict, list[str]]:
    """The kernel's registers and local memory (cuobjdump --dump-resource-usage) and what is wrong with them: spills,
    local memory in any function, a launch register count the setmaxnreg budgets do not assume."""
    problems = []
    local = sum(1 for _, text in instrs if re.match(r"(@!?U?P\w+\s+)?(LDL|STL)\b", text))
    if local:
        problems.append(f"{local} local-memory instruction(s) (LDL/STL): registers spilled")
    funcs = function_resources(resources)
    # the MMA kernel's own line (a module may hold other functions); local memory in any function counts
    res = dict(funcs.get(spec.kernel_name) or {k: int(v) for k, v in re.findall(r"\b(REG|STACK|LOCAL):(\d+)", resources)})
    for name, other in funcs.items():
        if name != spec.kernel_name and (other.get("LOCAL", 0) or other.get("STACK", 0)):
            problems.append(f"local memory in {name}: LOCAL {other.get('LOCAL', 0)} B, STACK {other.get('STACK', 0)} B")
    pipe = plan_kernel(spec).pipeline
    entry = pipe.entry_registers
    if entry and not relocatable and res.get("REG", 0) != entry:
        problems.append(f"{res.get('REG', 0)} registers at launch, but the setmaxnreg budgets assume {entry}")
    problems += _register_ceiling_problems(instrs, res.get("REG", 0), pipe, relocatable)
    if res.get("LOCAL", 0) or res.get("STACK", 0):
        problems.append(f"local memory in use: LOCAL {res.get('LOCAL', 0)} B, STACK {res.get('STACK', 0)} B")
    return res, problems


_REGISTER_RE = re.compile(r"\bR(\d+)\b")


def highest_register(instrs: list[tuple[int, str]]) -> int:
    """The highest general register index any instruction names (R0..R254; RZ is not counted), -1 for none."""
    return max((int(m) for _, text in instrs for m in _REGISTER_RE.findall(text)), default=-1)


def _register_ceiling_problems(instrs: list[tuple[int, str]], launch: int, pipe, relocatable: bool) -> list[str]:
    """A register the warps cannot own: past the launch count, or, with setmaxnreg, past the largest count a role
    raises to (the consumers' setmaxnreg.inc: ptxas allocates that branch up to it, isa.shapes.consumer_register_budget)."""
    raised = [r.registers for r in pipe.roles if r.registers] if pipe.entry_registers and not relocatable else []
    ceiling = max([launch, *raised])
    top = highest_register(instrs)
    if ceiling and top >= ceiling:
        return [f"register R{top} used, but no warp owns more than {ceiling} (launch {launch}"
                + (f", setmaxnreg up to {max(raised)})" if raised else ")")]
    return []


def check_sass(
    spec: TileSpec, cubin: bytes, sass: str | None = None, resources: str | None = None, relocatable: bool = False
) -> SassReport:
    """``relocatable``: the cubin came from a linker (nvJitLink), which drops setmaxnreg to keep compilation units
    compatible (ptxas C7504); then setmaxnreg and the launch register count are not required."""
    sass = run_tool("cuobjdump", ["--dump-sass"], cubin) if sass is None else sass
    resources = run_tool("cuobjdump", ["--dump-resource-usage"], cubin) if resources is None else resources
    instrs = parse_instructions(sass)
    want = expected_mma_opcode(spec)
    count = _mma_count(spec)
    mmas, in_loop, problems = _mma_problems(spec, count, instrs, want)
    ldtm = _count(instrs, r"LDTM\b")
    if spec.arch is Arch.SM100A and ldtm == 0:
        problems.append("no LDTM (tcgen05.ld) in the epilogue")
    structure, more = _structure(spec, instrs, relocatable)
    problems += more
    res, more = _resource_problems(spec, instrs, resources, relocatable)
    problems += more
    return SassReport(
        opcode=want,
        mma_total=len(mmas),
        mma_in_loop=in_loop,
        expected_per_iteration=count.expected,
        ldtm=ldtm,
        structure=structure,
        registers=res.get("REG", 0),
        local_bytes=res.get("LOCAL", 0),
        stack_bytes=res.get("STACK", 0),
        problems=problems,
    )



def _block_scale_problems(spec: TileSpec, instrs: list[tuple[int, str]]) -> list[str]:
    """Block-scaled MMAs carry the scale-factor TMEM operands (D, SFA, SFB: three tmem[]), dense ones only D's
    (two: D and, for .kind::f16 etc., the enable-input operand is a predicate); kind::mxf4nvf4 with ue4m3 is .4X."""
    mma_texts = [text for _, text in instrs if _MMA_RE.search(text)]
    problems = []
    if spec.block_scaled:
        plain = [t for t in mma_texts if len(_TMEM_OPERAND_RE.findall(t)) < 3]
        if plain:
            problems.append(f"{len(plain)} MMA(s) without the scale-factor tmem operands: not block-scaled")
        if spec.scale.value == "ue4m3" and any(".4X" not in t for t in mma_texts):
            problems.append("kind::mxf4nvf4 with ue4m3 scale factors should be .4X (scale_vec::4X) in SASS")
    elif any(len(_TMEM_OPERAND_RE.findall(t)) >= 3 for t in mma_texts):
        problems.append("a dense kernel has block-scaled MMAs")
    return problems


# cuobjdump (CUDA 13) spells the pair forms with a .2CTA suffix: UTCHMMA.2CTA (tcgen05.mma.cta_group::2),
# UTCBAR.2CTA.MULTICAST (tcgen05.commit.cta_group::2 ... .multicast::cluster), UTMALDG.2D.2CTA
# (cp.async.bulk.tensor .cta_group::2); barrier.cluster is UCGABAR_ARV / UCGABAR_WAIT.
_PAIR_FORMS = (
    ("2-CTA commits", r"UTCBAR\.2CTA\.MULTICAST"),
    ("2-CTA TMA loads", r"UTMALDG\S*\.2CTA"),
    ("cluster barrier arrivals", r"UCGABAR_ARV"),
    ("cluster barrier waits", r"UCGABAR_WAIT"),
)


def _cta_group_problems(spec: TileSpec, instrs: list[tuple[int, str]]) -> list[str]:
    """Every tcgen05 MMA has the pair form iff the spec is a CTA pair; a pair also needs its multicast commits,
    its .2CTA TMA loads and the cluster barrier."""
    if spec.arch is not Arch.SM100A:
        return []
    texts = [text for _, text in instrs if _MMA_RE.search(text)]
    pair_mmas = sum(1 for t in texts if re.search(r"\bUTC[A-Z]*MMA\.2CTA\b", t))
    problems = []
    if spec.pair and pair_mmas != len(texts):
        problems.append(f"{len(texts) - pair_mmas} tcgen05 MMA(s) without .2CTA: --cta-group 2 must issue tcgen05.mma.cta_group::2")
    if not spec.pair and pair_mmas:
        problems.append(f"{pair_mmas} tcgen05 MMA(s) with .2CTA in a cta_group::1 kernel")
    if spec.pair:
        for name, pattern in _PAIR_FORMS:
            if _count(instrs, pattern) == 0:
                problems.append(f"no {name} ({pattern.replace(chr(92), '')}) in the SASS of a CTA-pair kernel")
    # tcgen05.cp (UTCCP) of the scale factors: UTCCP.T.S.2CTA.4x32dp128bit (tcgen05.cp.cta_group::2) iff a pair, like
    # the MMAs.
    cps = [text for _, text in instrs if re.match(r"(@!?U?P\w+\s+)?UTCCP\b", text)]
    pair_cps = sum(1 for t in cps if ".2CTA" in t)
    if spec.pair and pair_cps != len(cps):
        problems.append(f"{len(cps) - pair_cps} tcgen05.cp (UTCCP) without .2CTA: a pair copies its scale factors with cta_group::2")
    if not spec.pair and pair_cps:
        problems.append(f"{pair_cps} tcgen05.cp (UTCCP) with .2CTA in a cta_group::1 kernel")
    return problems


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
        ("stmatrix", r"STSM", spec.epilogue is Epilogue.TMA and spec.arch is Arch.SM90A and spec.out_dtype.bytes == 2),
        ("2-byte shared stores (e4m3 pairs)", r"STS\.U16", spec.epilogue is Epilogue.TMA and spec.arch is Arch.SM90A
         and spec.out_dtype.bytes == 1),
        ("8-byte shared stores (f32 pairs)", r"STS\.64", spec.epilogue is Epilogue.TMA and spec.arch is Arch.SM90A
         and spec.out_dtype.bytes == 4),
        ("16-byte shared stores", r"STS\.128", spec.epilogue is Epilogue.TMA and spec.arch is Arch.SM100A),
        ("TMA stores", r"UTMASTG", spec.epilogue is Epilogue.TMA),
        # an M-major D through the TMA store: stmatrix .trans (cuobjdump 13: STSM.16.MT88.4 / .2; the plain form is M88)
        ("stmatrix .trans", r"STSM\.16\.MT88", spec.epilogue is Epilogue.TMA and spec.d_major.value == "m"),
        ("tcgen05.cp", r"UTCCP", spec.block_scaled),
        ("bulk copies", r"UBLKCP", spec.block_scaled),
        # a 2-CTA cluster: the shared operand's share goes out as a multicast (cuobjdump 13: UTMALDG.2D.MULTICAST),
        # and barrier.cluster.arrive/wait show as UCGABAR_ARV / UCGABAR_WAIT
        ("TMA multicast loads", r"UTMALDG\.\w+\.MULTICAST", spec.cluster.size > 1),
        ("cluster barriers", r"UCGABAR_WAIT", spec.cluster.size > 1),
    ]
    found, problems = {}, []
    if not spec.block_scaled and _count(instrs, r"UTCCP"):
        problems.append("tcgen05.cp (UTCCP) in a dense kernel")
    for name, pattern, required in wanted:
        n = _count(instrs, pattern)
        if required:
            found[name] = n
            if n == 0:
                problems.append(f"no {name} ({pattern.replace(chr(92), '')}) in the SASS")
    return found, problems


@dataclass
class CountReport:
    """A user kernel's SASS against the instruction counts its author named (ptxgen.author): each opcode's count
    in the whole kernel, the MMA opcodes present, registers and local memory."""

    kernel: str
    expected: dict
    counts: dict
    mma_opcodes: dict
    registers: int
    local_bytes: int
    stack_bytes: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        got = ", ".join(f"{n} {op} (expected {self.expected[op]})" for op, n in self.counts.items())
        return f"{self.kernel}: {got}; {self.registers} registers, local {self.local_bytes} B, stack {self.stack_bytes} B"


def check_counts(kernel: str, expected: dict, sass: str, resources: str) -> CountReport:
    """Count each opcode of ``expected`` (e.g. ``{"HGMMA": 8, "UTMALDG": 3}``; an opcode matches with any suffix,
    ``HGMMA.64x128x16.F32.BF16``) in ``kernel``'s SASS; any MMA opcode not named, any local-memory access or
    LOCAL/STACK bytes is a problem too."""
    instrs = [t for _, t in parse_instructions(sass)]
    counts = {op: sum(1 for t in instrs if re.search(rf"(^|\s){re.escape(op)}(\.|\s|$)", t)) for op in expected}
    mmas: dict[str, int] = {}
    for t in instrs:
        m = _MMA_RE.search(t)
        if m:
            mmas[m.group(1)] = mmas.get(m.group(1), 0) + 1
    problems = [f"{counts[op]} {op}, expected {n}" for op, n in expected.items() if counts[op] != n]
    problems += [f"{n} {op}: an MMA opcode the kernel's author did not name" for op, n in mmas.items() if op not in expected]
    local = sum(1 for t in instrs if re.match(r"(@!?U?P\w+\s+)?(LDL|STL)\b", t))
    if local:
        problems.append(f"{local} local-memory instruction(s) (LDL/STL): registers spilled")
    res = function_resources(resources).get(kernel, {})
    if not res:
        problems.append(f"no resource line for {kernel} in the cubin")
    if res.get("LOCAL", 0) or res.get("STACK", 0):
        problems.append(f"local memory in use: LOCAL {res.get('LOCAL', 0)} B, STACK {res.get('STACK', 0)} B")
    return CountReport(kernel, dict(expected), counts, mmas, res.get("REG", 0), res.get("LOCAL", 0), res.get("STACK", 0), problems)
