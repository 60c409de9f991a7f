"""The pipeline simulation's configuration, result and state (ptxgen.model.sim.pipesim describes the model): one
CTA's barriers, what each shared-memory stage holds, and the checks on every fill and read. Independent: imports
nothing from ptxgen but the simulation's other modules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .mbarrier import MBarrier


@dataclass(frozen=True)
class Config:
    arch: str = "sm_90a"  # "sm_90a" (wgmma) or "sm_100a" (tcgen05)
    loader: str = "tma"  # "tma" or "cp.async"
    stages: int = 2
    k_tiles: int = 4
    full_arrivals: int = 1  # init count of full[s]
    empty_arrivals: int = 1  # init count of empty[s]
    producer_threads: int = 1  # threads that issue copies (TMA: the one elected thread)
    consumer_groups: int = 1  # sm_90a: consumer warpgroups (sm_100a: ignored, one MMA thread)
    producer_parity_flip: int = 1
    consumer_parity_flip: int = 0
    expect_tx_bytes: int = 0  # TMA: bytes announced per stage
    copy_bytes: tuple[int, ...] = ()  # TMA: bytes each copy of one stage delivers (empty: one copy of expect_tx_bytes)
    copies_per_thread: int = 1  # cp.async: copies each producer thread issues per stage
    release_lag: int = 0  # sm_90a: the arrive at K-tile it releases K-tile it - release_lag
    mma_wait_depth: int | None = None  # sm_90a: wgmma.wait_group N before that arrive (None: release_lag)
    acc_barrier: bool = False  # sm_100a: commit to acc_full after the last K-tile
    acc_stages: int = 1  # sm_100a: accumulators in TMEM; CTA tile tc uses stage tc % acc_stages
    mma_waits_acc_empty: bool = True  # False only in control tests
    epilogue_waits_acc: bool = True
    epilogue_warps: int = 4
    tiles_per_cta: int = 1
    pingpong: bool = False  # sm_90a: 2 consumer warpgroups take alternate tiles, ordered by order[0], order[1]
    order_barrier: bool = True  # pingpong: the warpgroups wait order[w] before each mainloop (false: run freely)
    order_parity_flip: int = 0  # pingpong: the order[w] wait of the j-th own tile uses ((j + w - 1) & 1) ^ this
    ctas: int = 1  # sm_100a: 2 = a CTA pair (tcgen05.mma.cta_group::2), CTA 0 the leader
    commit_mask: int = 0b11  # pair: the CTAs whose barrier each tcgen05.commit arrives on (bit c = CTA c)
    peer_copies_to_leader: bool = True  # pair: the peer's copies complete the leader's full[s] (false: its own)
    epilogue_to_leader: bool = True  # pair: every epilogue warp arrives on the leader's acc_empty (false: its own)
    acc_empty_arrivals: int | None = None  # init count of acc_empty (None: epilogue_warps)
    cluster_ctas: int = 1  # CTAs of a cluster, each with its own ring; > 1: TMA multicast of mc_copy_bytes
    mc_copy_bytes: tuple[int, ...] = ()  # bytes of each multicast copy a CTA issues per stage (lands in every CTA)
    release_peers: bool = True  # cluster: consumers arrive on the empty barrier of every CTA (False: own only)
    producer_tail: bool = False  # sm_100a: after its last K-tile the producer waits empty[s] of S more ring slots
    # sm_100a block scaling: bytes of each scale-factor cp.async.bulk a CTA issues per stage into its own stage; they
    # complete that CTA's OWN full[s] (cp.async.bulk has no .cta_group). In a pair the leader's expect_tx_bytes
    # includes the leader's; the peer arms its own full[s] (count peer_full_arrivals) with its own, and its relay
    # thread waits that barrier and arrives on the leader's full[s] (whose count full_arrivals is then 2).
    sf_copy_bytes: tuple[int, ...] = ()
    peer_full_arrivals: int = 1
    sf_relay: bool = True  # pair with sf_copy_bytes: the peer's relay runs (False: a control, no relay)
    relay_waits: bool = True  # the relay waits the peer's full[s] before arriving (False: a control)
    # sm_90a block-FP8 scales in shared memory: lanes of the producer's scale warp; each, per K-tile, waits empty[s]
    # (producer parity), stores its scales into stage s's slot and arrives on full[s] (counted in full_arrivals)
    scale_lanes: int = 0
    scale_lane_waits: bool = True  # False only in control tests: a lane stores without waiting empty[s]
    # sm_90a, cooperative: model each consumer warpgroup as this many warps. Each warp waits full[s], issues its part
    # of the warpgroup's MMAs (they start once every warp has issued), reads the stage's scale slots on its own, waits
    # for the MMAs, and releases the stage if release_per_warp (else only warp 0 of the warpgroup releases). The kernels
    # release per thread (derive.roles.pipeline release_per_thread): a modelled warp's arrive stands for its 32 threads'
    consumer_warps: int = 1
    release_per_warp: bool = False
    # sm_90a, TMA, one agent per warpgroup: the K-tiles of each CTA tile when they differ (the K-grouped walk: a tile
    # has its group's count, 0 for an empty group); empty: k_tiles for every tile. The ring's K-tile it counts every
    # earlier tile's K-tiles.
    tile_k: tuple[int, ...] = ()
    # ping-pong with tile_k: how a warpgroup finds its tile's first K-tile: "count" (the K-tiles of every earlier CTA
    # tile, the other warpgroup's included) or "product" (lt x its own tile's K-tiles: the uniform kernels' rule, a control)
    pingpong_first: str = "count"

    def k_of(self, lt: int) -> int:
        """K-tiles of CTA tile lt."""
        return self.tile_k[lt] if self.tile_k else self.k_tiles

    def first_it(self, lt: int) -> int:
        """The ring position of CTA tile lt's first K-tile."""
        return sum(self.tile_k[:lt]) if self.tile_k else lt * self.k_tiles

    @property
    def total_its(self) -> int:
        return sum(self.tile_k) if self.tile_k else self.k_tiles * self.tiles_per_cta

    def tile_of_it(self, it: int) -> int:
        """The CTA tile whose K-tile it is."""
        if not self.tile_k:
            return it // self.k_tiles
        lt, end = 0, self.tile_k[0]
        while it >= end and lt + 1 < len(self.tile_k):  # past the last tile: the last one
            lt += 1
            end += self.tile_k[lt]
        return lt

    @property
    def tma(self) -> bool:
        return self.loader == "tma"

    @property
    def wgmma(self) -> bool:
        return self.arch == "sm_90a"

    @property
    def readers(self) -> int:
        return self.consumer_groups if self.wgmma else 1

    @property
    def wait_depth(self) -> int:
        return self.release_lag if self.mma_wait_depth is None else self.mma_wait_depth

    def delivered(self) -> tuple[int, ...]:
        if self.cluster_ctas > 1:
            return self.copy_bytes
        return self.copy_bytes or (self.expect_tx_bytes,)

    def check(self) -> None:
        bad = [n for n in ("stages", "k_tiles", "full_arrivals", "empty_arrivals", "producer_threads",
                           "consumer_groups", "tiles_per_cta", "epilogue_warps", "copies_per_thread", "acc_stages") if getattr(self, n) < 1]
        if self.arch not in ("sm_90a", "sm_100a") or self.loader not in ("tma", "cp.async") or bad:
            raise ValueError(f"bad pipeline config {self} ({', '.join(bad) or 'arch/loader'})")
        if self.pingpong and (not self.wgmma or self.consumer_groups != 2):
            raise ValueError(f"bad pipeline config {self} (pingpong: sm_90a with 2 consumer warpgroups)")
        if self.ctas not in (1, 2) or (self.ctas == 2 and (self.wgmma or not self.tma)):
            raise ValueError(f"bad pipeline config {self} (a CTA pair is sm_100a with TMA)")
        if self.cluster_ctas > 1 and (not self.wgmma or not self.tma or not self.mc_copy_bytes):
            raise ValueError(f"bad pipeline config {self} (a cluster: sm_90a, TMA, multicast copies)")
        if self.consumer_warps > 1 and (not self.wgmma or self.pingpong or self.release_lag or self.mma_wait_depth):
            raise ValueError(f"bad pipeline config {self} (warps one by one: sm_90a cooperative, released after wait_group 0)")
        if self.tile_k and (len(self.tile_k) != self.tiles_per_cta or min(self.tile_k) < 0 or not self.wgmma
                            or not self.tma or self.consumer_warps > 1 or self.scale_lanes):
            raise ValueError(f"bad pipeline config {self} (tile_k: one count >= 0 per CTA tile; sm_90a, TMA, one agent a "
                             "warpgroup, no scale lanes)")
        if self.pingpong_first not in ("count", "product"):
            raise ValueError(f"bad pipeline config {self} (pingpong_first: count or product)")

    def reader_of(self, it: int) -> set[int]:
        """The readers whose MMAs read K-tile it (pingpong: the warpgroup of its CTA tile)."""
        return {self.tile_of_it(it) % 2} if self.pingpong else set(range(self.readers))

    def scale_readers_of(self, it: int) -> set:
        """Who reads K-tile it's scale slots: its MMAs' readers, or with consumer_warps > 1 each of their warps."""
        if self.consumer_warps > 1:
            return {(g, w) for g in self.reader_of(it) for w in range(self.consumer_warps)}
        return self.reader_of(it)


