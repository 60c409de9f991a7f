"""Kernel selection for :func:`ptxgen.gemm`: which spec a call's arrays get (the tuned table for K-major
f16/bf16/e4m3, else a default tile with the operands' majorness). The dispatch cache (``api.dispatch``) calls
:func:`choose_for_arrays` once per dispatch key and keeps the result; nothing here is on the hot path.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from ..derive.tile.rules_promote import PROMOTE_3XTF32
from ..derive.tile.spec import TileSpec, make_spec
from ..isa.types import DType, Epilogue, Major, SpecError
from ..runtime.launch.arrays import ArgumentError, ArrayInfo, DTypeError, read_array
from .launch import streams
from .arrays.accumulate import WHY as ACC16_WHY
from .arrays.accumulate import f16_spec
from .arrays.binding import _check_2d, _check_strides, _dtype_words, operand_major

_INPUT_ARRAY_DTYPES = {"f16": "f16", "bf16": "bf16", "f32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "s8": "s8", "u8": "u8"}
_DEFAULT_OUT = {"f16": "f16", "bf16": "bf16", "tf32": "f32", "e4m3": "bf16", "e5m2": "bf16", "s8": "s32", "u8": "s32"}
_TUNED_DTYPES = ("f16", "bf16", "e4m3")  # the types ptxgen.runtime.choose.tune searches (A and B K-major)
# gemm() runs the chooser's stream-K kernels as chosen (api.launch.launchplan.streamk_workspace); False: the same kernel whole
GEMM_STREAM_K = True
# M-major A or N-major B (bf16/f16) take the chooser's kernel for K-major operands with their own operand layouts
# (_mn_major_pick); off: default_spec's kernel, as before 2026-12-06
MN_MAJOR_PICKS = True
_MN_PICK_DTYPES = ("bf16", "f16")
# ptxgen.api.plan's device while it plans (a stand-in with the device's name and SM count): the chooser's device when a
# call names an arch and no GPU (api.callplan)
PLAN_DEVICE: ContextVar = ContextVar("ptxgen_plan_device", default=None)
# True while a 3xTF32 call (api.arrays.precision) runs or is planned on its split operands: the tf32 kernels it picks
# promote (--promote 4: a fresh partial per 4 K-tiles added to the f32 accumulator, derive.tile.rules_promote), and the
# dispatch caches key it apart from tf32 calls of the same arrays (promoting)
PROMOTE: ContextVar = ContextVar("ptxgen_promote", default=False)
PROMOTE_WHY = (f"3xTF32 runs the promoting kernel (--promote {PROMOTE_3XTF32}: each {PROMOTE_3XTF32} K-tiles' MMAs into a "
               "fresh partial, added to the f32 accumulator rounded to nearest; the tensor core's own additions round toward zero)")


# True while an f16-accumulate call (api.arrays.accumulate) is run or planned: the f16 kernels chosen inside take an f16
# accumulator (accumulate.f16_spec), and the dispatch caches key it apart from f32-accumulate calls of the same arrays
ACC16: ContextVar = ContextVar("ptxgen_acc16", default=False)


@contextmanager
def _raised(flag: ContextVar):
    """``flag`` True for the calls inside."""
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)


def accumulating_f16():
    """An f16-accumulate call: the f16 kernels chosen inside accumulate in f16 (:data:`ACC16`)."""
    return _raised(ACC16)


def _acc16(dtype: str) -> bool:
    return dtype == "f16" and ACC16.get()


def _accumulated(dtype: str, choice: tuple[TileSpec, str, bool]) -> tuple[TileSpec, str, bool]:
    """``choice`` (spec, why, swap_ab) with an f16 accumulator inside :func:`accumulating_f16` (f16 inputs)."""
    spec, why, swap = choice
    if not _acc16(dtype):
        return choice
    spec, note = f16_spec(spec)  # (default_spec's kernels come with it: their why is said here too)
    return spec, f"{why}; {note}", swap


def promoting():
    """The 3xTF32 door's call on its split operands: the tf32 kernels chosen inside promote (:data:`PROMOTE`)."""
    return _raised(PROMOTE)


def promotes(dtype: str, arch: str) -> bool:
    """Whether a kernel chosen now for ``dtype`` inputs on ``arch`` promotes: tf32 on sm_90a inside :func:`promoting`
    (sm_100a has no promoting form: its 3xTF32 calls keep the tf32 kernels)."""
    return dtype == "tf32" and arch == "sm_90a" and PROMOTE.get()


