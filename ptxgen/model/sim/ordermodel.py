"""An independent model of --epilogue-order (imports nothing from ptxgen): the consumer warpgroups of a persistent
cooperative wgmma CTA, warp by warp, taking turns at the epilogue through named barriers, with the producer's stage ring.

The model
---------
**Named barriers** (PTX ISA ``bar``): ``bar.sync b, n`` and ``bar.arrive b, n`` count the executing warp's 32 threads
toward the open generation of barrier b; the generation completes when n threads are in, and the next arrival opens
the next one. ``bar.sync`` then waits until the generation it counted toward has completed; ``bar.arrive`` goes on. The
hardware counts threads, not who they are: a warp that arrives twice before the generation completes is counted twice
(the generation completes early, with a partner missing). That is what this model reports, as well as a generation
completed by other than all warps of exactly two warpgroups, and an arrival still open when the CTA exits.

**The warps.** Each consumer warpgroup is ``warps`` warps that run independently (no synchronization inside a
warpgroup is assumed beyond what wgmma needs: the conservative case, as with the direct epilogue). A warp's program
per tile: per K-tile ``it`` (counted over the CTA's tiles): wait until the stage of ``it`` holds it, issue its part of
the warpgroup's MMAs of ``it``; warp 0 releases the stage of ``it - lag`` after the warpgroup's MMAs of it are complete
(every warp of the warpgroup issued them: wgmma is warpgroup-collective), and after the tile's last K-tile the
remaining ones; then the order's ``before`` steps, the epilogue (two events: start and end), the ``after`` steps; once,
after the CTA's tiles, the ``tail`` steps. ``before_mainloop`` steps (controls only) run before a tile's first K-tile.

**The producer** fills K-tile ``it`` into stage ``it % S`` once every consumer warpgroup released K-tile ``it - S``.

A step is ``(wg, where, op, barrier, when)``: warpgroup wg at ``where`` (prologue: once before the tiles;
before_mainloop, before, after, tail) does op
(sync, arrive) on barrier E_barrier; ``when``: "always"; "not_first" (before: not at the CTA's first tile; tail: only if
the CTA had a tile); "has_next" (only if the CTA has a tile after this one).

Checks: no deadlock; every generation completed by all warps of two warpgroups, no warp counted twice; no arrival open
and nobody waiting at the end; the MMAs of K-tile it read the stage while it holds it; and (``require_order``) the order:
warpgroup w >= 1 starts its epilogue of tile t after every warp of w - 1 ended its own, warpgroup 0 starts t + 1 after
every warp of the last warpgroup ended t.
"""

from __future__ import annotations

import random

WHERE = ("prologue", "before_mainloop", "before", "after", "tail")


def _runs(when, t: int, tiles: int) -> bool:
    if when in (False, "always", None):
        return True
    if when in (True, "not_first"):
        return t > 0 if t < tiles else tiles > 0  # t == tiles: the tail
    if when == "has_next":
        return t + 1 < tiles
    raise ValueError(when)


def _program(steps, wg: int, warp: int, tiles: int, k_tiles: int, lag: int) -> list[tuple]:
    def mine(where, t):
        return [(op, b) for (g, w, op, b, when) in steps if g == wg and w == where and _runs(when, t, tiles)]

    prog: list[tuple] = mine("prologue", 0)
    it = 0
    for t in range(tiles):
        prog += mine("before_mainloop", t)
        first = it
        for kt in range(k_tiles):
            prog += [("wait_full", it), ("mma", it)]
            if warp == 0 and kt >= lag:
                prog.append(("release", it - lag))
            it += 1
        if warp == 0 and lag:
            prog += [("release", r) for r in range(max(first, it - lag), it)]
        prog += mine("before", t)
        prog += [("epi_start", t), ("epi_end", t)]
        prog += mine("after", t)
    prog += mine("tail", tiles)
    return prog


