"""How the kernel is organized: warp roles, the mbarrier ring between loader and MMA, register budgets.

One design carries both architectures and both loaders (warp specialization):

* **wgmma (sm_90a)**: consumer warpgroups 0..C-1 (one per 64-row slab of the tile) issue ``wgmma`` and
  run the epilogue; the producer warpgroup C loads. With C >= 2 the producer drops to 40 registers and
  the consumers take the rest (``setmaxnreg``).
* **tcgen05 (sm_100a)**: epilogue warps 0-3 (warp w reads TMEM lanes 32w..32w+31), one MMA warp (a single
  thread issues every ``tcgen05.mma``), then the producer: one warp (TMA) or a warpgroup (cp.async).

The ring: stage s = it mod S of K-tile ``it`` has a ``full`` and an ``empty`` mbarrier. The producer waits
``empty[s]`` with parity ``((it / S) & 1) ^ 1`` (a fresh barrier counts its previous phase as complete, so
the first S waits return at once), fills the stage, and the fill completes ``full[s]``: TMA by transaction
bytes after one ``arrive.expect_tx``; cp.async by one ``cp.async.mbarrier.arrive.noinc`` per producer
thread. Consumers wait ``full[s]`` with parity ``(it / S) & 1``, issue the MMAs and release the stage
(wgmma: one arrive per consumer warpgroup once ``wgmma.wait_group`` says its reads are done; tcgen05:
``tcgen05.commit`` arrives when the MMAs have completed). ``ptxgen.model.sim.pipesim`` runs this plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scaled.blockfp8 import SCALE_WARP_LANES
from ..scaled.sfa_tma import SCALE_LANES as SFA_TMA_SCALE_LANES

from ...isa.shapes import (
    uses_setmaxnreg,
    TCGEN05_EPILOGUE_WARPS,
    PRODUCER_REGISTERS,
    producer_registers,
    register_pool_balance,
    WARPGROUP_THREADS,
    setmaxnreg_consumer_registers,
    entry_registers,
)
from ...isa.types import Arch, Consumers, Loader
from ..tile.derived import Derived
from ..tile.spec import TileSpec

PIPELINE_REF = "PTX ISA 9.7.13.15 'mbarrier' (#parallel-synchronization-and-communication-instructions-mbarrier)"


@dataclass(frozen=True)
class WarpRole:
    name: str  # "consumer", "producer", "mma", "epilogue"
    first_warp: int
    warps: int
    registers: int | None  # setmaxnreg target, None: keep the launch budget
    doc: str

    @property
    def first_thread(self) -> int:
        return self.first_warp * 32

    @property
    def threads(self) -> int:
        return self.warps * 32


@dataclass(frozen=True)
class Parity:
    """The phase parity a wait asks for at K-tile ``it``: ``((it / stages) & 1) ^ flip``."""

    stages: int
    flip: int

    def value(self, it: int) -> int:
        return ((it // self.stages) & 1) ^ self.flip


@dataclass(frozen=True)
class PipelinePlan:
    arch: Arch
    loader: Loader
    stages: int
    roles: tuple[WarpRole, ...]
    full_arrivals: int  # mbarrier.init count of full[s]: arrivals (besides TMA bytes) that complete one fill
    empty_arrivals: int  # mbarrier.init count of empty[s]: arrivals that release a stage
    producer_parity: Parity  # producer waits empty[s]
    consumer_parity: Parity  # consumers wait full[s]
    expect_tx_bytes: int  # TMA: bytes per stage, A and B; 0 for cp.async
    release_lag: int  # wgmma: a stage is released this many K-tiles after its MMAs were issued
    acc_barrier: bool  # tcgen05: acc_full, committed after the last K-tile, waited by the epilogue
    acc_empty_arrivals: int  # tcgen05: one per epilogue warp once it has read the accumulator out (0: none)
    acc_stages: int  # tcgen05: accumulators in TMEM (tile lt uses stage lt % acc_stages)
    acc_full_parity: Parity  # tcgen05, per CTA-local tile index: the epilogue waits acc_full[lt % acc_stages]
    acc_empty_parity: Parity  # the MMA warp waits acc_empty[lt % acc_stages] before accumulating into it
    entry_registers: int | None  # registers at launch when setmaxnreg is used (the SASS check expects them)
    pingpong: bool  # wgmma: consumer warpgroups take alternate tiles; their mainloops alternate through order[wg]
    derivation: tuple[Derived, ...]
    ctas: int = 1  # tcgen05: 2 for a CTA pair (ptxgen.derive.roles.ctapair): the leader arms and waits, both CTAs load
    # tcgen05: after its last K-tile the producer waits empty[s] of S more ring slots (CUTLASS load_tail), so no
    # tcgen05.commit arrival (multicast into the peer for a pair) is still in flight when the CTA exits
    producer_tail: bool = False
    # block-scaled CTA pair: full_arrivals is the leader's (2: its producer, the peer's relay); the peer's full[s]
    # counts peer_full_arrivals (its producer's arrive.expect_tx of its own scale-factor bytes)
    sf_relay: bool = False
    peer_full_arrivals: int = 1
    # block-FP8 --fp8-scale-load smem: the producer's scale warp's lanes, each arriving on full[s] (in full_arrivals)
    scale_warp_lanes: int = 0
    # wgmma consumers release a stage per thread (every consumer thread arrives after its own reads) instead of one
    # elected thread per warpgroup: they read it with plain loads too (the block-FP8 scale slots); empty_arrivals
    # counts the threads
    release_per_thread: bool = False

    @property
    def threads(self) -> int:
        return sum(r.threads for r in self.roles)

    def role(self, name: str) -> WarpRole:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)

    def has_role(self, name: str) -> bool:
        return any(r.name == name for r in self.roles)


def _roles(spec: TileSpec) -> tuple[tuple[WarpRole, ...], int | None]:
    tma = spec.loader is Loader.TMA
    if spec.arch is Arch.SM90A:
        nc = spec.consumer_warpgroups
        threads = WARPGROUP_THREADS * (nc + 1)
        use = uses_setmaxnreg(tma, nc)  # registers move from the TMA producer to the consumers at run time
        regs = (producer_registers(nc), setmaxnreg_consumer_registers(nc)) if use else (None, None)
        roles = (
            WarpRole("consumer", 0, 4 * nc, regs[1],
                     "2 consumer warpgroups taking alternate tiles (ping-pong): wgmma on the whole tile, then its epilogue"
                     if spec.consumers is Consumers.PINGPONG else f"{nc} consumer warpgroup(s): wgmma on 64-row slab wg, then the epilogue" if spec.consumer_slabs == 1 else
                     f"{nc} consumer warpgroups: wgmma on the {spec.consumer_slabs} 64-row slabs of rows "
                     f"{64 * spec.consumer_slabs} wg.. (one shared partial), then the epilogue"),
            WarpRole("producer", 4 * nc, 4, regs[0],
                     "producer warpgroup: one elected thread issues the TMA copies" if tma else "producer warpgroup: cp.async, 16 B a thread"),
        )
        return roles, (entry_registers(threads) if use else None)
    producer_warps = 1 if tma else 4
    return (
        WarpRole("epilogue", 0, TCGEN05_EPILOGUE_WARPS, None, "epilogue warps 0-3: warp w reads TMEM lanes 32w..32w+31 (tcgen05.ld)"),
        WarpRole("mma", 4, 1, None, "MMA warp: one elected thread issues tcgen05.mma and tcgen05.commit"),
        WarpRole("producer", 5, producer_warps, None,
                 "TMA warp: one elected thread issues the copies" if tma else "producer warpgroup: cp.async, 16 B a thread"),
    ), None


@dataclass(frozen=True)
class _Arrivals:
    full: int  # arrivals that complete a full barrier's phase
    empty: int  # and an empty barrier's
    scale_lanes: int  # of full: the scale warp's lanes (block FP8, --fp8-scale-load smem / cpasync / tma)
    sf_relay: bool  # the pair's leader also waits the peer's relay of its scale factors
    scale_warp: bool  # the producer's scale warp stages each stage's scales
    release_lag: int  # wgmma: a consumer releases the stage of the K-tile this many before


def _arrivals(spec: TileSpec, producer: WarpRole, tma: bool) -> _Arrivals:
    full_arrivals = 1 if tma else producer.threads
    sf_relay = spec.pair and spec.block_scaled  # the leader's full[s] also waits the peer's relay (derive.roles.ctapair)
    if sf_relay:
        full_arrivals = 2
    # block-scaled FP8 with --fp8-scale-load smem: each lane of the producer's scale warp arrives once it has stored the
    # stage's scales (derive.scaled.blockfp8: SCALE_WARP_LANES)
    # (--fp8-scale-load tma: the TMA thread copies the A scales inside its expect_tx; only lane 0 stages the B scales)
    scale_warp = spec.scale_load.staged
    scale_lanes = {"smem": SCALE_WARP_LANES, "cpasync": SCALE_WARP_LANES, "tma": SFA_TMA_SCALE_LANES}.get(spec.scale_load.value, 0)
    full_arrivals += scale_lanes
    pingpong = spec.consumers is Consumers.PINGPONG
    if spec.arch is Arch.SM90A:
        empty_arrivals = 1 if pingpong else spec.consumer_warpgroups  # pingpong: one warpgroup reads each stage
        # --fp8-scale-load smem/tma: each consumer thread also reads the stage's scale slots with ld.shared, and a
        # warpgroup's wgmma completion orders none of its threads' plain loads: every consumer thread arrives after its
        # own reads. compute-sanitizer racecheck flagged one arrive per warpgroup and one per warp after a
        # __syncwarp (2026-12-02: 3 hazards) and passes this form (0; runs/2026-12-02-stage-release-f32-store), at the same speed (+-1%).
        empty_arrivals *= WARPGROUP_THREADS if scale_warp else 1
        # A cluster: every consumer warpgroup of the cluster that reads a stage multicast into it releases it in
        # each CTA: (cluster M + cluster N - 1) x the warpgroups (CUTLASS PipelineTmaAsync multicast_consumer_arrival_count).
        cm, cn = spec.cluster.dims
        empty_arrivals *= cm + cn - 1
        # block-scaled FP8 (derive.scaled.blockfp8) and --promote 1 read each K-tile's partial sum: wait_group 0, then release
        # (--promote G > 1: wait_group 1 inside a group of K-tiles, wait_group 0 and the last release at its end)
        release_lag = 1 if spec.stages >= 2 and spec.fp8_blocks.value == "none" and spec.promote != 1 else 0
    else:
        empty_arrivals, release_lag = 1, 0
    return _Arrivals(full_arrivals, empty_arrivals, scale_lanes, sf_relay, scale_warp, release_lag)


def _barrier_fields(spec: TileSpec, roles, producer: WarpRole, ar: _Arrivals, tma: bool) -> list[Derived]:
    """warp_roles, full_arrivals, empty_arrivals and parity."""
    S, full_arrivals, empty_arrivals, scale_lanes = spec.stages, ar.full, ar.empty, ar.scale_lanes
    sf_relay, scale_warp = ar.sf_relay, ar.scale_warp
    cm, cn = spec.cluster.dims
    return [
        Derived("warp_roles", "; ".join(f"{r.name} warps {r.first_warp}..{r.first_warp + r.warps - 1}" for r in roles),
                f"{sum(r.threads for r in roles)} threads",
                "warp specialization: loading and MMA issue overlap; each role is one branch of the kernel", PIPELINE_REF),
        Derived("full_arrivals", full_arrivals,
                ("the leader's: 2 (its producer's mbarrier.arrive.expect_tx, the peer's relay of its scale factors); the "
                 "peer's: 1 (its producer's arrive.expect_tx of its SF bytes)") if sf_relay else
                f"1 (the elected thread's mbarrier.arrive.expect_tx) + {scale_lanes} (the scale warp's lanes, each "
                + ("once its cp.async copies of the scales have landed (cp.async.mbarrier.arrive.noinc)"
                   if spec.scale_load.value == "cpasync" else "after storing its scales") + "; --fp8-scale-load " + spec.scale_load.value + ("" if scale_lanes == SCALE_WARP_LANES else
                ": the A scales are a TMA copy inside the expect_tx bytes, lane 0 stores the B scales") + ")" if scale_warp else
                "1 (the elected thread's mbarrier.arrive.expect_tx)" if tma else f"{producer.threads} (one cp.async.mbarrier.arrive.noinc per producer thread)",
                "a stage is full when every arrival is in" + (" and the expected transaction bytes have landed" if tma else " (each fires once that thread's copies have landed)"),
                PIPELINE_REF),
        Derived("empty_arrivals", empty_arrivals,
                (f"{spec.consumer_warpgroups} consumer warpgroup(s) x {WARPGROUP_THREADS} threads: every consumer thread "
                 "arrives after its own ld.shared of the stage's scales (--fp8-scale-load smem, cpasync, tma; a warpgroup's wgmma "
                 "wait orders none of its threads' plain loads)"
                 + ("" if spec.cluster.size == 1 else f", on the empty barriers of both CTAs of the cluster ({cm + cn - 1} x)")
                 if scale_warp and spec.arch is Arch.SM90A else
                 f"{empty_arrivals} consumer warpgroup(s), one elected arrive each" if spec.cluster.size == 1 else
                 f"{empty_arrivals // spec.cluster.size} consumer warpgroup(s) x {spec.cluster.size} CTAs: each warpgroup arrives on the empty "
                 "barrier at this offset in both CTAs of the cluster (mapa + mbarrier.arrive.shared::cluster)")
                if spec.arch is Arch.SM90A else "1 (tcgen05.commit from the MMA thread)",
                "a stage may be refilled only once every reader has finished with it" + (
                    "; with multicast, the peer CTA's producer writes into this CTA's stage too, so the stage is free only when "
                    "the consumers of both CTAs have released it (CUTLASS PipelineTmaAsync: (cluster M + cluster N - 1) x "
                    "consumer warpgroups; include/cutlass/pipeline/sm90_pipeline.hpp)" if spec.cluster.size > 1 else ""), PIPELINE_REF),
        Derived("parity", "full: (it / S) & 1; empty: ((it / S) & 1) ^ 1",
                f"S = {S} stages; round r = it / S waits for phase r of full[s] and phase r - 1 of empty[s]",
                "try_wait.parity(p) returns once the phase with parity p has completed; a fresh barrier's previous "
                "phase (parity 1) counts as complete, so the producer's first round does not wait", PIPELINE_REF),
    ]


def _schedule_fields(spec: TileSpec, roles, entry, ar: _Arrivals, tma: bool, expect_tx_bytes: int) -> list[Derived]:
    """Ping-pong's order, the release lag or TMEM's accumulator barriers, expect_tx, the producer's tail, setmaxnreg."""
    S, release_lag, pingpong = spec.stages, ar.release_lag, spec.consumers is Consumers.PINGPONG
    D: list[Derived] = []
    if pingpong:
        D.append(Derived("pingpong", "order[0], order[1]",
                         "warpgroup w takes the CTA's tiles lt with lt mod 2 = w; before its j-th tile's mainloop it waits "
                         "order[w] with parity (j + w - 1) & 1, and after issuing that mainloop it arrives on order[1 - w]",
                         "the mainloops alternate, so one warpgroup's epilogue runs under the other's MMAs; and a warpgroup "
                         "only waits on full barriers once the other has consumed every earlier K-tile, so a parity wait "
                         "can never be a whole phase behind", "CUTLASS KernelTmaWarpSpecializedPingpong (OrderedSequenceBarrier)"))
    if spec.arch is Arch.SM90A:
        D.append(Derived("release_lag", release_lag, "1 with two or more stages, else 0; 0 where each K-tile's partial sum is "
                         "read after wait_group 0 (block FP8, --promote 1)",
                         "a consumer keeps one wgmma group in flight (wait_group 1) and releases the stage of the K-tile before; "
                         "with one stage that would deadlock (the producer could never refill it)", PIPELINE_REF))
    else:
        A = spec.accumulator_stages
        acc_empty = 4 * spec.cta_group
        D.append(Derived("acc_barriers", f"{A} accumulator stage(s) in TMEM, {A} x {spec.tmem_columns} columns; acc_full[{A}] 1, acc_empty[{A}] {acc_empty}",
                         f"tile lt accumulates into stage lt % {A}; acc_full: tcgen05.commit after the tile's last MMA; "
                         "acc_empty: one arrive per epilogue warp" + (" of both CTAs, on the leader's barrier" if spec.pair else "")
                         + "; waits use parity (lt / stages) & 1 (acc_empty flipped)",
                         "the epilogue reads a stage out while the MMAs of the next tile accumulate into the other; a stage is "
                         "overwritten only after the epilogue has read it", PIPELINE_REF))
    if tma:
        D.append(Derived("expect_tx_bytes", expect_tx_bytes, "A + B bytes of one stage" + (" + SFA + SFB bytes" if spec.block_scaled else "")
                         + (", both CTAs of the pair" if spec.pair else ""), "what full[s] waits for beyond its one arrival", PIPELINE_REF))
    if spec.arch is Arch.SM100A:
        D.append(Derived("producer_tail", f"{S} empty waits after the last K-tile",
                         f"ring slots it .. it + {S - 1} past the last one loaded: one wait on each stage's empty barrier",
                         "tcgen05.commit arrives on empty[s] asynchronously once the MMAs completed; the epilogue's acc_full "
                         "does not order those arrivals, so a CTA could exit (and a pair's peer too) with one still in flight. "
                         "CUTLASS drains them the same way (load_tail: 'avoid early exit of ctas in Cluster')", PIPELINE_REF))
    if entry:
        p, nc = roles[1].registers, roles[0].warps // 4
        D.append(Derived("setmaxnreg", f"producer {p}, consumers {roles[0].registers}",
                         f"launch {entry} a thread at {sum(r.threads for r in roles)} threads; the producer gives back "
                         f"({entry} - {p}) x 128; consumers take {entry} + ({entry} - {p}) / "
                         f"{nc}, rounded down to 8 = {roles[0].registers}; pool left {register_pool_balance(nc)} (>= 0)",
                         "the producer needs few registers; the consumers hold the accumulators"
                         + (f". Producer {p}, not {PRODUCER_REGISTERS}, at {nc} consumer warpgroups: so that the consumers get "
                            f"{roles[0].registers} (block FP8 at BM = 192 spills at 152; NVRTC 13.5, isa.shapes."
                            "PRODUCER_REGISTERS_BY_CONSUMERS)" if p != PRODUCER_REGISTERS else ""),
                         "PTX ISA 'setmaxnreg' (#miscellaneous-instructions-setmaxnreg)"))
    return D


