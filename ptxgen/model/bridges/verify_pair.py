"""L1 for the CTA pair (``--cta-group 2``): the writer's per-CTA loads against the independent pair model.

Fed only the explain JSON (``TileLayout.to_json``): for each CTA r of the pair, a shared-memory image is filled the
way that CTA's producer fills it: the independent TMA model (``tmamodel``) runs the operand's copies from the
tile origin plus the CTA's row origin (``cta_pair.a_row0[r]`` / ``b_row0[r]``) into a garbage image. Then the
independent pair model (``pairmodel``) reads, through every K-step's single pair of descriptors and the
instruction descriptor, the M x K of A and N x K of B that ``tcgen05.mma.cta_group::2`` multiplies. They must be
exactly A[m0 : m0 + BM, k-slice] and B[n0 : n0 + BN, k-slice] of the global tensors (zeros past their ends).
First and last stage, whole and partial tile.

The epilogue is checked against the model's TMEM placement: what each warp / lane / column of each CTA reads
(the plan's rendered expressions) must be where ``pairmodel.d_home`` puts that D element, and the pair's
epilogues together must cover every element of the tile exactly once.
"""

from __future__ import annotations

import copy

import numpy as np

from ..layouts import pairmodel, readmodel, tmamodel
from ...isa.numerics import CODE_DTYPE, unpack_e2m1
from ...isa.tensormap import TMA_SWIZZLE_KEY
from ...isa.types import DType

EPILOGUE_WARPS = 4


def _global(rng, outer: int, inner: int, esize: int) -> np.ndarray:
    code = CODE_DTYPE[esize]
    return rng.integers(0, np.iinfo(code).max, size=(outer, inner), dtype=np.uint64, endpoint=True).astype(code)


def _window(g: np.ndarray, outer0: int, inner0: int, outer: int, inner: int) -> np.ndarray:
    """g[outer0 : outer0 + outer, inner0 : inner0 + inner], zero past g's ends."""
    w = np.zeros((outer, inner), dtype=g.dtype)
    part = g[outer0 : outer0 + outer, inner0 : inner0 + inner]
    w[: part.shape[0], : part.shape[1]] = part
    return w


def _operand_setup(tj: dict, name: str, partial: bool, rng):
    """(global tensor [outer, inner], tile origin along MN, origin along K, the logical MN x BK tile of the PAIR)."""
    spec, opj = tj["spec"], tj[name]
    mn = spec["bm"] if name == "a" else spec["bn"]  # the pair's whole extent
    bk = spec["bk"]
    dt = DType(spec["b_dtype"] if name == "b" and "b_dtype" in spec else spec["dtype"])
    k_major = opj["major"] == "k"
    unpacked = "smem_element" in opj  # kind::mxf8f6f4's 6-/4-bit types: one value code an element, the map pads them
    packed = dt.container_bits < 8 and not unpacked  # e2m1 two a byte (K-major only): global and map count bytes along K
    kb = dt.bytes_of(bk) if packed else bk
    mn0, k0 = (int(x) for x in rng.integers(0, 40, size=2))
    mn_ext = mn0 + (int(rng.integers(1, mn)) if partial else mn + int(rng.integers(0, 9)))
    k_ext = k0 + (int(rng.integers(1, kb)) if partial else kb + int(rng.integers(0, 9)))
    if unpacked:  # K-major only (the rules refuse transposed 6-/4-bit operands); codes below 2^bits
        g = rng.integers(0, 1 << dt.bits, size=(mn_ext, k_ext), dtype=np.uint8)
        tile = _window(g, mn0, k0, mn, kb)
    elif k_major:
        g = _global(rng, mn_ext, k_ext, 1 if packed else dt.bytes)
        tile = _window(g, mn0, k0, mn, kb)
        if packed:
            tile = unpack_e2m1(tile)
    else:
        g = _global(rng, k_ext, mn_ext, dt.bytes)
        tile = _window(g, k0, mn0, bk, mn).T
    return g, mn0, k0, tile, dt


def _fill(tj: dict, name: str, g: np.ndarray, mn0: int, k0: int, address: int, images: list[np.ndarray], dt: DType) -> None:
    """Each CTA's producer: the operand's copies, from the tile origin plus that CTA's row origin."""
    opj, pair = tj[name], tj["cta_pair"]
    row0 = pair[f"{name}_row0"]
    for r, img in enumerate(images):
        mn_origin = mn0 + int(row0[r])
        origin = (k0, mn_origin) if opj["major"] == "k" else (mn_origin, k0)  # (inner0, outer0)
        tmamodel.write(opj["tma"], g.itemsize, address, origin, g, img, anchor=TMA_SWIZZLE_KEY)


