"""An independent simulator of the warp-specialized mbarrier pipeline (imports nothing from ptxgen).

The model
---------
**mbarrier** (PTX ISA 'mbarrier'): ``init(count)`` sets pending arrivals = count, tx-count = 0, phase = 0.
``arrive`` decrements pending; ``expect_tx(b)`` adds b to tx-count (``arrive.expect_tx`` expects first,
then arrives); ``complete_tx(b)`` subtracts b. A phase completes when pending == 0 and tx-count == 0: the
phase number increments and pending resets to count. ``try_wait.parity(p)`` succeeds iff the phase with
parity p has completed, i.e. iff ``(phase & 1) != p``: on a fresh barrier parity 1 passes at once and
parity 0 waits for phase 0. An arrive with no arrival pending is undefined behaviour and is reported.

**The ring**: S stages; K-tile ``it`` (counted over all tiles of the CTA) uses stage ``it % S``, which has a
``full`` and an ``empty`` barrier. Agents are state machines written as generators: every ``yield`` is one
scheduling point (one atomic step), the generator's position is the agent's state, and a blocked agent
parks on the barrier (or queue) it waits for until that object changes:

* producer, TMA: one thread. Waits ``empty[s]`` with parity ``((it / S) & 1) ^ producer_parity_flip``,
  does ``arrive.expect_tx(full[s], expect_tx_bytes)``, then issues the copies (``copy_bytes``). Each copy
  lands later in 1-3 pieces, in any order, each piece doing ``complete_tx`` of its bytes on full[s].
* producer, cp.async: ``producer_threads`` threads. Each waits empty[s] itself, issues
  ``copies_per_thread`` copies and a ``cp.async.mbarrier.arrive.noinc`` on full[s]; the copies land in any
  order, the arrive fires only once every earlier copy of that thread has landed.
* sm_90a (wgmma): ``consumer_groups`` warpgroups. Each waits full[s] with parity
  ``((it / S) & 1) ^ consumer_parity_flip``, issues its MMAs (one wgmma group, completing later, in order),
  then ``wgmma.wait_group(mma_wait_depth)`` and one arrive on the empty barrier of K-tile
  ``it - release_lag``; after the last K-tile ``wait_group(0)``, the remaining releases, then it reads
  its accumulator (the epilogue).
* sm_90a ping-pong (``pingpong``): 2 consumer warpgroups take the CTA's tiles in turn: warpgroup w runs the
  tiles lt with ``lt % 2 == w`` (its ``it`` jumps to ``lt * k_tiles``), each K-tile is read by that warpgroup
  alone (so ``empty_arrivals`` is 1). Two more barriers ``order[0]``, ``order[1]`` (count 1): before the
  mainloop of its j-th own tile (lt = 2j + w), if lt >= 1, warpgroup w waits ``order[w]`` with parity
  ``((j + w - 1) & 1) ^ order_parity_flip`` (skipped when ``order_barrier`` is false); after issuing the
  tile's last MMAs (and that K-tile's release) it arrives on ``order[1 - w]``, then ``wait_group(0)``, the
  remaining releases and the epilogue, as above. The order makes the mainloops alternate; without it a
  warpgroup's parity wait on full[s] can be a whole phase behind and pass on the wrong phase.
* sm_100a (tcgen05): one MMA thread waits full[s], issues the MMAs and ``tcgen05.commit`` to empty[s]; the
  tensor core completes MMAs in order and a commit arrives once everything issued before it completed.
  CTA tile tc accumulates into TMEM stage a = tc % acc_stages. After its last K-tile the thread commits to
  ``acc_full[a]`` (count 1). ``epilogue_warps`` warps wait acc_full[a] with parity ``(tc / acc_stages) & 1``
  (unless ``epilogue_waits_acc`` is false), read the accumulator and arrive on ``acc_empty[a]``. Before a
  tile's first MMA the MMA thread waits ``acc_empty[a]`` (count = epilogue warps, parity flipped; the
  first round passes at once); below, the older wording for one stage:
  with ``tiles_per_cta > 1`` the MMA thread waits ``acc_empty`` (count = epilogue warps, parity
  ``(tile & 1) ^ 1``) before the first MMA of the next tile; the epilogue warps arrive on it.

* sm_100a CTA pair (``ctas`` = 2, ``tcgen05.mma.cta_group::2``): each CTA has its own ring, accumulator barriers,
  shared-memory stages and TMA producer; only CTA 0 (the leader) has an MMA thread. Each producer waits its
  own ``empty[s]``; the leader's producer alone does ``arrive.expect_tx`` on the leader's ``full[s]`` with both
  CTAs' bytes (``expect_tx_bytes``), and every copy of both CTAs completes the leader's ``full[s]`` (the peer's
  copies complete its own ``full[s]`` instead when ``peer_copies_to_leader`` is false). The MMA thread waits the
  leader's ``full[s]``, reads the stage in BOTH CTAs (stale / torn reads are checked in each), and its commits
  arrive on ``empty[s]`` (and after a tile's last K-tile ``acc_full[a]``) of every CTA in ``commit_mask``. Each
  CTA's ``epilogue_warps`` warps wait their own ``acc_full[a]`` and arrive on the LEADER's ``acc_empty[a]``
  (count ``acc_empty_arrivals``), or on their own when ``epilogue_to_leader`` is false.

* a cluster (``cluster_ctas`` = 2, sm_90a TMA): every CTA has its own ring, agents and units, all run by one
  scheduler. Each CTA's producer issues its own copies (``copy_bytes``) and its share of the shared operand
  (``mc_copy_bytes``), the latter multicast: every piece lands in the stage of the same index in every CTA
  of the cluster and completes tx bytes on that CTA's full barrier (PTX ``.multicast::cluster``). Each CTA
  announces ``expect_tx_bytes`` (its own bytes plus the whole shared operand). Consumers release a stage
  on the empty barrier of every CTA (``release_peers``; False only in control tests: own CTA only).

A randomized scheduler (seeded) runs one ready agent per step; every agent, including the asynchronous
units that deliver TMA pieces, cp.async completions and MMA completions, gets a random speed per run so
that some schedules let a unit lag far behind. Shared-memory contents are tracked per stage (which K-tile
each piece holds) and MMA completion per K-tile, which gives the checks:

* deadlock: no agent can run and work remains (names each blocked agent and its barrier's state);
* early overwrite: the producer issues a copy into a stage whose previous K-tile's MMAs have not all
  completed;
* stale / torn read: MMAs are issued on a stage that does not hold all of K-tile ``it``;
* the epilogue reads the accumulator before all MMAs of that tile completed (or the MMAs of the next tile
  start before the epilogue read it);
* warnings: a barrier ends mid-phase (arrivals pending or tx-count != 0) that nothing will consume.

API: ``simulate(cfg, seed) -> Result`` (``cfg``: a :class:`Config` or a dict of its fields);
``explore(cfg, seeds) -> Result`` merges many seeds, without repeating a problem. ``Result``: ``ok``,
``problems`` (strings naming the K-tile, stage and barrier), ``warnings``, ``counts`` (steps, pieces
landed, MMAs completed, arrivals, runs). ``MBarrier`` is the primitive on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


# ---- the mbarrier primitive ----------------------------------------------------------------------------


class MBarrier:
    def __init__(self, name: str, count: int):
        self.name, self.count = name, count
        self.pending, self.tx, self.phase = count, 0, 0
        self.waiters: list = []
        self.misuse: list[str] = []

    def _maybe_complete(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            return True
        return False

    def arrive(self) -> bool:
        """One arrival; True when it completed the phase."""
        if self.pending == 0:
            self.misuse.append(f"arrive on {self.name} in phase {self.phase} with no arrival pending (undefined behaviour)")
            return False
        self.pending -= 1
        return self._maybe_complete()

    def expect_tx(self, nbytes: int) -> bool:
        self.tx += nbytes
        return self._maybe_complete()

    def arrive_expect_tx(self, nbytes: int) -> bool:
        self.tx += nbytes
        return self.arrive()

    def complete_tx(self, nbytes: int) -> bool:
        self.tx -= nbytes
        return self._maybe_complete()

    def test_wait(self, parity: int) -> bool:
        """try_wait.parity: has the phase with this parity completed?"""
        return (self.phase & 1) != parity

    def mid_phase(self) -> bool:
        return self.pending != self.count or self.tx != 0

    def state(self) -> str:
        return f"{self.name}: phase {self.phase}, {self.pending} of {self.count} arrivals pending, tx-count {self.tx}"


# ---- configuration and result ----------------------------------------------------------------------


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

    def reader_of(self, it: int) -> set[int]:
        """The readers whose MMAs read K-tile it (pingpong: the warpgroup of its CTA tile)."""
        return {(it // self.k_tiles) % 2} if self.pingpong else set(range(self.readers))


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


# ---- the simulation state ----------------------------------------------------------------------------


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
        self.problems: list[str] = []
        self.ready: list = []
        self.counts = {"steps": 0, "pieces": 0, "mmas": 0, "arrivals": 0}

    # -- naming
    def tile(self, it: int) -> str:
        K = self.cfg.k_tiles
        at = "" if self.cta is None else f" (CTA {self.cta})"
        return (f"K-tile {it}" if self.cfg.tiles_per_cta == 1 else f"K-tile {it % K} of CTA tile {it // K}") + at

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
        self.counts["arrivals"] += 1
        done = bar.arrive() if tx is None else bar.arrive_expect_tx(tx)
        if done:
            self.wake(bar)

    def push(self, q: WaitList, item) -> None:
        q.items.append(item)
        self.wake(q)


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


def describe_stage(sim: Sim, s: int) -> str:
    if sim.holds[s] is not None:
        return sim.tile(sim.holds[s])
    return "nothing yet" if sim.latest[s] is None else f"part of {sim.tile(sim.latest[s])}"


def mma_complete(sim: Sim, reader: int, s: int, it: int) -> None:
    sim.counts["mmas"] += 1
    sim.readers[s].get(it, set()).discard(reader)
    if not sim.readers[s].get(it, True):
        del sim.readers[s][it]
    key = (reader, it // sim.cfg.k_tiles)
    sim.mma_done[key] = sim.mma_done.get(key, 0) + 1


def check_acc_read(sim: Sim, reader: int, tc: int, who: str) -> None:
    done = sim.mma_done.get((reader, tc), 0)
    if done != sim.cfg.k_tiles:
        sim.problem(f"early accumulator read: {who} reads the accumulator of CTA tile {tc} after only {done} of "
                    f"{sim.cfg.k_tiles} K-tiles' MMAs completed")


# ---- the agents (generators; each yield is a scheduling point) ----------------------------------------


def producer_parity(cfg: Config, it: int) -> int:
    return ((it // cfg.stages) & 1) ^ cfg.producer_parity_flip


def consumer_parity(cfg: Config, it: int) -> int:
    return ((it // cfg.stages) & 1) ^ cfg.consumer_parity_flip


def tma_producer(sim: Sim):
    cfg = sim.cfg
    for it in range(cfg.k_tiles * cfg.tiles_per_cta):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"TMA producer ({sim.tile(it)})")
        sim.arrive(sim.full[s], tx=cfg.expect_tx_bytes)
        yield
        pieces = [p for b in cfg.delivered() for p in split(sim.rng, b)]
        if pieces:
            begin_fill(sim, s, it, len(pieces))
        for p in pieces:
            sim.push(sim.tma_q, (s, it, p))
        if cfg.cluster_ctas > 1:  # this CTA's share of the shared operand, into every CTA's stage s
            yield
            for dst in sim.cluster:
                mc = [p for b in cfg.mc_copy_bytes for p in split(sim.rng, b)]
                begin_fill(dst, s, it, len(mc))
                for p in mc:
                    dst.push(dst.tma_q, (s, it, p))
        yield


def split(rng: random.Random, nbytes: int) -> list[int]:
    """A copy's bytes land in 1-3 pieces."""
    cuts = sorted(rng.sample(range(1, nbytes), min(rng.randrange(3), nbytes - 1))) if nbytes > 1 else []
    edges = [0, *cuts, nbytes]
    return [b - a for a, b in zip(edges, edges[1:])]


