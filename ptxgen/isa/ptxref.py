"""Where each fact comes from: PTX ISA sections, cited by anchor.

Section numbers are PTX ISA 9.1's; newer releases renumber (tcgen05 moves from 9.7.16 to 9.7.17), so the
anchor is the stable part. ``cite(key)`` gives "PTX ISA 9.7.16.4.1 'Shared memory descriptor'
(#tcgen05-shared-memory-descriptor)".
"""

from __future__ import annotations

PTX_URL = "https://docs.nvidia.com/cuda/parallel-thread-execution/"

REFS: dict[str, tuple[str, str, str]] = {
    # key: (section in PTX ISA 9.1, title, anchor)
    "smem_desc": ("9.7.16.4.1", "Shared memory descriptor", "tcgen05-shared-memory-descriptor"),
    "base_offset": ("9.7.16.4.1, Table 41", "Starting address of repeating pattern", "tcgen05-start-addr-swizzle-mode"),
    "lbo": ("9.7.16.3.1", "Leading dimension byte offset", "tcgen05-leading-dimension-byte-offset"),
    "sbo": ("9.7.16.3.2", "Stride dimension byte offset", "tcgen05-stride-dimension-byte-offset"),
    "canonical": ("9.7.16.3.3", "Canonical layouts", "tcgen05-canonical-layouts"),
    "swizzling": ("5.5.7", "Swizzling modes", "tensor-swizzling-modes"),
    "idesc": (
        "9.7.16.4.2, Table 42",
        "Instruction descriptor for .kind::tf32/f16/f8f6f4/i8",
        "tcgen05-instuction-desc-kind-tf32-f16-f8f6f4",
    ),
    "shapes": ("9.7.16.2.1", "Matrix shape (tcgen05 .kind and shapes)", "tcgen05-kind-shapes"),
    "majorness": (
        "9.7.16.10.3",
        "Valid combinations of type size, majorness and swizzling",
        "tcgen05-valid-combinations-of-type-size-majorness-and-swizzling",
    ),
    "transpose": ("9.7.16.10.1", "Transpose and negate operations", "tcgen05-transpose-negate"),
    "tmem_alloc": ("9.7.16.7.1", "tcgen05.alloc / dealloc / relinquish_alloc_permit", "tcgen05-instructions-tcgen05-alloc-dealloc-relinquish-alloc-permit"),
    "tmem_layout": ("9.7.16.10.5", "Data path layout organization", "tcgen05-data-path-layout-organization"),
    "wgmma_desc": (
        "9.7.15.5.1.2.2",
        "Matrix descriptor format (wgmma)",
        "asynchronous-warpgroup-level-matrix-shared-memory-layout-matrix-descriptor",
    ),
    "wgmma": ("9.7.15.5.2", "wgmma.mma_async", "asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async"),
    "wgmma_shapes": ("9.7.15.2", "Matrix shape (wgmma)", "asynchronous-warpgroup-level-matrix-shape"),
    "stmatrix": ("9.7.14.5.16", "stmatrix", "warp-level-matrix-instructions-stmatrix"),
    # Cluster facts (sections by instruction; anchors of the PTX ISA 9.x HTML):
    "tma_multicast": ("cp.async.bulk.tensor", ".multicast::cluster: the box lands at the same CTA-relative offset in every CTA of ctaMask, "
                      "and complete_tx signals the mbarrier at the same offset in each", "data-movement-and-conversion-instructions-cp-async-bulk-tensor"),
    "mapa": ("mapa", "map a shared::cta address to the same variable in another CTA of the cluster", "data-movement-and-conversion-instructions-mapa"),
    "barrier_cluster": ("barrier.cluster", "every non-exited thread of the cluster arrives; wait blocks until all have",
                        "parallel-synchronization-and-communication-instructions-barrier-cluster"),
    "smem_limit": ("CUDA C++ Programming Guide, compute capabilities", "227 KB of shared memory per block on 9.0 and 10.x", "features-and-technical-specifications"),
}


def cite(key: str) -> str:
    section, title, anchor = REFS[key]
    doc = "" if section.startswith("CUDA") else "PTX ISA "
    return f"{doc}{section} '{title}' (#{anchor})"
