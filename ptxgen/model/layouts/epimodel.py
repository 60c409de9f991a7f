"""An independent model of where a fused epilogue's operands come from, for every accumulator register.

Imports nothing from ptxgen (only its sibling ``fragmodel``, itself independent). Two transcriptions meet here:

* the chain's meaning (what a user of ``gemm(..., bias=, c=, residual=, aux=)`` expects): output element (r, n) reads
  C[r, n] and R[r, n], and aux[r, n] (the backward step ``dact``) or writes aux[r, n] (the pre-activation ``aux``); a column bias reads bias[n], a row bias bias[r]; an FP8 output is scaled by scale[r] (per
  row) or scale[0] (per tensor), and its amax entry is the max of |y| over row r (or over everything);
* which element each register holds: the wgmma m64nN D fragment and the tcgen05 32x32b TMEM load
  (``fragmodel.wgmma_d_coords``, ``fragmodel.tmem_32x32b_coords``).

The check takes a thread's loads as plain data (operand, row, column, per loaded element the registers it feeds),
performs them on random operand arrays, and compares what each register received with what the element that
register holds needs. A row amax is checked by running the butterfly shuffles on the per-lane maxima.
"""

from __future__ import annotations

import numpy as np

from . import fragmodel

OPERAND_AXES = {"c": "rc", "residual": "rc", "aux": "rc",  # bias and scale take their axis from the chain
                "scale_a": "r", "scale_b": "c"}  # rowscale: A's row scale by the output's row, B's by its column


def operand_axis(chain: dict, operand: str) -> str:
    if operand in OPERAND_AXES:
        return OPERAND_AXES[operand]
    if operand == "bias":
        return {"col": "c", "row": "r"}[chain["bias"]["axis"]]
    if operand == "scale":
        return {"row": "r", "tensor": ""}[chain["fp8_scale"]]
    raise ValueError(operand)


def source_index(chain: dict, operand: str, row: int, col: int) -> tuple[int, ...]:
    """The index into ``operand`` that output element (row, col) of the tile reads, by the chain's meaning."""
    axis = operand_axis(chain, operand)
    return {"rc": (row, col), "c": (col,), "r": (row,), "": (0,)}[axis]


def reads(chain: dict, row: int, col: int) -> dict:
    """What output element (row, col) reads, operand -> index, by the chain's meaning (rowscale: scale_a[row] and
    scale_b[col], torch._scaled_mm's row-wise scales of A's row and B's row)."""
    ops = (["scale_a", "scale_b"] if chain.get("rowscale") else []) + (["c"] if chain.get("c") else []) + (
        ["bias"] if chain.get("bias") else []) + (["aux"] if chain.get("dact") else []) + (
        ["residual"] if chain.get("residual") else []) + (["scale"] if chain.get("fp8_scale") else [])
    return {op: source_index(chain, op, row, col) for op in ops}


def element_value(chain: dict, row: int, col: int, acc: float, arrays: dict, alpha: float = 1.0, beta: float = 1.0) -> float:
    """What output element (row, col) computes before the output rounding (activations left out: the steps that read
    operands): (acc x scale_a[r] x scale_b[n]) x alpha + beta x C + bias, then + residual, as torch._scaled_mm(...,
    bias=) and addmm define it (the dequantized product first, the bias added to it in f32)."""
    at = reads(chain, row, col)
    y = float(acc)
    if "scale_a" in at:
        y = y * float(arrays["scale_a"][at["scale_a"]]) * float(arrays["scale_b"][at["scale_b"]])
    y *= alpha
    if "c" in at:
        y += beta * float(arrays["c"][at["c"]])
    if "bias" in at:
        y += float(arrays["bias"][at["bias"]])
    if "residual" in at:
        y += float(arrays["residual"][at["residual"]])
    return y