def plan_pipeline(spec: TileSpec, expect_tx_bytes: int) -> PipelinePlan:
    roles, entry = _roles(spec)
    tma = spec.loader is Loader.TMA
    S = spec.stages
    producer = next(r for r in roles if r.name == "producer")
    ar = _arrivals(spec, producer, tma)
    full_arrivals, empty_arrivals, release_lag = ar.full, ar.empty, ar.release_lag
    sf_relay, scale_lanes, scale_warp = ar.sf_relay, ar.scale_lanes, ar.scale_warp
    pingpong = spec.consumers is Consumers.PINGPONG
    D = _barrier_fields(spec, roles, producer, ar, tma) + _schedule_fields(spec, roles, entry, ar, tma, expect_tx_bytes)
    return PipelinePlan(
        arch=spec.arch,
        loader=spec.loader,
        stages=S,
        roles=roles,
        full_arrivals=full_arrivals,
        empty_arrivals=empty_arrivals,
        producer_parity=Parity(S, 1),
        consumer_parity=Parity(S, 0),
        expect_tx_bytes=expect_tx_bytes if tma else 0,
        release_lag=release_lag,
        acc_barrier=spec.arch is Arch.SM100A,
        acc_empty_arrivals=TCGEN05_EPILOGUE_WARPS * spec.cta_group if spec.arch is Arch.SM100A else 0,  # the pair: both CTAs' epilogue warps
        acc_stages=spec.accumulator_stages if spec.arch is Arch.SM100A else 0,
        acc_full_parity=Parity(max(1, spec.accumulator_stages), 0),
        acc_empty_parity=Parity(max(1, spec.accumulator_stages), 1),
        entry_registers=entry,
        pingpong=pingpong,
        derivation=tuple(D),
        ctas=spec.cta_group,
        producer_tail=spec.arch is Arch.SM100A,
        sf_relay=sf_relay,
        peer_full_arrivals=1,
        scale_warp_lanes=scale_lanes,
        release_per_thread=scale_warp and spec.arch is Arch.SM90A,
    )