def check_pair_stage(tj: dict, stage: int, partial: bool, rng, cta_group: int | None = None) -> list[str]:
    spec, pair = tj["spec"], tj["cta_pair"]
    ctas = cta_group or pair["ctas"]
    label = f"stage {stage}, {'partial' if partial else 'whole'} tile"
    addr = {n: tj[n]["ring_offset_bytes"] + stage * tj[n]["stage_bytes"] for n in ("a", "b")}
    size = max(addr[n] + 2 * tj[n]["stage_bytes"] for n in ("a", "b")) + 1024
    images = [rng.integers(0, 256, size=size, dtype=np.uint8) for _ in range(pair["ctas"])]
    tiles, dts = {}, {}
    try:
        for n in ("a", "b"):
            g, mn0, k0, tiles[n], dts[n] = _operand_setup(tj, n, partial, rng)
            _fill(tj, n, g, mn0, k0, addr[n], images, dts[n])
    except (ValueError, IndexError) as e:
        return [f"{label}: the TMA model refuses the copies: {e}"]
    idesc = int(tj["idesc"]["hex"], 16)
    # what the read model takes each operand's shared-memory elements as: the padded form for 6-/4-bit mxf8f6f4 types
    elems = {n: tj[n].get("smem_element") or dts[n].value for n in ("a", "b")}
    kmma = dts["a"].k_per_mma if not any("smem_element" in tj[n] for n in ("a", "b")) else None
    problems = []
    for si, (sa, sb) in enumerate(zip(tj["a"]["k_steps"], tj["b"]["k_steps"])):
        da, db = readmodel.moved(int(sa["desc_hex"], 16), addr["a"]), readmodel.moved(int(sb["desc_hex"], 16), addr["b"])
        try:
            got_a, got_b = pairmodel.pair_operands(
                spec["arch"], da, db, idesc, tj["a"]["major"], tj["b"]["major"], elems["a"], elems["b"],
                tuple(images[:ctas]), cta_group=ctas)
        except (ValueError, IndexError) as e:
            problems.append(f"{label}: K-step {si}: {e}")
            continue
        for n, got in (("a", got_a), ("b", got_b)):
            # K of one MMA: 32 elements for every kind::mxf8f6f4 type, the read model's 256 bits of a padded row
            want = tiles[n][:, sa["k"] : sa["k"] + (kmma or got.shape[1])]
            if got.shape != want.shape or not np.array_equal(got, want):
                bad = want.size if got.shape != want.shape else int(np.count_nonzero(got != want))
                problems.append(f"{label}: K-step {si}: the pair MMA reads {bad} of {want.size} elements of {n.upper()} wrong")
    return problems


def check_epilogue(tj: dict) -> list[str]:
    """Every (CTA, warp, lane, column) the epilogues read holds the D element they store it as, and together they
    store each element of the BM x BN tile exactly once."""
    pair = tj["cta_pair"]
    m, n = pairmodel.decode_mn(int(tj["idesc"]["hex"], 16))
    rows, e = pair["d_rows_per_cta"], pair["epilogue"]
    seen = np.zeros((m, n), dtype=np.int64)
    problems = []
    row_expr, col_expr = (compile(x.replace("/", "//"), "<epilogue>", "eval") for x in (e["row"], e["col"]))  # parsed once
    for cta in range(pair["ctas"]):
        for warp in range(EPILOGUE_WARPS):
            for lane in range(32):
                for c0 in range(e["cols_per_warp"]):
                    env = {"warp": warp, "lane": lane, "c0": c0}
                    r, c = (int(eval(x, {"__builtins__": {}}, env)) for x in (row_expr, col_expr))
                    row = cta * rows + r
                    if not (0 <= row < m and 0 <= c < n):
                        problems.append(f"CTA {cta} warp {warp} lane {lane} column {c0}: D[{row}, {c}] is outside the tile")
                        continue
                    if r >= rows:  # a lane past this CTA's rows (none in Layouts A and B)
                        continue
                    home = pairmodel.d_home(2, row, c, m, n)
                    if home != (cta, 32 * warp + lane, c0):
                        problems.append(f"CTA {cta} warp {warp} lane {lane} column {c0} is stored as D[{row}, {c}], "
                                        f"which the MMA put in CTA {home[0]} lane {home[1]} column {home[2]}")
                    seen[row, c] += 1
                    if len(problems) > 8:
                        return problems
    if not problems and not np.all(seen == 1):
        problems.append(f"{int(np.count_nonzero(seen == 0))} elements of D never stored, {int(np.count_nonzero(seen > 1))} stored twice")
    return problems


def check_pair(tj: dict, seed: int = 0) -> list[str]:
    """[] when every CTA's loads put exactly the pair MMA's operands where it reads them, and the epilogue agrees."""
    if "cta_pair" not in tj:
        return ["no 'cta_pair' object: not a cta_group::2 layout"]
    rng = np.random.default_rng(seed)
    problems = []
    for stage in sorted({0, tj["spec"]["stages"] - 1}):
        for partial in (False, True):
            problems += check_pair_stage(tj, stage, partial, rng)
    return problems + check_epilogue(tj)


def mutated(tj: dict, **changes) -> dict:
    """A copy of ``tj`` with ``cta_pair`` keys replaced (control tests: a deliberately wrong CTA split)."""
    out = copy.deepcopy(tj)
    out["cta_pair"].update(changes)
    return out