def run_steps(chain: dict, steps, row: int, col: int, acc: float, arrays: dict, alpha: float = 1.0, beta: float = 1.0) -> float:
    """The same element through a given step order (the derivation's, ``derive.store.fusion.step_names``): each
    named step applied as the model reads it; a step the model does not model here (activation, FP8 output) is
    skipped, so the comparison is over the operand steps."""
    at = reads(chain, row, col)
    y = float(acc)
    for step in steps:
        if step == "rowscale":
            if "scale_a" not in at:
                return float("nan")
            y = y * float(arrays["scale_a"][at["scale_a"]]) * float(arrays["scale_b"][at["scale_b"]])
        elif step == "alpha":
            y *= alpha
        elif step in ("c", "bias", "residual"):
            if step not in at:
                return float("nan")  # a step on an operand the chain does not have
            y += (beta if step == "c" else 1.0) * float(arrays[step][at[step]])
    return y


def check_values(chain: dict, steps, rows: int, cols: int, rng, alpha: float = 0.75, beta: float = 0.5) -> list[str]:
    """Every element of a rows x cols tile through ``steps`` against :func:`element_value`, on random operands
    (distinct scales, so a swapped or misplaced scale shows)."""
    arrays = {op: random_operand(chain, op, rows, cols, rng).astype(np.float64) / 7.0 for op in
              ("scale_a", "scale_b", "c", "bias", "residual") if op in reads(chain, 0, 0)}
    acc = rng.standard_normal((rows, cols))
    problems = []
    for r in range(rows):
        for n in range(cols):
            want = element_value(chain, r, n, acc[r, n], arrays, alpha, beta)
            got = run_steps(chain, steps, r, n, acc[r, n], arrays, alpha, beta)
            if not np.isclose(got, want, rtol=1e-12, atol=1e-12):
                problems.append(f"element ({r}, {n}) computes {got!r}, the chain means {want!r} (steps {list(steps)})")
                if len(problems) > 8:
                    return problems
    return problems


def random_operand(chain: dict, operand: str, rows: int, cols: int, rng) -> np.ndarray:
    """Distinct values, so that reading the wrong element shows."""
    axis = operand_axis(chain, operand)
    shape = {"rc": (rows, cols), "c": (cols,), "r": (rows,), "": (1,)}[axis]
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.int64) + 1


def perform(loads: list, arrays: dict) -> dict:
    """Run a thread's loads: {(operand, register): [values it received]}."""
    got: dict = {}
    for operand, row, col, targets in loads:
        arr = arrays[operand]
        for k, regs in enumerate(targets):
            if arr.ndim == 2:
                inside = 0 <= row < arr.shape[0] and 0 <= col + k < arr.shape[1]
                v = arr[row, col + k] if inside else -1  # outside the tile: a value no element needs
            elif col is not None:
                v = arr[col + k]
            elif row is not None:
                assert k == 0
                v = arr[row]
            else:
                v = arr[0]
            for reg in regs:
                got.setdefault((operand, reg), []).append(int(v))
    return got


def register_coords(family: str, warp: int, lane: int, reg: int, col0: int = 0, bm: int = 128):
    """(row, column) of the tile that a register holds; None for a lane without a row (tcgen05 M=64, lanes 16..31)."""
    if family == "wgmma":
        return fragmodel.wgmma_d_coords(warp, lane, reg)
    if bm == 64:  # rows 16w..16w+15 in lanes 32w..32w+15 of the data path (half of it)
        return None if lane >= 16 else (16 * warp + lane, col0 + reg)
    return fragmodel.tmem_32x32b_coords(warp, lane, reg, col0)


def check_thread(chain: dict, family: str, operand: str, warp: int, lane: int, registers: int, loads: list, arrays: dict,
                 col0: int = 0, bm: int = 128) -> list[str]:
    """Problems for one thread: every register it holds got exactly one value, the one its element needs."""
    got = perform(loads, arrays)
    problems = []
    for reg in range(registers):
        rc = register_coords(family, warp, lane, reg, col0, bm)
        vals = got.pop((operand, reg), [])
        if rc is None:
            if vals:
                problems.append(f"{operand}: lane {lane} of warp {warp} holds no row but loads into register {reg}")
            continue
        want = int(arrays[operand][source_index(chain, operand, *rc)])
        if vals != [want]:
            problems.append(f"{operand}: warp {warp} lane {lane} register {reg} (element {rc}) received {vals}, needs [{want}] "
                            f"({operand}{list(source_index(chain, operand, *rc))})")
    for (op, reg), vals in got.items():
        problems.append(f"{op}: warp {warp} lane {lane} loads into register {reg}, which the thread does not hold")
    return problems