def tma_unit(sim: Sim):
    q = sim.tma_q.items
    while True:
        while not q:
            yield sim.tma_q, None
        i = sim.rng.randrange(len(q))
        q[i], q[-1] = q[-1], q[i]
        s, it, nbytes = q.pop()
        land(sim, s, it)
        if sim.full[s].complete_tx(nbytes):
            sim.wake(sim.full[s])
        yield


def cp_producer(sim: Sim, t: int):
    cfg = sim.cfg
    n = cfg.copies_per_thread
    for it in range(cfg.k_tiles * cfg.tiles_per_cta):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"cp.async producer thread {t} ({sim.tile(it)})")
        begin_fill(sim, s, it, n * cfg.producer_threads)
        if not sim.cp_thread[t]:
            sim.push(sim.cp_q, t)
        sim.cp_thread[t] += [("copy", s, it)] * n + [("arrive", s, it)]
        yield


def cp_unit(sim: Sim):
    """Lands any in-flight copy of a random thread, or fires its arrive once every earlier copy landed."""
    threads = sim.cp_q.items
    while True:
        while not threads:
            yield sim.cp_q, None
        k = sim.rng.randrange(len(threads))
        queue = sim.cp_thread[threads[k]]
        first_arrive = next(i for i, item in enumerate(queue) if item[0] == "arrive")
        kind, s, it = queue.pop(sim.rng.randrange(first_arrive) if first_arrive else 0)
        if kind == "copy":
            land(sim, s, it)
        else:
            sim.arrive(sim.full[s])
        if not queue:
            threads[k] = threads[-1]
            threads.pop()
        yield


