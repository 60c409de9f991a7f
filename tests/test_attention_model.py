"""L1: the attention plan against the independent models (ptxgen.model.layouts.attnmodel), each with a control that fails."""

import numpy as np
import pytest

from ptxgen.attention.plan import n_block_end, needs_mask, p_register_pairs, plan_attention
from ptxgen.attention.spec import AttentionSpec
from ptxgen.model.layouts import attnmodel
from ptxgen.model.layouts.fragmodel import wgmma_d_coords

# D 256 takes BN 64 only (spec: S, O and P in a consumer's registers)
SPECS = ([AttentionSpec(d, bm, bn) for d in (64, 128) for bm in (64, 128) for bn in (64, 128)]
         + [AttentionSpec(256, bm, 64) for bm in (64, 128)])


def _v_tile(keys: int, d: int) -> np.ndarray:
    return (np.arange(keys * d, dtype=np.uint16).reshape(keys, d) + 1)  # every element distinct


def _reads(plan, descriptors, tma=None):
    s = plan.spec
    v = _v_tile(s.bn, s.head_dim)
    stage = 2048  # 1024-aligned, as every stage is
    got = attnmodel.v_reads(tma or plan.v.tma.to_json(), descriptors, v, stage, stage + 4 * plan.v.stage_bytes + 65536, s.head_dim)
    return v, got


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel_name)
def test_v_mn_major_reads_are_v_transposed(spec):
    plan = plan_attention(spec)
    v, got = _reads(plan, plan.v.descriptors)
    assert len(got) == spec.bn // 16
    for j, m in enumerate(got):
        assert m.shape == (spec.head_dim, 16)
        assert np.array_equal(m, v[16 * j:16 * j + 16, :].T), j


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel_name)
def test_q_and_k_k_major_reads_are_their_tiles(spec):
    """S = Q·Kᵀ's operands: Q (each consumer warpgroup's 64-row slab) and K placed by the plan's TMA copies (one box
    per 64 head-dim columns: four at D 256) and read through each K-step's descriptor give tile[rows, 16j:16j+16]."""
    plan = plan_attention(spec)
    d, stage = spec.head_dim, 2048
    q, k = _v_tile(spec.bm, d), _v_tile(spec.bn, d)
    assert len(plan.q.slab_offsets_bytes) == spec.bm // 64
    for c, slab in enumerate(plan.q.slab_offsets_bytes):
        got = attnmodel.k_reads(plan.q.tma.to_json(), plan.q.descriptors, q, stage, stage + plan.q.stage_bytes + 4096, 64, slab)
        assert len(got) == d // 16
        for j, m in enumerate(got):
            assert np.array_equal(m, q[64 * c:64 * c + 64, 16 * j:16 * j + 16]), (c, j)
    got = attnmodel.k_reads(plan.k.tma.to_json(), plan.k.descriptors, k, stage, stage + plan.k.stage_bytes + 4096, spec.bn)
    for j, m in enumerate(got):
        assert np.array_equal(m, k[:, 16 * j:16 * j + 16]), j


def test_k_major_read_control_fails():
    """D 256: the K-steps of the second 64-column box read with the first box's descriptors (a 128-byte row
    assumed) give the wrong head-dim columns; one box across the 512-byte row is refused by the TMA model (a
    128B-swizzled box is at most 128 bytes wide)."""
    plan = plan_attention(AttentionSpec(256, 128, 64))
    k = _v_tile(64, 256)
    wrong = plan.k.descriptors[:4] * 4
    got = attnmodel.k_reads(plan.k.tma.to_json(), wrong, k, 2048, 2048 + plan.k.stage_bytes + 4096, 64)
    assert not np.array_equal(got[4], k[:, 64:80])
    one_box = dict(plan.k.tma.to_json(), box=[256, 64], copies=[{"smem_offset_bytes": 0, "inner": 0, "outer": 0}])
    with pytest.raises(ValueError, match="swizzle span"):
        attnmodel.k_reads(one_box, plan.k.descriptors, k, 2048, 2048 + plan.k.stage_bytes + 4096, 64)


def _replace_field(desc: int, lo: int, width: int, value: int) -> int:
    mask = ((1 << width) - 1) << lo
    return (desc & ~mask) | ((value << lo) & mask)


