"""The persistent attention kernel's Q buffers replayed on the CPU (independent: imports only the sim's own mbarrier).

A producer thread walks a CTA's tiles in order; for tile t it picks a buffer, waits (from some tile on) on that buffer's
empty barrier with some parity, arrives on its full barrier with the tile's bytes and issues the load, which lands
later. ``consumers`` warps (lane 0 of each consumer warp) each wait on the tile's full barrier with some parity, read
the buffer (it must hold tile t's Q, entirely landed), and arrive on its empty barrier. The three rules the kernel
uses are functions of the tile index given by the caller (read from the rendered kernel by the test):

- ``buffer(t)``: the buffer tile t's Q goes to and is read from;
- ``empty_wait(t)``: None (no wait) or the parity the producer waits for on ``buffer(t)``'s empty barrier;
- ``full_parity(t)``: the parity consumers wait for on ``buffer(t)``'s full barrier.

The carried form (``carried``: a function of t and whether tile t is the CTA's last, giving (buffer, parity)): after
reading tile t's Q a consumer waits on that buffer's full barrier for the next tile's first S *before* it releases tile
t's buffer (it holds both for a while; ``hold_both``, where O is staged in that buffer) or after it (where Q is
released at the tile's last S); after the CTA's last tile it waits once more, on a buffer no load will fill, and that
wait must pass at once. Tile t + 1's own full wait is then the carried one.

:func:`replay` runs many random interleavings (the load's landing, each agent's steps) and reports the first
violation: the producer loading into a buffer a consumer has not released (an overwrite), a consumer reading a
buffer that holds another tile's Q or not yet landed, an arrival on a barrier with none pending, or a deadlock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from .mbarrier import MBarrier


@dataclass(frozen=True)
class QReplay:
    ok: bool
    violation: str | None
    runs: int


def _one(tiles: int, buffers: int, consumers: int, buffer: Callable[[int], int], empty_wait: Callable[[int], int | None],
         full_parity: Callable[[int], int], rng: random.Random, tx: int = 1024,
         carried: Callable[[int, bool], tuple[int, int]] | None = None, hold_both: bool = True) -> str | None:
    full = [MBarrier(f"Q_full[{b}]", 1) for b in range(buffers)]
    empty = [MBarrier(f"Q_empty[{b}]", consumers) for b in range(buffers)]
    holds = [None] * buffers  # tile whose Q a buffer holds (or is receiving)
    landed = [True] * buffers
    readers = [set() for _ in range(buffers)]  # consumers that have not released the tile the buffer holds
    in_flight: list[int] = []  # buffers whose load has not landed
    prod_t, prod_stage = 0, "wait"
    misread: list[str] = []

    def _carried_wait(c: int, t: int) -> bool:
        nb, par = carried(t, t + 1 == tiles)
        if not full[nb].test_wait(par):
            return False
        if t + 1 < tiles and (holds[nb] != t + 1 or not landed[nb]):
            misread.append(f"tile {t + 1}: consumer {c}'s carried S passed buffer {nb}'s full barrier holding tile "
                           f"{holds[nb]} (landed {landed[nb]})")
        return True

    cons_t = [0] * consumers
    cons_stage = ["wait"] * consumers
    while prod_t < tiles or any(t < tiles for t in cons_t) or in_flight:
        moves = []
        if prod_t < tiles:
            moves.append(("producer", None))
        if in_flight:
            moves.append(("land", None))
        moves += [("consumer", c) for c in range(consumers) if cons_t[c] < tiles]
        rng.shuffle(moves)
        if misread:
            return misread[0]
        for kind, c in moves:
            if kind == "land":
                b = in_flight.pop(rng.randrange(len(in_flight)))
                landed[b] = True
                full[b].complete_tx(tx)
                break
            if kind == "producer":
                t = prod_t
                b = buffer(t)
                par = empty_wait(t)
                if par is not None and not empty[b].test_wait(par):
                    continue
                if readers[b]:
                    return f"tile {t}: the producer loads buffer {b} while consumers {sorted(readers[b])} still read tile {holds[b]}"
                holds[b], landed[b], readers[b] = t, False, set(range(consumers))
                full[b].arrive_expect_tx(tx)
                in_flight.append(b)
                prod_t += 1
                break
            t = cons_t[c]
            b = buffer(t)
            if cons_stage[c] == "wait":
                if not full[b].test_wait(full_parity(t)):
                    continue
                if holds[b] != t or not landed[b]:
                    return f"tile {t}: consumer {c} passed buffer {b}'s full barrier holding tile {holds[b]} (landed {landed[b]})"
                cons_stage[c] = "read"
                break
            if cons_stage[c] == "read" and carried is not None and hold_both:  # the next S before this release
                if not _carried_wait(c, t):
                    continue
                cons_stage[c] = "carried"
                break
            if cons_stage[c] == "released":  # the carried wait after this tile's release (Q released at its last S)
                if not _carried_wait(c, t):
                    continue
                cons_t[c] += 1
                cons_stage[c] = "read"
                break
            readers[b].discard(c)
            empty[b].arrive()
            if carried is not None and not hold_both:
                cons_stage[c] = "released"
                break
            cons_t[c] += 1
            cons_stage[c] = "wait" if carried is None else "read"
            break
        else:
            return (f"deadlock: producer at tile {prod_t}, consumers at {cons_t}; "
                    + "; ".join(x.state() for x in full + empty))
    misuse = misread + [m for x in full + empty for m in x.misuse]
    return misuse[0] if misuse else None


def replay(tiles: int, buffers: int, consumers: int, buffer, empty_wait, full_parity, runs: int = 200,
           seed: int = 0, carried=None, hold_both: bool = True) -> QReplay:
    """``runs`` random interleavings of one CTA's ``tiles`` tiles; the first violation found, if any (``carried``: the
    carried form's wait, see the module; ``hold_both``: it comes before the release of this tile's buffer, as where O
    is staged in that buffer, else after it)."""
    rng = random.Random(seed)
    for i in range(runs):
        v = _one(tiles, buffers, consumers, buffer, empty_wait, full_parity, rng, carried=carried, hold_both=hold_both)
        if v is not None:
            return QReplay(False, v, i + 1)
    return QReplay(True, None, runs)
