"""The rows of a grouped product's output past its last group set to zero on the device (``torch.ops.ptxgen.grouped_gemm``
with ``zero_tail``: the expert bank's dx), by a kernel written with the public authoring layer
(templates/grouped_tail.cu.j2): one launch that reads ``offs[G - 1]`` on the GPU and returns at once where every row
belongs to a group, in place of a fill of the whole output before the product (a write of every byte of dx)."""

from __future__ import annotations

import threading

THREADS = 256
CTAS_PER_SM = 2  # the grid (a CTA per row up to this many per SM): a long tail streamed, an empty one one launch
ZERO = {"bf16": "0", "f16": "0", "f32": "0.0f"}
CTYPE = {"bf16": "unsigned short", "f16": "unsigned short", "f32": "float"}
_BUILT: dict = {}
_LOCK = threading.Lock()


def kernel_for(dtype: str):
    """The ``ptxgen.author.Kernel`` of an output of ``dtype`` (bf16, f16, f32): out, offs, G (>= 1), M, cols, ld
    (elements)."""
    from ..author import Kernel, Param, template_file

    if dtype not in ZERO:
        raise ValueError(f"zero tail: outputs are bf16, f16 or f32, not {dtype}")
    params = (Param("out", "ptr", dtype=dtype, const=False), Param("offs", "ptr", dtype="s32"), Param("G", "i32"),
              Param("M", "i32"), Param("cols", "i32"), Param("ld", "u64"))
    return Kernel(f"ptxgen_grouped_zero_tail_{dtype}", template_file("grouped_tail.cu.j2"), params, block=(THREADS, 1, 1),
                  shared_bytes=0, expect_sass={"HGMMA": 0},
                  context={"zero": ZERO[dtype], "ctype": CTYPE[dtype]})


def built(dtype: str):
    """The compiled kernel of ``dtype`` (once per process; the compile cache across processes)."""
    k = _BUILT.get(dtype)
    if k is None:
        from ..author import build

        with _LOCK:
            k = _BUILT.get(dtype)
            if k is None:
                k = _BUILT[dtype] = build(kernel_for(dtype))
    return k


def zero_tail(torch, out, offs) -> None:
    """Rows of torch tensor ``out`` (M x cols, row stride ``out.stride(0)``) at or past ``offs[-1]`` set to zero, on
    the current stream of ``out``'s device (made the current device for the launch); nothing synchronises."""
    from ..api.launch import streams
    from ..runtime.launch.arrays import DTYPE_BY_NAME

    m, cols = out.shape
    if m == 0 or cols == 0:
        return
    if offs.shape[0] == 0:  # no group: every row is past the last
        out.zero_()
        return
    dev = out.device.index
    grid = max(1, min(streams.require_gpu(dev).sm_count * CTAS_PER_SM, m))
    kernel = built(DTYPE_BY_NAME[str(out.dtype).removeprefix("torch.")])
    args = (out, offs, int(offs.shape[0]), m, cols, int(out.stride(0)))
    if dev == torch.cuda.current_device():
        kernel(*args, grid=(grid, 1, 1))
    else:
        with torch.cuda.device(out.device):
            kernel(*args, grid=(grid, 1, 1))
