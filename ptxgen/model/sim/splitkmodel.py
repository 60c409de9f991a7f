"""Split-K's one-launch reduction replayed on the CPU, independent of ptxgen.derive.store.splitk (imports nothing from
ptxgen): the S splits of one output tile arrive at the tile's counter in any order; each stores its f32 partial tile
into its own slot, then adds 1 to the counter and gets the previous value; the split that gets ``last_value`` resets
the counter and sums the slots in ``read_order``, in float32, one addition at a time; nobody else writes D.

:func:`replay` returns D, which split reduced, and the counter after the launch, or says what went wrong (a reducer
that read a slot no split had stored yet, no reducer, two reducers). tests/test_splitk.py runs it for every arrival
order of small S with the constants read from the rendered kernel, and checks D is the same bits for every order;
``read_order=None`` sums in arrival order instead (the control: that sum changes with the order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Replay:
    d: np.ndarray | None  # the tile the reducer wrote (None: nobody wrote it)
    reducer: int | None  # the split that reduced
    counter_after: int
    problems: tuple[str, ...]


def replay(partials: list[np.ndarray], arrival: tuple[int, ...], last_value: int, read_order: tuple[int, ...] | None,
           counter: int = 0, reset: bool = True) -> Replay:
    """One launch of one tile: split ``arrival[i]`` arrives i-th. ``last_value``: the previous count on which a split
    reduces; ``read_order``: the slots it sums, in order (None: the order the splits arrived in)."""
    s = len(partials)
    slots: dict[int, np.ndarray] = {}
    d, reducer, problems = None, None, []
    for z in arrival:
        slots[z] = np.asarray(partials[z], dtype=np.float32).copy()  # the partial store, released by the add below
        previous, counter = counter, counter + 1
        if previous != last_value:
            continue
        if reset:
            counter = 0
        if reducer is not None:
            problems.append(f"splits {reducer} and {z} both reduced")
        reducer = z
        order = tuple(arrival) if read_order is None else read_order
        missing = [j for j in order if j not in slots]
        if missing or sorted(order) != list(range(s)):
            problems.append(f"split {z} read slots {order} with {missing} not stored yet")
            continue
        acc = slots[order[0]].copy()
        for j in order[1:]:
            acc = (acc + slots[j]).astype(np.float32)
        d = acc
    if reducer is None:
        problems.append(f"no split reduced (counter went {counter - len(arrival)} -> {counter}, reduces on {last_value})")
    return Replay(d, reducer, counter, tuple(problems))