@dataclass
class Result:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def merge(self, other: "Result") -> None:
        self.ok &= other.ok
        self.problems += [p for p in other.problems if p not in self.problems]
        self.warnings += [w for w in other.warnings if w not in self.warnings]
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v


class WaitList:
    """Something agents can park on (a queue of async work, a wgmma pipe)."""

    def __init__(self):
        self.items: list = []
        self.waiters: list = []


class Sim:
    def __init__(self, cfg: Config, seed: int, prefix: str = "", cta: int | None = None):
        cfg.check()
        self.cfg, self.rng = cfg, random.Random(seed)
        self.cta = cta  # rank in a wgmma cluster (None: no cluster)
        self.cluster: list["Sim"] = [self]  # every CTA of the cluster, this one included
        S, P = cfg.stages, (prefix if cta is None else f"CTA {cta} ")
        self.full = [MBarrier(f"{P}full[{s}]", cfg.full_arrivals) for s in range(S)]
        self.empty = [MBarrier(f"{P}empty[{s}]", cfg.empty_arrivals) for s in range(S)]
        self.acc_full = [MBarrier(f"{P}acc_full[{i}]", 1) for i in range(cfg.acc_stages)]
        acc_empty = cfg.acc_empty_arrivals or cfg.epilogue_warps
        self.acc_empty = [MBarrier(f"{P}acc_empty[{i}]", acc_empty) for i in range(cfg.acc_stages)]
        self.order = [MBarrier(f"order[{w}]", 1) for w in range(2)] if cfg.pingpong else []
        self.fill = [dict() for _ in range(S)]  # stage -> {K-tile: pieces not landed yet}
        self.latest = [None] * S  # the newest K-tile whose fill has started in the stage
        self.holds = [None] * S  # the K-tile the stage holds completely (None: none, or being written)
        self.readers = [dict() for _ in range(S)]  # stage -> {K-tile: reader ids whose MMAs have not completed}
        self.mma_done: dict = {}  # (reader, cta tile) -> K-tiles whose MMAs completed
        self.epi_read: dict = {}  # cta tile -> epilogue warps that read the accumulator
        self.tma_q = WaitList()  # pieces in flight, any order
        self.cp_q = WaitList()  # items: producer thread ids with work queued
        self.cp_thread = [[] for _ in range(cfg.producer_threads)]
        self.pipes = [WaitList() for _ in range(cfg.readers)]  # MMA completions, in order
        self.issued = {}  # consumer_warps > 1: (warpgroup, K-tile) -> warps that issued their part of its MMAs
        self.arrivals = WaitList()  # tcgen05.commit arrivals in flight, any order
        self.exited = False  # every non-unit agent of the CTA (of the pair) has finished
        self.live = 0  # non-unit agents still running (set on the scheduling Sim)
        self.group: list["Sim"] = [self]  # the CTAs that exit together
        self.problems: list[str] = []
        self.ready: list = []
        self.counts = {"steps": 0, "pieces": 0, "mmas": 0, "arrivals": 0}
        # scale slots (scale_lanes): per stage and lane the K-tile stored there and the consumers that read it since
        self.sf_slot = [[None] * cfg.scale_lanes for _ in range(S)]
        self.sf_read = [[set() for _ in range(cfg.scale_lanes)] for _ in range(S)]

    # -- naming
    def tile(self, it: int) -> str:
        lt = self.cfg.tile_of_it(it)
        at = "" if self.cta is None else f" (CTA {self.cta})"
        return (f"K-tile {it}" if self.cfg.tiles_per_cta == 1 else f"K-tile {it - self.cfg.first_it(lt)} of CTA tile {lt}") + at

    def problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    # -- parking and waking
    def wake(self, obj) -> None:
        self.ready.extend(obj.waiters)
        obj.waiters.clear()

    def wait(self, bar: MBarrier, parity: int, who: str):
        while not bar.test_wait(parity):
            yield bar, f"{who} waits {bar.name} parity {parity}"

    def arrive(self, bar: MBarrier, tx: int | None = None) -> None:
        if self.exited:
            self.problem(f"an arrival lands on {bar.name} after the CTA exited (a tcgen05.commit still in flight at exit)")
        self.counts["arrivals"] += 1
        done = bar.arrive() if tx is None else bar.arrive_expect_tx(tx)
        if done:
            self.wake(bar)

    def push(self, q: WaitList, item) -> None:
        q.items.append(item)
        self.wake(q)


