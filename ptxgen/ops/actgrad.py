"""A Linear layer's activation backward and bias gradient in one pass over its tensors: dz = dy x act'(z) and
dbias = dz summed over the rows (the 16-bit values as stored, accumulated in f32), by two kernels written with the
public authoring layer (templates/act_grad.cu.j2, templates/column_sum.cu.j2). In torch eager the same step is two
passes: the activation's backward (reads dy and z, writes dz) and the bias' reduction (reads dz again); here dz is
summed while it is written (each CTA's column sums to its own row of an f32 scratch array) and a second, small
launch adds those rows in a fixed order (the result does not depend on timing).

:func:`eligible` says when the kernels take a call (CUDA bf16/f16 tensors on an sm_90 GPU, rows of whole 16-byte cells);
``torch.ops.ptxgen.activation_grad`` runs torch's two operators for everything else (ptxgen.ops.torch_ops), and
for everything while :data:`ENABLED` is off (the default)."""

from __future__ import annotations

import threading

# torch.ops.ptxgen.activation_grad and gemm_aux's backward use these kernels (True), or torch's activation backward and
# sum (False). Off: on the H100 the kernels ran 0.95x / 0.70x torch's two operators at 8192 x 14336 / 8192 x 4096 and
# the MLP step gained nothing (runs/2026-12-06-h100-one-pass-grad-few-row).
ENABLED = False
THREADS = 128  # a CTA of the first kernel: 128 threads x 8 columns = 1024 columns
COLS_PER_THREAD = 8  # 16 bytes of 16-bit elements: one vector load of dy and of z, one store of dz
CTAS_PER_SM = 12  # the first kernel's grid aims at this many CTAs an SM (rows split into that many blocks)
ROWS_IN_FLIGHT = 4  # rows whose loads a thread issues before it uses any (8 loads of 16 bytes in flight a thread)
MIN_ROWS_PER_CTA = 16
SUM_COLS, SUM_WAYS = 32, 8  # the second kernel: a CTA of 32 x 8 threads adds 32 columns, 8 rows at a time
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu")
DTYPES = ("bf16", "f16")
BIAS_DTYPES = ("bf16", "f16", "f32")
_TO_F32 = {"bf16": "__uint_as_float(static_cast<unsigned>(h) << 16)", "f16": "f16_bits_to_f32(h)"}
_FROM_F32 = {"bf16": "f32_to_bf16_bits(x)", "f16": "f32_to_f16_bits(x)"}
_STORE = {"bf16": "f32_to_bf16_bits(t)", "f16": "f32_to_f16_bits(t)", "f32": "t"}
_BUILT: dict = {}
_LOCK = threading.Lock()


def grad_kernel(act: str, dtype: str):
    """The ``ptxgen.author.Kernel`` writing dz = dy x act'(z) (``dtype`` bf16 or f16) and per-CTA column sums:
    dy, z, dz, partial, M, N, rows_per_cta, ld_dy, ld_z, ld_dz (elements)."""
    from ..author import Kernel, Param, template_file
    from ..emit.views.chain import dact_c_body
    from ..isa.epiops import Activation

    if act not in ACTIVATIONS or dtype not in DTYPES:
        raise ValueError(f"activation grad: {', '.join(ACTIVATIONS)} on {' or '.join(DTYPES)} tensors, not {act} on {dtype}")
    params = (Param("dy", "ptr", dtype=dtype), Param("z", "ptr", dtype=dtype), Param("dz", "ptr", dtype=dtype, const=False),
              Param("partial", "ptr", dtype="f32", const=False), Param("M", "i32"), Param("N", "i32"),
              Param("rows_per_cta", "i32"), Param("ld_dy", "u64"), Param("ld_z", "u64"), Param("ld_dz", "u64"))
    return Kernel(f"ptxgen_act_grad_{act}_{dtype}", template_file("act_grad.cu.j2"), params, block=(THREADS, 1, 1),
                  shared_bytes=0, expect_sass={"HGMMA": 0},
                  context={"act": act, "dact_body": dact_c_body(Activation(act)), "to_f32": _TO_F32[dtype],
                           "from_f32": _FROM_F32[dtype], "cols_per_thread": COLS_PER_THREAD,
                           "rows_in_flight": ROWS_IN_FLIGHT})