def spec_or_direct_store(fields: dict) -> TileSpec:
    """``make_spec(**fields)``; where the rules refuse it and it has the TMA-store epilogue (not derived for every output:
    derive.tile.rules/derive.store.output), the same kernel with the direct stores, which need no staging buffers (tile, stages,
    schedule kept); SpecError where that is refused too. An f32 output keeps the TMA store where the rules accept it (the
    wgmma st.shared.v2.f32 staging, 2026-12-02): measured 1.0-4.6% faster than the direct stores of the same kernel on the H200
    (runs/2026-12-02-stage-release-f32-store/run5 and runs/2026-12-02-gpu-tier-f32-store, tools/bench_f32store.py)."""
    try:
        return make_spec(**fields)
    except SpecError:
        if fields.get("epilogue") != Epilogue.TMA.value:
            raise
    return make_spec(**{**fields, "epilogue": Epilogue.DIRECT.value})


def _with_out_dtype(spec: TileSpec, out_dtype: str) -> TileSpec:
    """``spec`` retyped to write ``out_dtype`` (:func:`spec_or_direct_store`: a TMA-store pick asked for an output its
    TMA store cannot stage keeps its kernel with the direct stores)."""
    if spec.out_dtype.value == out_dtype:
        return spec
    return spec_or_direct_store({**spec.to_json(), "out_dtype": out_dtype})


def default_spec(dtype: str, arch: str, a_major: Major, b_major: Major, out_dtype: str, copy_bytes: int = 16) -> TileSpec:
    """A general-purpose spec with the given majorness: 128 B of K per stage with the 128-byte swizzle,
    a persistent schedule, the largest of a few tiles that is legal. ``copy_bytes`` 8 or 4: the cp.async loader
    with copies that narrow (operand rows aligned only to that many bytes)."""
    loader = {} if copy_bytes == 16 else {"loader": "cp.async", "copy_bytes": copy_bytes}
    if promotes(dtype, arch):  # a 3xTF32 call: the tiles the promoting form allows (derive.tile.rules_promote)
        loader["promote"] = PROMOTE_3XTF32
    d = DType(dtype)
    acc = "s32" if d.is_integer else ("f16" if _acc16(dtype) else "f32")
    bk = 128 // d.bytes

    def tokens(major: Major) -> list[str]:
        return ["kmajor-sw128"] if major is Major.K else ["mnmajor-sw128", "mnmajor-sw128b32"]

    # MN-major operands with their atoms adjacent along K: a stage loads in 64 x 64 boxes, not 64 x 8 ones (8x fewer
    # TMA copies; measured: runs/2026-12-01-gpu-tier-cost-model/order); the default order where that one is not legal
    orders = [{f"{x}_order": "k" for x, mj in (("a", a_major), ("b", b_major)) if mj is Major.MN}, {}]
    errors = []
    for bm, bn, stages in ((128, 256, 4), (128, 128, 4), (128, 128, 2), (64, 128, 2)):
        for ta in tokens(a_major):
            for tb in tokens(b_major):
                for order in orders if orders[0] else [{}]:
                    try:
                        return make_spec(bm=bm, bn=bn, bk=bk, a=ta, b=tb, dtype=dtype, acc=acc, out_dtype=out_dtype, arch=arch,
                                         stages=stages, schedule="persistent", **loader, **order)
                    except SpecError as e:
                        errors.append(str(e))
    mn = [n for n, mj in (("a", a_major), ("b", b_major)) if mj is Major.MN]
    hint = f"; pass {' and '.join(f'{x}.contiguous()' for x in mn)} (K-major)" if mn else ""
    raise ArgumentError(f"no {dtype} kernel for {arch} reads A {a_major.value}-major and B {b_major.value}-major: "
                        f"{errors[-1] if errors else 'no legal tile'}{hint}")


def _check_out_dtype(dtype: str, out_dtype: str | None) -> str:
    """The output type for ``dtype`` inputs (``out_dtype`` or the default), or DTypeError."""
    if dtype not in _DEFAULT_OUT:
        raise DTypeError(f"no ptxgen kernel takes {dtype} inputs: one of {', '.join(_DEFAULT_OUT)}")
    out = out_dtype or _DEFAULT_OUT[dtype]
    legal = ("s32",) if DType(dtype).is_integer else ("f32", "f16", "bf16")
    if out not in legal:
        raise DTypeError(f"{dtype} inputs give {'/'.join(legal)} outputs, not {out}")
    return out