def mma_unit(sim: Sim, reader: int):
    """The tensor core: completes one reader's MMAs and commits in issue order."""
    pipe = sim.pipes[reader]
    while True:
        while not pipe.items:
            yield pipe, None
        kind, s, it = pipe.items.pop(0)
        if kind == "mma":
            mma_complete(sim, reader, s, it)
        else:
            sim.arrive(s)  # a tcgen05.commit: s is the barrier
        sim.wake(pipe)
        yield


def wgmma_mainloop(sim: Sim, g: int, lt: int, who: str):
    """Consumer warpgroup g's K-tiles of CTA tile lt: wait full, MMA, wait_group(depth), release K-tile kt - lag."""
    cfg = sim.cfg
    K, S, lag = cfg.k_tiles, cfg.stages, cfg.release_lag
    pipe = sim.pipes[g]
    for kt in range(K):
        it = lt * K + kt
        s = it % S
        yield from sim.wait(sim.full[s], consumer_parity(cfg, it), f"{who} ({sim.tile(it)})")
        check_read(sim, g, s, it)
        sim.push(pipe, ("mma", s, it))
        yield
        yield from wait_group(pipe, cfg.wait_depth, f"{who} ({sim.tile(it)})")
        if kt >= lag:
            release(sim, (it - lag) % S)
        yield


