"""An independent model of DeepSeek-style block-scaled FP8 GEMM (imports only the independent fragment model).

* the recipe: output (m, n) takes, for each 128-block kb of K, its partial dot product times sfa[m, kb] times
  sfb[kb, n // 128] (A: one scale per row per 128 of K; B: one per 128 x 128 block);
* a float64 reference of it, and a model of the tensor core's limited-precision FP8 accumulation (the partial sum
  rounded to ``acc_bits`` significant bits after every K = 32 wgmma, as DeepSeek-V3 reports about 14 bits; a model,
  not a measurement) with f32 promotion every ``promote_every`` of K;
* the check of a plan's per-thread scale loads: every register's partial sum must be multiplied by exactly the
  two scales the recipe gives its (row, column) at that K block.
"""

from __future__ import annotations

import numpy as np

from ..layouts import fragmodel

BLOCK = 128


def reference(a: np.ndarray, sfa: np.ndarray, b: np.ndarray, sfb: np.ndarray, c: np.ndarray | None = None,
              per_column: bool = False) -> np.ndarray:
    """float64 D (M x N) of the recipe; a: M x K values, b: N x K values, sfa: M x Kb, sfb: Kb x Nb (1x128x128: one
    scale per 128 columns) or, ``per_column``, Kb x N (1x128x1x128: one per column); plus C when given."""
    m, k = a.shape
    n = b.shape[0]
    d = np.zeros((m, n)) if c is None else np.array(c, dtype=np.float64)
    for kb in range(0, k, BLOCK):
        part = a[:, kb:kb + BLOCK].astype(np.float64) @ b[:, kb:kb + BLOCK].astype(np.float64).T
        d += part * sfa[:, kb // BLOCK][:, None] * column_scales(sfb[kb // BLOCK], n, per_column)[None, :]
    return d


def column_scales(row: np.ndarray, n: int, per_column: bool) -> np.ndarray:
    """One K block's B scale of each of the N columns: ``row`` holds one per column (1x128x1x128) or one per 128
    columns (1x128x128)."""
    return row[:n] if per_column else np.repeat(row, BLOCK)[:n]


# How far a kernel's output may lie from `reference`, per element, in the size of the element's own terms: the
# output's rounding (``out_rtol`` of |D|) plus the FP8 tensor core's accumulation inside each 128-K block, a fraction
# ``acc_rtol`` of the sum of the terms' magnitudes (measured on the H200: 6.2e-4 of it with positive inputs at K = 16384,
# block_fp8_promotion.json). A bound in the mean |D| instead fails near-cancelling sums: one element of 7e6 at
# 1000x7000x2000 and two of 4.5e6 at 1500x3000x400, alike in every kernel variant (runs/2026-12-02-blockfp8-streamk, runs/2026-12-02-blockfp8-half).
# A dropped or misscaled K block moves a typical element by ~1/sqrt(128) of that block's magnitude, far above 2^-9 of
# the total for K up to thousands.
ACC_RTOL = 2.0 ** -9


def outside_bound(got: np.ndarray, a, sfa, b, sfb, out_rtol: float, acc_rtol: float = ACC_RTOL, c=None,
                  per_column: bool = False) -> np.ndarray:
    """Mask of the outputs farther from the float64 recipe than ``out_rtol`` |D| + ``acc_rtol`` x (the recipe on |a|, |b|)."""
    ref = reference(a, sfa, b, sfb, c, per_column)
    magnitude = reference(np.abs(a), np.abs(sfa), np.abs(b), np.abs(sfb), None, per_column)
    return ~(np.abs(got - ref) <= out_rtol * np.abs(ref) + acc_rtol * magnitude)


def round_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """Round to ``bits`` significant bits (nearest)."""
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def limited_accumulate(a, sfa, b, sfb, promote_every: int | None, acc_bits: int = 14, k_step: int = 32) -> np.ndarray:
    """The recipe computed as the model tensor core does: unscaled partial sums accumulated in ``acc_bits`` bits
    (rounded after each ``k_step``), promoted (scaled by the scales of the interval's first K block, added in f32)
    every ``promote_every`` of K (None: once, at the end). Promoting less often than every 128 is the recipe only
    when the scales do not vary along K; the controls use such scales."""
    m, k = a.shape
    n = b.shape[0]
    acc = np.zeros((m, n), dtype=np.float32)
    part = np.zeros((m, n))
    every = promote_every or k
    for k0 in range(0, k, k_step):
        part = round_bits(part + a[:, k0:k0 + k_step] @ b[:, k0:k0 + k_step].T, acc_bits)
        end = k0 + k_step
        if end % every == 0 or end >= k:
            kb = k0 // BLOCK
            scale = sfa[:, kb][:, None] * np.repeat(sfb[kb], BLOCK)[None, :n]
            acc = (acc + (part * scale).astype(np.float32)).astype(np.float32)
            part = np.zeros((m, n))
    return acc.astype(np.float64)


def applied_scales(vals: list) -> tuple[list[str], float | None]:
    """What one accumulator register was scaled by: the operands' names, sorted, and the product of their values (None
    when no scale reached it), from its (operand, value) loads."""
    return sorted(o for o, _ in vals), (float(np.prod([v for _, v in vals])) if vals else None)


def random_scales(rng, rows: int, k_blocks: int, n_blocks: int) -> tuple:
    """Scale arrays (sfa rows x k_blocks, sfb k_blocks x n_blocks) of distinct values whose products stay distinct."""
    sfa = rng.permutation(np.arange(1, rows * k_blocks + 1)).reshape(rows, k_blocks).astype(np.float64)
    sfb = rng.permutation(np.arange(1, k_blocks * n_blocks + 1)).reshape(k_blocks, n_blocks).astype(np.float64) * 1e6
    return sfa, sfb


def thread_scale_problems(thread_loads, sfa, sfb, bn: int, kb: int, n0: int, warp: int, lane: int, row0: int,
                          who: str, per_column: bool = False) -> list[str]:
    """One thread's scale loads (operand, (i, j), registers) performed on sfa / sfb, and each of its BN / 2 accumulator
    registers' product compared with the recipe's scales of the register's (row, column): the fragment model's
    coordinates for ``warp`` (in its warpgroup) and ``lane``, the rows from ``row0``."""
    got: dict[int, list] = {}
    for operand, (i, j), regs in thread_loads:
        arr = sfa if operand == "sfa" else sfb
        if not (0 <= i < arr.shape[0] and 0 <= j < arr.shape[1]):
            return [f"{who}: loads {operand}[{i}, {j}], outside the {arr.shape} array"]
        v = arr[i, j]
        for r in regs:
            got.setdefault(r, []).append((operand, v))
    problems = []
    for reg in range(bn // 2):
        r, c = fragmodel.wgmma_d_coords(warp, lane, reg)
        want = sfa[row0 + r, kb] * sfb[kb, n0 + c if per_column else (n0 + c) // BLOCK]
        ops, prod = applied_scales(got.get(reg, []))
        if ops != ["sfa", "sfb"] or prod != want:
            problems.append(f"{who} register {reg} (row {row0 + r}, column {n0 + c}, K block {kb}): scaled by {ops} = "
                            f"{prod}, the recipe says {want}")
    return problems


def check_loads(loads, bn: int, kb: int, m0: int, n0: int, rows: int, kbs: int, rng, per_column: bool = False) -> list[str]:
    """``loads(warp, lane)``: the plan's scale loads (operand, (i, j), registers) of one thread for K block ``kb``.
    Performs them on random distinct scale arrays and compares each register's product with the recipe's
    (``per_column``: 1x128x1x128, B's scale of output column n is sfb[kb, n], else sfb[kb, n // 128])."""
    width = n0 + bn + 2 * BLOCK if per_column else n0 // BLOCK + 8  # room for a wrong plan's indices
    sfa, sfb = random_scales(rng, m0 + rows + 16, kbs + 2, width)
    problems = []
    for warp in range(rows // 16):
        for lane in range(32):
            problems += thread_scale_problems(loads(warp, lane), sfa, sfb, bn, kb, n0, warp % 4, lane,
                                              m0 + 64 * (warp // 4), f"warp {warp} lane {lane}", per_column)
            if len(problems) > 10:
                return problems
    return problems


# ---- the --fp8-stagger protocol: two consumer warpgroups ordered through two named barriers ----------------------------
def check_stagger(steps, k_tiles: int, seeds=range(40), mode: str = "issue", stages: int | None = None) -> list[str]:
    """``steps``: (wg, where, op, barrier, not_first) tuples, where in before_issue / after_issue / after_half / after_wait
    / tail, op in sync / arrive. Runs both warpgroups over ``k_tiles`` K-tiles under random interleavings, with bar.sync /
    bar.arrive semantics (a generation of a barrier completes once 128 threads of each warpgroup are in; a sync waits for
    it; one warpgroup counted twice in a generation completes it wrongly). A K-tile's program: issue (its MMAs, as two
    commit groups), the first group complete (wait_group 1; after_half follows it), all complete (wait_group 0). Checks:
    no deadlock, no double count, no arrival left at the end, and the order: warpgroup 1 issues K-tile i after warpgroup
    0 issued (mode issue), completed (mode complete) or completed the first half of (mode half) it; warpgroup 0 issues
    i + 1 after warpgroup 1 issued i (half: completed the first half of i). With ``stages``, the producer's ring too: a
    K-tile can be issued only once both warpgroups released (after its wait_group 0) the K-tile ``stages`` before it."""
    import random

    problems: list[str] = []
    where_order = ("before_issue", "issue", "after_issue", "half", "after_half", "wait", "after_wait", "release")
    events = {"issue": "issued", "half": "half", "wait": "done", "release": "released"}
    first_of = {"issue": "issued", "complete": "done", "half": "half"}[mode]  # warpgroup 0's event that lets 1 issue i
    second_of = "half" if mode == "half" else "issued"  # warpgroup 1's event that lets 0 issue i + 1
    for seed in seeds:
        rng = random.Random(seed)
        progs = []
        for wg in (0, 1):
            prog = []
            for i in range(k_tiles):
                for w in where_order:
                    if w in events:
                        prog.append((w, i))
                    else:
                        prog += [(op, b, i) for (g, ww, op, b, nf) in steps if g == wg and ww == w and not (nf and i == 0)]
            prog += [(op, b, k_tiles) for (g, ww, op, b, nf) in steps if g == wg and ww == "tail" and not (nf and k_tiles == 0)]
            progs.append(prog)
        pc = [0, 0]
        gen_members = {0: set(), 1: set()}  # warpgroups counted in the open generation of each barrier
        completed = {0: 0, 1: 0}  # generations completed
        waiting = {}  # wg -> (barrier, generation it waits for)
        times = {e: {} for e in events.values()}  # event -> (wg, i) -> time

        def landed(g):  # the next step is not the issue of a K-tile whose stage the producer cannot have filled yet
            op, i = progs[g][pc[g]][0], progs[g][pc[g]][-1]
            return op != "issue" or stages is None or i < stages or all((w, i - stages) in times["released"] for w in (0, 1))

        t = 0
        while pc[0] < len(progs[0]) or pc[1] < len(progs[1]):
            runnable = [g for g in (0, 1) if pc[g] < len(progs[g]) and landed(g)
                        and (g not in waiting or completed[waiting[g][0]] > waiting[g][1])]
            if not runnable:
                problems.append(f"seed {seed}: deadlock at {[progs[g][pc[g]] if pc[g] < len(progs[g]) else 'end' for g in (0, 1)]}")
                break
            g = rng.choice(runnable)
            waiting.pop(g, None)
            ev = progs[g][pc[g]]
            t += 1
            if ev[0] in ("sync", "arrive"):
                b = ev[1]
                if g in gen_members[b]:
                    problems.append(f"seed {seed}: warpgroup {g} counted twice in generation {completed[b]} of barrier {b} "
                                    f"(K-tile {ev[2]})")
                    break
                gen_members[b].add(g)
                gen = completed[b]
                if len(gen_members[b]) == 2:
                    completed[b] += 1
                    gen_members[b] = set()
                if ev[0] == "sync" and completed[b] <= gen:
                    waiting[g] = (b, gen)
            else:
                times[events[ev[0]]][(g, ev[1])] = t
            pc[g] += 1
        else:
            for b in (0, 1):
                if gen_members[b]:
                    problems.append(f"seed {seed}: barrier {b} left with an arrival of warpgroup(s) {sorted(gen_members[b])}")
            issued = times["issued"]
            for i in range(k_tiles):
                if issued[(1, i)] < times[first_of][(0, i)]:
                    problems.append(f"seed {seed}: warpgroup 1 issued K-tile {i} before warpgroup 0's event {first_of} of it")
                if i + 1 < k_tiles and issued[(0, i + 1)] < times[second_of][(1, i)]:
                    problems.append(f"seed {seed}: warpgroup 0 issued K-tile {i + 1} before warpgroup 1's event {second_of} of {i}")
        if len(problems) > 5:
            break
    return problems


# ---- --fp8-overlap halves: one warpgroup's wgmma groups, fragments and stage releases -----------------------------------
def release_order_problems(kb: int, released: list[int], where: str) -> list[str]:
    """A stage release of K block ``kb`` after ``released``: the stages go back in K order, once each."""
    return [f"{where}: release of K block {kb} after {released[-1:]}"] if (released and released[-1] != kb - 1
                                                                            or not released and kb != 0) else []


def end_problems(inflight, released: list[int], promoted: dict, k_blocks: int, unit: str) -> list[str]:
    """At the end of a warpgroup's K blocks: nothing in flight, every stage released once in order, and every fragment
    (``unit`` names it: a column half, a slab) promoted for every K block once, in order."""
    problems = [f"groups {inflight} still in flight at the end"] if inflight else []
    if released != list(range(k_blocks)):
        problems.append(f"stages released {released}, expected 0..{k_blocks - 1} once each")
    for u, kbs in sorted(promoted.items()):
        if kbs != list(range(k_blocks)):
            problems.append(f"{unit} {u} promoted for K blocks {kbs}, expected 0..{k_blocks - 1} once each in order")
    return problems


def check_overlap(steps, k_blocks: int, halves: int, back_edge_empty: bool = True, require_overlap: bool = True) -> list[str]:
    """``steps``: (op, kb, half, n) in program order, op in issue / wait / promote / release. Simulates the warpgroup's
    wgmma groups (commit order; ``wait n`` completes the oldest until at most n are in flight; an issue with n = 1
    joins the previous issue's group, no commit between them: --fp8-overlap interleave) and its ``halves`` fragments.
    Checks: a fragment is overwritten only after its partial was promoted; a promotion reads a complete
    fragment holding that K block's half; a stage is released once, in order, after every group reading it completed;
    every (K block, half) is promoted exactly once, in K order per half; nothing is in flight at the end. With
    ``back_edge_empty``, nothing is in flight where a K block's first MMAs are issued (the loop's back edge); with
    ``require_overlap``, a group is in flight during every promotion but the last (the point of the halves)."""
    problems: list[str] = []
    inflight: list[list[tuple[int, int]]] = []  # groups of (kb, half), oldest first
    frag: dict[int, tuple[int, str]] = {}  # half -> (kb, "pending" | "complete" | "promoted")
    released: list[int] = []
    promoted: dict[int, list[int]] = {h: [] for h in range(halves)}
    lonely = 0
    for i, (op, kb, half, n) in enumerate(steps):
        where = f"step {i} ({op} {kb}/{half})"
        if op == "issue":
            if n and not inflight:
                problems.append(f"{where}: joins a group, but none is open")
            if half == 0 and back_edge_empty and inflight:
                problems.append(f"{where}: K block {kb} starts with groups {inflight} in flight")
            state = frag.get(half)
            if state is not None and state[1] != "promoted":
                problems.append(f"{where}: fragment {half} overwritten while it holds K block {state[0]} ({state[1]})")
            if kb in released:
                problems.append(f"{where}: MMAs read stage of K block {kb} after it was released")
            frag[half] = (kb, "pending")
            if n and inflight:
                inflight[-1].append((kb, half))
            else:
                inflight.append([(kb, half)])
        elif op == "wait":
            while len(inflight) > n:
                for done_kb, done_h in inflight.pop(0):
                    if frag.get(done_h) == (done_kb, "pending"):
                        frag[done_h] = (done_kb, "complete")
        elif op == "promote":
            if frag.get(half) != (kb, "complete"):
                problems.append(f"{where}: fragment {half} is {frag.get(half)}, not K block {kb} complete")
            else:
                frag[half] = (kb, "promoted")
            promoted[half].append(kb)
            if not inflight:
                lonely += 1
        elif op == "release":
            mine = [x for g in inflight for x in g if x[0] == kb]
            if mine:
                problems.append(f"{where}: stage of K block {kb} released with its MMAs {mine} in flight")
            problems += release_order_problems(kb, released, where)
            released.append(kb)
        else:
            problems.append(f"{where}: unknown operation")
    problems += end_problems(inflight, released, {h: promoted[h] for h in range(halves)}, k_blocks, "half")
    if require_overlap and k_blocks and lonely > 1:
        problems.append(f"{lonely} promotions with no wgmma group in flight (only the last may have none)")
    return problems


# ---- --fp8-scale-load: which K block's scales each promotion reads -----------------------------------------------------
def check_scale_steps(steps, k_blocks: int) -> list[str]:
    """``steps``: (op, kb, regs, src) tuples, op in load / move / promote (derive.scaled.bfp8steps.ScaleStep). Simulates the
    thread's register sets: a load puts K block kb's scales into set ``regs``, a move copies set ``src`` into ``regs``, a
    promotion of kb reads set ``regs``. Checks: every K block 0..k_blocks-1 promoted exactly once, in order, each with
    its own block's scales (never unset or stale ones); no load of a block outside 0..k_blocks-1 (the scale arrays end
    there: a read past them can fault)."""
    sets: dict[str, int | None] = {}
    promoted, problems = [], []
    for op, kb, regs, src in steps:
        if op == "load":
            if not 0 <= kb < k_blocks:
                problems.append(f"load of K block {kb}: outside the tile's K blocks 0..{k_blocks - 1}")
            sets[regs] = kb
        elif op == "move":
            sets[regs] = sets.get(src)
        elif op == "promote":
            if sets.get(regs) != kb:
                problems.append(f"promotion of K block {kb} reads the scales of K block {sets.get(regs)} (set {regs})")
            promoted.append(kb)
        else:
            problems.append(f"unknown step {op}")
    if promoted != list(range(k_blocks)):
        problems.append(f"K blocks promoted {promoted}, expected 0..{k_blocks - 1} once each in order")
    return problems


# ---- --fp8-scale-load smem: the scale warp's stores and the consumers' reads of a stage's scale slots --------------------
def check_scale_slots(writes, reads, bm: int, sfb_slots: int, sfa_stage_bytes: int, sfb_stage_bytes: int,
                      lanes: int = 32, per_column: bool = False) -> list[str]:
    """``writes(lane)``: (operand, what, byte offset) the scale warp's lane stores per stage (what: the tile row of an
    sfa scale, the block n0 / 128 + j of an sfb scale). ``reads(warp, lane, slab)``: (operand, byte offset) a consumer
    thread loads, in the order (its upper row's A scale, its lower row's, B block 0's[, B block 1's]). Checks: every tile
    row and B block stored exactly once, 4-byte aligned inside its slot, no two values at one offset; each consumer
    read finds what the promotion needs there: its fragment rows (from the wgmma D fragment model, not the plan) and
    the B blocks in order; ``per_column`` (1x128x1x128, sfb_slots = BN): the B scales of the thread's own columns, in
    register order (the fragment model's column of registers 0, 1, 4, 5, ...)."""
    problems = []
    held: dict[tuple[str, int], object] = {}
    for lane in range(lanes):
        for operand, what, off in writes(lane):
            size = sfa_stage_bytes if operand == "sfa" else sfb_stage_bytes
            if off % 4 or not 0 <= off <= size - 4:
                problems.append(f"lane {lane} stores {operand} {what} at byte {off}: outside or misaligned in its {size}-byte slot")
            if (operand, off) in held:
                problems.append(f"lane {lane} stores {operand} {what} at byte {off}, which already holds {held[(operand, off)]}")
            held[(operand, off)] = what
    for operand, want in (("sfa", range(bm)), ("sfb", range(sfb_slots))):
        got = sorted(w for (o, _), w in held.items() if o == operand)
        if got != list(want):
            problems.append(f"{operand}: stored {got[:8]}... ({len(got)}), expected each of 0..{len(want) - 1} once")
    for warp in range(bm // 16):
        slab, w = divmod(warp, 4)
        for lane in range(32):
            rows = [fragmodel.wgmma_d_coords(w, lane, reg)[0] + 64 * slab for reg in (0, 2)]
            cols = [fragmodel.wgmma_d_coords(w, lane, reg)[1] for reg in range(2 * sfb_slots // 4) if reg % 4 < 2]
            need = [("sfa", r) for r in rows] + ([("sfb", c) for c in cols] if per_column else
                                                 [("sfb", j) for j in range(sfb_slots)])
            got = [(operand, held.get((operand, off))) for operand, off in reads(w, lane, slab)]
            if got != need:
                problems.append(f"consumer warp {warp} lane {lane}: reads {got}, the promotion needs {need}")
                if len(problems) > 10:
                    return problems
    return problems


# ---- stream-K: the scale blocks each split of a tile's K loop promotes with --------------------------------------------
def check_unit_scale_blocks(units, k: int, bk: int, blocks_read) -> list[str]:
    """``units``: the (split, first K-tile, K-tiles) of each work unit of one output tile (a whole tile: one unit
    (0, 0, ceil(K / bk))); ``blocks_read(first, count)``: the scale K block each of the unit's K-tiles kt = 0..count-1
    promotes with, in loop order (what the kernel computes). The K elements a unit's K-tile kt multiplies are the ones
    its loader reads: (first + kt) x bk .. + bk - 1, clipped to K. Checks: every K element a K-tile multiplies lies in
    the 128-block whose scales it is promoted with (so a split reads the scale blocks of exactly its K range); no block
    outside 0..ceil(K / 128) - 1 is read; over the tile's units every K element is multiplied once and every K block's
    K elements are all promoted with that block."""
    problems = []
    k_blocks = -(-k // BLOCK)
    covered: dict[int, int] = {}
    for split, first, count in units:
        got = list(blocks_read(first, count))
        if len(got) != count:
            problems.append(f"split {split}: {len(got)} scale blocks for {count} K-tiles")
            continue
        for kt, kb in enumerate(got):
            lo, hi = (first + kt) * bk, min(k, (first + kt + 1) * bk)
            if not 0 <= kb < k_blocks:
                problems.append(f"split {split} K-tile {kt} (K {lo}..{hi - 1}): scale block {kb} outside 0..{k_blocks - 1}")
            wrong = sorted({e // BLOCK for e in range(lo, hi)} - {kb})
            if wrong:
                problems.append(f"split {split} K-tile {kt} multiplies K {lo}..{hi - 1} (blocks {wrong}) but promotes with "
                                f"block {kb}'s scales")
            for e in range(lo, hi):
                covered[e] = covered.get(e, 0) + 1
        if len(problems) > 10:
            return problems
    missing = [e for e in range(k) if covered.get(e, 0) != 1]
    if missing:
        problems.append(f"{len(missing)} K elements not multiplied exactly once over the splits, e.g. K = {missing[0]}")
    return problems


def split_recipe(a, sfa, b, sfb, units, bk: int, blocks_read, per_column: bool = False) -> np.ndarray:
    """The recipe as stream-K computes it: each unit (split, first K-tile, K-tiles) promotes the partial sum of each of
    its K-tiles (the loader's K range, clipped to K) with the scales of the block ``blocks_read`` gives it, into its own
    accumulator; the owner adds the other splits' accumulators in split order. float64 (the order of additions differs
    from ``reference`` only by rounding). ``per_column``: sfb is Kb x N, one scale per column (1x128x1x128)."""
    n, k = b.shape[0], a.shape[1]
    accs = {}
    for split, first, count in units:
        acc = np.zeros((a.shape[0], n))
        for kt, kb in enumerate(blocks_read(first, count)):
            lo, hi = (first + kt) * bk, min(k, (first + kt + 1) * bk)
            part = a[:, lo:hi].astype(np.float64) @ b[:, lo:hi].astype(np.float64).T
            acc += part * sfa[:, kb][:, None] * column_scales(sfb[kb], n, per_column)[None, :]
        accs[split] = acc
    return sum(accs[z] for z in sorted(accs))
