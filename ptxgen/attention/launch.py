"""``ptxgen.attention``: the runtime entry. Checks the arguments, picks the tile, builds (once per spec) and launches
through the public layer's prepared launch (``ptxgen.author.PreparedLaunch``: one cuLaunchKernel over a pre-packed
parameter block, Q, K and V as rank-4 tensor maps of their (B, H, S, D) views).

The slow path (first call with a dispatch key: shapes, strides, dtypes, devices, causal, scale, return_lse, the
options) checks every argument and builds a :class:`PreparedAttention`; later calls with that key check only the
pointers' alignment, write the pointers and launch."""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import replace

from ..author import PreparedLaunch, SpecError
from .args import AttentionProblem, check_arguments
from .build import build
from .plan import LOG2E
from .spec import AttentionSpec

_KERNELS: dict = {}
_LOCK = threading.Lock()


LONG_KEYS = 4096  # from this many keys on, D 128 takes 192-key blocks


SHORT_KEYS = 2048  # up to this many keys, a non-causal call takes the persistent walk
# up to this many keys, a causal call (D 64 or 128) takes ping-pong 128 x 128 with the persistent walk (odd rounds
# reversed: plan.walk_tile): 1.08-1.41x the one-CTA-per-tile kernel at 512-4096 keys on the H100
# (runs/2026-12-06-h100-few-wave-d256 run 5)
CAUSAL_WALK_KEYS = 4096
# D 64 causal walks: (BM, BN, stages) up to CAUSAL_D64_SHORT_KEYS keys, and beyond. Measured on the H100 against the
# (128, 128, 2) walk (runs/2026-12-06-h100-attention-q-buffers run 1, TFLOP/s): 512 keys 248 against 237, 1024 311 / 307
# with three stages; 2048 379 / 366 and 4096 421 / 401 with 192-key blocks
CAUSAL_D64_TILES = ((128, 128, 3), (128, 192, 2))
CAUSAL_D64_SHORT_KEYS = 1024
# up to this many keys, a D 64 non-causal call takes ping-pong 128 x 128, two stages, with the walk, O staged and the
# next tile's first S carried (BM 192 covers 512 and 1024 rows with 576 and 1152: 11% of its rows are padding).
# Measured on the H100 (runs/2026-12-06-h100-pairs-sanitizer-training run 3, 9 alternating passes, outputs checked):
# 0.992 / 0.990 of cuDNN at 512 / 1024 keys against the overlap 192 x 128 walk's 0.909 / 0.954; at 2048 the latter
# 1.057 against 1.001
D64_PINGPONG_KEYS = 1024


def default_choice(p: AttentionProblem, causal: bool = False, schedule: str | None = None) -> tuple[tuple[int, int, int], str, bool]:
    """((BM, BN, stages), schedule, persistent) for a problem, from the H100 sweeps of docs/attention.md ("How the
    defaults were found"): D 64: three consumer warpgroups (BM 192, FA3's head-dim-64 tile) with 128-key blocks,
    intra-warpgroup overlap (ping-pong, which needs two warpgroups, when asked for: BM 128, BN 192); D 128: two
    consumer warpgroups in ping-pong, 192-key blocks from LONG_KEYS keys on, else 128; D 64 non-causal calls of at most
    D64_PINGPONG_KEYS keys take ping-pong 128 x 128 with the walk (O staged, the S carried: choose_spec). Non-causal calls of at most
    SHORT_KEYS keys walk the tiles persistently (the next tile's loads hide this one's end); causal calls of at most
    CAUSAL_WALK_KEYS keys, D 64 or 128, take ping-pong with the walk (D 128: 128 x 128, two stages; D 64:
    CAUSAL_D64_TILES). D 256, not measured, as
    FA3 builds its head dim 256: two consumer warpgroups, 64-key blocks (FA3 takes 80; 64 is the only BN of
    spec.BLOCK_N whose S, O and P fit 240 registers), two stages (all that fit shared memory beside Q),
    intra-warpgroup overlap without ping-pong (FA3 takes its scheduler barrier only up to head dim 128), one CTA per
    tile."""
    if p.head_dim == 256:
        return (128, 64, 2), "overlap", False
    if causal and p.seqlen_k <= CAUSAL_WALK_KEYS and schedule in (None, "pingpong"):
        if p.head_dim == 64:  # D 64: three stages up to 1024 keys, 192-key blocks beyond (CAUSAL_D64_TILES)
            return (CAUSAL_D64_TILES[0] if p.seqlen_k <= CAUSAL_D64_SHORT_KEYS else CAUSAL_D64_TILES[1]), "pingpong", True
        return (128, 128, 2), "pingpong", True
    walk = not causal and p.seqlen_k <= SHORT_KEYS
    if p.head_dim == 64:
        if schedule in (None, "pingpong") and _d64_short(p, causal):
            return (128, 128, 2), "pingpong", True
        if schedule == "pingpong":
            return (128, 192, 2), "pingpong", walk
        return (192, 128, 2), "overlap", walk
    return (128, 192 if p.seqlen_k >= LONG_KEYS else 128, 2), "pingpong", walk


