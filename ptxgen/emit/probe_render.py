"""Render the TMA probe kernel (templates/tma_probe.cu.j2).

One kernel per box size in bytes (the mbarrier's transaction count is a compile-time constant); the
tensor map, the box coordinates and the shared-memory destination offset are run-time parameters:
``(const __grid_constant__ TmaMap tmap, int x, int y, unsigned dst_offset, uint4* out, int out_vectors)``.
"""

from __future__ import annotations

from .. import __version__
from ..isa.tensormap import TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES
from .render import GENERATED_MARK, environment

TMA_PROBE_THREADS = 128
TMA_PROBE_BASE_ALIGN = 1024  # the image starts on a 1024-byte boundary: every swizzle address bit is the host's
TMA_PROBE_IMAGE_BYTES = 16 * 1024  # what comes back: bytes [0, 16 KB) from the aligned base
TMA_PROBE_DYNAMIC_SMEM = TMA_PROBE_IMAGE_BYTES + TMA_PROBE_BASE_ALIGN  # + slack to align the base
TMA_PROBE_TIMEOUT_CYCLES = 4_000_000_000  # ~2 s at H200 clocks, then trap


def tma_probe_name(box_bytes: int) -> str:
    return f"ptxgen_tma_probe_{box_bytes}b"


def tma_probe_context(box_bytes: int) -> dict:
    if box_bytes <= 0 or box_bytes % 16:
        raise ValueError(f"box of {box_bytes} B: a TMA box is a positive multiple of 16 B")
    if box_bytes + 1024 > TMA_PROBE_IMAGE_BYTES:
        raise ValueError(f"box of {box_bytes} B does not fit the {TMA_PROBE_IMAGE_BYTES}-byte probe image with a 1 KB offset")
    return {
        "generated_line": f"{GENERATED_MARK} {__version__} (TMA probe); do not edit",
        "kernel_name": tma_probe_name(box_bytes),
        "box_bytes": box_bytes,
        "threads": TMA_PROBE_THREADS,
        "base_align": TMA_PROBE_BASE_ALIGN,
        "base_align_minus_one": TMA_PROBE_BASE_ALIGN - 1,
        "image_bytes": TMA_PROBE_IMAGE_BYTES,
        "image_vectors": TMA_PROBE_IMAGE_BYTES // 16,
        "smem_vectors": TMA_PROBE_DYNAMIC_SMEM // 16,
        "map_align": TENSOR_MAP_ALIGN,
        "map_words": TENSOR_MAP_BYTES // 8,
        "timeout_cycles": TMA_PROBE_TIMEOUT_CYCLES,
    }


def render_tma_probe(box_bytes: int) -> tuple[str, str]:
    """(kernel name, CUDA source) of the TMA probe for boxes of ``box_bytes`` bytes."""
    k = tma_probe_context(box_bytes)
    return k["kernel_name"], environment().get_template("tma_probe.cu.j2").render(k=k)