def sum_kernel(out_dtype: str):
    """The ``ptxgen.author.Kernel`` adding the rows of a parts x N f32 array into ``out`` (bf16, f16 or f32):
    partial, out, N, parts."""
    from ..author import Kernel, Param, template_file

    if out_dtype not in BIAS_DTYPES:
        raise ValueError(f"column sum: outputs are {', '.join(BIAS_DTYPES)}, not {out_dtype}")
    params = (Param("partial", "ptr", dtype="f32"), Param("out", "ptr", dtype=out_dtype, const=False), Param("N", "i32"),
              Param("parts", "i32"))
    return Kernel(f"ptxgen_column_sum_{out_dtype}", template_file("column_sum.cu.j2"), params, block=(SUM_COLS, SUM_WAYS, 1),
                  shared_bytes=0, expect_sass={"HGMMA": 0},
                  context={"cols": SUM_COLS, "ways": SUM_WAYS, "row_pitch": SUM_COLS + 1, "store": _STORE[out_dtype]})


def built(key: tuple):
    """The compiled kernel of ``key`` (("grad", act, dtype) or ("sum", out_dtype); once per process, the compile cache
    across processes)."""
    k = _BUILT.get(key)
    if k is None:
        from ..author import build

        with _LOCK:
            k = _BUILT.get(key)
            if k is None:
                k = _BUILT[key] = build(grad_kernel(*key[1:]) if key[0] == "grad" else sum_kernel(*key[1:]))
    return k


def grid_plan(m: int, n: int, sm_count: int) -> tuple[int, int, int]:
    """(CTAs along the columns, row blocks, rows per CTA) of the first kernel for an M x N dz: every column in a CTA,
    the rows split so that the grid holds about CTAS_PER_SM CTAs an SM, at least MIN_ROWS_PER_CTA rows a CTA."""
    col_ctas = -(-n // (THREADS * COLS_PER_THREAD))
    blocks = max(1, min(m // MIN_ROWS_PER_CTA, -(-(CTAS_PER_SM * sm_count) // col_ctas)))
    rows = -(-m // blocks)
    return col_ctas, -(-m // rows), rows


def _name(t) -> str:
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(str(t.dtype).removeprefix("torch."), "")


def _cells(t) -> bool:
    """2-D, unit column stride, rows a whole number of 16-byte cells apart, 16-byte aligned."""
    return (t.dim() == 2 and t.stride(1) == 1 and t.stride(0) % COLS_PER_THREAD == 0
            and t.data_ptr() % 16 == 0)


def eligible(dy, z, act: str, bias_dtype) -> bool:
    """Whether the kernels take dz = dy x act'(z) with a bias gradient of ``bias_dtype``: CUDA tensors of one 16-bit
    type and shape M x N (N a multiple of 8, M and N at least 1), rows of whole 16-byte cells, an activation with a
    derivative, a 16- or 32-bit float bias, a GPU of compute capability 9.0 (the kernels are built for sm_90a)."""
    from ..api.launch import streams

    if act not in ACTIVATIONS or not (dy.is_cuda and z.is_cuda) or dy.device != z.device:
        return False
    if _name(dy) not in DTYPES or dy.dtype != z.dtype or dy.shape != z.shape or dy.dim() != 2:
        return False
    m, n = dy.shape
    if m == 0 or n == 0 or n % COLS_PER_THREAD or not (_cells(dy) and _cells(z)):
        return False
    if {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32"}.get(str(bias_dtype)) is None:
        return False
    try:
        return streams.require_gpu(dy.device.index).cc == (9, 0)
    except Exception:  # noqa: BLE001 - a GPU ptxgen cannot use (NoGPU, a driver error): torch's operators take the call
        return False


def activation_grad(torch, dy, z, act: str, bias_dtype):
    """(dz, dbias) for tensors :func:`eligible` takes: dz a new M x N tensor of dy's type (contiguous), dbias of length
    N in ``bias_dtype``; two launches on the current stream of dy's device, nothing synchronises."""
    from ..api.launch import streams

    m, n = dy.shape
    col_ctas, blocks, rows = grid_plan(m, n, streams.require_gpu(dy.device.index).sm_count)
    dz = torch.empty((m, n), device=dy.device, dtype=dy.dtype)
    partial = torch.empty((blocks, n), device=dy.device, dtype=torch.float32)
    dbias = torch.empty((n,), device=dy.device, dtype=bias_dtype)
    grad, total = built(("grad", act, _name(dy))), built(("sum", _name(dbias)))
    if dy.device.index == torch.cuda.current_device():
        _launch(grad, total, dy, z, dz, partial, dbias, col_ctas, blocks, rows)
    else:
        with torch.cuda.device(dy.device):
            _launch(grad, total, dy, z, dz, partial, dbias, col_ctas, blocks, rows)
    return dz, dbias


def _launch(grad, total, dy, z, dz, partial, dbias, col_ctas: int, blocks: int, rows: int) -> None:
    m, n = dy.shape
    grad(dy, z, dz, partial, m, n, rows, int(dy.stride(0)), int(z.stride(0)), n, grid=(col_ctas, blocks, 1))
    total(partial, dbias, n, blocks, grid=(-(-n // SUM_COLS), 1, 1))
