"""Compile the attention kernel with NVRTC (through the project's cubin cache) and gate its SASS.

The gate, per kernel: the key-block loop (the smallest backward branch around an HGMMA) holds exactly D/16
HGMMA.64xBNx16 (S = Q·Kᵀ) and BN/16 HGMMA.64xDx16 (O += P·V); in all, one copy of each (serial schedule) or two
(overlap, pingpong: S of the first block before the loop, the last P·V after it); every P·V reads A from registers
(no ``gdesc`` for A) and V transposed (``.tnspB``: MN-major); TMA loads (UTMALDG) and setmaxnreg (USETMAXREG) present;
no local memory (no LDL/STL, LOCAL and STACK 0); no ptxas note that it serialized the wgmmas (C7514/C7515).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..author import BuiltKernel, parse_sass, sass_resources
from ..author import build as build_kernel
from .plan import AttentionPlan, plan_attention
from .render import kernel
from .spec import AttentionSpec

_HGMMA_RE = re.compile(r"\bHGMMA\.64x(\d+)x16\.F32(?:\.BF16)?\b")  # f16 inputs print no type suffix


@dataclass
class AttentionSass:
    qk_mmas: int
    pv_mmas: int
    in_loop: int
    pv_transposed: int
    pv_from_registers: int
    expected_qk: int
    expected_pv: int
    tma_loads: int
    setmaxnreg: int
    registers: int
    local_bytes: int
    stack_bytes: int
    problems: list[str] = field(default_factory=list)
    opcode: str = "HGMMA"

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.opcode != "HGMMA":
            return (f"{self.qk_mmas} x {self.opcode} S=Q·Kᵀ (expected {self.expected_qk}), {self.pv_mmas} x {self.opcode} "
                    f"O+=P·V with A from TMEM (expected {self.expected_pv}), {self.in_loop} in the key-block loop, "
                    f"{self.tma_loads} TMA loads, {self.registers} registers, local {self.local_bytes} B")
        return (f"{self.qk_mmas} x HGMMA S=Q·Kᵀ (expected {self.expected_qk}), {self.pv_mmas} x HGMMA O+=P·V (expected "
                f"{self.expected_pv}, {self.pv_from_registers} with A from registers, {self.pv_transposed} .tnspB), "
                f"{self.in_loop} in the key-block loop, {self.tma_loads} TMA loads, "
                f"{self.setmaxnreg} setmaxnreg, {self.registers} registers, local {self.local_bytes} B")


_BACK_RE = re.compile(r"^@!?U?P\w+\s+BRA(?:\.[A-Z.]+)?\s+0x([0-9a-f]+)")


def key_block_loop(parsed: list[tuple[int, str]], mma_addrs: list[int]) -> tuple[int, int] | None:
    """(first, last) address of the smallest *predicated* backward branch's range holding an HGMMA. ptxas moves the
    mbarrier spin loops out of line and jumps back from them unconditionally; those jumps are not loops."""
    loops = []
    for addr, text in parsed:
        if "BRA.U.ANY" in text:  # ptxas's loop over the distinct values of an operand that must be uniform: not a loop of ours
            continue
        m = _BACK_RE.search(text)
        if m:
            target = int(m.group(1), 16)
            if target < addr and any(target <= a <= addr for a in mma_addrs):
                loops.append((addr - target, target, addr))
    return min(loops)[1:] if loops else None


def check_attention_sass(plan: AttentionPlan, sass: str, resources: str, log: str = "") -> AttentionSass:
    s = plan.spec
    parsed = parse_sass(sass)
    instrs = [t for _, t in parsed]
    mma_addrs = [a for a, t in parsed if _HGMMA_RE.search(t)]
    loop = key_block_loop(parsed, mma_addrs)
    in_loop = sum(loop[0] <= a <= loop[1] for a in mma_addrs) if loop else 0
    copies = 1 if s.schedule == "serial" else 2
    qk_copies = copies + s.carry  # the carried form issues a tile's first S twice: the CTA's first, and with a last P·V
    qk = pv = pv_regs = pv_t = 0
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
            pv_t += ".tnspB" in t
    res = sass_resources(resources, s.kernel_name)
    rep = AttentionSass(
        qk_mmas=qk, pv_mmas=pv, in_loop=in_loop, pv_transposed=pv_t, pv_from_registers=pv_regs,
        expected_qk=qk_copies * s.head_dim // 16, expected_pv=copies * s.bn // 16,
        tma_loads=sum("UTMALDG" in t for t in instrs), setmaxnreg=sum("USETMAXREG" in t for t in instrs),
        registers=res.get("REG", -1), local_bytes=res.get("LOCAL", -1), stack_bytes=res.get("STACK", -1),
    )
    if qk != rep.expected_qk:
        rep.problems.append(f"{qk} HGMMA.64x{s.bn}x16 for S = Q·Kᵀ, expected {rep.expected_qk} ({qk_copies} x D/16)")
    if pv != rep.expected_pv:
        rep.problems.append(f"{pv} HGMMA.64x{s.head_dim}x16 for O += P·V, expected {rep.expected_pv} ({copies} x BN/16)")
    if in_loop != (s.head_dim + s.bn) // 16:
        rep.problems.append(f"{in_loop} HGMMA in the key-block loop, expected D/16 + BN/16 = {(s.head_dim + s.bn) // 16}")
    if pv_t != pv:
        rep.problems.append(f"only {pv_t} of {pv} P·V HGMMAs read B transposed (.tnspB: V MN-major)")
    if s.schedule != "serial" and not any(re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", t) for t in instrs):
        rep.problems.append("no wgmma.wait_group 1 (WARPGROUP.DEPBAR.LE gsb0, 0x1): S and P·V are not in flight together")
    if s.schedule == "pingpong" and not (any(re.search(r"\bBAR\.SYNC\S*\s+\S+, 0x100\b", t) for t in instrs)
                                         and any(re.search(r"\bBAR\.ARV\b", t) for t in instrs)):
        rep.problems.append("no named-barrier turn taking (BAR.SYNC ..., 0x100 and BAR.ARV) between the consumer warpgroups")
    if re.search(r"C751[45]|serializ", log, re.IGNORECASE):
        rep.problems.append("ptxas serialized the wgmmas: " + log.strip()[:200])
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


_UTCHMMA_RE = re.compile(r"\bUTCHMMA\s+(\S+),")


def check_attention_sass_sm100(plan, sass: str, resources: str) -> AttentionSass:
    """sm_100a: D/16 UTCHMMA with A from a descriptor (S = Q·Kᵀ) and BN/16 with A from TMEM (O += P·V), inside the
    key-block loop; LDTM (S and O read) and STTM (P and the rescaled O written); four tcgen05.commits (UTCBAR: S
    full, K stage empty, V stage empty, O ready); no local memory."""
    s = plan.spec
    parsed = parse_sass(sass)
    instrs = [t for _, t in parsed]
    mmas = [(a, m.group(1)) for a, t in parsed for m in [_UTCHMMA_RE.search(t)] if m]
    loop = key_block_loop(parsed, [a for a, _ in mmas])
    qk = sum(a_op.startswith("gdesc") for _, a_op in mmas)
    pv = sum(a_op.startswith("tmem") for _, a_op in mmas)
    in_loop = sum(loop[0] <= a <= loop[1] for a, _ in mmas) if loop else 0
    res = sass_resources(resources, s.kernel_name)
    rep = AttentionSass(
        qk_mmas=qk, pv_mmas=pv, in_loop=in_loop, pv_transposed=pv, pv_from_registers=pv,
        expected_qk=s.head_dim // 16, expected_pv=s.bn // 16, tma_loads=sum("UTMALDG" in t for t in instrs),
        setmaxnreg=0, registers=res.get("REG", -1), local_bytes=res.get("LOCAL", -1), stack_bytes=res.get("STACK", -1),
        opcode="UTCHMMA",
    )
    if qk != rep.expected_qk:
        rep.problems.append(f"{qk} UTCHMMA with A from shared memory (S = Q·Kᵀ), expected D/16 = {rep.expected_qk}")
    if pv != rep.expected_pv:
        rep.problems.append(f"{pv} UTCHMMA with A from TMEM (O += P·V), expected BN/16 = {rep.expected_pv}")
    if in_loop != qk + pv or not mmas:
        rep.problems.append(f"{in_loop} of {qk + pv} UTCHMMA inside the key-block loop")
    if not any("LDTM" in t for t in instrs) or not any("STTM" in t for t in instrs):
        rep.problems.append("no LDTM (tcgen05.ld) or no STTM (tcgen05.st)")
    if sum("UTCBAR" in t for t in instrs) != 4:
        rep.problems.append(f"{sum('UTCBAR' in t for t in instrs)} UTCBAR (tcgen05.commit), expected 4 (S full, K and V empty, O ready)")
    if rep.tma_loads == 0:
        rep.problems.append("no UTMALDG (TMA load)")
    if any(re.search(r"\b(LDL|STL)\b", t) for t in instrs) or rep.local_bytes != 0 or rep.stack_bytes != 0:
        rep.problems.append(f"local memory (LDL/STL, LOCAL {rep.local_bytes} B, STACK {rep.stack_bytes} B)")
    return rep


@dataclass(frozen=True)
class BuiltAttention:
    plan: AttentionPlan
    kernel: BuiltKernel  # ptxgen.author's build: the source, the cubin, the compile cache's record, the count gate

    @property
    def source(self) -> str:
        return self.kernel.source

    @property
    def cubin(self) -> bytes:
        return self.kernel.cubin

    @property
    def ptx(self) -> str:
        return self.kernel.ptx

    @property
    def cache_hit(self) -> bool:
        return self.kernel.cache_hit

    @property
    def cache_result(self):
        return self.kernel.cache_result

    def sass_report(self) -> AttentionSass:
        """Attention's own gate (each MMA's form, the key-block loop, setmaxnreg, TMA) on the kernel's SASS, plus the
        layer's count gate (the MMA total of ``expect_sass``, no other MMA opcode, no local memory)."""
        k = self.kernel
        if self.plan.spec.tcgen05:
            rep = check_attention_sass_sm100(self.plan, k.sass_dump, k.resources)
        else:
            rep = check_attention_sass(self.plan, k.sass_dump, k.resources, k.log)
        if not k.sass.ok:
            rep.problems.append("the count gate: " + "; ".join(k.sass.problems))
        return rep


_BUILT: dict = {}


def build(spec: AttentionSpec) -> BuiltAttention:
    """Plan, render and compile through ptxgen.author (memoized per spec in the process, cached on disk by source).
    The SASS is disassembled and checked by ``sass_report`` (the CLI and the tests), not on the launch path."""
    b = _BUILT.get(spec)
    if b is None:
        if spec.tcgen05:
            from .plan_sm100 import plan_attention_sm100

            plan = plan_attention_sm100(spec)
        else:
            plan = plan_attention(spec)
        b = BuiltAttention(plan, build_kernel(kernel(plan), gate=False))
        _BUILT[spec] = b
    return b
