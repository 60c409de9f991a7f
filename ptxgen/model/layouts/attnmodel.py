"""Independent models of the attention forward's three new layouts and orders.

It imports only the other independent models (the descriptor read model, the TMA write model, the wgmma D map).

* ``v_reads``: what each P·V K-step reads of V through its MN-major swizzled descriptor, V placed by the TMA copies
  (``tmamodel.write``) and read back by ``readmodel.read``: the N x K matrix must be V[keys of the step, :]ᵀ.
* ``k_reads``: the same for S = Q·Kᵀ's K-major operands: what each K-step reads of Q (one 64-row slab) or K through
  its descriptor, the tile placed by the TMA copies (at D 256 four boxes of 64 head-dim columns): the rows x 16
  matrix must be tile[rows, 16 j : 16 j + 16].
* ``a_fragment_coords``: PTX 'Register Fragments', Figure wgmma-64N16-A (multiplicand A of m64nNk16, 16-bit):
  warp w of the warpgroup holds rows 16w..16w+15; thread (lane) t holds elements a0..a7 in four .b32 registers,
  a_e at row 16w + t/4 + 8 ((e / 2) % 2), column 8 (e / 4) + 2 (t % 4) + (e % 2). (Transcribed from the figure;
  FlashMLA's get_AorC_row/col_idx and nvFuser's operand schedule give the same.)
* ``p_operand_matrix``: given, per K-step, which two accumulator registers fill each A register, the 64 x 16 matrix
  each P·V K-step multiplies, built from the D map (``fragmodel.wgmma_d_coords``) and the A map above.
* ``online_softmax``: the tiled forward in numpy (f32 statistics, exp2 with the scale folded in, running max and
  sum, O rescaled before the block's P·V is added), visiting key blocks in a given order; ``exact_attention`` is
  the float64 reference.
"""

from __future__ import annotations

import numpy as np

from .fragmodel import wgmma_d_coords
from .readmodel import read
from .tmamodel import write


def a_fragment_coords(warp: int, lane: int, e: int) -> tuple[int, int]:
    """(row, k) of element a_e (0..7) of ``lane`` in warp ``warp`` for wgmma m64nNk16's register A."""
    row = 16 * warp + lane // 4 + 8 * ((e // 2) % 2)
    col = 8 * (e // 4) + 2 * (lane % 4) + (e % 2)
    return row, col


def p_operand_matrix(s: np.ndarray, pairs, step: int) -> np.ndarray:
    """The 64 x 16 A matrix of P·V K-step ``step`` when every thread fills A register q with its accumulator
    registers ``pairs[step][q]`` (lo, hi) of the 64 x N matrix ``s`` (one warpgroup's S)."""
    out = np.full((64, 16), np.nan)
    for warp in range(4):
        for lane in range(32):
            for q, (lo, hi) in enumerate(pairs[step]):
                for e, acc in ((2 * q, lo), (2 * q + 1, hi)):
                    r, c = wgmma_d_coords(warp, lane, acc)
                    ar, ak = a_fragment_coords(warp, lane, e)
                    if not np.isnan(out[ar, ak]):
                        raise AssertionError(f"A element ({ar}, {ak}) written twice")
                    out[ar, ak] = s[r, c]
    return out


def v_reads(tma: dict, descriptors, v_tile: np.ndarray, stage_address: int, image_bytes: int, n: int,
            element_bytes: int = 2, dtype: str = "bf16") -> list[np.ndarray]:
    """[j]: the N x 16 matrix P·V K-step j reads through ``descriptors[j]`` (start relative to the stage) after the
    TMA copies of ``tma`` placed ``v_tile`` (keys x head dim, raw 16-bit codes) at ``stage_address``."""
    image = np.zeros(image_bytes, dtype=np.uint8)
    write(tma, element_bytes, stage_address, (0, 0), v_tile, image)
    return [read("sm_90a", d + (stage_address >> 4), "mn", n, dtype, image) for d in descriptors]


def k_reads(tma: dict, descriptors, tile: np.ndarray, stage_address: int, image_bytes: int, rows: int,
            slab_offset_bytes: int = 0, element_bytes: int = 2, dtype: str = "bf16") -> list[np.ndarray]:
    """[j]: the ``rows`` x 16 matrix K-step j of a K-major operand reads through ``descriptors[j]`` (start relative to
    the stage) moved by ``slab_offset_bytes`` (a consumer warpgroup's 64-row slab of Q), after the TMA copies of
    ``tma`` placed ``tile`` (rows x head dim, raw 16-bit codes) at ``stage_address``."""
    image = np.zeros(image_bytes, dtype=np.uint8)
    write(tma, element_bytes, stage_address, (0, 0), tile, image)
    return [read("sm_90a", d + ((stage_address + slab_offset_bytes) >> 4), "k", rows, dtype, image) for d in descriptors]


def exact_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """(O, LSE) in float64 for one head: q (Sq, D), k and v (Sk, D); causal is top-left aligned (key j <= query i)."""
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True)
    return (p / l) @ v.astype(np.float64), (m + np.log(l))[:, 0]


