"""The pipeline ring of a warp-specialized kernel: stages, the shared-memory carve-up, mbarrier roles and registers.

A :class:`Ring` is declared as data (stages, the operand plans each stage holds, the consumer warpgroups, extra
buffers); :meth:`Ring.plan` lays out shared memory from a 1024-byte-aligned base: each operand's ring of stages on
its swizzle repeat (so every descriptor's base offset is 0), then the extra buffers, then the mbarriers. It says
how many bytes each stage's copies deliver (the full barrier's transaction count), who arrives on which barrier,
and the setmaxnreg budgets, from the project's own register rules (ptxgen.isa.shapes).

Barrier roles (one pair per stage, CUTLASS's PipelineTmaAsync):

* ``full[s]``: initialised with 1 arrival; the producer's one thread arrives with ``expect_tx`` = the stage's bytes,
  the TMA copies complete the transaction count. Consumers wait on parity ``(it / stages) & 1``.
* ``empty[s]``: initialised with one arrival per consumer warpgroup (one elected thread each; ``empty_arrivals``
  overrides it: one per consumer warp, or 1 for a tcgen05.commit). The producer waits on parity
  ``((it / stages) & 1) ^ 1``: a fresh barrier passes that wait, so the first pass over the ring needs no release.

FlashAttention-3's pipeline adds four things, each optional: ``resident`` operands (loaded once before the loop, one
stage and one full barrier each, never released: Q; a persistent kernel that walks tiles reloads them: with
``resident_release`` each stage has an empty barrier ``<name>_empty`` too, and ``resident_stages=2`` gives two stages,
so the next tile's Q loads while this tile runs), ``full_per_operand`` (one full barrier per operand per stage, so
a consumer waits for K, starts Q·Kᵀ, and waits for V only before P·V), ``empty_per_operand`` (one empty barrier per
operand per stage, ``empty_<name>``: a consumer releases K as soon as Q·Kᵀ has read it, V after P·V, so the producer
refills K while P·V still reads V) and named single ``barriers`` and 8-byte ``words`` after the stage barriers (an
MMA's commit barrier, the tcgen05.alloc address slot).
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
    resident: tuple[OperandPlan, ...] = ()  # loaded once: one stage, one full barrier ("<name>_full") each, first
    # stages of each resident operand (2: a persistent kernel loads the next tile's Q while this tile's runs), each with
    # its own full barrier ("<name>_full" holds one per stage)
    resident_stages: int = 1
    resident_release: bool = False  # an empty barrier per resident stage ("<name>_empty"): a persistent kernel's reload
    full_per_operand: bool = False  # one full barrier set per operand ("full_<name>"), each with its own expect_tx
    empty_per_operand: bool = False  # one empty barrier set per operand ("empty_<name>"), each released on its own
    empty_arrivals: int | None = None  # None: one per consumer warpgroup
    barriers: tuple[str, ...] = ()  # single mbarriers by name, after the stage barriers
    words: tuple[str, ...] = ()  # 8-byte shared words by name, after those (e.g. the TMEM address tcgen05.alloc writes)

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
    bars: dict[str, Region] = field(default_factory=dict)  # every barrier and word region by name, in address order
    expect_tx: dict[str, int] = field(default_factory=dict)  # bytes each full barrier's copies deliver, by barrier name
    resident_stages: int = 1  # Ring.resident_stages: the stages of each resident operand

    @property
    def barriers_offset_bytes(self) -> int:
        """Where the barriers start (from the aligned base): the first barrier region's offset."""
        return min(r.offset_bytes for r in self.bars.values())

    def bar_offset(self, name: str) -> int:
        """A barrier (or word) region's offset from the first barrier: what a kernel adds to its ``bars`` address."""
        return self.bars[name].offset_bytes - self.barriers_offset_bytes

    def bar(self, name: str, stage: str = "0") -> str:
        """C: the address of barrier ``name`` (of stage ``stage`` for a per-stage one), from ``base``."""
        return self.bars[name].addr(stage)

    @property
    def next_start_bytes(self) -> int:
        """Where a further ring may start (Ring.start_bytes): past this one's barriers, on the swizzle repeat."""
        return _up(self.used_bytes, BASE_ALIGN)

    def stage_addr(self, name: str, stage: str = "s") -> str:
        return self.regions[name].addr(stage)

    def full_bar(self, stage: str = "s", operand: str | None = None) -> str:
        """C: the stage's full barrier (``operand``: that operand's, with ``full_per_operand``)."""
        return (self.bars[f"full_{operand}"] if operand else self.full).addr(stage)

    def empty_bar(self, stage: str = "s", operand: str | None = None) -> str:
        """C: the stage's empty barrier (``operand``: that operand's, with ``empty_per_operand``)."""
        return (self.bars[f"empty_{operand}"] if operand else self.empty).addr(stage)

    def stage_of(self, it: str) -> str:
        """C: the stage iteration ``it`` (0, 1, 2, ... over the K tiles) uses."""
        return f"({it}) % {self.stages}"

    def phase_of(self, it: str) -> str:
        """C: the parity of iteration ``it``'s pass over the ring (flips each time the ring wraps)."""
        return f"static_cast<unsigned>(({it}) / {self.stages}) & 1u"

    def resident_stage_of(self, t: str) -> str:
        """C: the resident stage round ``t`` (a persistent walk's tile count) uses: stages taken in turn."""
        return f"{_c_term(t)} % {self.resident_stages}" if self.resident_stages > 1 else "0"

    def resident_phase_of(self, t: str) -> str:
        """C: the parity round ``t`` waits for on its resident stage's full barrier (flips each time that stage refills)."""
        return f"({_c_term(t)} / {self.resident_stages}) & 1"

    def resident_release_phase_of(self, t: str) -> str:
        """C: the parity the producer of round ``t`` (t >= resident_stages) waits for on its stage's empty barrier: the
        release of the fill ``resident_stages`` rounds earlier."""
        return f"({_c_term(t)} / {self.resident_stages} - 1) & 1"

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
                "entry_registers": self.entry_registers, "dynamic_smem_bytes": self.dynamic_smem_bytes,
                "bars": {n: vars(r) for n, r in self.bars.items()}, "expect_tx": dict(self.expect_tx)}