def select_spec(dtype: str, arch: str, m: int, n: int, k: int, a_major: Major = Major.K, b_major: Major = Major.K,
                out_dtype: str | None = None, *, lda: int | None = None, ldb: int | None = None) -> tuple[TileSpec, str]:
    """(spec, why) of :func:`select_choice` without the swap-ab rule: a spec that is called as ``kernel(a, b, out)``."""
    spec, why, _ = select_choice(dtype, arch, m, n, k, a_major, b_major, out_dtype, lda=lda, ldb=ldb, allow_swap=False)
    return spec, why


def select_choice(dtype: str, arch: str, m: int, n: int, k: int, a_major: Major = Major.K, b_major: Major = Major.K,
                  out_dtype: str | None = None, *, lda: int | None = None, ldb: int | None = None,
                  allow_swap: bool = True, device=None) -> tuple[TileSpec, str, bool]:
    """(spec, why, swap_ab): :func:`_select_choice`'s pick, with an f16 accumulator inside :func:`accumulating_f16`."""
    return _accumulated(dtype, _select_choice(dtype, arch, m, n, k, a_major, b_major, out_dtype, lda=lda, ldb=ldb,
                                              allow_swap=allow_swap, device=device))


def _select_choice(dtype: str, arch: str, m: int, n: int, k: int, a_major: Major = Major.K, b_major: Major = Major.K,
                   out_dtype: str | None = None, *, lda: int | None = None, ldb: int | None = None,
                   allow_swap: bool = True, device=None) -> tuple[TileSpec, str, bool]:
    """(spec, why) as :func:`gemm` picks it: the tuned table (``ptxgen.runtime.choose``) for K-major
    f16/bf16/e4m3, else :func:`default_spec` with the operands' majorness. ``dtype`` is the spec's input
    type (``tf32`` for float32 arrays); ``out_dtype`` defaults to the input type (f32 for tf32, bf16 for FP8,
    s32 for integers). ``lda``/``ldb``: the K-major operands' row pitch in elements (None: tight rows); the
    choice depends on whether rows start on a 32-byte sector (``ptxgen.runtime.choose``). The third value: the spec
    is swap-AB's (``allow_swap``; chosen_by swap-ab): called as ``kernel(b, a, out.T)``, its D M-major. ``device``: the
    ``runtime.launch.gpu.Device`` the call runs on (None: the first GPU in use, else none known, e.g. ``gemm_spec(arch=...)``
    on a machine with no GPU): its calibration, tuning table and SM count (``runtime.choose.calibration``)."""
    out = _check_out_dtype(dtype, out_dtype)
    if dtype in _TUNED_DTYPES and a_major is Major.K and b_major is Major.K:
        from ..runtime.choose import Problem, choose
        from ..runtime.choose.calibrate import current_device
        from ..runtime.choose.tune import TuningTableError

        try:  # the call's GPU picks the calibration, tuning table and SM count (none known: the reference ones)
            c = choose(Problem(dtype, arch, m, n, k, lda, ldb, allow_swap), current_device(device or PLAN_DEVICE.get()))
            if c.spec.stream_k > 1 and not GEMM_STREAM_K:
                return (_with_out_dtype(make_spec(**{**c.spec.to_json(), "stream_k": 1}), out),
                        c.why + "; run without stream-K (ptxgen.api.select.GEMM_STREAM_K is off)", c.swap_ab)
            return _with_out_dtype(c.spec, out), c.why, c.swap_ab
        except TuningTableError:  # a table named in $PTXGEN_TUNING that cannot be used: as `ptxgen bench` says
            raise
        except (SpecError, IndexError, ValueError):
            pass
    mn = [f"{x} is {'M' if x == 'A' else 'N'}-major" for x, mj in (("A", a_major), ("B", b_major)) if mj is Major.MN]
    if MN_MAJOR_PICKS and mn and dtype in _MN_PICK_DTYPES:
        picked = _mn_major_pick(dtype, arch, m, n, k, a_major, b_major, out, device)
        if picked is not None:
            return picked[0], picked[1] + f" (the chooser's kernel for K-major operands, {' and '.join(mn)})", False
    why = (f"default: {' and '.join(mn)} (the tuned table covers K-major A and B)" if mn
           else f"default: no tuned {dtype} kernels")
    if promotes(dtype, arch):
        why += "; " + PROMOTE_WHY
    return default_spec(dtype, arch, a_major, b_major, out), why, False