# persistent kernels with two Q buffers at these head dims stage O in the tile's Q buffer and store whole 16-byte cells
# (spec.o_staging) where the output allows 16-byte stores (``cells_ok``). Measured on the H100 against the direct
# store (runs/2026-12-06-h100-attention-q-buffers run 3): D 128 1.02-1.07x at 512-2048 keys, 1.00-1.02 at 4096;
# D 64 0.95-1.02 (its rows are one 128-byte line: the round trip through shared memory does not pay)
O_STAGING_HEAD_DIMS = (128,)
# persistent non-causal kernels at these head dims and at most CARRY_MAX_KEYS keys issue the next tile's first S with
# this tile's last P·V (spec.carry). Measured on the H100 against the same kernel without it, two machines
# (runs/2026-12-06-h100-carry-kgrouped runs 1 and 2): D 128 non-causal 1.034 / 1.045 at 512 keys, 1.031 / 1.014 at
# 1024, 0.992 at 2048; D 128 causal 0.958 / 0.955 at 512; D 64 non-causal on the overlap 192 x 128 walk 0.974-0.978
# (its S is half as long: the carried S delays the epilogue more than it hides); the D 64 ping-pong 128 x 128 walk of
# short calls (D64_PINGPONG_KEYS) carries it: 0.992 of cuDNN at 512 keys with it, 0.939 without
# (runs/2026-12-06-h100-pairs-sanitizer-training run 3)
CARRY_HEAD_DIMS = (128,)
CARRY_MAX_KEYS = 1024


def _d64_short(p: AttentionProblem, causal: bool) -> bool:
    """A D 64 non-causal call of at most D64_PINGPONG_KEYS keys: ping-pong 128 x 128 with O staged and the S carried."""
    return p.head_dim == 64 and not causal and p.seqlen_k <= D64_PINGPONG_KEYS


def cells_ok(out) -> bool:
    """Whether every row of ``out`` (B, H, S, D) starts on 16 bytes: the staged O store writes 16-byte cells."""
    return out.data_ptr() % 16 == 0 and all(out.stride(i) % 8 == 0 for i in range(3)) and out.stride(3) == 1


def choose_spec(p: AttentionProblem, causal: bool, schedule: str | None = None,
                tile: tuple[int, int, int] | None = None, persistent: bool | None = None,
                q_buffers: int | None = None, o_staging: bool | None = None, carry: bool | None = None) -> AttentionSpec:
    """The default tile, schedule and walk of the problem (``default_choice``), or the ones asked for. A persistent
    kernel takes two Q buffers where they fit shared memory (``q_buffers`` None), else one; with two, O is staged
    (``o_staging`` None: at ``O_STAGING_HEAD_DIMS``; the caller says False where the output cannot take 16-byte stores)
    and the next tile's first S is carried (``carry`` None: non-causal, at ``CARRY_HEAD_DIMS``, at most ``CARRY_MAX_KEYS``
    keys)."""
    (bm, bn, stages), default, walk = default_choice(p, causal, schedule)
    if tile is not None:
        bm, bn, stages = tile
    spec = AttentionSpec(p.head_dim, bm, bn, causal, p.dtype, stages=stages, schedule=schedule or default,
                         persistent=walk if persistent is None else bool(persistent))
    if q_buffers is not None:
        spec = replace(spec, q_buffers=q_buffers)
    elif spec.persistent:
        try:
            spec = replace(spec, q_buffers=2)
        except SpecError:  # shared memory: Q, the K/V stages and a second Q take more than a CTA may use
            pass
    short = _d64_short(p, causal) and (spec.bm, spec.bn, spec.stages) == (128, 128, 2) and spec.schedule == "pingpong"
    stage = (p.head_dim in O_STAGING_HEAD_DIMS or short) if o_staging is None else o_staging
    if stage and spec.q_buffers == 2:
        spec = replace(spec, o_staging=True)
    if carry is None:
        carry = not causal and (p.head_dim in CARRY_HEAD_DIMS or short) and p.seqlen_k <= CARRY_MAX_KEYS
    return replace(spec, carry=True) if carry and spec.q_buffers == 2 and spec.schedule != "serial" else spec


