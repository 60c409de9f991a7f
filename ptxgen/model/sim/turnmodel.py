"""The attention kernel's ping-pong turns replayed on the CPU, independent of the templates (imports nothing from ptxgen).

Two consumer warpgroups (0 and 1) take turns issuing their MMAs through two named barriers of 256 threads: warpgroup
c waits on barrier 1 + c (``bar.sync``: its own 128 threads plus 128 arrivals of the other) and after each issue
arrives on barrier 2 - c (``bar.arrive``: the other's turn). Per tile of ``n`` key blocks each warpgroup issues n + 1
times (S of the first block, then S and P·V together, then the last P·V); in the carried form the last P·V and the
next tile's first S go out in one turn, n turns a tile after the first. A policy says who arrives where:

- ``head_start``: "every tile" (warpgroup 1 arrives on barrier 1 as each tile opens) or "first tile" (only before the
  first);
- ``last_arrive``: for each of a tile's last issue, whether warpgroup c arrives: "warpgroup 0 only" or "both unless the
  tile is the CTA's last".

:func:`replay` runs both warpgroups as state machines over a CTA's tiles, a barrier completing when 256 threads have
reached it (a warpgroup's sync counts 128 and blocks; an arrive counts 128 and goes on), and says whether they finish,
where they deadlock, and which arrivals are left pending at the end (a named barrier left half-arrived at exit).
tests/test_attention_turns.py replays the policy read from the rendered kernel, with the mixed policies as controls.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_START = ("every tile", "first tile")
LAST_ARRIVE = ("warpgroup 0 only", "both unless last tile")


@dataclass(frozen=True)
class TurnReplay:
    finished: bool
    deadlock: str | None  # where each warpgroup waits when neither can move
    pending: dict  # barrier id -> threads arrived but not released at the end
    order: tuple  # (warpgroup, tile, issue) in the order the turns were taken


def issues(blocks: list[int], carry: bool = False) -> list[int]:
    """Turns per tile: n + 1 (S of the first block, S and P·V together, the last P·V); carried (the next tile's first
    S goes out with a tile's last P·V), n for every tile after the first."""
    return [n + (1 if (t == 0 or not carry) else 0) for t, n in enumerate(blocks)]


def _program(c: int, blocks: list[int], head_start: str, last_arrive: str, carry: bool = False) -> list[tuple[str, int, tuple]]:
    """Warpgroup c's barrier operations in program order: ("sync", bar, (tile, issue)) and ("arrive", bar, ())."""
    ops: list[tuple[str, int, tuple]] = []
    for t, k in enumerate(issues(blocks, carry)):
        if c == 1 and (head_start == "every tile" or t == 0):
            ops.append(("arrive", 1, ()))
        n = k - 1
        for i in range(k):
            ops.append(("sync", 1 + c, (t, i)))
            last = i == n
            if not last or c == 0 or (last_arrive == "both unless last tile" and t < len(blocks) - 1):
                ops.append(("arrive", 2 - c, ()))
    return ops


def replay(blocks: list[int], head_start: str, last_arrive: str, threads: int = 128, barrier: int = 256,
           carry: bool = False) -> TurnReplay:
    """Both warpgroups over the tiles of ``blocks`` (key blocks per tile) under one policy (``carry``: the next tile's
    first S issued in a tile's last turn)."""
    if head_start not in HEAD_START or last_arrive not in LAST_ARRIVE:
        raise ValueError(f"policy ({head_start!r}, {last_arrive!r}): one of {HEAD_START} x {LAST_ARRIVE}")
    progs = [_program(c, blocks, head_start, last_arrive, carry) for c in (0, 1)]
    pc, count, waiting = [0, 0], {1: 0, 2: 0}, [False, False]
    order = []
    while pc[0] < len(progs[0]) or pc[1] < len(progs[1]):
        moved = False
        for c in (0, 1):
            if pc[c] >= len(progs[c]):
                continue
            op, bar, where = progs[c][pc[c]]
            if op == "arrive":
                count[bar] += threads
                pc[c] += 1
                moved = True
            elif not waiting[c]:
                count[bar] += threads  # this warpgroup reaches the barrier and blocks there
                waiting[c] = True
                moved = True
            if waiting[c] and count[bar] >= barrier:
                count[bar] -= barrier  # the barrier completes: the waiters go on
                waiting[c] = False
                pc[c] += 1
                order.append((c, *where))
                moved = True
        if not moved:
            where = {c: progs[c][pc[c]][2] for c in (0, 1) if pc[c] < len(progs[c])}
            return TurnReplay(False, f"warpgroups wait at (tile, issue) {where}", dict(count), tuple(order))
    return TurnReplay(True, None, {b: n for b, n in count.items() if n}, tuple(order))
