"""The named barriers (``bar.sync`` / ``bar.arrive`` ids) of the sm_90a kernel, allocated in one place.

A CTA has 16 (PTX ISA ``bar``: ids 0..15). The wgmma kernel uses:

* 0: ``__syncthreads``;
* 1, 2: the ping-pong consumers' ``1 + wg`` (``--consumers pingpong``; the template's consumer loop); 1 is also the
  K-grouped kernel's K-tail barrier of its cooperative consumers (``--grouped offs_k``, no ping-pong there);
* 3 .. 3 + C - 1: the TMA-store epilogue's per-warpgroup barrier ``3 + wg`` (C consumer warpgroups, at most 4;
  stream-K's partial-tile barrier reuses it);
* the next 2: block FP8's ``--fp8-stagger`` pair;
* the next C: ``--epilogue-order alternate``'s E_0 .. E_{C-1} (ptxgen.derive.roles.epiorder);
* the K-grouped kernel with ping-pong consumers: its K-tail barrier ``3 + C + wg``, one per warpgroup (each zeroes the
  stages of its own tile), after the store's (no stagger or epilogue order in that kernel).
"""

from __future__ import annotations

from ...isa.ptxref import cite
from ...isa.shapes import WARPGROUP_THREADS

NAMED_BARRIERS = 16  # bar.sync / bar.arrive ids 0..15
SYNCTHREADS_BARRIER_ID = 0
PINGPONG_FIRST_BARRIER_ID = 1  # 1 + wg, two ping-pong consumer warpgroups
STORE_FIRST_BARRIER_ID = 3  # 3 + wg: one per consumer warpgroup (at most four)
MAX_CONSUMER_WARPGROUPS = 4
STAGGER_BARRIERS = 2


KGROUPED_TAIL_BARRIER_ID = 1  # cooperative consumers: all of them meet after zeroing a K tail


def kgrouped_tail_barrier(pingpong: bool, consumer_warpgroups: int) -> tuple[str, str]:
    """(barrier id, threads) of the K-grouped kernel's K-tail barrier, as C: the cooperative consumers all meet at one
    (they share each stage); a ping-pong warpgroup zeroes its own tile's stages and meets only itself."""
    if not pingpong:
        return str(KGROUPED_TAIL_BARRIER_ID), str(consumer_warpgroups * WARPGROUP_THREADS)
    first = STORE_FIRST_BARRIER_ID + consumer_warpgroups
    assert first + consumer_warpgroups - 1 < NAMED_BARRIERS, cite("bar_sync")
    return f"{first} + wg", str(WARPGROUP_THREADS)


def stagger_first_barrier_id(consumer_warpgroups: int) -> int:
    """The first of block FP8's two --fp8-stagger barriers: after the store epilogue's per-warpgroup ones."""
    return STORE_FIRST_BARRIER_ID + consumer_warpgroups


def order_first_barrier_id(consumer_warpgroups: int, staggered: bool) -> int:
    """E_0 of --epilogue-order alternate: after the store's and (where a kernel has them) the stagger's barriers."""
    first = stagger_first_barrier_id(consumer_warpgroups) + (STAGGER_BARRIERS if staggered else 0)
    last = first + consumer_warpgroups - 1
    assert last < NAMED_BARRIERS, (first, consumer_warpgroups, cite("bar_sync"))
    return first