def _kernel(spec: AttentionSpec, device_index: int):
    """(the built kernel, its CUfunction on GPU ``device_index``), once per (spec, device). ``BuiltKernel.load``
    raises NoGPU when the GPU runs another arch's kernels (the tcgen05 form is compiled and SASS-checked only)."""
    key = (spec, device_index)
    k = _KERNELS.get(key)
    if k is None:
        with _LOCK:
            k = _KERNELS.get(key)
            if k is None:
                built = build(spec)
                k = (built, built.kernel.load(device_index))
                _KERNELS[key] = k
    return k


class PreparedAttention:
    """Everything one dispatch key needs, built once: the kernel, the grid, and a PreparedLaunch whose three tensor
    maps are re-encoded only when their pointer changes (the last few pointers' maps kept) and whose pointer slots
    take O and LSE. A call writes pointers and launches. ``drv``: the launcher (``encode`` and ``launch``)."""

    def __init__(self, spec: AttentionSpec, plan, func: int, p: AttentionProblem, q, k, v, out, scale: float, drv=None):
        self.spec, self.func, self.drv, self.smem = spec, func, drv, plan.smem_bytes
        self.lse_shape = (p.batch, p.heads, p.seqlen_q)
        tiles = (-(-p.seqlen_q // spec.bm), p.heads, p.batch)
        self.grid = (min(tiles[0] * tiles[1] * tiles[2], sm_count(q.device)), 1, 1) if spec.persistent else tiles
        args = (q, k, v, out, None, p.seqlen_q, p.seqlen_k, p.heads, p.group, p.batch, out.stride(0), out.stride(1),
                out.stride(2), scale * LOG2E)
        self.launch = PreparedLaunch.of(plan.params, args, driver=drv)
        self.block = self.launch.block
        self.lock = threading.Lock()

    def run(self, q, k, v, out, lse, stream: int) -> int:
        """Point the slots at this call's tensors and launch; the CUresult."""
        with self.lock:  # one parameter block per key: two threads with one key take turns
            pl = self.launch
            pl.point(0, q.data_ptr())
            pl.point(1, k.data_ptr())
            pl.point(2, v.data_ptr())
            pl.point(3, out.data_ptr())
            pl.point(4, None if lse is None else lse.data_ptr())
            return pl.launch(self.func, self.grid, (self.spec.threads, 1, 1), self.smem, stream, self.drv)


_PREPARED: dict = {}
_SMS: dict = {}


def sm_count(device) -> int:
    """The multiprocessors of a torch device (the persistent grid: one CTA each), once per device."""
    n = _SMS.get(device.index)
    if n is None:
        n = _SMS[device.index] = sys.modules["torch"].cuda.get_device_properties(device).multi_processor_count
    return n


def dispatch_key(q, k, v, out, causal: bool, scale, return_lse: bool, schedule: str | None, tile=None,
                 persistent=None, q_buffers=None, o_staging=None, carry=None) -> tuple:
    """Everything :func:`check_arguments` and the tile choice read of a call but the pointers: each tensor's shape,
    strides, dtype and device (``out``'s, or None), whether ``out``'s rows start on 16 bytes, and the options. A call
    whose key was launched before passed every check but the pointer alignment, which :func:`_pointers_ok` repeats.
    TypeError or AttributeError for arguments that are not tensors (the full check says why)."""
    o = None if out is None else (out.shape, out.stride(), out.dtype, out.device, out.data_ptr() % 16 == 0)
    return (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, v.shape, v.stride(), v.dtype,
            v.device, o, causal, scale, return_lse, schedule, tile, persistent, q_buffers, o_staging, carry)


def _pointers_ok(q, k, v, out) -> bool:
    """The pointer rules of :func:`check_arguments`: Q, K and V 16-byte aligned, ``out`` (if given) 4-byte aligned."""
    return not (q.data_ptr() % 16 or k.data_ptr() % 16 or v.data_ptr() % 16 or (out is not None and out.data_ptr() % 4))


def _stream(torch, device) -> int:
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # torch's current stream without building a Stream
    return raw(device.index or 0) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, out=None, return_lse: bool = False,
              schedule: str | None = None, tile: tuple[int, int, int] | None = None, persistent: bool | None = None,
              q_buffers: int | None = None, o_staging: bool | None = None, carry: bool | None = None):
    """softmax(q·kᵀ·scale [+ causal mask]) · v for (B, H, S, D) tensors (SDPA's layout; (B, S, H, D) storage
    transposed to (B, H, S, D) works without a copy). k and v may have fewer heads than q (GQA/MQA: H_kv divides H).
    Causal is top-left aligned, as scaled_dot_product_attention's is_causal. ``return_lse``: also the float32
    log-sum-exp (natural log) of each row, shape (B, H, S_q). ``schedule``: the consumer schedule (spec.SCHEDULES),
    ``tile``: (BM, BN, stages), ``persistent``: one CTA per SM walking the tiles, ``q_buffers`` (1 or 2, persistent
    only), ``o_staging`` (O staged in the Q buffer, two Q buffers only) and ``carry`` (the next tile's first S issued
    with this tile's last P·V, two Q buffers and an overlapped schedule only), for tests and benchmarks (None:
    ``default_choice`` and ``choose_spec``; an output whose rows do not start on 16 bytes is never staged).

    A call whose :func:`dispatch_key` was launched before skips the argument checks but the pointers' alignment."""
    try:
        key = dispatch_key(q, k, v, out, bool(causal), scale, return_lse, schedule, tile, persistent, q_buffers, o_staging,
                           carry)
        prep = _PREPARED.get(key)
    except (TypeError, AttributeError):  # not tensors, an unhashable scale: the full check says what is wrong
        key, prep = None, None
    if prep is None or not _pointers_ok(q, k, v, out):
        prep = _prepare(key, q, k, v, out, causal, scale, schedule, tile, persistent, q_buffers, o_staging, carry)
    torch = sys.modules["torch"]
    if out is None:
        out = torch.empty_like(q)
    lse = torch.empty(prep.lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    rc = prep.run(q, k, v, out, lse, _stream(torch, q.device))
    PreparedLaunch.check(rc, prep.spec.kernel_name)
    return (out, lse) if return_lse else out


def _prepare(key, q, k, v, out, causal, scale, schedule, tile, persistent, q_buffers, o_staging, carry) -> "PreparedAttention":
    """Every argument checked (ArgumentError / DTypeError naming the rule), the spec chosen, the kernel built and loaded,
    the launch prepared and kept under ``key`` (None: not kept)."""
    p = check_arguments(q, k, v, out, scale)
    torch = sys.modules["torch"]
    scale = 1.0 / math.sqrt(p.head_dim) if scale is None else float(scale)
    stand_in = out if out is not None else torch.empty_like(q)  # the output's geometry (strides) under this key
    spec = choose_spec(p, bool(causal), schedule, tile, persistent, q_buffers, o_staging if cells_ok(stand_in) else False,
                       carry)
    built, func = _kernel(spec, q.device.index or 0)
    prep = PreparedAttention(spec, built.plan, func, p, q, k, v, stand_in, scale)
    if key is not None:
        if len(_PREPARED) > 256:  # a bound on distinct shapes kept
            _PREPARED.clear()
        _PREPARED[key] = prep
    return prep
