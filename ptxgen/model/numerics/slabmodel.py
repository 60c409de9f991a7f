"""An independent model of a cooperative wgmma consumer warpgroup that owns several 64-row slabs (--consumer-slabs N)
and passes every slab's K block through one shared partial fragment (imports only the other independent models).

What it says, from the PTX ISA and the recipe, not from the plan:

* ownership: the tile's 64-row slabs are dealt out in order, N to a warpgroup: warpgroup wg multiplies rows
  64 N wg .. 64 N wg + 64 N - 1, its slab i rows 64 (N wg + i) .. (DeepGEMM's "rows 128w..128w+127" at N = 2);
* every register of every accumulator: slab i's register r holds the wgmma D fragment's (row, column) of r
  (fragmodel) in that slab, so its promotion must take that row's A scale and the column's B block scale;
* the order of one warpgroup's operations (``check_shared_partial``): wgmma groups complete only at ``wait``
  (wait_group 0: every group of the warpgroup), the partial holds one (K block, slab) at a time, a promotion reads a
  complete partial, an issue may overwrite it only after it was promoted, the stage is released once per K block
  after every group reading it completed and after the scale reads, and nothing is in flight while the partial is
  read or at a K block's start (C7514: ptxas serializes every wgmma when a fragment is read with a group in flight).
"""

from __future__ import annotations

from . import bfp8model

SLAB_ROWS = 64


def tile_rows(wg: int, slab: int, slabs: int) -> range:
    """The tile rows warpgroup ``wg``'s slab ``slab`` multiplies when each warpgroup owns ``slabs`` slabs."""
    first = SLAB_ROWS * (slabs * wg + slab)
    return range(first, first + SLAB_ROWS)


def check_slab_registers(loads, warpgroups: int, slabs: int, bn: int, kb: int, m0: int, n0: int, rng) -> list[str]:
    """``loads(wg, slab, warp, lane)``: the plan's scale loads (operand, (i, j), registers) of one thread for its slab
    ``slab`` at K block ``kb`` (registers of that slab's accumulator). Performs them on random distinct scale arrays and
    compares the product every register of every slab's accumulator is promoted with against the recipe's scales of
    the register's (row, column), the row from the ownership above and the fragment model."""
    rows = SLAB_ROWS * slabs * warpgroups
    sfa, sfb = bfp8model.random_scales(rng, m0 + rows + 16, kb + 3, n0 // bfp8model.BLOCK + 8)
    problems: list[str] = []
    for wg in range(warpgroups):
        for slab in range(slabs):
            first = tile_rows(wg, slab, slabs).start
            for warp in range(4):
                for lane in range(32):
                    problems += bfp8model.thread_scale_problems(loads(wg, slab, warp, lane), sfa, sfb, bn, kb, n0, warp,
                                                                lane, m0 + first,
                                                                f"warpgroup {wg} slab {slab} warp {warp} lane {lane}")
                    if len(problems) > 10:
                        return problems
    return problems


def check_slot_reads(writes, reads, warpgroups: int, slabs: int, sfb_slots: int, sfa_stage_bytes: int,
                     sfb_stage_bytes: int) -> list[str]:
    """bfp8model.check_scale_slots for warpgroups of ``slabs`` slabs: ``reads(wg, slab, warp, lane)`` is what a consumer
    thread loads for its slab; the tile slab it must serve is the ownership's (slabs x wg + slab), stated here."""
    def tile_reads(warp: int, lane: int, tile_slab: int):
        wg, slab = divmod(tile_slab, slabs)
        return reads(wg, slab, warp, lane)
    return bfp8model.check_scale_slots(writes, tile_reads, SLAB_ROWS * slabs * warpgroups, sfb_slots, sfa_stage_bytes,
                                       sfb_stage_bytes)


def check_shared_partial(steps, k_blocks: int, slabs: int) -> list[str]:
    """``steps``: one warpgroup's (op, kb, slab) in program order over a tile of ``k_blocks`` K blocks, op in issue
    (slab's MMAs of K block kb into the partial, one commit group), scales (the stage of kb's scale slots into
    registers, every slab's rows), wait (wait_group 0), release (kb's stage), promote (slab's accumulator += partial).
    Checks the rules of the module docstring; every (K block, slab) promoted exactly once, in K order per slab."""
    problems: list[str] = []
    inflight: list[tuple[int, int]] = []  # groups (kb, slab), oldest first
    partial: tuple[int, int, str] | None = None  # (kb, slab, pending | complete | promoted)
    released: list[int] = []
    scales_read: set[int] = set()
    promoted: dict[int, list[int]] = {s: [] for s in range(slabs)}
    for i, (op, kb, slab) in enumerate(steps):
        where = f"step {i} ({op} K block {kb} slab {slab})"
        if op == "issue":
            if partial is not None and partial[2] != "promoted":
                problems.append(f"{where}: the partial overwritten while it holds K block {partial[0]} slab {partial[1]} "
                                f"({partial[2]})")
            if slab == 0 and inflight:
                problems.append(f"{where}: K block {kb} starts with groups {inflight} in flight (the loop's back edge)")
            if kb in released:
                problems.append(f"{where}: the MMAs read K block {kb}'s stage after it was released")
            partial = (kb, slab, "pending")
            inflight.append((kb, slab))
        elif op == "scales":
            if kb in released:
                problems.append(f"{where}: scale slots of K block {kb} read after its stage was released")
            scales_read.add(kb)
        elif op == "wait":
            inflight.clear()
            if partial is not None and partial[2] == "pending":
                partial = (partial[0], partial[1], "complete")
        elif op == "promote":
            if inflight:
                problems.append(f"{where}: the partial read with groups {inflight} in flight (C7514)")
            if partial != (kb, slab, "complete"):
                problems.append(f"{where}: the partial is {partial}, not K block {kb} slab {slab} complete")
            else:
                partial = (kb, slab, "promoted")
            if kb not in scales_read:
                problems.append(f"{where}: promoted before K block {kb}'s scales were read")
            promoted.setdefault(slab, []).append(kb)
        elif op == "release":
            mine = [g for g in inflight if g[0] == kb]
            if mine:
                problems.append(f"{where}: K block {kb}'s stage released with its MMAs {mine} in flight")
            if kb not in scales_read:
                problems.append(f"{where}: K block {kb}'s stage released before its scale slots were read")
            issued = {s for (o, b, s) in steps[:i] if o == "issue" and b == kb}
            if issued != set(range(slabs)):
                problems.append(f"{where}: K block {kb}'s stage released before every slab's MMAs were issued ({sorted(issued)})")
            problems += bfp8model.release_order_problems(kb, released, where)
            released.append(kb)
        else:
            problems.append(f"{where}: unknown operation")
    return problems + bfp8model.end_problems(inflight, released, {s: promoted.get(s) for s in range(slabs)}, k_blocks, "slab")