def check_amax(family: str, per_row: bool, xor_masks, written_rows, rows: int, cols: int, warps: int, bm: int = 128,
               chunk: int = 32) -> list[str]:
    """Run the amax reduction on sets of elements instead of values (so that a miss cannot hide behind a lucky
    maximum): each lane starts with the elements it holds (per row: per row it holds), each butterfly step over
    ``xor_masks`` joins in the partner lane's, and ``written_rows(warp, lane)`` says which rows (per tensor: (0,)) the
    lane raises with its set. Per row, a written set must be exactly that row's elements and every row must be
    written; per tensor, the written sets must cover the whole tile."""
    problems = []
    covered: dict = {}
    for w in range(warps):
        part = [dict() for _ in range(32)]
        for lane in range(32):
            regs = cols // 2 if family == "wgmma" else cols
            for reg in range(regs):
                rc = register_coords(family, w, lane, reg if family == "wgmma" else reg % chunk,
                                     0 if family == "wgmma" else reg // chunk * chunk, bm)
                if rc is None:
                    continue
                part[lane].setdefault(rc[0] if per_row else 0, set()).add(rc)
        for m in xor_masks:
            part = [{k: v | part[lane ^ m].get(k, set()) for k, v in part[lane].items()} for lane in range(32)]
        for lane in range(32):
            for r in written_rows(w, lane):
                if r not in part[lane]:
                    problems.append(f"warp {w} lane {lane} writes amax[{r}] but holds nothing of it")
                    continue
                got = part[lane][r]
                if per_row and len(got) != cols:
                    problems.append(f"warp {w} lane {lane} writes amax[{r}] from {len(got)} of the row's {cols} elements")
                covered.setdefault(r, set()).update(got)
    if per_row:
        missing = [r for r in range(rows) if r not in covered]
        if missing:
            problems.append(f"no lane writes amax of rows {missing[:8]}{'...' if len(missing) > 8 else ''}")
    elif len(covered.get(0, ())) != rows * cols:
        problems.append(f"the amax writes cover {len(covered.get(0, ()))} of the tile's {rows * cols} elements")
    return problems


def check_stores(family: str, operand: str, rows: int, cols: int, stores_of, warps: int = 4, bm: int = 128,
                 chunk: int = 32) -> list[str]:
    """A matrix the epilogue writes beside D (the pre-activation ``aux``): every thread's stores run with each of its
    registers holding the id of the element the fragment map says it holds (row x cols + column + 1). ``stores_of(warp,
    lane, col0)`` gives the thread's records as loads are given, element k written from the one register
    ``targets[k]`` names. The tile must end with every element written exactly once, with its own id."""
    got = np.zeros((rows, cols), dtype=np.int64)
    count = np.zeros((rows, cols), dtype=np.int64)
    problems = []
    col0s = [0] if family == "wgmma" else list(range(0, cols, chunk))
    for w in range(warps):
        for lane in range(32):
            for col0 in col0s:
                for op, row, col, targets in stores_of(w, lane, col0):
                    for k, regs in enumerate(targets):
                        if len(regs) != 1:
                            problems.append(f"{op}: warp {w} lane {lane} stores element ({row}, {col + k}) from registers {regs}")
                            continue
                        reg = regs[0]
                        rc = register_coords(family, w, lane, reg, col0, bm)  # tcgen05: reg of the chunk at col0
                        if rc is None or not (0 <= row < rows and 0 <= col + k < cols):
                            problems.append(f"{op}: warp {w} lane {lane} stores register {reg} (holding {rc}) at ({row}, {col + k})")
                            continue
                        got[row, col + k] = rc[0] * cols + rc[1] + 1
                        count[row, col + k] += 1
    want = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols) + 1
    bad = np.argwhere((got != want) | (count != 1))
    for r, c in bad[:8]:
        problems.append(f"{operand}[{r}, {c}]: written {count[r, c]} time(s), last with element id {got[r, c]}, wants {want[r, c]}")
    return problems
