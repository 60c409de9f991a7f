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
    "cta_pair": ("9.7.16.5.1", "CTA Pair", "tcgen05-cta-pair"),
    "issue_granularity": ("9.7.16.5", "Issue Granularity", "tcgen05-issue-granularity"),
    "tcgen05_mma": ("9.7.16.10.9.1", "tcgen05.mma", "tcgen05-mma-instructions-mma"),
    "tcgen05_commit": ("9.7.16.12.1", "tcgen05.commit", "tcgen05-instructions-tcgen05-commit"),
    "tma_cta_group": ("9.7.9.27.1.2", "cp.async.bulk.tensor (.cta_group)", "data-movement-and-conversion-instructions-cp-async-bulk-tensor"),
    "cp_async": ("cp.async", "cp-size is 4, 8 or 16 bytes (.cg: 16 only); both addresses aligned to cp-size; src-size < cp-size "
                 "zero-fills the rest", "data-movement-and-conversion-instructions-cp-async"),
    "mapa": ("9.7.9.23", "mapa", "data-movement-and-conversion-instructions-mapa"),
    "bar_sync": ("9.7.13.1", "bar, barrier: bar.sync waits for, bar.arrive counts toward, a generation of b threads of a named "
                 "barrier (0..15)", "parallel-synchronization-and-communication-instructions-bar"),
    "barrier_cluster": ("9.7.13.3", "barrier.cluster", "parallel-synchronization-and-communication-instructions-barrier-cluster"),
    "tma_multicast": ("cp.async.bulk.tensor", ".multicast::cluster: the box lands at the same CTA-relative offset in every CTA of ctaMask, "
                      "and complete_tx signals the mbarrier at the same offset in each", "data-movement-and-conversion-instructions-cp-async-bulk-tensor"),
    "smem_limit": ("CUDA C++ Programming Guide, compute capabilities", "227 KB of shared memory per block on 9.0 and 10.x", "features-and-technical-specifications"),
}


def cite(key: str) -> str:
    section, title, anchor = REFS[key]
    doc = "" if section.startswith("CUDA") else "PTX ISA "
    return f"{doc}{section} '{title}' (#{anchor})"

# Block scaling (PTX ISA 9.1 numbering; anchors are the stable part).
REFS.update(
    {
        "block_scaling": ("9.7.16.10.7", "Block Scaling for tcgen05.mma", "tcgen05-block-scaling"),
        "scale_vec": (
            "9.7.16.10.7.1, Tables 54-55",
            "Valid combinations of scale_vectorsize with types and MMA-Kind",
            "tcgen05-mma-scale-valid-comb-detail",
        ),
        "sfa_id": ("9.7.16.10.7.2", "Scale Factor A ID", "tcgen05-mma-scale-factor-a"),
        "sfb_id": ("9.7.16.10.7.3", "Scale Factor B ID", "tcgen05-mma-scale-factor-b"),
        "idesc_mxf8f6f4": ("9.7.16.4.2, Table 43", "Instruction descriptor for .kind::mxf8f6f4", "tcgen05-instuction-desc-kind-mxf8f6f4"),
        "idesc_mxf4": ("9.7.16.4.2, Table 44", "Instruction descriptor for .kind::mxf4 and .kind::mxf4nvf4", "tcgen05-instuction-desc-kind-mxf4-mxf4nvf4"),
        "tcgen05_cp": ("9.7.16.9.1", "tcgen05.cp", "tcgen05-instructions-tcgen05-cp"),
        "pipelined": ("9.7.16.6.2", "Pipelined tcgen05 instructions", "tcgen05-memory-consistency-model-pipelined-instructions"),
        "mxf4_smem": (
            "9.7.16.10.4.6",
            "Packing format used for matrix A and B by .kind::mxf4 and .kind::mxf4nvf4 in Shared Memory",
            "tcgen05-packing-formats-mxf4-smem",
        ),
        "mxf8f6f4_smem": (
            "9.7.16.10.4.4",
            "Packing format used for matrix A and B by .kind::mxf8f6f4 in Shared Memory",
            "tcgen05-packing-formats-mxf8f6f4-smem",
        ),
        "bulk_copy": ("9.7.9.25.4.1", "cp.async.bulk", "data-movement-and-conversion-instructions-cp-async-bulk"),
    }
)