def check_order(steps, consumers: int, tiles: int, k_tiles: int, stages: int, warps: int = 4, lag: int = 1,
                seeds=range(10), require_order: bool = True, max_problems: int = 5) -> list[str]:
    """Runs the CTA under random interleavings (``seeds``; each seed skews the agents' speeds differently) and returns
    the problems found (empty: the protocol passed every check on every seed)."""
    problems: list[str] = []
    warp_ids = [(g, x) for g in range(consumers) for x in range(warps)]
    total = tiles * k_tiles
    gen_threads = 2 * warps  # warps per generation: two warpgroups
    for seed in seeds:
        rng = random.Random(seed)
        progs = {w: _program(steps, w[0], w[1], tiles, k_tiles, lag) for w in warp_ids}
        pc = {w: 0 for w in warp_ids}
        filled = -1  # the producer has filled K-tiles 0..filled
        issued: dict[tuple[int, int], int] = {}  # (wg, it) -> warps that issued their part of its MMAs
        released: dict[int, set] = {}  # it -> warpgroups that released its stage
        open_gen: dict[int, list] = {}  # barrier -> warps counted in its open generation
        done_gens: dict[int, int] = {}
        waiting: dict[tuple, tuple[int, int]] = {}  # warp -> (barrier, generation it waits to complete)
        start: dict[tuple[int, int], list[int]] = {}
        end: dict[tuple[int, int], list[int]] = {}
        speed = {a: rng.random() ** 3 + 1e-3 for a in warp_ids + ["producer"]}
        bad = False

        def can_fill() -> bool:
            nxt = filled + 1
            return nxt < total and (nxt < stages or len(released.get(nxt - stages, ())) == consumers)

        def runnable(w) -> bool:
            if pc[w] >= len(progs[w]):
                return False
            if w in waiting:
                b, g = waiting[w]
                return done_gens.get(b, 0) > g
            op, x = progs[w][pc[w]]
            if op == "wait_full":
                return filled >= x
            if op == "release":
                return issued.get((w[0], x), 0) == warps  # the warpgroup's MMAs of x are complete (all warps issued)
            return True

        step = 0
        while True:
            agents = [w for w in warp_ids if runnable(w)] + (["producer"] if can_fill() else [])
            if not agents:
                break
            if step % 200 == 0 and rng.random() < 0.3:  # change who is fast now and then
                speed = {a: rng.random() ** 3 + 1e-3 for a in speed}
            a = rng.choices(agents, [speed[x] for x in agents])[0]
            step += 1
            if a == "producer":
                filled += 1
                continue
            if a in waiting:
                waiting.pop(a)
                pc[a] += 1
                continue
            op, x = progs[a][pc[a]]
            if op == "mma":
                if filled < x or (x + stages <= filled):  # the stage was refilled with a later K-tile
                    problems.append(f"seed {seed}: warp {a} read K-tile {x}'s stage while it held K-tile {filled} ")
                    bad = True
                    break
                issued[(a[0], x)] = issued.get((a[0], x), 0) + 1
            elif op == "release":
                if a[0] in released.setdefault(x, set()):
                    problems.append(f"seed {seed}: warpgroup {a[0]} released K-tile {x} twice")
                released[x].add(a[0])
            elif op == "epi_start":
                start.setdefault((a[0], x), []).append(step)
            elif op == "epi_end":
                end.setdefault((a[0], x), []).append(step)
            elif op in ("sync", "arrive"):
                members = open_gen.setdefault(x, [])
                if a in members:
                    problems.append(f"seed {seed}: warp {a} counted twice in generation {done_gens.get(x, 0)} of E_{x}")
                    bad = True
                    break
                members.append(a)
                gen = done_gens.get(x, 0)
                if len(members) == gen_threads:
                    groups = sorted({g for g, _ in members})
                    if len(groups) != 2 or any(sum(1 for g, _ in members if g == h) != warps for h in groups):
                        problems.append(f"seed {seed}: generation {gen} of E_{x} completed by warps {sorted(members)}")
                        bad = True
                        break
                    done_gens[x] = gen + 1
                    open_gen[x] = []
                if op == "sync" and done_gens.get(x, 0) <= gen:
                    waiting[a] = (x, gen)
                    continue  # pc moves on when the generation completes
            pc[a] += 1
        if not bad:
            stuck = [(w, progs[w][pc[w]]) for w in warp_ids if pc[w] < len(progs[w])]
            if stuck or filled + 1 < total:
                problems.append(f"seed {seed}: deadlock with {len(stuck)} warps stuck, e.g. {stuck[:3]}, producer at "
                                f"{filled + 1} of {total}")
            else:
                for b, members in open_gen.items():
                    if members:
                        problems.append(f"seed {seed}: E_{b} left with {len(members)} warps counted at exit: {sorted(members)}")
                if require_order:
                    problems += _order_problems(seed, consumers, tiles, start, end)
        if len(problems) >= max_problems:
            break
    return problems


def _order_problems(seed: int, consumers: int, tiles: int, start: dict, end: dict) -> list[str]:
    out = []
    for t in range(tiles):
        for w in range(consumers):
            prev = (w - 1, t) if w else (consumers - 1, t - 1)
            if prev[1] < 0:
                continue
            if min(start[(w, t)]) < max(end[prev]):
                out.append(f"seed {seed}: warpgroup {w} started its epilogue of tile {t} before warpgroup {prev[0]} "
                           f"ended its epilogue of tile {prev[1]}")
    return out