def _mn_major_pick(dtype: str, arch: str, m: int, n: int, k: int, a_major: Major, b_major: Major, out: str, device):
    """The chooser's pick for the same problem with K-major operands, its A and B retyped to the majorness passed
    (128-byte swizzle, atoms adjacent along K as :func:`default_spec` lays MN-major operands out), no swap-AB; None where
    the rules refuse that kernel with these operands. Measured on the H100 (runs/2026-12-06-h100-new-forms): the MLP
    training step's transposed-operand GEMMs ran 645-702 TFLOP/s on :func:`default_spec`'s kernel, cuBLAS 780."""
    from ..runtime.choose import Problem, choose
    from ..runtime.choose.calibrate import current_device

    try:
        line = -(-k // 64) * 64  # the K-major rules' row pitch: on a 128-byte line, so no rows-off-a-sector variant
        c = choose(Problem(dtype, arch, m, n, k, line, line, False), current_device(device or PLAN_DEVICE.get()))
        fields = {**c.spec.to_json(), **{f"{x}": "mnmajor-sw128" for x, mj in (("a", a_major), ("b", b_major)) if mj is Major.MN},
                  **{f"{x}_order": "k" for x, mj in (("a", a_major), ("b", b_major)) if mj is Major.MN}}
        if c.spec.stream_k > 1 and not GEMM_STREAM_K:
            fields["stream_k"] = 1
        return _with_out_dtype(spec_or_direct_store(fields), out), c.why
    except (SpecError, IndexError, ValueError):
        return None


def gemm_spec(a, b, out=None, *, out_dtype: str | None = None, arch: str | None = None) -> tuple[TileSpec, str]:
    """(spec, why) that :func:`gemm` would use for these arrays (``arch`` None: the GPU's). A spec with an M-major D
    (``spec.d_major``, the swap-ab rule) is called with the operands swapped: ``kernel(b, a, out.T)``."""
    ai, bi = read_array(a, "a"), read_array(b, "b")
    oi = None if out is None else read_array(out, "out")
    spec, why, _ = _gemm_choice(ai, bi, oi, out_dtype, arch, allow_swap=True)
    return spec, why


def _gemm_spec(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, arch: str | None) -> tuple[TileSpec, str]:
    """(spec, why) called as ``kernel(a, b, out)`` (no swap-ab): the fused, batched and grouped paths."""
    spec, why, _ = _gemm_choice(ai, bi, oi, out_dtype, arch, allow_swap=False)
    return spec, why


def check_operand_pair(ai: ArrayInfo, bi: ArrayInfo) -> None:
    """A (M x K) and B (N x K) of ``out = a @ b.T``: 2-D, one input type that a kernel takes, one K; else ArgumentError
    or DTypeError (what is wrong whatever the layout)."""
    _check_2d(ai, "A: M x K")
    _check_2d(bi, "B: N x K; out = a @ b.T")
    for info in (ai, bi):
        if info.dtype not in _INPUT_ARRAY_DTYPES:
            raise DTypeError(f"{info.name} has dtype {_dtype_words(info.dtype)}; ptxgen kernels take "
                             + ", ".join(_dtype_words(t) for t in _INPUT_ARRAY_DTYPES))
    if ai.dtype != bi.dtype:
        raise DTypeError(f"a is {_dtype_words(ai.dtype)} but b is {_dtype_words(bi.dtype)}: both inputs have one type")
    if ai.shape[1] != bi.shape[1]:
        raise ArgumentError(f"a is {ai.shape[0]} x {ai.shape[1]} and b is {bi.shape[0]} x {bi.shape[1]}: both must have K "
                            "columns (out = a @ b.T)")


def _gemm_choice(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None, arch: str | None,
                 allow_swap: bool) -> tuple[TileSpec, str, bool]:
    check_operand_pair(ai, bi)
    if out_dtype is None and oi is not None:
        out_dtype = oi.dtype
    for info in (ai, bi):
        _check_strides(info)
    a_major, b_major = operand_major(ai), operand_major(bi)
    _check_out_dtype(_INPUT_ARRAY_DTYPES[ai.dtype], out_dtype)  # before looking for a GPU
    dev = None
    if arch is None:  # the arrays' device: a machine may hold GPUs of other kinds
        dev = streams.call_device((ai, bi, oi))
        arch = dev.arch.value
    (m, k), n = ai.shape, bi.shape[0]
    lda, ldb = (_row_pitch(x) for x in (ai, bi))
    return select_choice(_INPUT_ARRAY_DTYPES[ai.dtype], arch, max(m, 1), max(n, 1), max(k, 1), a_major, b_major, out_dtype,
                         lda=lda, ldb=ldb, allow_swap=allow_swap, device=dev)


def _row_pitch(info: ArrayInfo) -> int | None:
    """A K-major operand's row pitch in elements as the kernel will read it, or None (tight rows assumed: MN-major,
    one row, or rows gemm packs because they do not start 16-byte aligned)."""
    rows, cols = info.shape
    s0, s1 = info.strides
    if rows <= 1 or s1 != 1 or s0 < cols or (s0 * info.itemsize) % 16:
        return None
    return s0


def narrow_spec_for_arrays(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None,
                           copy_bytes: int, arch: str | None = None) -> tuple[TileSpec, str]:
    """(spec, why) for operands whose rows (or data) start only ``copy_bytes`` (8 or 4) aligned: the default tile
    with the cp.async loader copying that many bytes at a time (the tuned table's kernels load with TMA, which
    needs 16). Raises ArgumentError or DTypeError where no such kernel exists (the caller packs instead).
    ``arch`` None: the GPU's (``ptxgen.api.plan`` passes the one it plans for)."""
    _check_2d(ai, "A: M x K")
    _check_2d(bi, "B: N x K; out = a @ b.T")
    dtype = _INPUT_ARRAY_DTYPES.get(ai.dtype)
    if dtype is None or ai.dtype != bi.dtype:
        raise DTypeError(f"no ptxgen kernel takes {ai.dtype} x {bi.dtype} inputs")
    out = out_dtype or (oi.dtype if oi is not None else None) or _DEFAULT_OUT[dtype]
    if arch is None:
        arch = streams.call_device((ai, bi, oi)).arch.value
    spec = default_spec(dtype, arch, operand_major(ai), operand_major(bi), out, copy_bytes)
    return spec, (f"default with the cp.async loader, {copy_bytes}-byte copies: operand rows start only {copy_bytes}-byte "
                  "aligned" + (f"; {ACC16_WHY}" if _acc16(dtype) else ""))


def batched_spec_for_arrays(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None,
                            arch: str | None = None) -> tuple[TileSpec, str]:
    """(spec, why) for batched arrays (``a`` B x M x K, ``b`` B x N x K or shared): the kernel a 2-D call with one
    batch's planes would get, made batched (``batch`` a or ab; the direct epilogue, no cluster, split-K or fused chain,
    as derived for batched kernels), else the default tile with the planes' majorness, batched."""
    from .arrays.batched import batch_kind, plane, shared_b

    kind = batch_kind(ai, bi)
    a2, b2 = plane(ai), (shared_b(bi) if kind.value == "a" else plane(bi))
    o2 = plane(oi) if oi is not None and oi.ndim == 3 else oi
    spec, why = _gemm_spec(a2, b2, o2, out_dtype, arch)
    fields = {**spec.to_json(), "batch": kind.value, "epilogue": "direct", "cluster": "1x1", "split_k": 1, "cta_group": 1,
              "stream_k": 1}  # stream-K is not derived for batched kernels
    try:
        return make_spec(**fields), f"{why}; batched over {ai.shape[0]} batches (3-D tensor maps, one launch)"
    except SpecError:
        d = default_spec(spec.dtype.value, spec.arch.value, spec.a.major, spec.b.major, spec.out_dtype.value)
        return (make_spec(**{**d.to_json(), "batch": kind.value}),
                f"default tile batched over {ai.shape[0]} batches ({spec.kernel_name} has no batched form)")


def choose_for_arrays(ai: ArrayInfo, bi: ArrayInfo, oi: ArrayInfo | None, out_dtype: str | None,
                      arch: str | None = None) -> tuple[TileSpec, str, bool]:
    """The one selection entry point of the dispatch cache: (spec, why, swap_ab) for these arrays on this GPU (``arch``
    None; ``ptxgen.api.plan`` passes the arch it plans for); swap_ab: launch the spec (an M-major D) as
    ``kernel(b, a, out.T)`` (runtime.choose's swap-ab rule)."""
    return _gemm_choice(ai, bi, oi, out_dtype, arch, allow_swap=True)
