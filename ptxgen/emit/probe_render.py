"""Render the probe kernels: the TMA probe (templates/tma_probe.cu.j2) and the wgmma layout probe (wgmma_probe.cu.j2).

The TMA probe:

One kernel per box size in bytes (the mbarrier's transaction count is a compile-time constant); the
tensor map, the box coordinates and the shared-memory destination offset are run-time parameters:
``(const __grid_constant__ TmaMap tmap, int x, int y, unsigned dst_offset, uint4* out, int out_vectors)``.
"""

from __future__ import annotations

from ..isa.descriptors import SmemDescriptor
from ..isa.idesc import WgmmaInstr
from ..isa.tensormap import TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES
from ..isa.types import Arch, DType, Major
from ..version import __version__
from .cexpr import wgmma_fragment_col, wgmma_fragment_row, wgmma_operand_lists
from .env import environment
from .sources import GENERATED_MARK

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


def probe_context(dtype: DType, n: int, a_major: Major, b_major: Major) -> dict:
    """The layout-probe kernel: one m64nNk wgmma, f32 accumulator, descriptors given at run time."""
    w = WgmmaInstr(n, dtype, DType.F32, a_major, b_major)
    d_list, outputs = wgmma_operand_lists(n // 2, "+f")
    imm = ", 1, 1" + (f", {w.imm_trans_a}, {w.imm_trans_b}" if w.has_transpose else "")
    return {
        "generated_line": f"{GENERATED_MARK} {__version__} (layout probe); do not edit",
        "kernel_name": f"ptxgen_probe_{dtype.value}_n{n}_a{a_major.value}_b{b_major.value}",
        "n": n,
        "acc_regs": n // 2,
        "op_a_desc": n // 2,
        "op_b_desc": n // 2 + 1,
        "wgmma_opcode": w.opcode,
        "wgmma_d_list": d_list,
        "wgmma_outputs": outputs,
        "wgmma_immediates": imm,
        "start_field_expr": SmemDescriptor.start_field_c_expr(Arch.SM90A, "base"),
        "frag_row_expr": wgmma_fragment_row("i", "t", "lane"),
        "frag_col_expr": wgmma_fragment_col("i", "lane"),
    }


def render_probe(dtype: DType, n: int, a_major: Major, b_major: Major) -> tuple[str, str]:
    k = probe_context(dtype, n, a_major, b_major)
    return k["kernel_name"], environment().get_template("wgmma_probe.cu.j2").render(k=k)