def release(sim: Sim, s: int) -> None:
    """A consumer warpgroup is done with stage s: arrive on empty[s] of every CTA of the cluster (or its own)."""
    for dst in sim.cluster if sim.cfg.release_peers else [sim]:
        dst.arrive(dst.empty[s])


def wgmma_tile_end(sim: Sim, g: int, lt: int, who: str):
    """wait_group(0), release the tile's last K-tiles, then the epilogue reads the accumulator."""
    cfg = sim.cfg
    K, S, lag = cfg.k_tiles, cfg.stages, cfg.release_lag
    yield from wait_group(sim.pipes[g], 0, f"{who} (end of CTA tile {lt})")
    for kt in range(max(0, K - lag), K):
        release(sim, (lt * K + kt) % S)
    check_acc_read(sim, g, lt, f"{who}'s epilogue")
    yield


def wgmma_consumer(sim: Sim, g: int):
    who = f"consumer warpgroup {g}"
    for tc in range(sim.cfg.tiles_per_cta):
        yield from wgmma_mainloop(sim, g, tc, who)
        yield from wgmma_tile_end(sim, g, tc, who)


def pingpong_consumer(sim: Sim, w: int):
    """Warpgroup w of the ping-pong mode: the CTA tiles lt = w, w + 2, ...; the order barriers alternate the mainloops."""
    cfg = sim.cfg
    who = f"consumer warpgroup {w}"
    for j, lt in enumerate(range(w, cfg.tiles_per_cta, 2)):
        if lt >= 1 and cfg.order_barrier:
            yield from sim.wait(sim.order[w], ((j + w - 1) & 1) ^ cfg.order_parity_flip, f"{who} (CTA tile {lt}, its tile {j})")
        yield from wgmma_mainloop(sim, w, lt, who)
        sim.arrive(sim.order[1 - w])  # after the warpgroup's named barrier: its mainloop is issued
        yield
        yield from wgmma_tile_end(sim, w, lt, who)


