"""The agents of the pipeline simulation (ptxgen.model.sim.pipesim describes them): producers, copy units, MMA issuers
and units, consumers and epilogue warps, one CTA's or a CTA pair's, as generators whose every ``yield`` is one
scheduling point. Independent: imports nothing from ptxgen but the simulation's other modules.
"""

from __future__ import annotations

import random

from .mbarrier import MBarrier
from .pipesim_state import (
    Agent,
    Config,
    Sim,
    WaitList,
    begin_fill,
    check_acc_read,
    check_read,
    check_scale_read,
    land,
    mma_complete,
    store_scales,
)


# ---- the agents (generators; each yield is a scheduling point) ----------------------------------------


def producer_parity(cfg: Config, it: int) -> int:
    return ((it // cfg.stages) & 1) ^ cfg.producer_parity_flip


def consumer_parity(cfg: Config, it: int) -> int:
    return ((it // cfg.stages) & 1) ^ cfg.consumer_parity_flip


def tma_producer(sim: Sim):
    cfg = sim.cfg
    for it in range(cfg.total_its):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"TMA producer ({sim.tile(it)})")
        sim.arrive(sim.full[s], tx=cfg.expect_tx_bytes)
        yield
        pieces = [p for b in cfg.delivered() + cfg.sf_copy_bytes for p in split(sim.rng, b)]
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
    yield from producer_tail(sim, "TMA producer")


def scale_lane(sim: Sim, lane: int):
    """A lane of the block-FP8 scale warp (scale_lanes): per K-tile, wait empty[s], store, arrive on full[s]."""
    cfg = sim.cfg
    for it in range(cfg.total_its):
        s = it % cfg.stages
        if cfg.scale_lane_waits:
            yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"scale lane {lane} ({sim.tile(it)})")
        store_scales(sim, lane, s, it)
        yield
        sim.arrive(sim.full[s])  # release: its stores are visible to full[s]'s waiters
        yield


def producer_tail(sim: Sim, who: str):
    """CUTLASS load_tail: acquire S more ring slots without filling them, i.e. wait until the MMAs' commits have
    released every stage."""
    cfg = sim.cfg
    if not cfg.producer_tail:
        return
    total = cfg.total_its
    for it in range(total, total + cfg.stages):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"{who} tail (ring slot {it})")


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
    for it in range(cfg.total_its):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"cp.async producer thread {t} ({sim.tile(it)})")
        begin_fill(sim, s, it, n * cfg.producer_threads)
        if not sim.cp_thread[t]:
            sim.push(sim.cp_q, t)
        sim.cp_thread[t] += [("copy", s, it)] * n + [("arrive", s, it)]
        yield
    yield from producer_tail(sim, f"cp.async producer thread {t}")


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
        else:  # a tcgen05.commit (s is the barrier): its arrival is on its way, with those of the commits right after
            sim.push(sim.arrivals, (sim, s))  # it, which track the same completed MMAs
            while pipe.items and pipe.items[0][0] == "commit":
                sim.push(sim.arrivals, (sim, pipe.items.pop(0)[1]))
        sim.wake(pipe)
        yield


def arrival_unit(sim: Sim):
    """Delivers tcgen05.commit arrivals, in any order."""
    q = sim.arrivals
    while True:
        while not q.items:
            yield q, None
        i = sim.rng.randrange(len(q.items))
        q.items[i], q.items[-1] = q.items[-1], q.items[i]
        owner, bar = q.items.pop()
        owner.arrive(bar)
        yield


def wgmma_mainloop(sim: Sim, g: int, lt: int, who: str):
    """Consumer warpgroup g's K-tiles of CTA tile lt: wait full, MMA, wait_group(depth), release K-tile kt - lag."""
    cfg = sim.cfg
    K, S, lag, first = cfg.k_of(lt), cfg.stages, cfg.release_lag, _first(cfg, lt)
    pipe = sim.pipes[g]
    for kt in range(K):
        it = first + kt
        s = it % S
        yield from sim.wait(sim.full[s], consumer_parity(cfg, it), f"{who} ({sim.tile(it)})")
        check_read(sim, g, s, it)
        sim.push(pipe, ("mma", s, it))
        yield
        if cfg.scale_lanes:  # ld.shared of the K-tile's scales after issuing its MMAs, before the release
            check_scale_read(sim, g, s, it)
            yield
        yield from wait_group(pipe, cfg.wait_depth, f"{who} ({sim.tile(it)})")
        if kt >= lag:
            release(sim, (it - lag) % S)
        yield


