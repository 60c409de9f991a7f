"""DeepGEMM's SM90 FP8 1D2D configuration rules, restated in Python for tools/ref/bench_deepgemm.py (no torch, no GPU).

Read from DeepGEMM 54e2261 (github deepseek-ai/DeepGEMM, 2026-06-23), csrc/jit_kernels/heuristics/sm90.hpp
(SM90ArchSpec: get_layout_candidates, get_storage_config, get_pipeline_config, get_layout_info, compare), common.hpp
(get_best_config: the first candidate with the fewest modelled cycles) and utils.hpp (get_swizzle_mode), for
``fp8_gemm_nt`` with the default recipe (1, 128, 128), a Normal GEMM, K-major A and B, bf16 D, no accumulation, all SMs
(tc_util 100). Also the scale layouts its kernel reads (csrc/apis/layout.hpp, csrc/jit_kernels/impls/smxx_layout.hpp)
and the converters from torch's blockwise ``_scaled_mm`` layouts (tools/bench_blockfp8.py ``inputs``), written for any
array library with ``.T``, ``reshape`` and slice assignment (numpy for the CPU test, torch on the device).
"""

from __future__ import annotations

from dataclasses import dataclass

SMEM_CAPACITY_BYTES = 232448  # SM90ArchSpec::smem_capacity
BLOCK_K = 128                 # 128 / element size of FP8
MAX_STAGES = 16


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def align(a: int, b: int) -> int:
    return cdiv(a, b) * b


def swizzle_mode(block_bytes: int) -> int:
    """utils.hpp get_swizzle_mode: the largest of 128, 64, 32, 16 dividing the inner box bytes."""
    return next(m for m in (128, 64, 32, 16) if block_bytes % m == 0)


@dataclass(frozen=True)
class DgConfig:
    """One instantiation of sm90_fp8_gemm_1d2d_impl for a compiled (N, K)."""
    n: int
    k: int
    bm: int
    bn: int
    cluster_m: int
    cluster_n: int
    stages: int
    smem_bytes: int
    swizzle_d_bytes: int
    num_sms: int

    @property
    def name(self) -> str:
        return f"dg-{self.bm}x{self.bn}-c{self.cluster_m}x{self.cluster_n}-s{self.stages}"

    @property
    def tile(self) -> str:
        return f"{self.bm}x{self.bn}"

    @property
    def lib(self) -> str:
        return f"dg_n{self.n}_k{self.k}_{self.bm}x{self.bn}_c{self.cluster_m}x{self.cluster_n}_s{self.stages}_sm{self.num_sms}.so"

    def defines(self) -> list[str]:
        return [f"-DDG_N={self.n}", f"-DDG_K={self.k}", f"-DDG_BM={self.bm}", f"-DDG_BN={self.bn}",
                f"-DDG_STAGES={self.stages}", f"-DDG_SWZ_D={self.swizzle_d_bytes}", f"-DDG_CM={self.cluster_m}",
                f"-DDG_CN={self.cluster_n}", f"-DDG_NUM_SMS={self.num_sms}", f"-DDG_SMEM={self.smem_bytes}"]