def wait_group(pipe: WaitList, depth: int, who: str):
    while sum(1 for item in pipe.items if item[0] == "mma") > depth:
        yield pipe, f"{who} in wgmma.wait_group({depth})"


def tcgen05_issuer(sim: Sim):
    cfg = sim.cfg
    K, S = cfg.k_tiles, cfg.stages
    pipe = sim.pipes[0]
    A = cfg.acc_stages
    for tc in range(cfg.tiles_per_cta):
        a = tc % A
        if cfg.mma_waits_acc_empty:
            yield from sim.wait(sim.acc_empty[a], ((tc // A) & 1) ^ 1, f"MMA thread (CTA tile {tc}, accumulator {a})")
        if tc >= A and len(sim.epi_read.get(tc - A, ())) < cfg.epilogue_warps:
            sim.problem(f"early accumulator overwrite: CTA tile {tc}'s MMAs start in accumulator {a} before the epilogue "
                        f"read tile {tc - A} out of it")
        for kt in range(K):
            it = tc * K + kt
            s = it % S
            yield from sim.wait(sim.full[s], consumer_parity(cfg, it), f"MMA thread ({sim.tile(it)})")
            check_read(sim, 0, s, it)
            sim.push(pipe, ("mma", s, it))
            sim.push(pipe, ("commit", sim.empty[s], it))
            yield
        if cfg.acc_barrier:
            sim.push(pipe, ("commit", sim.acc_full[a], None))
            yield


def epilogue_warp(sim: Sim, w: int):
    cfg = sim.cfg
    A = cfg.acc_stages
    for tc in range(cfg.tiles_per_cta):
        a = tc % A
        if cfg.epilogue_waits_acc:
            yield from sim.wait(sim.acc_full[a], (tc // A) & 1, f"epilogue warp {w} (CTA tile {tc}, accumulator {a})")
        check_acc_read(sim, 0, tc, f"epilogue warp {w}")
        sim.epi_read.setdefault(tc, set()).add(w)
        yield
        sim.arrive(sim.acc_empty[a])
        yield


# ---- the CTA pair (ctas = 2): one Sim per CTA sharing the scheduler, problems and counts -----------------


def pair_producer(sims: list, c: int, q: WaitList):
    """CTA c's TMA producer: its own empty[s]; the leader arms full[s] for both CTAs; the copies complete the
    leader's full[s] (or, as a control, their own CTA's)."""
    sim = sims[c]
    cfg = sim.cfg
    target = sims[0] if cfg.peer_copies_to_leader else sim
    for it in range(cfg.k_tiles * cfg.tiles_per_cta):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"CTA {c} TMA producer ({sim.tile(it)})")
        if c == 0:
            sim.arrive(sim.full[s], tx=cfg.expect_tx_bytes)
            yield
        pieces = [p for b in cfg.delivered() for p in split(sim.rng, b)]
        begin_fill(sim, s, it, len(pieces))
        for p in pieces:
            sim.push(q, (sim, s, it, p, target.full[s]))
        yield


def pair_tma_unit(sim: Sim, q: WaitList):
    while True:
        while not q.items:
            yield q, None
        i = sim.rng.randrange(len(q.items))
        q.items[i], q.items[-1] = q.items[-1], q.items[i]
        owner, s, it, nbytes, bar = q.items.pop()
        land(owner, s, it)
        if bar.complete_tx(nbytes):
            sim.wake(bar)
        yield


def _multicast(sims: list, mask: int, pick) -> list:
    return [pick(sims[c]) for c in range(len(sims)) if mask >> c & 1]


def pair_issuer(sims: list, pipe: WaitList):
    """The leader's MMA thread: waits the leader's barriers; its MMAs read the stage of both CTAs."""
    lead = sims[0]
    cfg = lead.cfg
    K, S, A = cfg.k_tiles, cfg.stages, cfg.acc_stages
    for tc in range(cfg.tiles_per_cta):
        a = tc % A
        yield from lead.wait(lead.acc_empty[a], ((tc // A) & 1) ^ 1, f"MMA thread (CTA tile {tc}, accumulator {a})")
        for c, sim in enumerate(sims):
            if tc >= A and len(sim.epi_read.get(tc - A, ())) < cfg.epilogue_warps:
                lead.problem(f"early accumulator overwrite: CTA tile {tc}'s MMAs start in accumulator {a} before CTA {c}'s "
                             f"epilogue read tile {tc - A} out of it")
        for kt in range(K):
            it = tc * K + kt
            s = it % S
            yield from lead.wait(lead.full[s], consumer_parity(cfg, it), f"MMA thread ({lead.tile(it)})")
            for c, sim in enumerate(sims):
                n = len(sim.problems)
                check_read(sim, 0, s, it)
                if len(sim.problems) > n:  # name the CTA whose stage was read
                    sim.problems[-1] = f"CTA {c}: " + sim.problems[-1]
            lead.push(pipe, ("mma", s, it))
            lead.push(pipe, ("commit", _multicast(sims, cfg.commit_mask, lambda x: x.empty[s]), it))
            yield
        lead.push(pipe, ("commit", _multicast(sims, cfg.commit_mask, lambda x: x.acc_full[a]), None))
        yield


def pair_mma_unit(sims: list, pipe: WaitList):
    """The tensor core of the pair: an MMA completes in both CTAs; a commit arrives on every barrier of its mask."""
    lead = sims[0]
    while True:
        while not pipe.items:
            yield pipe, None
        kind, what, it = pipe.items.pop(0)
        if kind == "mma":
            for sim in sims:
                mma_complete(sim, 0, what, it)
        else:
            for bar in what:
                lead.arrive(bar)
        lead.wake(pipe)
        yield


def pair_epilogue_warp(sims: list, c: int, w: int):
    sim = sims[c]
    cfg = sim.cfg
    A = cfg.acc_stages
    target = sims[0] if cfg.epilogue_to_leader else sim
    for tc in range(cfg.tiles_per_cta):
        a = tc % A
        yield from sim.wait(sim.acc_full[a], (tc // A) & 1, f"CTA {c} epilogue warp {w} (CTA tile {tc}, accumulator {a})")
        check_acc_read(sim, 0, tc, f"CTA {c} epilogue warp {w}")
        sim.epi_read.setdefault(tc, set()).add(w)
        yield
        sim.arrive(target.acc_empty[a])
        yield


def make_pair(cfg: Config, seed: int) -> tuple[Sim, list, list]:
    """(the leader's Sim, both Sims, the agents): the second Sim shares the first's ready list, problems and counts."""
    sims = [Sim(cfg, seed, prefix=f"CTA{c} ") for c in range(cfg.ctas)]
    for other in sims[1:]:
        other.rng, other.problems, other.counts = sims[0].rng, sims[0].problems, sims[0].counts
    rng, q, pipe = sims[0].rng, WaitList(), WaitList()
    spec = [(f"CTA {c} TMA producer", pair_producer(sims, c, q), False) for c in range(cfg.ctas)]
    spec += [("TMA unit", pair_tma_unit(sims[0], q), True), ("MMA thread", pair_issuer(sims, pipe), False),
             ("MMA unit", pair_mma_unit(sims, pipe), True)]
    spec += [(f"CTA {c} epilogue warp {w}", pair_epilogue_warp(sims, c, w), False)
             for c in range(cfg.ctas) for w in range(cfg.epilogue_warps)]
    return sims[0], sims, [Agent(name, gen, rng.choice((0.05, 0.2, 0.5, 1.0)), unit) for name, gen, unit in spec]


# ---- the scheduler ---------------------------------------------------------------------------------------


class Agent:
    def __init__(self, name: str, gen, speed: float, unit: bool = False):
        self.name, self.gen, self.speed, self.unit = name, gen, speed, unit
        self.blocked_on: str | None = None
        self.finished = False


def make_agents(sim: Sim) -> list[Agent]:
    cfg, rng = sim.cfg, sim.rng
    at = "" if sim.cta is None else f"CTA {sim.cta} "
    spec = []
    if cfg.tma:
        spec += [("TMA producer", tma_producer(sim), False), ("TMA unit", tma_unit(sim), True)]
    else:
        spec += [(f"cp.async thread {t}", cp_producer(sim, t), False) for t in range(cfg.producer_threads)]
        spec.append(("cp.async unit", cp_unit(sim), True))
    if cfg.wgmma:
        consumer = pingpong_consumer if cfg.pingpong else wgmma_consumer
        spec += [(f"consumer warpgroup {g}", consumer(sim, g), False) for g in range(cfg.consumer_groups)]
    else:
        spec.append(("MMA thread", tcgen05_issuer(sim), False))
        spec += [(f"epilogue warp {w}", epilogue_warp(sim, w), False) for w in range(cfg.epilogue_warps)]
    spec += [(f"MMA unit {r}", mma_unit(sim, r), True) for r in range(cfg.readers)]
    return [Agent(at + name, gen, rng.choice((0.05, 0.2, 0.5, 1.0)), unit) for name, gen, unit in spec]


def pick(sim: Sim) -> int:
    """A random ready agent, biased by its speed (rejection sampling)."""
    ready, rng = sim.ready, sim.rng
    while True:
        i = rng.randrange(len(ready))
        if rng.random() < ready[i].speed:
            return i


def step(sim: Sim, i: int) -> None:
    agent = sim.ready[i]
    try:
        parked = next(agent.gen)
    except StopIteration:
        agent.finished = True
        parked = None
    if agent.finished or parked is not None:
        sim.ready[i] = sim.ready[-1]
        sim.ready.pop()
    if parked is not None:
        obj, agent.blocked_on = parked
        obj.waiters.append(agent)


def simulate(cfg: Config | dict, seed: int = 0, max_steps: int = 10_000_000) -> Result:
    cfg = Config(**cfg) if isinstance(cfg, dict) else cfg
    if cfg.ctas == 2:
        sim, sims, agents = make_pair(cfg, seed)
    else:
        sim = Sim(cfg, seed, cta=0 if cfg.cluster_ctas > 1 else None)
        sims = [sim] + [Sim(cfg, seed, cta=r) for r in range(1, cfg.cluster_ctas)]
        for c in sims:  # one scheduler, one random stream, one problem list for the whole cluster
            c.cluster, c.rng, c.problems, c.counts = sims, sim.rng, sim.problems, sim.counts
        agents = [a for c in sims for a in make_agents(c)]
    sim.ready = list(agents)
    for other in sims[1:]:
        other.ready = sim.ready  # one scheduler: a barrier of any CTA wakes its waiters into the same list
    while sim.ready and sim.counts["steps"] < max_steps:
        step(sim, pick(sim))
        sim.counts["steps"] += 1
    if sim.ready:
        sim.problem(f"step limit {max_steps} reached")
    bars = tuple(b for x in sims for b in all_barriers(x))
    report_deadlock(sim, agents, bars)
    for b in bars:
        for m in b.misuse:
            sim.problem(m)
    warnings = [w for x in sims for w in end_warnings(x)]
    return Result(ok=not sim.problems, problems=sim.problems, warnings=warnings, counts=dict(sim.counts, runs=1))


def report_deadlock(sim: Sim, agents: list[Agent], barriers: tuple | None = None) -> None:
    stuck = [a for a in agents if not a.unit and not a.finished]
    if not stuck or sim.ready:
        return
    waits = sorted({a.blocked_on or a.name for a in stuck})
    bars = [b for b in (barriers or all_barriers(sim)) if any(b.name + " " in w for w in waits)]
    more = f" (and {len(waits) - 4} more)" if len(waits) > 4 else ""
    sim.problem(f"deadlock: {'; '.join(waits[:4])}{more}; " + "; ".join(b.state() for b in bars))


def all_barriers(sim: Sim) -> tuple[MBarrier, ...]:
    return (*sim.full, *sim.empty, *sim.acc_full, *sim.acc_empty, *sim.order)


def end_warnings(sim: Sim) -> list[str]:
    return [f"{b.name} ends mid-phase, never consumed: {b.state()}" for b in all_barriers(sim) if b.mid_phase()]


def explore(cfg: Config | dict, seeds=range(8)) -> Result:
    """simulate() over many seeds; problems and warnings merged without repeats."""
    total = Result(counts={})
    for seed in seeds:
        total.merge(simulate(cfg, seed))
    return total

