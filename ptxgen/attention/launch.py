"""``ptxgen.attention``: the runtime entry. Checks the arguments, picks the tile, builds (once per spec) and launches
through the project's launcher (``runtime.fastlaunch.launcher``: one cuLaunchKernel over a pre-packed ParamBlock)."""

from __future__ import annotations

import math
import sys
import threading

from ..isa.tensormap import L2_PROMOTION_128B, TMA_DATA_TYPE_OF, TmaSwizzle
from ..runtime.params import ParamBlock
from ..runtime.tensormap import TensorMapArgs
from .args import AttentionProblem, check_arguments
from .build import build
from .spec import AttentionSpec

PARAM_KINDS = ["tensormap", "tensormap", "tensormap", "ptr", "ptr", "i32", "i32", "i32", "i32", "u64", "u64", "u64", "f32"]
_KERNELS: dict = {}
_LOCK = threading.Lock()


DEFAULT_SCHEDULE = "serial"


def choose_spec(p: AttentionProblem, causal: bool, schedule: str | None = None) -> AttentionSpec:
    """Two consumer warpgroups (BM 128) and 128-key blocks (FA3's hdim-128 causal tile, and a legal 64 one)."""
    return AttentionSpec(p.head_dim, 128, 128, causal, p.dtype, schedule=schedule or DEFAULT_SCHEDULE)


def tensor_map(t, rows_box: int, dtype) -> TensorMapArgs:
    """A rank-4 map over (head dim, seqlen, heads, batch) of a (B, H, S, D) view with any strides (D contiguous)."""
    b, h, s, d = t.shape
    es = t.element_size()
    return TensorMapArgs(
        data_type=TMA_DATA_TYPE_OF[dtype].value, element_bytes=es, rank=4, global_address=t.data_ptr(),
        global_dims=(d, s, h, b), global_strides=(t.stride(2) * es, t.stride(1) * es, t.stride(0) * es),
        box=(64, rows_box, 1, 1), element_strides=(1, 1, 1, 1), interleave=0, swizzle=TmaSwizzle.B128.value,
        l2_promotion=L2_PROMOTION_128B, oob_fill=0)


def _kernel(spec: AttentionSpec, device_index: int):
    key = (spec, device_index)
    k = _KERNELS.get(key)
    if k is None:
        with _LOCK:
            k = _KERNELS.get(key)
            if k is None:
                from ..api.streams import ensure_current
                from ..runtime import gpu

                dev = gpu.require_gpu(device_index)
                if dev.arch is not spec.arch:
                    raise gpu.NoGPU(f"ptxgen.attention runs on Hopper (sm_90a) GPUs; this one ({dev.name}) runs "
                                    f"{dev.arch.value} kernels (the tcgen05 form is compiled and SASS-checked only)")
                ensure_current(dev)
                built = build(spec)
                k = (built, gpu.Kernel(built.cubin, spec.kernel_name, built.plan.smem_bytes))
                _KERNELS[key] = k
    return k


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, out=None, return_lse: bool = False,
              schedule: str | None = None):
    """softmax(q·kᵀ·scale [+ causal mask]) · v for (B, H, S, D) tensors (SDPA's layout; (B, S, H, D) storage
    transposed to (B, H, S, D) works without a copy). k and v may have fewer heads than q (GQA/MQA: H_kv divides H).
    Causal is top-left aligned, as scaled_dot_product_attention's is_causal. ``return_lse``: also the float32
    log-sum-exp (natural log) of each row, shape (B, H, S_q). ``schedule``: the consumer schedule (spec.SCHEDULES;
    None: DEFAULT_SCHEDULE), for tests and benchmarks."""
    p = check_arguments(q, k, v, out, scale)
    torch = sys.modules["torch"]
    scale = 1.0 / math.sqrt(p.head_dim) if scale is None else float(scale)
    if out is None:
        out = torch.empty_like(q)
    lse = torch.empty((p.batch, p.heads, p.seqlen_q), dtype=torch.float32, device=q.device) if return_lse else None
    spec = choose_spec(p, bool(causal), schedule)
    dev = q.device.index or 0
    built, kernel = _kernel(spec, dev)
    from ..runtime.fastlaunch import error_name, launcher

    drv = launcher()
    plan = built.plan
    block = ParamBlock(PARAM_KINDS)
    block.set_map(0, drv.encode(tensor_map(q, plan.q.box[1], p.dtype)))
    block.set_map(1, drv.encode(tensor_map(k, plan.k.box[1], p.dtype)))
    block.set_map(2, drv.encode(tensor_map(v, plan.v.box[1], p.dtype)))
    block.set_ptr(3, out.data_ptr())
    block.set_ptr(4, 0 if lse is None else lse.data_ptr())
    for i, val in zip(range(5, 9), (p.seqlen_q, p.seqlen_k, p.heads, p.group)):
        block.set(i, val)
    for i, dim in zip(range(9, 12), (0, 1, 2)):
        block.set(i, out.stride(dim))
    block.set(12, scale * 1.4426950408889634)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    grid = (-(-p.seqlen_q // spec.bm), p.heads, p.batch)
    rc = drv.launch(int(kernel.func), *grid, spec.threads, 1, 1,
                    plan.smem_bytes, stream, block.address, None)
    if rc:
        from ..runtime.gpu import CudaError

        raise CudaError(f"cuLaunchKernel({spec.kernel_name}) failed: {error_name(rc)} ({rc})")
    return (out, lse) if return_lse else out

