"""How many CTAs of a tcgen05 kernel fit on one SM, and the Tensor Memory they ask for together.

An SM of compute capability 10.0 has 512 TMEM columns (PTX 'Tensor Memory'), 228 KB of shared memory of which a
block may opt into 227 KB, 1 KB of it reserved per resident block, 2048 threads, 64K 32-bit registers and 32 blocks
(CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability'; cudaDevAttrReservedSharedMemoryPerBlock
= 1024). The CTAs that fit are the smallest of the shared-memory, thread and (when a register count is known: the
SASS check's, or the driver's) register limits.

A CTA pair allocates its columns with ``tcgen05.alloc.cta_group::2`` in both SMs. Where each CTA allocates all 512
columns and two or more CTAs fit on an SM, one pair could hold one SM's columns while it waits for the other SM's,
which another pair holds while it waits the other way (issue 37, F3). ptxgen then asks for enough shared memory that
only one CTA fits on an SM (DeepGEMM asserts one CTA per SM for its 2-CTA kernels; CUTLASS instead keeps the
allocation permit until just before it frees, tcgen05.relinquish_alloc_permit after the main loop in
sm100_gemm_tma_warpspecialized.hpp). Other kernels keep the shared memory their plan uses.

>>> ctas_per_sm(66596, 192)
3
>>> ctas_per_sm(ONE_CTA_SMEM_BYTES, 192), ctas_per_sm(ONE_CTA_SMEM_BYTES - 128, 192)
(1, 2)
>>> ctas_per_sm(1000, 192, registers=168)
2
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.ptxref import cite
from ..tile.derived import Derived
from ..tile.spec import TileSpec

SMEM_PER_SM_BYTES = 233472  # 228 KB (compute capability 9.0 and 10.0)
SMEM_RESERVED_PER_BLOCK_BYTES = 1024
SMEM_ALLOC_GRANULE_BYTES = 128
THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
REGISTER_ALLOC_GRANULE = 256  # registers are given to a warp in units of 256 (8 a thread)
BLOCKS_PER_SM = 32
TMEM_COLUMNS_PER_SM = 512
# The smallest dynamic shared memory (a multiple of the 128-byte granule) with which a second block no longer fits.
ONE_CTA_SMEM_BYTES = (SMEM_PER_SM_BYTES // 2 - SMEM_RESERVED_PER_BLOCK_BYTES) // SMEM_ALLOC_GRANULE_BYTES * SMEM_ALLOC_GRANULE_BYTES \
    + SMEM_ALLOC_GRANULE_BYTES
GUIDE_REF = "CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability' (10.0: 228 KB per SM, 1 KB reserved per block)"
DEEPGEMM_REF = "DeepGEMM sm100 kernels (one CTA per SM); CUTLASS sm100_gemm_tma_warpspecialized.hpp (release_allocation_lock after the main loop)"


def _granule(x: int) -> int:
    return -(-x // SMEM_ALLOC_GRANULE_BYTES) * SMEM_ALLOC_GRANULE_BYTES


def ctas_per_sm(dynamic_smem_bytes: int, threads: int, registers: int | None = None) -> int:
    """Blocks of this size resident on one SM at once (shared memory, threads, blocks, and registers if known)."""
    fit = min(SMEM_PER_SM_BYTES // (_granule(dynamic_smem_bytes) + SMEM_RESERVED_PER_BLOCK_BYTES), THREADS_PER_SM // threads,
              BLOCKS_PER_SM)
    if registers:
        per_warp = -(-registers * 32 // REGISTER_ALLOC_GRANULE) * REGISTER_ALLOC_GRANULE
        fit = min(fit, REGISTERS_PER_SM // (per_warp * -(-threads // 32)))
    return fit


@dataclass(frozen=True)
class TmemFit:
    columns: int  # TMEM columns each CTA allocates
    plan_smem_bytes: int  # what the shared-memory plan uses (with the base-alignment slack)
    smem_bytes: int  # what the kernel asks for at launch
    ctas_per_sm: int  # by shared memory and threads, with smem_bytes
    one_cta_per_sm: bool  # smem_bytes raised so that one CTA fits (a CTA pair allocating all 512 columns)
    derivation: tuple[Derived, ...]

    @property
    def columns_per_sm(self) -> int:
        """The columns the CTAs that fit on one SM ask for together (more than 512: some wait in tcgen05.alloc)."""
        return self.columns * self.ctas_per_sm


def plan_tmem_fit(spec: TileSpec, plan_smem_bytes: int, threads: int) -> TmemFit:
    cols = spec.tmem_alloc_columns
    before = ctas_per_sm(plan_smem_bytes, threads)
    raise_it = spec.pair and cols == TMEM_COLUMNS_PER_SM and before > 1
    smem = max(plan_smem_bytes, ONE_CTA_SMEM_BYTES) if raise_it else plan_smem_bytes
    fit = ctas_per_sm(smem, threads)
    how = (f"floor({SMEM_PER_SM_BYTES} / ({_granule(smem)} + {SMEM_RESERVED_PER_BLOCK_BYTES})) = "
           f"{SMEM_PER_SM_BYTES // (_granule(smem) + SMEM_RESERVED_PER_BLOCK_BYTES)} by shared memory, "
           f"{THREADS_PER_SM // threads} by threads ({threads} a CTA): {fit} CTA(s) per SM ask for {cols} x {fit} = "
           f"{cols * fit} of the {TMEM_COLUMNS_PER_SM} columns")
    d = [Derived("tmem_occupancy", f"{fit} CTA(s) per SM, {cols * fit} TMEM columns", how,
                 "tcgen05.alloc blocks while the SM's 512 columns are taken; registers may lower the count further "
                 "(the SASS check's count)", f"{cite('tmem_alloc')}; {GUIDE_REF}")]
    if raise_it:
        d.append(Derived("one_cta_per_sm", f"shared memory {smem} B (the plan uses {plan_smem_bytes} B)",
                         f"the pair allocates all {TMEM_COLUMNS_PER_SM} columns and {before} CTAs would fit: ask for "
                         f"{ONE_CTA_SMEM_BYTES} B, the least with which a second block no longer fits "
                         f"(2 x ({ONE_CTA_SMEM_BYTES} + {SMEM_RESERVED_PER_BLOCK_BYTES}) > {SMEM_PER_SM_BYTES})",
                         "ptxgen's choice of the two ways out of a pair holding one SM's columns while it waits for the "
                         "other's: one CTA per SM (DeepGEMM), not CUTLASS's permit kept until the main loop ends",
                         DEEPGEMM_REF))
    return TmemFit(cols, plan_smem_bytes, smem, fit, raise_it, tuple(d))
