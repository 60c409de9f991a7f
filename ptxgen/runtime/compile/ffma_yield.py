"""A post-compile SASS patch for block-scaled FP8 (experiment, issue 17): the promotion's FFMA runs lose some operand-
reuse flags and get their yield hint flipped, so that a promoting warp lets the other consumer warpgroup's warp on the
same SM sub-partition issue its wgmma sooner. The idea is DeepGEMM's (``deep_gemm/jit/interleave_ffma.py``: in the
first 9/16 of every run of at least 8 FFMA, an FFMA whose reuse flag is set and whose destination register is new, or
repeats the previous changed one, gets ``high ^= reuse | yield``); this is our own implementation of that rule.

The two flags are bits of each instruction's high 64-bit word as cuobjdump prints it (the second ``/* 0x... */`` of an
instruction): ``REUSE_FLAG`` is the flag cuobjdump shows as ``.reuse`` on an FFMA source, ``YIELD_FLAG`` the yield
hint of the control bits. The patch changes only those bits of the FFMA it selects; ``check_patch`` proves it on the
disassembly of the patched cubin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .toolchain import run_tool

REUSE_FLAG = 0x0800000000000000
YIELD_FLAG = 0x0000200000000000
MIN_RUN = 8  # FFMA in a row
PREFIX = (9, 16)  # the part of each run that is patched

_INSTR_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*\n\s*/\*\s*(0x[0-9a-f]+)\s*\*/")
_REG_RE = re.compile(r"\bR(\d+)\b")


@dataclass(frozen=True)
class Instr:
    addr: int
    text: str
    low: int
    high: int

    @property
    def is_ffma(self) -> bool:
        return re.match(r"(@!?P\w+\s+)?FFMA\b", self.text) is not None

    @property
    def dst(self) -> str:
        m = _REG_RE.search(self.text.split(None, 1)[1])
        return m.group(0) if m else ""

    def encoded(self, high: int | None = None) -> bytes:
        return self.low.to_bytes(8, "little") + (self.high if high is None else high).to_bytes(8, "little")


@dataclass(frozen=True)
class YieldPatch:
    runs: int  # FFMA runs of at least MIN_RUN
    changed: tuple[int, ...]  # addresses (in the function) of the FFMA whose flags were flipped


def instructions(sass: str) -> list[Instr]:
    return [Instr(int(a, 16), t.strip(), int(lo, 16), int(hi, 16)) for a, t, lo, hi in _INSTR_RE.findall(sass)]


def ffma_runs(instrs: list[Instr]) -> list[list[Instr]]:
    runs, cur = [], []
    for ins in instrs + [Instr(-1, "END", 0, 0)]:
        if ins.is_ffma and (not cur or ins.addr == cur[-1].addr + 16):
            cur.append(ins)
            continue
        if len(cur) >= MIN_RUN:
            runs.append(cur)
        cur = [ins] if ins.is_ffma else []
    return runs


def plan_patch(instrs: list[Instr]) -> tuple[int, dict[int, int]]:
    """(runs, {address: new high word}) by the rule in the module docstring."""
    new = {}
    runs = ffma_runs(instrs)
    for run in runs:
        seen, last_reused, last_dst = set(), False, ""
        for ins in run[: len(run) * PREFIX[0] // PREFIX[1]]:
            reused = bool(ins.high & REUSE_FLAG)
            if reused and (ins.dst not in seen or (last_reused and ins.dst == last_dst)):
                new[ins.addr] = ins.high ^ (REUSE_FLAG | YIELD_FLAG)
                reused = False
            seen.add(ins.dst)
            last_reused, last_dst = reused, ins.dst
    return len(runs), new


def interleave_ffma(cubin: bytes, sass: str | None = None) -> tuple[bytes, YieldPatch]:
    """The patched cubin (a cubin of one function: its instructions one contiguous run of bytes)."""
    sass = run_tool("cuobjdump", ["--dump-sass"], cubin) if sass is None else sass
    instrs = instructions(sass)
    runs, new = plan_patch(instrs)
    # the function's text section: where its first instructions lie; every instruction must then be at base + addr
    head = b"".join(i.encoded() for i in instrs[:8])
    base = cubin.find(head)
    if base < 0 or cubin.find(head, base + 1) >= 0 or any(
            cubin[base + i.addr:base + i.addr + 16] != i.encoded() for i in instrs):
        raise ValueError("the disassembly's instructions are not one contiguous text section of the cubin")
    out = bytearray(cubin)
    by_addr = {i.addr: i for i in instrs}
    for addr, high in sorted(new.items()):
        out[base + addr:base + addr + 16] = by_addr[addr].encoded(high)
    return bytes(out), YieldPatch(runs, tuple(sorted(new)))


def check_patch(before: str, after: str, patch: YieldPatch) -> list[str]:
    """Compare the disassemblies: same instructions in the same places, the patched FFMA differ from the original only
    in REUSE_FLAG | YIELD_FLAG of the high word (and lose a ``.reuse``), everything else is byte-identical."""
    a, b = instructions(before), instructions(after)
    problems = []
    if [i.addr for i in a] != [i.addr for i in b]:
        return ["the patched cubin's instructions are not at the same addresses"]
    for x, y in zip(a, b):
        if x.addr in patch.changed:
            if x.low != y.low or x.high ^ y.high != REUSE_FLAG | YIELD_FLAG or x.text.replace(".reuse", "") != y.text.replace(".reuse", ""):
                problems.append(f"{x.addr:#x}: {x.text} -> {y.text} ({x.high:#x} -> {y.high:#x})")
        elif (x.low, x.high, x.text) != (y.low, y.high, y.text):
            problems.append(f"{x.addr:#x} changed but was not to be: {x.text} -> {y.text}")
    return problems