@pytest.mark.parametrize("mutation", ["sbo", "lbo", "swizzle_none", "swizzle_64"])
@pytest.mark.parametrize("d,bn", [(128, 128), (256, 64)])
def test_v_read_control_wrong_descriptor_fails(mutation, d, bn):
    """A wrong SBO, LBO (D = 128, 256: two, four atoms along the head dim) or swizzle reads something else."""
    plan = plan_attention(AttentionSpec(d, 128, bn))
    lo, width, value = {"sbo": (32, 14, (plan.v.sbo_bytes * 2) >> 4), "lbo": (16, 14, (plan.v.lbo_bytes // 2) >> 4),
                        "swizzle_none": (62, 2, 0), "swizzle_64": (62, 2, 2)}[mutation]
    bad = [_replace_field(d, lo, width, value) for d in plan.v.descriptors]
    v, got = _reads(plan, bad)
    assert not all(np.array_equal(m, v[16 * j:16 * j + 16, :].T) for j, m in enumerate(got))


@pytest.mark.parametrize("bn", [64, 128, 192])
def test_p_register_path_gives_p(bn):
    s = np.arange(64 * bn, dtype=np.float64).reshape(64, bn)
    pairs = p_register_pairs(bn)
    for j in range(bn // 16):
        assert np.array_equal(attnmodel.p_operand_matrix(s, pairs, j), s[:, 16 * j:16 * j + 16])


def test_p_register_path_control_fails():
    """Pairs taken in the accumulator's other natural order (row halves swapped) must not give P."""
    s = np.arange(64 * 64, dtype=np.float64).reshape(64, 64)
    bad = tuple(tuple((8 * j + (2 * q + 2) % 8, 8 * j + (2 * q + 3) % 8) for q in range(4)) for j in range(4))
    assert not np.array_equal(attnmodel.p_operand_matrix(s, bad, 0), s[:, :16])


def test_a_fragment_figure_rows():
    """Spot values of Figure wgmma-64N16-A: thread 0 a2 at (8, 0), a4 at (0, 8); lane 17 of warp 2, a5 at (36, 11)."""
    assert attnmodel.a_fragment_coords(0, 0, 2) == (8, 0)
    assert attnmodel.a_fragment_coords(0, 0, 4) == (0, 8)
    assert attnmodel.a_fragment_coords(2, 17, 5) == (36, 11)
    assert wgmma_d_coords(2, 17, 5) == (36, 11)


def _model_run(q, k, v, scale, causal, bm, bn, **kw):
    sq, sk = q.shape[0], k.shape[0]
    o = np.zeros((sq, v.shape[1]))
    lse = np.zeros(sq)
    for m in range(-(-sq // bm)):
        end = n_block_end(m, bm, bn, sk, causal)
        blocks = list(range(end - 1, -1, -1))  # the kernel's order: last visited block first
        rows = slice(m * bm, min((m + 1) * bm, sq))
        o[rows], lse[rows] = attnmodel.online_softmax(q[rows], k, v, scale, causal, bn, blocks, row0=m * bm, **kw)
    return o, lse


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq,sk,d", [(1, 1, 64), (7, 7, 64), (200, 200, 64), (130, 300, 64), (300, 130, 64),
                                     (1, 1, 256), (7, 7, 256), (130, 300, 256)])
def test_online_softmax_matches_exact(causal, sq, sk, d, overlap):
    rng = np.random.default_rng(sq * 1000 + sk)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for n in (sq, sk, sk))
    scale = d ** -0.5
    o, lse = _model_run(q, k, v, scale, causal, 64, 64, overlap=overlap)
    ro, rl = attnmodel.exact_attention(q, k, v, scale, causal)
    np.testing.assert_allclose(o, ro, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(lse, rl, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("switch", ["rescale_first", "rescale_sum"])
def test_online_softmax_control_wrong_order_fails(switch, overlap):
    """Serial: O rescaled after the block's own P·V; overlap: the previous block's P·V added before its factor
    rescales O; either: the running sum not rescaled. Each must miss the exact result."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((n, 64)).astype(np.float32) * 3 for n in (128, 256, 256))
    o, _ = _model_run(q, k, v, 0.125, False, 64, 64, overlap=overlap, **{switch: False})
    ro, _ = attnmodel.exact_attention(q, k, v, 0.125, False)
    assert not np.allclose(o, ro, atol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn", [(64, 64), (128, 64), (64, 128), (128, 128), (128, 192)])
def test_block_range_and_mask_cover_the_exact_mask(causal, bm, bn):
    """Every visible (query, key) pair lies in a visited block, and every tile holding a masked pair is masked."""
    for sq, sk in [(1, 1), (7, 7), (1000, 1000), (300, 517), (517, 300)]:
        qi = np.arange(sq)[:, None]
        kj = np.arange(-(-sk // bn) * bn)[None, :]
        visible = (kj < sk) & ((kj <= qi) if causal else True)
        for m in range(-(-sq // bm)):
            end = n_block_end(m, bm, bn, sk, causal)
            rows = visible[m * bm:(m + 1) * bm]
            assert not rows[:, end * bn:].any()
            for n in range(end):
                tile_ = np.zeros((bm, bn), bool)
                tile_[:rows.shape[0]] = rows[:, n * bn:(n + 1) * bn]
                # rows past sq are padding: they need no mask of their own (not stored); check real rows only
                if not tile_[:rows.shape[0]].all():
                    assert needs_mask(m, n, bm, bn, sk, causal), (sq, sk, m, n)


def test_block_range_control_fails():
    """One block fewer than the plan visits loses visible keys."""
    sk = 1000
    m, bm, bn = 3, 128, 128
    end = n_block_end(m, bm, bn, sk, True) - 1
    visible = np.arange(sk)[None, :] <= np.arange(m * bm, (m + 1) * bm)[:, None]
    assert visible[:, end * bn:].any()
