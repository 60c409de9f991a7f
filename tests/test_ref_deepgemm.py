"""CPU tier for tools/ref/deepgemm_configs.py's scale-layout converters (the DeepGEMM reference bench): torch's blockwise
``_scaled_mm`` scale layouts (as tools/bench_blockfp8.py ``inputs`` builds them) -> the addresses DeepGEMM's SM90 1D2D
kernel reads, checked element by element against a reference written from the kernel's addressing (the SFA TMA map's
coordinates and ``local_sfb[i * stride_k_sfb]``), at sizes where M is not a multiple of 4 and Kb not a multiple of 4."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "tools" / "ref" / "deepgemm_configs.py"
_spec = importlib.util.spec_from_file_location("deepgemm_configs", _PATH)
dgc = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("deepgemm_configs", dgc)  # dataclasses look their module up
_spec.loader.exec_module(dgc)


def torch_like_scales(rng, m, n, k):
    """numpy twins of bench_blockfp8.inputs' scale tensors: scale_a = (Kb x M).T, scale_b = (Nb x Kb4).T[:Kb]."""
    kb, nb = -(-k // 128), -(-n // 128)
    sa = rng.random((kb, m), dtype=np.float32).T
    kb4 = -(-kb // 4) * 4
    sb = rng.random((nb, kb4), dtype=np.float32).T[:kb]
    return sa, sb, kb, nb


def kernel_reads_sfa(flat, m, kb):
    """What the 1D2D kernel sees as A's scale of (row, kb): the TMA map over {align(M, 4), Kb} floats, row stride
    align(M, 4) (make_tma_sf_desc), box {BLOCK_M, 1} at (m_block * BLOCK_M, k_block): element row + kb * stride."""
    stride = (m + 3) // 4 * 4
    return {(r, j): flat[j * stride + r] for r in range(m) for j in range(kb)}


def kernel_reads_sfb(flat, nb, kb):
    """What it sees as B's scale of (n block, k block): local_sfb = sfb + n_block * stride_n_sfb (kMajorSFB K:
    stride_n_sfb = shape_k_scales, stride_k_sfb = 1), read at [k_block * stride_k_sfb]."""
    return {(i, j): flat[i * kb + j] for i in range(nb) for j in range(kb)}


@pytest.mark.parametrize("m,n,k", [(130, 384, 640), (4, 128, 128), (257, 300, 1100), (64, 7168, 512)])
def test_scale_layouts_match_the_kernels_addressing(m, n, k):
    rng = np.random.default_rng(m * 7 + k)
    sa, sb, kb, nb = torch_like_scales(rng, m, n, k)
    zeros = lambda cnt: np.zeros(cnt, dtype=np.float32)  # noqa: E731
    fa = dgc.sfa_to_deepgemm(sa, m, kb, zeros)
    fb = dgc.sfb_to_deepgemm(sb, nb, kb, zeros)
    assert fa.shape == (kb * ((m + 3) // 4 * 4),) and fb.shape == (nb * kb,)
    got_a, got_b = kernel_reads_sfa(fa, m, kb), kernel_reads_sfb(fb, nb, kb)
    for (r, j), v in got_a.items():
        assert v == sa[r, j], (r, j)
    for (i, j), v in got_b.items():
        assert v == sb[j, i], (i, j)


def test_control_a_transposed_sfb_is_caught():
    """Control: SFB laid out N-major (the other layout the kernel can be compiled for) reads the wrong scales under
    the K-major addressing the harness compiles."""
    rng = np.random.default_rng(1)
    sa, sb, kb, nb = torch_like_scales(rng, 130, 384, 640)
    wrong = np.ascontiguousarray(sb).reshape(-1)  # Kb x Nb row-major: MN-major
    got = kernel_reads_sfb(wrong, nb, kb)
    assert any(v != sb[j, i] for (i, j), v in got.items())


def test_control_unpadded_sfa_is_caught():
    """Control: SFA with the M stride left at M (not padded to 16 bytes) reads the wrong scales when M % 4 != 0."""
    rng = np.random.default_rng(2)
    m = 130
    sa, sb, kb, nb = torch_like_scales(rng, m, 384, 640)
    unpadded = np.ascontiguousarray(sa.T).reshape(-1)  # Kb x M, stride M
    unpadded = np.concatenate([unpadded, np.zeros(kb * 2, np.float32)])  # long enough to index
    got = kernel_reads_sfa(unpadded, m, kb)
    assert any(v != sa[r, j] for (r, j), v in got.items())