def online_softmax(q, k, v, scale: float, causal: bool, bn: int, blocks, row0: int = 0, rescale_first: bool = True,
                   rescale_sum: bool = True, overlap: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The tiled forward of one query tile (rows of q) over the key blocks ``blocks`` (in visiting order), as the
    kernel does it (the tile's first query index is ``row0``): f32, exp2, the scale folded into one FMA, running max and sum. The two switches exist for the
    controls: O rescaled after the block's P·V instead of before, or the running sum left unrescaled.

    ``overlap``: FA3's intra-warpgroup order. The P·V of block n-1 is issued with block n's Q·Kᵀ and runs while
    block n's softmax does; O is brought to block n-1's running max just before it (while Q·Kᵀ runs): O = O·corr_{n-1}
    + P_{n-1}·V_{n-1}, and after the loop the last block's the same way. (Here ``rescale_first=False`` is the
    control: O = (O + P_{n-1}·V_{n-1})·corr_{n-1}, the previous block's P·V rescaled twice.)"""
    f = np.float32
    log2e = f(1.4426950408889634)
    sl2 = f(scale) * log2e
    rows = q.shape[0]
    o = np.zeros((rows, v.shape[1]), f)
    mx = np.full(rows, -np.inf, f)
    sm = np.zeros(rows, f)
    pending = None  # overlap: the previous block's (P, keys), its P·V not yet added
    for n in blocks:
        keys = np.arange(n * bn, min((n + 1) * bn, k.shape[0]))
        s = (q.astype(f) @ k[keys].astype(f).T).astype(f)
        if causal:
            s = np.where(keys[None, :] <= np.arange(rows)[:, None] + row0, s, -np.inf).astype(f)
        new = np.maximum(mx, s.max(axis=1))
        ms = np.where(new == -np.inf, f(0), new * sl2).astype(f)
        corr = np.exp2(mx * sl2 - ms).astype(f)
        p = np.exp2(s * sl2 - ms[:, None]).astype(f)
        mx = new
        sm = (sm * corr if rescale_sum else sm) + p.sum(axis=1)
        if overlap:
            if pending is not None:
                o = _add_pending(o, pending, v, rescale_first)
            pending = (p, keys, corr)
        elif rescale_first:
            o = o * corr[:, None] + p @ v[keys].astype(f)
        else:
            o = (o + p @ v[keys].astype(f)) * corr[:, None]
    if pending is not None:
        o = _add_pending(o, pending, v, rescale_first)
    return o / sm[:, None], (mx * sl2 + np.log2(sm)) * f(np.log(2))


def _add_pending(o, pending, v, rescale_first: bool):
    """The overlapped step: O rescaled by the pending block's factor, then its P·V added (the control: added first)."""
    p, keys, corr = pending
    pv = p @ v[keys].astype(np.float32)
    return o * corr[:, None] + pv if rescale_first else (o + pv) * corr[:, None]

