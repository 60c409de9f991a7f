"""The pipeline ring of a warp-specialized kernel: stages, the shared-memory carve-up, mbarrier roles and registers.

A :class:`Ring` is declared as data (stages, the operand plans each stage holds, the consumer warpgroups, extra
buffers); :meth:`Ring.plan` lays out shared memory from a 1024-byte-aligned base: each operand's ring of stages on
its swizzle repeat (so every descriptor's base offset is 0), then the extra buffers, then the mbarriers. It says
how many bytes each stage's copies deliver (the full barrier's transaction count), who arrives on which barrier,
and the setmaxnreg budgets, from the project's own register rules (ptxgen.isa.shapes).

Barrier roles (one pair per stage, CUTLASS's PipelineTmaAsync):

* ``full[s]``: initialised with 1 arrival; the producer's one thread arrives with ``expect_tx`` = the stage's bytes,
  the TMA copies complete the transaction count. Consumers wait on parity ``(it / stages) & 1``.
* ``empty[s]``: initialised with one arrival per consumer warpgroup (one elected thread each). The producer waits on
  parity ``((it / stages) & 1) ^ 1``: a fresh barrier passes that wait, so the first pass over the ring needs no release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..derive.tile.derived import Derived
from ..isa.shapes import (
    WARPGROUP_THREADS,
    entry_registers,
    producer_registers,
    register_pool_balance,
    setmaxnreg_consumer_registers,
)
from ..isa.types import SpecError
from .operand import OperandPlan

BASE_ALIGN = 1024  # the largest swizzle repeat: the kernel rounds its dynamic window up to it
MBAR_BYTES = 8
MAX_DYNAMIC_SMEM = 227 * 1024  # sm_90a / sm_100a: 227 KB of dynamic shared memory per block
SETMAXNREG_RANGE = (24, 256)
REGISTER_FILE = 64 * 1024
PIPELINE_REF = "PTX ISA 9.7.13.15 'mbarrier' (#parallel-synchronization-and-communication-instructions-mbarrier)"
SETMAXNREG_REF = "PTX ISA 9.7.19.5 'setmaxnreg' (#miscellaneous-instructions-setmaxnreg)"


@dataclass(frozen=True)
class Buffer:
    """An extra shared-memory buffer (an epilogue staging tile, a softmax scratch, ...)."""

    name: str
    nbytes: int
    align: int = 128


@dataclass(frozen=True)
class Ring:
    stages: int
    operands: tuple[OperandPlan, ...]
    consumer_warpgroups: int = 1
    buffers: tuple[Buffer, ...] = ()
    producer_registers: int | None = None  # None: the project's rule (ptxgen.isa.shapes)
    consumer_registers: int | None = None
    # where this ring starts, from the aligned base: a second ring (FA3's separate K and V rings, each with its own
    # barriers) starts at the first's RingPlan.used_bytes rounded up to BASE_ALIGN
    start_bytes: int = 0

    def plan(self) -> "RingPlan":
        return plan_ring(self)


@dataclass(frozen=True)
class Region:
    name: str
    offset_bytes: int  # from the aligned base
    stage_stride_bytes: int  # 0 for a buffer
    nbytes: int  # all stages

    def addr(self, stage: str = "0") -> str:
        """C expression: this region's (stage's) shared-memory byte address, from ``base`` (pieces.kernel_base)."""
        if not self.stage_stride_bytes:
            return f"(base + {self.offset_bytes}u)"
        return f"(base + {self.offset_bytes}u + static_cast<unsigned>({stage}) * {self.stage_stride_bytes}u)"


@dataclass(frozen=True)
class RingPlan:
    stages: int
    regions: dict[str, Region]
    full: Region
    empty: Region
    expect_tx_bytes: int
    full_arrivals: int
    empty_arrivals: int
    consumer_warpgroups: int
    threads: int
    producer_registers: int
    consumer_registers: int
    entry_registers: int
    used_bytes: int
    dynamic_smem_bytes: int  # used + BASE_ALIGN - 16 (the window is only 16-byte aligned)
    derivation: tuple[Derived, ...] = field(default=())

    @property
    def next_start_bytes(self) -> int:
        """Where a further ring may start (Ring.start_bytes): past this one's barriers, on the swizzle repeat."""
        return _up(self.used_bytes, BASE_ALIGN)

    def stage_addr(self, name: str, stage: str = "s") -> str:
        return self.regions[name].addr(stage)

    def full_bar(self, stage: str = "s") -> str:
        return self.full.addr(stage)

    def empty_bar(self, stage: str = "s") -> str:
        return self.empty.addr(stage)

    def stage_of(self, it: str) -> str:
        """C: the stage iteration ``it`` (0, 1, 2, ... over the K tiles) uses."""
        return f"({it}) % {self.stages}"

    def phase_of(self, it: str) -> str:
        """C: the parity of iteration ``it``'s pass over the ring (flips each time the ring wraps)."""
        return f"static_cast<unsigned>(({it}) / {self.stages}) & 1u"

    @staticmethod
    def producer_parity(phase: str) -> str:
        """C: the parity the producer waits for on an empty barrier in pass ``phase`` (the other one: a fresh
        barrier has completed no phase, and waiting for parity 1 of it returns at once)."""
        return f"(({phase}) ^ 1u)"

    def to_json(self) -> dict:
        return {"stages": self.stages, "regions": {n: vars(r) for n, r in self.regions.items()},
                "full": vars(self.full), "empty": vars(self.empty), "expect_tx_bytes": self.expect_tx_bytes,
                "full_arrivals": self.full_arrivals, "empty_arrivals": self.empty_arrivals, "threads": self.threads,
                "producer_registers": self.producer_registers, "consumer_registers": self.consumer_registers,
                "entry_registers": self.entry_registers, "dynamic_smem_bytes": self.dynamic_smem_bytes}