def _first(cfg: Config, lt: int) -> int:
    """Where a consumer warpgroup starts CTA tile lt in the ring (pingpong_first "product": lt x the tile's K-tiles)."""
    return lt * cfg.k_of(lt) if cfg.pingpong and cfg.pingpong_first == "product" else cfg.first_it(lt)


def release(sim: Sim, s: int) -> None:
    """A consumer warpgroup is done with stage s: arrive on empty[s] of every CTA of the cluster (or its own)."""
    for dst in sim.cluster if sim.cfg.release_peers else [sim]:
        dst.arrive(dst.empty[s])


def wgmma_tile_end(sim: Sim, g: int, lt: int, who: str):
    """wait_group(0), release the tile's last K-tiles, then the epilogue reads the accumulator."""
    cfg = sim.cfg
    K, S, lag, first = cfg.k_of(lt), cfg.stages, cfg.release_lag, _first(cfg, lt)
    yield from wait_group(sim.pipes[g], 0, f"{who} (end of CTA tile {lt})")
    for kt in range(max(0, K - lag), K):
        release(sim, (first + kt) % S)
    check_acc_read(sim, g, lt, f"{who}'s epilogue")
    yield


def wgmma_warp(sim: Sim, g: int, w: int):
    """Warp w of consumer warpgroup g (consumer_warps > 1; block-FP8 scale slots, no release lag): per K-tile, wait
    full[s], issue its part of the MMAs (the MMA starts when the warpgroup's last warp has issued), read the scale
    slots, wait for the MMAs, release (every warp with release_per_warp, else warp 0 only)."""
    cfg = sim.cfg
    who = f"consumer warpgroup {g} warp {w}"
    pipe = sim.pipes[g]
    for it in range(cfg.total_its):
        s = it % cfg.stages
        yield from sim.wait(sim.full[s], consumer_parity(cfg, it), f"{who} ({sim.tile(it)})")
        issued = sim.issued.setdefault((g, it), set())
        issued.add(w)
        if len(issued) == cfg.consumer_warps:
            check_read(sim, g, s, it)
            sim.push(pipe, ("mma", s, it))
        yield
        check_scale_read(sim, (g, w), s, it)
        yield
        while len(sim.issued[(g, it)]) < cfg.consumer_warps or any(i[2] <= it for i in pipe.items if i[0] == "mma"):
            yield pipe, f"{who} in wgmma.wait_group(0) ({sim.tile(it)})"
        if cfg.release_per_warp or w == 0:
            release(sim, s)
        yield
        if (it + 1) % cfg.k_tiles == 0 and w == 0:
            check_acc_read(sim, g, it // cfg.k_tiles, f"{who}'s epilogue")


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
            if kt == K - 1 and cfg.acc_barrier:  # issued right after the last K-tile's commit, nothing in between
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
    for it in range(cfg.total_its):
        s = it % cfg.stages
        yield from sim.wait(sim.empty[s], producer_parity(cfg, it), f"CTA {c} TMA producer ({sim.tile(it)})")
        if c == 0:
            sim.arrive(sim.full[s], tx=cfg.expect_tx_bytes)
            yield
        elif cfg.sf_copy_bytes:  # the peer arms its own full[s] for its scale factors (the relay forwards it)
            sim.arrive(sim.full[s], tx=sum(cfg.sf_copy_bytes))
            yield
        pieces = [(p, target.full[s]) for b in cfg.delivered() for p in split(sim.rng, b)]
        pieces += [(p, sim.full[s]) for b in cfg.sf_copy_bytes for p in split(sim.rng, b)]  # complete this CTA's own full[s]
        begin_fill(sim, s, it, len(pieces))
        for p, bar in pieces:
            sim.push(q, (sim, s, it, p, bar))
        yield
    yield from producer_tail(sim, f"CTA {c} TMA producer")


def pair_sf_relay(sims: list):
    """The peer's MMA thread of a block-scaled pair: waits its own full[s] (its scale factors have landed), then
    arrives on the leader's full[s] (mbarrier.arrive.release.cluster on mapa(full[s], 0))."""
    lead, peer = sims[0], sims[1]
    cfg = peer.cfg
    for it in range(cfg.total_its):
        s = it % cfg.stages
        if cfg.relay_waits:
            yield from peer.wait(peer.full[s], consumer_parity(cfg, it), f"CTA 1 SF relay ({peer.tile(it)})")
        peer.arrive(lead.full[s])
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
            if kt == K - 1:  # issued right after the last K-tile's commit, nothing in between
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
        else:  # each CTA's arrival travels on its own, as do those of the commits right after it (same MMAs)
            for bar in what:
                lead.push(lead.arrivals, (lead, bar))
            while pipe.items and pipe.items[0][0] == "commit":
                for bar in pipe.items.pop(0)[1]:
                    lead.push(lead.arrivals, (lead, bar))
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
        if cfg.sf_copy_bytes:  # the peer's full[s] counts its own producer's arrive.expect_tx only
            other.full = [MBarrier(f"CTA1 full[{s}]", cfg.peer_full_arrivals) for s in range(cfg.stages)]
    rng, q, pipe = sims[0].rng, WaitList(), WaitList()
    spec = [(f"CTA {c} TMA producer", pair_producer(sims, c, q), False) for c in range(cfg.ctas)]
    spec += [("TMA unit", pair_tma_unit(sims[0], q), True), ("MMA thread", pair_issuer(sims, pipe), False),
             ("MMA unit", pair_mma_unit(sims, pipe), True), ("commit arrivals", arrival_unit(sims[0]), True)]
    spec += [(f"CTA {c} epilogue warp {w}", pair_epilogue_warp(sims, c, w), False)
             for c in range(cfg.ctas) for w in range(cfg.epilogue_warps)]
    if cfg.sf_copy_bytes and cfg.sf_relay:
        spec.append(("CTA 1 SF relay", pair_sf_relay(sims), False))
    return sims[0], sims, [Agent(name, gen, rng.choice((0.05, 0.2, 0.5, 1.0)), unit) for name, gen, unit in spec]


def make_agents(sim: Sim) -> list[Agent]:
    cfg, rng = sim.cfg, sim.rng
    at = "" if sim.cta is None else f"CTA {sim.cta} "
    spec = []
    if cfg.tma:
        spec += [("TMA producer", tma_producer(sim), False), ("TMA unit", tma_unit(sim), True)]
        spec += [(f"scale lane {lane}", scale_lane(sim, lane), False) for lane in range(cfg.scale_lanes)]
    else:
        spec += [(f"cp.async thread {t}", cp_producer(sim, t), False) for t in range(cfg.producer_threads)]
        spec.append(("cp.async unit", cp_unit(sim), True))
    if cfg.wgmma:
        consumer = pingpong_consumer if cfg.pingpong else wgmma_consumer
        if cfg.consumer_warps > 1 and not cfg.pingpong:
            spec += [(f"consumer warpgroup {g} warp {w}", wgmma_warp(sim, g, w), False)
                     for g in range(cfg.consumer_groups) for w in range(cfg.consumer_warps)]
        else:
            spec += [(f"consumer warpgroup {g}", consumer(sim, g), False) for g in range(cfg.consumer_groups)]
    else:
        spec.append(("MMA thread", tcgen05_issuer(sim), False))
        spec += [(f"epilogue warp {w}", epilogue_warp(sim, w), False) for w in range(cfg.epilogue_warps)]
        spec.append(("commit arrivals", arrival_unit(sim), True))
    spec += [(f"MMA unit {r}", mma_unit(sim, r), True) for r in range(cfg.readers)]
    return [Agent(at + name, gen, rng.choice((0.05, 0.2, 0.5, 1.0)), unit) for name, gen, unit in spec]