def _c_term(t: str) -> str:
    """``t`` as a C operand: a name as it is, an expression in parentheses."""
    return t if t.isidentifier() else f"({t})"


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
    names = ([p.name for p in ring.resident + ring.operands] + [b.name for b in ring.buffers] + list(ring.barriers)
             + list(ring.words) + [f"{p.name}_empty" for p in ring.resident if ring.resident_release])
    if len(set(names)) != len(names) or {"full", "empty"} & set(names):
        raise SpecError("ring names", ", ".join(names), "operands, buffers, barriers and words need distinct names (not full/empty)",
                        "distinct identifiers")
    if ring.start_bytes < 0 or ring.start_bytes % BASE_ALIGN:
        raise SpecError("start_bytes", ring.start_bytes, f"a ring starts on the {BASE_ALIGN} B swizzle repeat (base offsets 0)",
                        f"a multiple of {BASE_ALIGN}, e.g. the previous ring's used_bytes rounded up")
    if ring.empty_arrivals is not None and not 1 <= ring.empty_arrivals <= 4 * ring.consumer_warpgroups:
        raise SpecError("empty_arrivals", ring.empty_arrivals, "one arrival per consumer warpgroup or warp (or 1: an MMA commit)",
                        f"1..{4 * ring.consumer_warpgroups}", PIPELINE_REF)
    at, regions, D = ring.start_bytes, {}, []
    if ring.resident_stages not in (1, 2) or (ring.resident_stages > 1 and not ring.resident_release):
        raise SpecError("resident_stages", ring.resident_stages, "a resident operand has one stage, or two that the "
                        "consumers release (resident_release) for the producer to reload", "1, or 2 with resident_release",
                        PIPELINE_REF)
    for p, n in [(p, ring.resident_stages) for p in ring.resident] + [(p, ring.stages) for p in ring.operands]:
        at = _up(at, p.alignment_bytes)
        stride = _up(p.stage_bytes, p.alignment_bytes)
        regions[p.name] = Region(p.name, at, stride, stride * n)
        D.append(Derived(f"{p.name}_offset", at, f"{n} stage{'s' * (n > 1)} x {stride} B from +{at}",
                         f"on its {p.alignment_bytes} B swizzle repeat, so the descriptors' base offset is 0", PIPELINE_REF))
        at += stride * n
    for b in ring.buffers:
        at = _up(at, b.align)
        regions[b.name] = Region(b.name, at, 0, b.nbytes)
        at += b.nbytes
    bars, tx = _barriers(ring, _up(at, MBAR_BYTES))
    full = bars[f"full_{ring.operands[0].name}"] if ring.full_per_operand and ring.operands else bars.get("full")
    empty = bars[f"empty_{ring.operands[0].name}"] if ring.empty_per_operand and ring.operands else bars["empty"]
    used = max(r.offset_bytes + r.nbytes for r in bars.values())
    dynamic = used + BASE_ALIGN - 16
    if dynamic > MAX_DYNAMIC_SMEM:
        raise SpecError("stages", ring.stages, f"the ring needs {used} B (+{BASE_ALIGN - 16} B to align the window) of shared memory",
                        f"at most {MAX_DYNAMIC_SMEM} B per block", PIPELINE_REF)
    total = sum(p.expect_tx_bytes for p in ring.operands)
    D.append(Derived("expect_tx_bytes", total, " + ".join(f"{p.name} {p.expect_tx_bytes}" for p in ring.operands) + f" = {total}",
                     "the full barrier's transaction count: every byte the stage's TMA boxes deliver"
                     + (" (split over one full barrier per operand)" if ring.full_per_operand else ""), PIPELINE_REF))
    threads = WARPGROUP_THREADS * (ring.consumer_warpgroups + 1)
    p, q, entry, regs = _registers(ring, threads)
    D += regs
    empty_arrivals = ring.consumer_warpgroups if ring.empty_arrivals is None else ring.empty_arrivals
    return RingPlan(ring.stages, regions, full, empty, total, 1, empty_arrivals, ring.consumer_warpgroups, threads,
                    p, q, entry, used, dynamic, tuple(D), bars, tx, ring.resident_stages)


