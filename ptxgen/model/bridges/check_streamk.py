"""Bridge: stream-K's fix-up (``derive.store.streamk`` as ``emit.views.streamk_view`` renders it) composed with the
epilogue that stores D (row-major or the M-major D of swap-AB, direct or TMA store), against the independent models,
over a whole launch.

The writer side is plain data the caller takes from the generator: each CTA's work entries as the rendered C computes
them ((tile, split, parts, first K-tile, K-tiles), in order), the rendered C of the partial store, of the owner's add
and of the flag (pointer expressions and float4 statements, evaluated here), the workspace bytes the launch allocates,
and what the epilogue of each tile stores into D (``check_dstore.simulate`` / ``check_mstore.simulate``: (address,
(row, col) of the register's element) per store). Two facts of the template's control flow are parameters, so that a
control can change them: ``owner`` (the split that waits, adds and runs the epilogue; the others store their partial)
and ``adds`` (the slots the owner adds, in order).

The reader side is independent: which element of the tile each accumulator register holds (``fragmodel``), a tile
index's origin (row-major over the tile grid: any bijection does, the kernel's raster is checked elsewhere), and what
each step means: a unit's main loop leaves in every register its element's partial sum over the unit's K-tiles; a
store of a float4 puts four registers' values at an address of the workspace; an add reads them back; a flag counts.
The agents (each CTA's consumer warpgroups) run their entries in an order drawn from ``seed``; an owner runs only once
its flag reads parts - 1 (no agent able to run while some have work left: a deadlock). An entry runs as one step: the
memory order inside it (the partial's stores, the warpgroup barrier, the release add; the acquire load, the barrier,
the adds) is the template's, the same for either D layout, and is what the GPU tier of the row-major kernels tests.

:func:`check_launch` reports (empty: none) every element of D not stored exactly once at its address, every stored
value that is not the sum of the partials of exactly the K-tiles 0..T-1 of its own element, added in split order
0, 1, ..., S-1 (the same order under every schedule), every partial read that is not its element's, every workspace
access outside the allocated bytes or two partials in one place, every flag not back to zero, and a deadlock.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

from ..layouts import fragmodel, outmodel

SLAB_ROWS = outmodel.SLAB_ROWS
THREADS = 128  # a consumer warpgroup
LANE_OF = {"x": 0, "y": 1, "z": 2, "w": 3}


@dataclass(frozen=True)
class FixupC:
    """The rendered C of the fix-up (``StreamKView``): the partial store's statements, the owner's add statements
    (inside its loop over ``j``), the owner's wait and a split's signal."""

    store_partial: tuple[str, ...]
    add_partial: tuple[str, ...]
    wait_owner: str
    signal: str


def _expr(c: str) -> str:
    """A rendered C pointer/integer expression as Python (W at address 0; byte offsets of float4 and int pointers in
    their element units; C's integer division)."""
    c = re.sub(r"reinterpret_cast<float4\*>\(W \+ (\d+)u\)", lambda m: f"({int(m.group(1))} // 16)", c)
    c = c.replace("reinterpret_cast<int*>(W)", "0")
    c = re.sub(r"static_cast<\w+>", "", c)
    return re.sub(r"(?<![/])/(?![/])", "//", c)


def _eval(c: str, env: dict):
    return eval(_expr(c), {"__builtins__": {}}, env)  # numpy arrays in env: evaluated for every thread at once


def _pointer(lines: tuple[str, ...], name: str) -> str:
    for line in lines:
        m = re.match(rf"\s*(?:const )?float4\* const {name} = (.*);\s*$", line)
        if m:
            return m.group(1)
    raise ValueError(f"no pointer {name} in the rendered statements")


def parse_fixup(c: FixupC) -> dict:
    """The statements as data: the store's and the add's pointer expressions, each float4's (offset, register per lane)."""
    stores = []
    for line in c.store_partial:
        m = re.search(r"__stcg\(sk_dst \+ (\d+), make_float4\(([^)]*)\)\)", line)
        if m:
            stores.append((int(m.group(1)), [int(r) for r in re.findall(r"acc0\[(\d+)\]", m.group(2))]))
    adds = []
    for line in c.add_partial:
        m = re.search(r"__ldcg\(sk_src \+ (\d+)\)", line)
        if m:
            regs = [None] * 4
            for reg, lane in re.findall(r"acc0\[(\d+)\] \+= x\.([xyzw])", line):
                regs[LANE_OF[lane]] = int(reg)
            adds.append((int(m.group(1)), regs))
    flag = re.search(r"flag_release_add\((.*), 1\);", c.signal).group(1)
    wait = re.search(r"int\* const sk_flag = (.*?); while", c.wait_owner).group(1)
    return {"dst": _pointer(c.store_partial, "sk_dst"), "src": _pointer(c.add_partial, "sk_src"), "stores": stores,
            "adds": adds, "flag": flag, "wait_flag": wait, "reset": "flag_relaxed_store(sk_flag, 0);" in c.wait_owner}


class _Fragment:
    """Per consumer warpgroup: the (row, col) of the tile each thread's register holds (fragmodel), as arrays."""

    def __init__(self, bn: int):
        regs = bn // 2
        self.row = np.zeros((THREADS, regs), dtype=np.int64)
        self.col = np.zeros((THREADS, regs), dtype=np.int64)
        for t in range(THREADS):
            for i in range(regs):
                self.row[t, i], self.col[t, i] = fragmodel.wgmma_d_coords(t // 32, t % 32, i)


class _Launch:
    def __init__(self, bm, bn, m, n, k_tiles, work, fix, workspace_bytes, owner, adds, problems):
        self.bm, self.bn, self.m, self.n, self.t = bm, bn, m, n, k_tiles
        self.groups = bm // SLAB_ROWS
        self.tiles_n = -(-n // bn)
        self.frag = _Fragment(bn)
        self.fix, self.owner, self.adds, self.problems = fix, owner, adds, problems
        self.work = work
        self.units = [e for entries in work for e in entries]  # unit id -> (tile, split, parts, first, count)
        # unit id -> (tile, split, first, count); the last row for "no term"
        self.info = np.array([(e[0], e[1], e[3], e[4]) for e in self.units] + [(-1, -1, 0, 0)], dtype=np.int64)
        floats = workspace_bytes // 4
        self.ws_row = np.full(floats, -1, dtype=np.int64)
        self.ws_col = np.full(floats, -1, dtype=np.int64)
        self.ws_unit = np.full(floats, -1, dtype=np.int64)
        self.ws_bytes = workspace_bytes
        self.flags: dict[int, int] = {}
        self.flag_bytes: set[int] = set()
        # (tile, slab) -> per run of its epilogue: (which registers held their element's whole sum in split order, the
        # sums' terms as bytes: the same under every schedule)
        self.epilogue: dict[tuple[int, int], list] = {}
        self.dp = min((e[0] for e in self.units if e[2] > 1), default=0)  # sk_dp: the first split item
        self.splits = max((e[2] for e in self.units), default=1)

    def say(self, msg: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(msg)

    def origin(self, tile: int) -> tuple[int, int]:
        return (tile // self.tiles_n) * self.bm, (tile % self.tiles_n) * self.bn

    def env(self, tile, split, parts, g, j=0):
        return {"tile": tile, "sk_split": split, "sk_parts": parts, "sk_dp": self.dp, "sk_splits": self.splits, "wg": g,
                "wg_tid": np.arange(THREADS)[:, None], "j": j}

    def flag_index(self, expr, tile, split, parts, g) -> int:
        i = int(_eval(expr, self.env(tile, split, parts, g)))
        self.flag_bytes.update(range(4 * i, 4 * i + 4))
        return i

    def _float_addresses(self, base_expr, offsets_regs, env):
        base = _eval(base_expr, env)  # (THREADS, 1) float4 index of each thread's first vector
        for off, regs in offsets_regs:
            addr = (base + off) * 4  # float index of the vector's first lane
            for lane, reg in enumerate(regs):
                yield reg, (addr + lane)[:, 0]

    def _inside(self, floats) -> bool:
        if floats.min() < 0 or 4 * (floats.max() + 1) > self.ws_bytes:
            self.say(f"a partial access at floats {floats.min()}..{floats.max()} outside the {self.ws_bytes} B workspace")
            return False
        return True

    def store_partial(self, uid, tile, split, parts, g):
        m0, n0 = self.origin(tile)
        for reg, floats in self._float_addresses(self.fix["dst"], self.fix["stores"], self.env(tile, split, parts, g)):
            if not self._inside(floats):
                return
            if (self.ws_unit[floats] >= 0).any():
                self.say(f"tile {tile} split {split}: a partial stored where another one lies")
            self.ws_row[floats] = m0 + SLAB_ROWS * g + self.frag.row[:, reg]
            self.ws_col[floats] = n0 + self.frag.col[:, reg]
            self.ws_unit[floats] = uid

    def add_partials(self, acc_terms, tile, split, parts, g):
        m0, n0 = self.origin(tile)
        for pos, j in enumerate(self.adds(parts), start=1):
            if pos >= acc_terms.shape[-1]:
                self.say(f"tile {tile}: the owner adds more slots than the tile has splits")
                return
            env = self.env(tile, split, parts, g, j)
            for reg, floats in self._float_addresses(self.fix["src"], self.fix["adds"], env):
                if not self._inside(floats):
                    return
                want_row, want_col = m0 + SLAB_ROWS * g + self.frag.row[:, reg], n0 + self.frag.col[:, reg]
                if (self.ws_unit[floats] < 0).any():
                    self.say(f"tile {tile}: the owner adds a slot float nobody stored (slot {j})")
                elif ((self.ws_row[floats] != want_row) | (self.ws_col[floats] != want_col)).any():
                    self.say(f"tile {tile}: the owner's register {reg} adds another element's partial (slot {j})")
                acc_terms[:, reg, pos] = self.ws_unit[floats]

    def run_epilogue(self, acc_terms, tile, g):
        self.epilogue.setdefault((tile, g), []).append((_coverage(self, acc_terms, tile), acc_terms.tobytes()))


def _owner_first(parts: int) -> int:
    return 0  # the template: if (sk_split > 0) { partial } else { wait, add, epilogue }


def _adds_in_order(parts: int) -> range:
    return range(1, parts)  # the template: for (int j = 1; j < sk_parts; ++j)


def simulate(bm, bn, m, n, k_tiles, work, fix: FixupC, workspace_bytes, *, owner=_owner_first, adds=_adds_in_order,
             seed=0):
    """Run the launch under one schedule: (the _Launch after it, problems)."""
    problems: list[str] = []
    lay = _Launch(bm, bn, m, n, k_tiles, work, parse_fixup(fix), workspace_bytes, owner, adds, problems)
    uid = 0
    queues = {}
    for c, entries in enumerate(work):
        for g in range(lay.groups):
            queues[(c, g)] = [(uid + i, e) for i, e in enumerate(entries)]
        uid += len(entries)
    rng = random.Random(seed)
    max_terms = max((e[2] for e in lay.units), default=1) + 2
    while any(queues.values()):
        ready = []
        for a, q in queues.items():
            if not q:
                continue
            u, (tile, split, parts, first, count) = q[0]
            if split == owner(parts) and parts > 1:
                f = lay.flag_index(lay.fix["wait_flag"], tile, split, parts, a[1])
                if lay.flags.get(f, 0) != parts - 1:
                    continue
            ready.append(a)
        if not ready:
            lay.say(f"deadlock: {sum(map(len, queues.values()))} entries left, every agent waits on a flag")
            break
        a = rng.choice(ready)
        u, (tile, split, parts, first, count) = queues[a].pop(0)
        g = a[1]
        terms = np.full((THREADS, bn // 2, max_terms), -1, dtype=np.int64)
        terms[:, :, 0] = u  # the main loop: every register holds its element's sum over this unit's K-tiles
        if split != owner(parts):
            lay.store_partial(u, tile, split, parts, g)
            f = lay.flag_index(lay.fix["flag"], tile, split, parts, g)
            lay.flags[f] = lay.flags.get(f, 0) + 1
            continue
        if parts > 1:
            f = lay.flag_index(lay.fix["wait_flag"], tile, split, parts, g)
            if lay.fix["reset"]:  # the owner leaves its flag as the next launch must find it
                lay.flags[f] = 0
            lay.add_partials(terms, tile, split, parts, g)
        lay.run_epilogue(terms, tile, g)
    return lay, problems


def _coverage(lay: _Launch, terms: np.ndarray, tile: int) -> np.ndarray:
    """Per register (THREADS x regs): True where its terms are units of ``tile`` whose K-ranges are 0..T-1 exactly once,
    added in split order 0, 1, ..."""
    t = np.where(terms >= 0, terms, len(lay.units))
    tiles, splits, firsts, counts = (lay.info[t][..., i] for i in range(4))
    used = terms >= 0
    ok = (np.where(used, tiles, tile) == tile).all(axis=-1)
    nterms = used.sum(axis=-1)
    ok &= (np.where(used, splits, np.arange(terms.shape[-1])) == np.arange(terms.shape[-1])).all(axis=-1)  # split order
    ends = np.where(used, firsts + counts, 0)
    ok &= (np.where(used, firsts, 0)[..., 0] == 0)
    nxt = np.concatenate([firsts[..., 1:], np.zeros_like(firsts[..., :1])], axis=-1)
    nxt_used = np.concatenate([used[..., 1:], np.zeros_like(used[..., :1])], axis=-1)
    ok &= (~(used & nxt_used) | (ends == nxt)).all(axis=-1)  # each K-range starts where the one before ended
    last_end = np.take_along_axis(ends, np.maximum(nterms - 1, 0)[..., None], axis=-1)[..., 0]
    return ok & (last_end == lay.t) & (nterms > 0)


def check_launch(bm, bn, m, n, k_tiles, work, fix: FixupC, workspace_bytes, stores, d_major="m", ldd=None, *,
                 owner=_owner_first, adds=_adds_in_order, seeds=(0, 1)) -> list[str]:
    """Problems (empty: none) with one stream-K launch of an M x N x (k_tiles K-tiles) problem (see the module
    docstring). ``stores``: what the epilogue stores for the whole problem ((address, (row, col)) per store)."""
    results = []
    for seed in seeds:
        lay, problems = simulate(bm, bn, m, n, k_tiles, work, fix, workspace_bytes, owner=owner, adds=adds, seed=seed)
        if problems:
            return problems
        results.append(lay)
    lay, problems = results[0], []
    for other in results[1:]:  # the sums' order does not depend on the schedule
        if any([t for _, t in runs] != [t for _, t in other.epilogue.get(key, [])] for key, runs in lay.epilogue.items()):
            problems.append("the owner's sums differ between two schedules")
    if any(lay.flags.values()):
        problems.append(f"{sum(1 for v in lay.flags.values() if v)} flags not back to zero after the launch")
    slots = np.flatnonzero(lay.ws_unit >= 0)
    if slots.size and lay.flag_bytes and max(lay.flag_bytes) >= 4 * slots.min():
        problems.append("the flags reach into the partial slots")
    ok = np.zeros((-(-m // bm) * bm, -(-n // bn) * bn), dtype=bool)
    for (tile, g), runs in lay.epilogue.items():
        m0, n0 = lay.origin(tile)
        ok[m0 + SLAB_ROWS * g + lay.frag.row, n0 + lay.frag.col] = np.logical_and.reduce([good for good, _ in runs])
    runs = {key: len(r) for key, r in lay.epilogue.items()}
    stored = []
    for addr, (row, col) in stores:
        key = ((row // bm) * lay.tiles_n + col // bn, (row % bm) // SLAB_ROWS)
        stored += [(addr, (row, col))] * runs.get(key, 0)  # a tile's epilogue stores its elements each time it runs
        if runs.get(key) and not ok[row, col]:
            if len(problems) < 50:
                problems.append(f"D[{row}, {col}] stored without the sum of all K-tiles' partials in split order")
    problems += outmodel.check_stores(d_major, m, n, ldd if ldd is not None else (m if d_major == "m" else n), stored)[:50]
    return problems
