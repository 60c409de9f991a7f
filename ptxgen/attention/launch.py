"""``ptxgen.attention``: the runtime entry. Checks the arguments, picks the tile, builds (once per spec) and launches
through the project's launcher (``runtime.launch.fastlaunch.launcher``: one cuLaunchKernel over a pre-packed ParamBlock).

The slow path (first call with a dispatch key: shapes, strides, dtype, device, causal, scale, return_lse) builds a
:class:`PreparedAttention`; later calls with that key check the arguments, write pointers and launch."""

from __future__ import annotations

import math
import sys
import threading

from ..isa.tensormap import L2_PROMOTION_128B, TMA_DATA_TYPE_OF, TmaSwizzle
from ..runtime.launch.params import MapSlot, ParamBlock, PtrSlot
from ..runtime.launch.tensormap import TensorMapArgs
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


def tensor_map(t, rows_box: int, dtype, address: int | None = None) -> TensorMapArgs:
    """A rank-4 map over (head dim, seqlen, heads, batch) of a (B, H, S, D) view with any strides (D contiguous)."""
    b, h, s, d = t.shape
    es = t.element_size()
    return TensorMapArgs(
        data_type=TMA_DATA_TYPE_OF[dtype].value, element_bytes=es, rank=4,
        global_address=t.data_ptr() if address is None else address,
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
                from ..api.launch.streams import ensure_current
                from ..runtime.launch import gpu

                dev = gpu.require_gpu(device_index)
                if dev.arch is not spec.arch:
                    raise gpu.NoGPU(f"ptxgen.attention runs on Hopper (sm_90a) GPUs; this one ({dev.name}) runs "
                                    f"{dev.arch.value} kernels (the tcgen05 form is compiled and SASS-checked only)")
                ensure_current(dev)
                built = build(spec)
                k = (built, gpu.Kernel(built.cubin, spec.kernel_name, built.plan.smem_bytes))
                _KERNELS[key] = k
    return k


class PreparedAttention:
    """Everything one dispatch key needs, built once: the kernel, the grid, a pre-packed parameter block whose three
    tensor maps are re-encoded only when their pointer changes (``runtime.launch.params.MapSlot``, which also remembers the
    last few pointers' maps), and the pointer slots of O and LSE. A call writes pointers and launches."""

    def __init__(self, spec: AttentionSpec, plan, func: int, p: AttentionProblem, q, k, v, out, scale: float, drv):
        self.spec, self.func, self.drv, self.smem = spec, func, drv, plan.smem_bytes
        self.grid = (-(-p.seqlen_q // spec.bm), p.heads, p.batch)
        self.block = ParamBlock(PARAM_KINDS)
        self.maps = [MapSlot(self.block, i, tensor_map(t, rows, p.dtype, address=0), drv.encode)
                     for i, (t, rows) in enumerate(((q, plan.q.box[1]), (k, plan.k.box[1]), (v, plan.v.box[1])))]
        self.o, self.lse = PtrSlot(self.block, 3), PtrSlot(self.block, 4)
        for i, val in zip(range(5, 9), (p.seqlen_q, p.seqlen_k, p.heads, p.group)):
            self.block.set(i, val)
        for i, dim in zip(range(9, 12), (0, 1, 2)):
            self.block.set(i, out.stride(dim))
        self.block.set(12, scale * 1.4426950408889634)
        self.lock = threading.Lock()

    def run(self, q, k, v, out, lse, stream: int) -> int:
        """Point the slots at this call's tensors and launch; the CUresult."""
        with self.lock:  # one parameter block per key: two threads with one key take turns
            for slot, t in zip(self.maps, (q, k, v)):
                ptr = t.data_ptr()
                if slot.ptr != ptr:
                    slot.point(ptr)
            self.o.point(out.data_ptr())
            self.lse.point(0 if lse is None else lse.data_ptr())
            return self.drv.launch(self.func, *self.grid, self.spec.threads, 1, 1, self.smem, stream, self.block.address, None)


_PREPARED: dict = {}


def dispatch_key(q, k, v, out, causal: bool, scale: float, return_lse: bool, schedule: str | None) -> tuple:
    return (tuple(q.shape), q.stride(), tuple(k.shape), k.stride(), v.stride(), out.stride(), q.dtype, q.device,
            causal, scale, return_lse, schedule)


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
    from ..runtime.launch.fastlaunch import error_name, launcher

    key = dispatch_key(q, k, v, out, bool(causal), scale, return_lse, schedule)
    prep = _PREPARED.get(key)
    if prep is None:
        spec = choose_spec(p, bool(causal), schedule)
        built, kernel = _kernel(spec, q.device.index or 0)
        prep = PreparedAttention(spec, built.plan, int(kernel.func), p, q, k, v, out, scale, launcher())
        if len(_PREPARED) > 256:  # a bound on distinct shapes kept
            _PREPARED.clear()
        _PREPARED[key] = prep
    spec = prep.spec
    rc = prep.run(q, k, v, out, lse, torch.cuda.current_stream(q.device).cuda_stream)
    if rc:
        from ..runtime.launch.gpu import CudaError

        raise CudaError(f"cuLaunchKernel({spec.kernel_name}) failed: {error_name(rc)} ({rc})")
    return (out, lse) if return_lse else out