class Agent:
    def __init__(self, name: str, gen, speed: float, unit: bool = False):
        self.name, self.gen, self.speed, self.unit = name, gen, speed, unit
        self.blocked_on: str | None = None
        self.finished = False


# ---- shared-memory bookkeeping ---------------------------------------------------------------------------


def begin_fill(sim: Sim, s: int, it: int, pieces: int) -> None:
    """A copy for K-tile it is issued into stage s: every reader of an older K-tile must be done."""
    for old, who in sim.readers[s].items():
        if old != it and who:
            names = ", ".join(sorted(map(str, who)))
            sim.problem(f"early overwrite: the producer writes {sim.tile(it)} into stage {s} while the MMAs of "
                        f"reader(s) {names} on {sim.tile(old)} have not completed (empty[{s}] let it through)")
    if sim.latest[s] != it:
        sim.fill[s][it] = pieces
        sim.latest[s], sim.holds[s] = it, None
        sim.readers[s][it] = sim.cfg.reader_of(it)
    elif sim.cfg.cluster_ctas > 1:  # another CTA's multicast (or this CTA's own copies) into a fill already begun
        sim.fill[s][it] = sim.fill[s].get(it, 0) + pieces
        sim.holds[s] = None


def land(sim: Sim, s: int, it: int) -> None:
    sim.counts["pieces"] += 1
    sim.fill[s][it] -= 1
    if sim.fill[s][it] == 0:
        del sim.fill[s][it]
        if sim.latest[s] == it:
            sim.holds[s] = it