def _up(x: int, a: int) -> int:
    return -(-x // a) * a


def _registers(ring: Ring, threads: int) -> tuple[int, int, int, list[Derived]]:
    c = ring.consumer_warpgroups
    entry = entry_registers(threads)
    p = ring.producer_registers if ring.producer_registers is not None else producer_registers(c)
    q = ring.consumer_registers if ring.consumer_registers is not None else setmaxnreg_consumer_registers(c)
    lo, hi = SETMAXNREG_RANGE
    for what, v in (("producer_registers", p), ("consumer_registers", q)):
        if not lo <= v <= hi or v % 8:
            raise SpecError(what, v, f"setmaxnreg takes a multiple of 8 in {lo}..{hi}", f"{lo}, {lo + 8}, ..., {hi}", SETMAXNREG_REF)
    if p > entry:
        raise SpecError("producer_registers", p, f"setmaxnreg.dec must lower the launch count {entry}", f"<= {entry}", SETMAXNREG_REF)
    balance = (entry - p) * WARPGROUP_THREADS - (q - entry) * WARPGROUP_THREADS * c
    if balance < 0:
        raise SpecError("consumer_registers", q,
                        f"the consumers may take only what the producer gives back: {entry} + ({entry} - {p}) / {c} "
                        "(asking for more blocks setmaxnreg.inc forever)", f"<= {entry + (entry - p) // c // 8 * 8}", SETMAXNREG_REF)
    d = Derived("setmaxnreg", f"producer {p}, consumers {q}",
                f"launch {entry} = min(255, {REGISTER_FILE} / {threads}) in steps of 8; consumers {entry} + ({entry} - {p}) / {c} "
                f"rounded down to 8 = {setmaxnreg_consumer_registers(c) if ring.consumer_registers is None else q}; "
                f"pool left {balance if ring.producer_registers or ring.consumer_registers else register_pool_balance(c)}",
                "the producer needs few registers; the consumers hold the accumulators", SETMAXNREG_REF)
    return p, q, entry, [d]


def plan_ring(ring: Ring) -> RingPlan:
    if ring.stages < 1:
        raise SpecError("stages", ring.stages, "a ring has at least one stage", "1, 2, 3, ...", PIPELINE_REF)
    if ring.consumer_warpgroups not in (1, 2, 3):
        raise SpecError("consumer_warpgroups", ring.consumer_warpgroups, "one producer warpgroup and 1..3 consumer warpgroups "
                        "fit __launch_bounds__ and setmaxnreg's pool", "1, 2, 3", SETMAXNREG_REF)
    names = [p.name for p in ring.operands] + [b.name for b in ring.buffers]
    if len(set(names)) != len(names) or {"full", "empty"} & set(names):
        raise SpecError("ring names", ", ".join(names), "operands and buffers need distinct names (not full/empty)", "distinct identifiers")
    if ring.start_bytes < 0 or ring.start_bytes % BASE_ALIGN:
        raise SpecError("start_bytes", ring.start_bytes, f"a ring starts on the {BASE_ALIGN} B swizzle repeat (base offsets 0)",
                        f"a multiple of {BASE_ALIGN}, e.g. the previous ring's used_bytes rounded up")
    at, regions, D = ring.start_bytes, {}, []
    for p in ring.operands:
        at = _up(at, p.alignment_bytes)
        stride = _up(p.stage_bytes, p.alignment_bytes)
        regions[p.name] = Region(p.name, at, stride, stride * ring.stages)
        D.append(Derived(f"{p.name}_offset", at, f"{ring.stages} stages x {stride} B from +{at}",
                         f"on its {p.alignment_bytes} B swizzle repeat, so the descriptors' base offset is 0", PIPELINE_REF))
        at += stride * ring.stages
    for b in ring.buffers:
        at = _up(at, b.align)
        regions[b.name] = Region(b.name, at, 0, b.nbytes)
        at += b.nbytes
    at = _up(at, MBAR_BYTES)
    full = Region("full", at, MBAR_BYTES, MBAR_BYTES * ring.stages)
    empty = Region("empty", at + full.nbytes, MBAR_BYTES, MBAR_BYTES * ring.stages)
    used = empty.offset_bytes + empty.nbytes
    dynamic = used + BASE_ALIGN - 16
    if dynamic > MAX_DYNAMIC_SMEM:
        raise SpecError("stages", ring.stages, f"the ring needs {used} B (+{BASE_ALIGN - 16} B to align the window) of shared memory",
                        f"at most {MAX_DYNAMIC_SMEM} B per block", PIPELINE_REF)
    tx = sum(p.expect_tx_bytes for p in ring.operands)
    D.append(Derived("expect_tx_bytes", tx, " + ".join(f"{p.name} {p.expect_tx_bytes}" for p in ring.operands) + f" = {tx}",
                     "the full barrier's transaction count: every byte the stage's TMA boxes deliver", PIPELINE_REF))
    threads = WARPGROUP_THREADS * (ring.consumer_warpgroups + 1)
    p, q, entry, regs = _registers(ring, threads)
    D += regs
    return RingPlan(ring.stages, regions, full, empty, tx, 1, ring.consumer_warpgroups, ring.consumer_warpgroups, threads,
                    p, q, entry, used, dynamic, tuple(D))