def _barriers(ring: Ring, at: int) -> tuple[dict[str, Region], dict[str, int]]:
    """The barrier block from ``at``: each resident operand's full barrier, the stages' full barriers (one set, or one
    per operand), the empty barriers (likewise), the named barriers, the words; and each full barrier's transaction bytes."""
    bars, tx = {}, {}

    def put(name: str, count: int = 1, per_stage: bool = False) -> None:
        nonlocal at
        bars[name] = Region(name, at, MBAR_BYTES if per_stage else 0, MBAR_BYTES * count)
        at += MBAR_BYTES * count

    for p in ring.resident:
        put(f"{p.name}_full", ring.resident_stages, ring.resident_stages > 1)
        tx[f"{p.name}_full"] = p.expect_tx_bytes
    if ring.resident_release:
        for p in ring.resident:
            put(f"{p.name}_empty", ring.resident_stages, ring.resident_stages > 1)
    if ring.full_per_operand:
        for p in ring.operands:
            put(f"full_{p.name}", ring.stages, True)
            tx[f"full_{p.name}"] = p.expect_tx_bytes
    else:
        put("full", ring.stages, True)
        tx["full"] = sum(p.expect_tx_bytes for p in ring.operands)
    if ring.empty_per_operand:
        for p in ring.operands:
            put(f"empty_{p.name}", ring.stages, True)
    else:
        put("empty", ring.stages, True)
    for name in ring.barriers + ring.words:
        put(name)
    return bars, tx
