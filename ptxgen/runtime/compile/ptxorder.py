"""Order checks on a kernel's PTX that SASS cannot answer by count alone.

A CTA pair's ``tcgen05.alloc.cta_group::2`` must come after a cluster barrier that both CTAs have arrived at and
waited on: the pair allocates in both SMs together, so the issuing warp has to know the peer CTA is running (PTX ISA
'tcgen05.alloc'; CUTLASS sm100_gemm_tma_warpspecialized.hpp waits on its pipeline-init cluster barrier before
``tmem_allocator.allocate``; DeepGEMM sm100_bf16_gemm.cuh calls ``cluster_sync_with_relaxed_arrive`` "before 2-CTA
TMEM allocation"; issue 37, F1). ptxgen's prologue is straight-line code up to the allocation, so the PTX's text order
is its program order there.
"""

from __future__ import annotations

import re

_ALLOC = re.compile(r"^\s*tcgen05\.alloc\.cta_group::2\b")
_ARRIVE = re.compile(r"^\s*barrier\.cluster\.arrive\b")
_WAIT = re.compile(r"^\s*barrier\.cluster\.wait\b")


def _first(lines: list[str], pat: re.Pattern, start: int = 0) -> int | None:
    return next((i for i in range(start, len(lines)) if pat.match(lines[i])), None)


def pair_alloc_order_problems(ptx: str) -> list[str]:
    """Empty when the first ``barrier.cluster.arrive`` and then a ``barrier.cluster.wait`` precede the first
    ``tcgen05.alloc.cta_group::2`` of the PTX; else what is out of order (line numbers are 1-based)."""
    lines = ptx.splitlines()
    alloc = _first(lines, _ALLOC)
    if alloc is None:
        return ["no tcgen05.alloc.cta_group::2 in the PTX of a CTA-pair kernel"]
    arrive = _first(lines, _ARRIVE)
    if arrive is None or arrive > alloc:
        where = "none in the kernel" if arrive is None else f"the first is at line {arrive + 1}"
        return [f"tcgen05.alloc.cta_group::2 (line {alloc + 1}) before any barrier.cluster.arrive ({where}): the pair "
                "allocates before it knows the peer CTA runs"]
    wait = _first(lines, _WAIT, arrive)
    if wait is None or wait > alloc:
        return [f"no barrier.cluster.wait between the first barrier.cluster.arrive (line {arrive + 1}) and "
                f"tcgen05.alloc.cta_group::2 (line {alloc + 1})"]
    return []
