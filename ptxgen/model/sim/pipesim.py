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
* per-tile K-tile counts (``tile_k``, sm_90a with TMA): CTA tile lt has ``tile_k[lt]`` K-tiles (0 allowed: the
  accumulator is read with no MMA), the ring position of its first K-tile is the sum of the earlier tiles'; a ping-pong
  warpgroup starts there (``pingpong_first`` "count") or, as a control, at lt x its own tile's count ("product").
  With a cluster every CTA takes the same counts (a K-grouped cluster's CTAs take tiles of one group).
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

* block scaling (``sf_copy_bytes``): each CTA also issues scale-factor copies (cp.async.bulk) into its own stage,
  completing its OWN ``full[s]`` (cp.async.bulk has no .cta_group). One CTA: they are part of ``expect_tx_bytes``.
  A pair: the leader's are part of the leader's ``expect_tx_bytes``; the peer's producer arms the peer's ``full[s]``
  (count ``peer_full_arrivals``) with ``arrive.expect_tx`` of its SF bytes, and a relay agent (the peer's MMA thread)
  waits the peer's ``full[s]`` with the consumer parity and then arrives on the leader's ``full[s]`` (count
  ``full_arrivals`` = 2: the leader's producer and the relay). The leader's MMAs read both CTAs' stages, so a relay
  that does not wait (``relay_waits`` false) gives a torn read in the peer, and no relay (``sf_relay`` false) a deadlock.

* block-FP8 scales in shared memory (``scale_lanes``, sm_90a): that many lanes of a scale warp, each per K-tile
  waiting ``empty[s]`` with the producer's parity, storing its scales into stage s's slot and arriving on ``full[s]``
  (``full_arrivals`` counts them). Each consumer warpgroup reads every lane's slot after issuing a K-tile's MMAs and
  before releasing it: a slot holding another K-tile is a stale read; a lane storing over a K-tile that some consumer
  has not read yet is an early overwrite (``scale_lane_waits`` false, a control: the lanes do not wait empty[s]).

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
* exit: a ``tcgen05.commit`` arrival lands on a barrier after its CTA exited (every non-unit agent of the CTA, of
  both for a pair, has finished). Commit arrivals travel on their own (PTX: the commit makes the mbarrier track
  the completion of prior tcgen05 operations; nothing orders the arrive-on of two commits, or of one multicast
  commit in two CTAs): each lands in any order after its MMAs completed. With ``producer_tail`` the producer
  waits, after its last K-tile, on ``empty[s]`` of S more ring slots (CUTLASS ``load_tail``), so every
  commit to an empty barrier has landed before it finishes.

API: ``simulate(cfg, seed) -> Result`` (``cfg``: a :class:`Config` or a dict of its fields);
``explore(cfg, seeds) -> Result`` merges many seeds, without repeating a problem. ``Result``: ``ok``,
``problems`` (strings naming the K-tile, stage and barrier), ``warnings``, ``counts`` (steps, pieces
landed, MMAs completed, arrivals, runs). ``MBarrier`` is the primitive on its own.
"""

from __future__ import annotations

from .mbarrier import MBarrier
from .pipesim_agents import make_agents, make_pair
from .pipesim_state import Agent, Config, Result, Sim

__all__ = ["Config", "MBarrier", "Result", "simulate", "explore"]


def pick(sim: Sim) -> int:
    """A random ready agent, biased by its speed (rejection sampling)."""
    ready, rng = sim.ready, sim.rng
    below, uniform, n = getattr(rng, "_randbelow", rng.randrange), rng.random, len(ready)  # randrange(n)'s own draw
    while True:
        i = below(n)
        if uniform() < ready[i].speed:
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
    if agent.finished and not agent.unit:
        sim.live -= 1
        if sim.live == 0:  # __syncthreads (and, for a pair, the cluster barrier) passed: the CTA(s) exit
            for x in sim.group:
                x.exited = True
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
    sim.live = sum(not a.unit for a in agents)
    sim.group = sims
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