def check_read(sim: Sim, reader: int, s: int, it: int) -> None:
    left = sim.fill[s].get(it)
    others = [j for j in sim.fill[s] if j != it]
    if left:
        sim.problem(f"torn read: reader {reader} issues MMAs on {sim.tile(it)} in stage {s} with {left} piece(s) "
                    f"not landed (full[{s}] completed early)")
    elif sim.holds[s] != it:
        held = describe_stage(sim, s)
        sim.problem(f"stale read: reader {reader} issues MMAs on {sim.tile(it)} but stage {s} holds {held} "
                    f"(full[{s}] wait returned too early)")
    elif others:
        sim.problem(f"torn read: reader {reader} issues MMAs on {sim.tile(it)} in stage {s} while bytes of "
                    f"{sim.tile(others[0])} are still landing there")


def check_scale_read(sim: Sim, reader: int, s: int, it: int) -> None:
    """Consumer ``reader`` reads stage s's scale slot for K-tile it (after its full[s] wait, before its release)."""
    for lane in range(sim.cfg.scale_lanes):
        if sim.sf_slot[s][lane] != it:
            held = "nothing" if sim.sf_slot[s][lane] is None else sim.tile(sim.sf_slot[s][lane])
            sim.problem(f"stale scales: reader {reader} reads lane {lane}'s slot of stage {s} for {sim.tile(it)} but it "
                        f"holds {held}")
            return
        sim.sf_read[s][lane].add(reader)


def store_scales(sim: Sim, lane: int, s: int, it: int) -> None:
    """Scale lane ``lane`` stores K-tile it's scales into stage s's slot; the K-tile there must have been read by every
    consumer warpgroup that reads it."""
    old = sim.sf_slot[s][lane]
    if old is not None and not sim.cfg.scale_readers_of(old) <= sim.sf_read[s][lane]:
        sim.problem(f"scale lane {lane} overwrites stage {s}'s slot ({sim.tile(old)}) before every consumer read it")
    sim.sf_slot[s][lane], sim.sf_read[s][lane] = it, set()


def describe_stage(sim: Sim, s: int) -> str:
    if sim.holds[s] is not None:
        return sim.tile(sim.holds[s])
    return "nothing yet" if sim.latest[s] is None else f"part of {sim.tile(sim.latest[s])}"


def mma_complete(sim: Sim, reader: int, s: int, it: int) -> None:
    sim.counts["mmas"] += 1
    sim.readers[s].get(it, set()).discard(reader)
    if not sim.readers[s].get(it, True):
        del sim.readers[s][it]
    key = (reader, sim.cfg.tile_of_it(it))
    sim.mma_done[key] = sim.mma_done.get(key, 0) + 1


def check_acc_read(sim: Sim, reader: int, tc: int, who: str) -> None:
    done = sim.mma_done.get((reader, tc), 0)
    if done != sim.cfg.k_of(tc):
        sim.problem(f"early accumulator read: {who} reads the accumulator of CTA tile {tc} after only {done} of "
                    f"{sim.cfg.k_of(tc)} K-tiles' MMAs completed")