def pipeline(k: int, bm: int, bn: int) -> tuple[int, int]:
    """get_pipeline_config for the 1D2D kernel, bf16 D: (stages, dynamic smem bytes)."""
    smem_cd = align(bm * bn * 2, 1024)
    smem_barriers = MAX_STAGES * 8 * 2
    per_stage = bm * BLOCK_K + bn * BLOCK_K + align(bm * 4, 128)  # A, B, SFA (SFB is not per stage in 1D2D)
    uniform_sfb = 1 if BLOCK_K % bn == 0 else 2
    smem_extra_sfb = align(cdiv(k, BLOCK_K) * 4 * uniform_sfb, 8)
    extra = smem_cd + smem_barriers + smem_extra_sfb
    stages = min((SMEM_CAPACITY_BYTES - extra) // per_stage, MAX_STAGES)
    return stages, extra + stages * per_stage


def candidates(m: int, n: int, k: int, num_sms: int) -> list[tuple[int, int, int, int]]:
    """get_layout_candidates, in DeepGEMM's enumeration order: (bm, bn, cluster_m, cluster_n)."""
    block_ms = [64, 128] + ([16] if m <= 16 else []) + ([32] if m <= 32 else []) + [256]  # bf16 D allows 256
    block_ns = [bn for bn in range(16, 193, 16)]  # 1D2D: up to 192 (register spills beyond)
    out = []
    for cm in (1, 2):
        for cn in (1, 2):
            if cm * cn > 2 or num_sms % (cm * cn):
                continue
            for bm in block_ms:
                for bn in block_ns:
                    if bn > BLOCK_K and bn % (bn - BLOCK_K) and BLOCK_K % (bn - BLOCK_K):
                        continue  # the 1D2D unroll requirement
                    if bm > 128 and bn > 128:
                        continue
                    stages, _ = pipeline(k, bm, bn)
                    if stages < 3 or (bm * bn < 128 * 192 and stages < 4):
                        continue
                    out.append((bm, bn, cm, cn))
    return out


def modelled_cycles(m: int, n: int, k: int, num_sms: int, bm: int, bn: int, cm: int, cn: int) -> int:
    """get_layout_info's num_cycles (integer arithmetic as the C++: int64 products, int bandwidths)."""
    num_blocks = cdiv(m, bm) * cdiv(n, bn)
    waves = cdiv(num_blocks, num_sms)
    l2_bw = int(min(64.0 * num_sms, 8e6 / 1.3e3))
    l1_bw = 128 * num_sms
    l2_ab = k * (bm // cn + bn // cm)
    l1_ab = k * (bm + bn)
    l1_tc = k * (max(64, bm) + bn) + bm * bn * 2
    cd = bm * bn * 2
    l2_cycles = (l2_ab + cd) * num_blocks // l2_bw
    l1_cycles = (l1_ab + l1_tc + cd) * num_blocks // l1_bw
    wave_eff = num_blocks / (waves * num_sms)
    cycles = int(max(l1_cycles, l2_cycles) / wave_eff)
    if cm * cn > 1 and waves <= 1:
        cycles = 2 ** 63 - 1
    return cycles


def make_config(m: int, n: int, k: int, num_sms: int, bm: int, bn: int, cm: int, cn: int) -> DgConfig:
    stages, smem = pipeline(k, bm, bn)
    return DgConfig(n, k, bm, bn, cm, cn, stages, smem, swizzle_mode(bn * 2), num_sms)


def best(m: int, n: int, k: int, num_sms: int) -> DgConfig:
    """get_best_config: the first candidate with strictly the fewest modelled cycles."""
    cands = candidates(m, n, k, num_sms)
    pick = cands[0]
    for c in cands[1:]:
        if modelled_cycles(m, n, k, num_sms, *c) < modelled_cycles(m, n, k, num_sms, *pick):
            pick = c
    return make_config(m, n, k, num_sms, *pick)


def best_for_tile(m: int, n: int, k: int, num_sms: int, bm: int, bn: int) -> DgConfig | None:
    """The multicast DeepGEMM would pair with a given tile: its fewest-cycles cluster for that tile."""
    cands = [c for c in candidates(m, n, k, num_sms) if c[:2] == (bm, bn)]
    if not cands:
        return None
    pick = cands[0]
    for c in cands[1:]:
        if modelled_cycles(m, n, k, num_sms, *c) < modelled_cycles(m, n, k, num_sms, *pick):
            pick = c
    return make_config(m, n, k, num_sms, *pick)


# The tiles timed beside DeepGEMM's own pick: 128x128, 256x128 (DeepGEMM's reported best on an H800) and the
# 128x160 / 128x192 forms (ours is 128x192), each with the cluster DeepGEMM's model gives that tile
EXTRA_TILES = ((128, 128), (256, 128), (128, 160), (128, 192))


def configs_for(m: int, n: int, k: int, num_sms: int) -> list[tuple[DgConfig, bool]]:
    """[(config, is DeepGEMM's heuristic pick)], the pick first, no duplicates."""
    pick = best(m, n, k, num_sms)
    out = [(pick, True)]
    for bm, bn in EXTRA_TILES:
        c = best_for_tile(m, n, k, num_sms, bm, bn)
        if c is not None and c != pick:
            out.append((c, False))
    return out


# Scale layouts. torch's blockwise recipe (tools/bench_blockfp8.py inputs): scale_a M x Kb, element (row, kb) at
# kb * M + row (outer-dim-major); scale_b Kb x Nb, element (kb, nb) at nb * Kb4 + kb (Kb4: Kb padded to 4).
# DeepGEMM's 1D2D kernel: SFA through a TMA map over {align(M, 4), Kb} f32 (get_mn_major_tma_aligned_tensor: MN-major,
# the M stride padded to 16 bytes), element (row, kb) at kb * align(M, 4) + row; SFB read as sfb[nb * Kb + kb]
# (kMajorSFB = K: Nb x Kb row-major, contiguous).

def sfa_to_deepgemm(sa, m: int, kb: int, zeros):
    """torch's scale_a (M x Kb, any strides) -> DeepGEMM's flat MN-major TMA-aligned SFA (Kb * align(M, 4) floats);
    ``zeros(count)``: a zero-filled flat array of the target library."""
    ma = align(m, 4)
    out = zeros(kb * ma)
    out.reshape(kb, ma)[:, :m] = sa.T
    return out


def sfb_to_deepgemm(sb, nb: int, kb: int, zeros):
    """torch's scale_b (Kb x Nb, any strides) -> DeepGEMM's flat K-major SFB (Nb * Kb floats)."""
    out = zeros(nb * kb)
    out.reshape(nb, kb)[:, :] = sb.T
    return out
