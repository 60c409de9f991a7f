"""Compile the attention kernel with NVRTC (through the project's cubin cache) and gate its SASS.

The gate, per kernel: exactly D/16 HGMMA.64xBNx16 (S = Q·Kᵀ) and BN/16 HGMMA.64xDx16 (O += P·V) instructions, the
P·V ones reading A from registers (no ``gdesc`` for A); TMA loads (UTMALDG) present; setmaxnreg (USETMAXREG)
present; no local memory (no LDL/STL, LOCAL and STACK 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..runtime.cache import compile_cached, sass_dumps
from ..runtime.sass import function_resources, parse_instructions
from .plan import AttentionPlan, plan_attention
from .render import render
from .spec import AttentionSpec

_HGMMA_RE = re.compile(r"\bHGMMA\.64x(\d+)x16\.F32(?:\.BF16)?\b")  # f16 inputs print no type suffix


@dataclass
class AttentionSass:
    qk_mmas: int
    pv_mmas: int
    pv_from_registers: int
    expected_qk: int
    expected_pv: int
    tma_loads: int
    setmaxnreg: int
    registers: int
    local_bytes: int
    stack_bytes: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        return (f"{self.qk_mmas} x HGMMA S=Q·Kᵀ (expected {self.expected_qk}), {self.pv_mmas} x HGMMA O+=P·V (expected "
                f"{self.expected_pv}, {self.pv_from_registers} with A from registers), {self.tma_loads} TMA loads, "
                f"{self.setmaxnreg} setmaxnreg, {self.registers} registers, local {self.local_bytes} B")


def check_attention_sass(plan: AttentionPlan, sass: str, resources: str) -> AttentionSass:
    s = plan.spec
    instrs = [t for _, t in parse_instructions(sass)]
    qk = pv = pv_regs = 0
    for t in instrs:
        m = _HGMMA_RE.search(t)
        if not m:
            continue
        n = int(m.group(1))
        # S = Q·Kᵀ is m64nBNk16, P·V m64nDk16; when BN == D the A operand tells them apart (descriptor vs registers)
        from_regs = "gdesc" not in t.split(",")[1] if "," in t else False
        if n == s.bn and not (n == s.head_dim and from_regs):
            qk += 1
        elif n == s.head_dim:
            pv += 1
            pv_regs += from_regs
    res = function_resources(resources).get(s.kernel_name, {})
    rep = AttentionSass(
        qk_mmas=qk, pv_mmas=pv, pv_from_registers=pv_regs, expected_qk=s.head_dim // 16, expected_pv=s.bn // 16,
        tma_loads=sum("UTMALDG" in t for t in instrs), setmaxnreg=sum("USETMAXREG" in t for t in instrs),
        registers=res.get("REG", -1), local_bytes=res.get("LOCAL", -1), stack_bytes=res.get("STACK", -1),
    )
    if qk != rep.expected_qk:
        rep.problems.append(f"{qk} HGMMA.64x{s.bn}x16 for S = Q·Kᵀ, expected {rep.expected_qk} (D/16)")
    if pv != rep.expected_pv:
        rep.problems.append(f"{pv} HGMMA.64x{s.head_dim}x16 for O += P·V, expected {rep.expected_pv} (BN/16)")
    if pv_regs != pv:
        rep.problems.append(f"only {pv_regs} of {pv} P·V HGMMAs take A from registers")
    if rep.tma_loads == 0:
        rep.problems.append("no UTMALDG (TMA load)")
    if rep.setmaxnreg < 2:
        rep.problems.append(f"{rep.setmaxnreg} USETMAXREG, expected the producer's and the consumers'")
    if any(re.search(r"\b(LDL|STL)\b", t) for t in instrs):
        rep.problems.append("local memory loads or stores (LDL/STL)")
    if rep.local_bytes != 0 or rep.stack_bytes != 0:
        rep.problems.append(f"LOCAL {rep.local_bytes} B, STACK {rep.stack_bytes} B (expected 0)")
    return rep


@dataclass(frozen=True)
class BuiltAttention:
    plan: AttentionPlan
    source: str
    cubin: bytes
    ptx: str
    cache_hit: bool
    cache_result: object

    def sass_report(self) -> AttentionSass:
        sass, resources = sass_dumps(self.cache_result)
        return check_attention_sass(self.plan, sass, resources)


_BUILT: dict = {}


def build(spec: AttentionSpec) -> BuiltAttention:
    """Plan, render and compile (memoized per spec in the process, cached on disk by source)."""
    b = _BUILT.get(spec)
    if b is None:
        plan = plan_attention(spec)
        source = render(plan)
        res = compile_cached(source, spec.kernel_name, spec.arch.value)
        b = BuiltAttention(plan, source, res.compiled.cubin, res.compiled.ptx, res.hit, res)
        _BUILT[spec] = b
    return b
