"""Autograd formulas of the ``torch.ops.ptxgen`` operators (registered by ``ptxgen.ops.torch_ops`` with
``torch.library.register_autograd``): every backward product runs through the same operators, so on a GPU it runs
on ptxgen's kernels and under ``torch.compile`` it traces like the forward.

``gemm(a, b, out_dtype, bias, activation)``: y = act(z), z = a @ b.T + bias (a M x K or B x M x K, b N x K):
- dz = dy for no activation; relu's derivative from the saved output (y > 0); gelu_tanh, gelu_erf and silu need the
  pre-activation z, which this operator's kernel does not write: the backward recomputes it (one more GEMM with the
  bias fused). ``gemm_aux`` (below) is the form whose kernel writes z too; ``ptxgen.nn.Linear`` trains through it.
- da = dz @ b: ``gemm(dz, b.t())`` (B read N-major, the transposed view);
- db = dz.T @ a: ``gemm(dz.t(), a.t())`` (both operands MN-major);
- dbias = dz summed over the rows (f32 accumulation, one reduction writing the bias' type: :func:`column_sum`).
The activation's derivative multiplies the *input* dz of this operator's two backward GEMMs, and the bias gradient is
a column sum of that input: neither is an epilogue of those GEMMs' outputs, so here they run as torch element-wise
and reduction kernels. The derivative is an epilogue of the *next* layer's dX GEMM, whose output dz is: ``gemm_aux``'s
``a_pre`` takes it there.

``gemm_aux(a, b, out_dtype, bias, activation, a_pre, a_activation)``: (y, z), y = act(z), z written by the same
kernel (the chain's ``aux``), so nothing is recomputed:
- dz = dy x act'(z) (torch's element-wise backward of the activation, reading the saved z) plus the gradient that
  reaches z itself (from a next layer that fused this derivative, below);
- with ``a_pre`` (``a`` = a_activation(a_pre), the previous layer's output and its saved pre-activation): the gradient
  goes to ``a_pre``, ``gemm_dact(dz, b.t(), a_pre, a_activation)`` = (dz @ b) x a_activation'(a_pre), the previous
  layer's derivative fused into this dX GEMM's epilogue (the chain's ``dact``); ``a`` gets none (it is a function of
  ``a_pre``; a gradient that reaches it by another use still flows into the previous layer's y);
- otherwise da = ``gemm(dz, b.t())``; db = ``gemm(dz.t(), a.t())``; dbias the column sum of dz, as for ``gemm``;
- with a bias and an activation and ``actgrad.ENABLED`` set (off by default), dz and dbias come from one
  operator, ``activation_grad`` (in eager mode, where dy, z and a have one type and nothing else reaches z): on the
  GPU one pass over dy and z that writes dz and sums it as it goes (ptxgen.ops.actgrad), where torch eager runs the
  activation's backward and then reads dz again for the bias' sum.

``grouped_gemm(a, b, offs, out_dtype)``: rows of group g of y are a[rows g] @ b[g].T:
- da through the N-major grouped form: ``grouped_gemm(dy, b.transpose(1, 2), offs, zero_tail=True)``, rows past the
  last group 0 (zeroed on the GPU by ptxgen.ops.tailzero's kernel, the groups' rows written by the product);
- db through ``grouped_gemm_k(dy.t(), a.t(), offs)``: db[g] = dy[rows g].T @ a[rows g], the K-grouped form.

``scaled_gemm(a, b, scale_a, scale_b, out_dtype, bias)``: y = (a x sa) @ (b x sb).T + bias, a and b FP8 (f64 on the CPU
reference), sa M x 1, sb 1 x N (torch._scaled_mm's row-wise recipe). With G = (dy x sb) @ b (M x K) and
H = (dy x sa).T @ a (N x K), both ptxgen GEMMs on bf16 copies of the FP8 operands (exact: bf16 holds every e4m3 and
e5m2 value):
- dsa = rowsum(a x G) (shaped as scale_a), dsb = rowsum(b x H) (shaped as scale_b), dbias = column sum of dy;
- da = sa x G and db = sb x H, returned only where ``a`` / ``b`` have a float dtype of 16 or more bits (the CPU
  reference's f64, checked by gradcheck). FP8 ``a`` and ``b`` get none: autograd gives an input a gradient of its
  own dtype, and an FP8 gradient is not one anybody trains with. torch's convention: torch._scaled_mm has no
  derivative for its FP8 operands, and torchao's float8 training differentiates the high-precision tensors around the
  cast (its autograd.Function quantizes inside the forward; the gradient passes the cast unchanged).
  :func:`scaled_input_grads` gives da and db in bf16 (ptxgen's bf16 GEMMs): the gradients of the FP8 operands'
  values, or with ``dequantized=True`` G and H themselves, the gradients of a x sa and b x sb, which is what a float8
  training step passes through its casts to the high-precision x and w (a = x / sa: dL/dx = dL/da / sa = G).

``scaled_grouped_gemm(a, b, scale_a, scale_b, offs, out_dtype)``: rows of group g of y are
(a[rows g] x sa[rows g]) @ (b[g] x sb[g]).T (a M_total x K, b G x N x K, sa M_total, sb G x N): the same formula
grouped. G = dy @ (b x sb) through the N-major grouped form (M_total x K, rows past the last group 0) and
H[g] = (dy x sa)[rows g].T @ a[rows g] through the K-grouped form (G x N x K), both ptxgen's grouped kernels on bf16
copies of the FP8 operands (b x sb rounded to bf16 once, as the dense form rounds dy x sb):
- dsa = rowsum(a x G), dsb[g] = rowsum(b[g] x H[g]); da = sa x G, db[g] = sb[g] x H[g] where a / b are float
  tensors (the CPU reference's f64), none for FP8 (as above). :func:`scaled_grouped_input_grads` gives da and db in
  bf16, or G and H with ``dequantized=True`` (ptxgen.nn.GroupedLinear(fp8="rowwise")'s backward).
"""

from __future__ import annotations

import sys

from .opsref import activation_backward, canonical_activation

_TRAINABLE = ("float16", "bfloat16", "float32", "float64")


def _torch():
    return sys.modules["torch"]


def _check_trainable(*tensors) -> None:
    for t in tensors:
        name = str(t.dtype).removeprefix("torch.")
        if name not in _TRAINABLE:
            raise NotImplementedError(f"ptxgen's autograd takes f16, bf16 or f32 tensors (f64 on the CPU reference), not "
                                      f"{name}: FP8 and integer products are forward-only")


def _row_major(t):
    """``t`` with stride 1 along its last dimension (a copy only where it has none)."""
    return t if t.dim() == 0 or t.shape[-1] <= 1 or t.stride(-1) == 1 else t.contiguous()


def _needs(ctx, n: int) -> tuple:
    """ctx.needs_input_grad over all ``n`` arguments of the schema (a call may leave the trailing defaults out; the
    backward then returns as many gradients as it was given arguments)."""
    return (*ctx.needs_input_grad, *(False,) * (n - len(ctx.needs_input_grad)))


def column_sum(dz, dtype):
    """The bias gradient: ``dz`` summed over its rows, in ``dtype`` (the bias' type), accumulated in f32 (f64 for an f64
    ``dz``). One reduction kernel that writes ``dtype`` where that is ``dz``'s own type (torch's 16-bit sum accumulates
    in f32, on CUDA and on the CPU: nn.Linear's bias gradient is this kernel) or the accumulator's; a separate cast only
    for another type (an f16 ``dz`` with a bf16 bias)."""
    torch = _torch()
    acc = torch.float64 if dz.dtype == torch.float64 else torch.float32
    if dtype == dz.dtype or dtype == acc:
        return dz.sum(0, dtype=dtype)
    return dz.sum(0, dtype=acc).to(dtype)


def activation_and_bias_grad(dy, z, act: str, a_dtype, bias_dtype):
    """(dz, dbias) for dz = dy x act'(z) as a row-major M x N of ``a_dtype`` and its column sum in ``bias_dtype``, by
    ``torch.ops.ptxgen.activation_grad`` (one pass over dy and z on the GPU: ptxgen.ops.actgrad), or (None, None) where
    the caller's own two steps apply: while ``actgrad.ENABLED`` is off (the default: the kernels did not beat
    torch's two operators on the H100), under torch.compile (the activation's backward and the sum stay torch operators
    for inductor to schedule) and where dy, z and ``a_dtype`` are not one type."""
    from . import actgrad

    torch = _torch()
    if not actgrad.ENABLED or torch.compiler.is_compiling() or not (dy.dtype == z.dtype == a_dtype):
        return None, None
    n = z.shape[-1]
    token = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}.get(bias_dtype)
    if token is None:
        return None, None
    return torch.ops.ptxgen.activation_grad(dy.reshape(-1, n), z.reshape(-1, n), act, token)


def _aligned_rows(t):
    """A 2-D ``t`` row-major with rows starting 16 bytes apart (a padded copy where they do not): what the grouped kernels
    and torch's K-grouped kernel read without a copy of their own (ptxgen.gemm packs other layouts itself)."""
    q = 16 // t.element_size()
    rows_ok = t.shape[0] <= 1 or t.stride(0) % q == 0
    if t.shape[-1] <= 1 or (t.stride(-1) == 1 and rows_ok and t.storage_offset() % q == 0):
        return t
    out = t.new_empty_strided(tuple(t.shape), (max(q, -(-t.shape[1] // q) * q), 1))
    return out.copy_(t)


# ---- gemm ------------------------------------------------------------------------------------------------------

def gemm_setup_context(ctx, inputs, output) -> None:
    a, b, out_dtype, bias, act = inputs
    ctx.act = canonical_activation(act)
    ctx.out_dtype = out_dtype
    ctx.save_for_backward(a, b, bias, output if ctx.act == "relu" else None)


def _activation_grad(ctx, dy, a, b, bias, y):
    """dL/dz from dL/dy (see the module)."""
    torch = _torch()
    aten = torch.ops.aten
    if ctx.act == "none":
        return dy
    if ctx.act == "relu":
        return aten.threshold_backward(dy, y, 0)
    z = torch.ops.ptxgen.gemm(a, b, ctx.out_dtype, bias, None)  # the pre-activation, recomputed
    dy = dy.to(z.dtype)
    if ctx.act == "silu":
        return aten.silu_backward(dy, z)
    return aten.gelu_backward(dy, z, approximate="tanh" if ctx.act == "gelu_tanh" else "none")


def gemm_backward(ctx, dy):
    torch = _torch()
    a, b, bias, y = ctx.saved_tensors
    if b.dim() == 3:
        raise NotImplementedError("autograd of torch.ops.ptxgen.gemm's batched form (a 3-D b) is not registered; "
                                  "use a 2-D b (shared weights) or torch.bmm")
    _check_trainable(a, b)
    need = _needs(ctx, 5)
    need_a, need_b, need_bias = need[0], need[1], need[3]
    dz = _activation_grad(ctx, dy, a, b, bias, y)
    k, n = a.shape[-1], b.shape[0]
    dz2 = _row_major(dz.reshape(-1, n).to(a.dtype))
    da = db = dbias = None
    if need_a:
        da = torch.ops.ptxgen.gemm(dz2, b.t()).reshape(a.shape)
    if need_b:
        db = torch.ops.ptxgen.gemm(dz2.t(), a.reshape(-1, k).t()).to(b.dtype)
    if need_bias and bias is not None:
        dbias = column_sum(dz2, bias.dtype)
    return (da, db, None, dbias, None)[:len(ctx.needs_input_grad)]


# ---- gemm_aux ---------------------------------------------------------------------------------------------------

def aux_setup_context(ctx, inputs, output) -> None:
    a, b, _, bias, act, a_pre, a_act = (*inputs, *(None,) * (7 - len(inputs)))
    ctx.act, ctx.a_act = canonical_activation(act), canonical_activation(a_act)
    ctx.set_materialize_grads(False)  # a y or z nobody differentiates arrives as None, not as a tensor of zeros
    ctx.save_for_backward(a, b, bias, output[1], a_pre)


def aux_backward(ctx, dy, dz_in):
    torch = _torch()
    a, b, bias, z, a_pre = ctx.saved_tensors
    n_in = len(ctx.needs_input_grad)
    if dz_in is not None and dz_in.numel() == 0:  # no activation: z is 0 x N, and so is its gradient
        dz_in = None
    if dy is None and dz_in is None:
        return (None,) * n_in
    _check_trainable(a, b)
    need = _needs(ctx, 7)
    k, n = a.shape[-1], b.shape[0]
    dz2 = dbias = None
    if dz_in is None and ctx.act != "none" and need[3] and bias is not None:
        dz2, dbias = activation_and_bias_grad(dy, z, ctx.act, a.dtype, bias.dtype)
    if dz2 is None:
        dz = None
        if dy is not None:
            dz = activation_backward(dy.to(z.dtype), z, ctx.act) if ctx.act != "none" else dy
        if dz_in is not None:
            dz = dz_in if dz is None else dz + dz_in
        dz2 = _row_major(dz.reshape(-1, n).to(a.dtype))
        if need[3] and bias is not None:
            dbias = column_sum(dz2, bias.dtype)
    da = db = da_pre = None
    if a_pre is not None and need[5]:
        da_pre = torch.ops.ptxgen.gemm_dact(dz2, b.t(), a_pre, ctx.a_act).reshape(a_pre.shape)
    elif need[0]:
        da = torch.ops.ptxgen.gemm(dz2, b.t()).reshape(a.shape)
    if need[1]:
        db = torch.ops.ptxgen.gemm(dz2.t(), a.reshape(-1, k).t()).to(b.dtype)
    return (da, db, None, dbias, None, da_pre, None)[:n_in]


# ---- grouped_gemm ----------------------------------------------------------------------------------------------

def grouped_setup_context(ctx, inputs, output) -> None:
    a, b, offs = inputs[:3]
    ctx.save_for_backward(a, b, offs)


def grouped_input_grad(dy, b, offs):
    """dx of the grouped product: ``dy[rows g] @ b[g]`` through the N-major grouped form, the rows past the last group
    0 (no output depends on those rows of the input): the operator's ``zero_tail`` (those rows zeroed by a kernel that
    reads offs on the GPU and does nothing where every row belongs to a group; no fill of the whole of dx first)."""
    return _torch().ops.ptxgen.grouped_gemm(dy, b.transpose(1, 2), offs, None, True)


def grouped_backward(ctx, dy):
    torch = _torch()
    a, b, offs = ctx.saved_tensors
    _check_trainable(a, b)
    need_a, need_b = _needs(ctx, 5)[:2]
    dy = _aligned_rows(dy.to(a.dtype))
    da = db = None
    if need_a:
        da = grouped_input_grad(dy, b, offs)
    if need_b:
        db = torch.ops.ptxgen.grouped_gemm_k(dy.t(), _aligned_rows(a).t(), offs).to(b.dtype)
    return (da, db, None, None, None)[:len(ctx.needs_input_grad)]


# ---- scaled_gemm -----------------------------------------------------------------------------------------------

_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _is_fp8(t) -> bool:
    return str(t.dtype).removeprefix("torch.") in _FP8


def scaled_setup_context(ctx, inputs, output) -> None:
    a, b, sa, sb, _, bias = (*inputs, *(None,) * (6 - len(inputs)))
    ctx.save_for_backward(a, b, sa, sb)
    ctx.has_bias = bias is not None
    ctx.bias_dtype = None if bias is None else bias.dtype


def _scaled_products(dy, a, b, sa, sb, want_g: bool, want_h: bool):
    """G = (dy x sb) @ b and H = (dy x sa).T @ a through ptxgen's GEMMs (torch.ops.ptxgen.gemm), in bf16 for FP8
    operands (f64 on the CPU reference)."""
    torch = _torch()
    m, n = a.shape[0], b.shape[0]
    work = torch.bfloat16 if _is_fp8(a) or _is_fp8(b) else a.dtype
    acc = torch.float64 if work == torch.float64 else torch.float32
    dyf = dy.to(acc)
    g = h = None
    if want_g:
        g = torch.ops.ptxgen.gemm(_row_major((dyf * sb.reshape(1, n).to(acc)).to(work)), b.to(work).t(),
                                  out_dtype=None if work == torch.float64 else "f32")
    if want_h:
        h = torch.ops.ptxgen.gemm(_row_major((dyf * sa.reshape(m, 1).to(acc)).to(work)).t(), a.to(work).t(),
                                  out_dtype=None if work == torch.float64 else "f32")
    return g, h


def scaled_backward(ctx, dy):
    a, b, sa, sb = ctx.saved_tensors
    need = _needs(ctx, 6)
    need_a, need_b = need[0] and not _is_fp8(a), need[1] and not _is_fp8(b)
    m, n = a.shape[0], b.shape[0]
    g, h = _scaled_products(dy, a, b, sa, sb, need_a or need[2], need_b or need[3])
    da = db = dsa = dsb = dbias = None
    if need_a:
        da = (g * sa.reshape(m, 1).to(g.dtype)).to(a.dtype)
    if need_b:
        db = (h * sb.reshape(n, 1).to(h.dtype)).to(b.dtype)
    if need[2]:
        dsa = (a.to(g.dtype) * g).sum(1).reshape(sa.shape).to(sa.dtype)
    if need[3]:
        dsb = (b.to(h.dtype) * h).sum(1).reshape(sb.shape).to(sb.dtype)
    if need[5] and ctx.has_bias:
        dbias = column_sum(dy, ctx.bias_dtype)
    return (da, db, dsa, dsb, None, dbias)[:len(ctx.needs_input_grad)]


def scaled_input_grads(dy, a, b, scale_a, scale_b, *, dequantized: bool = False):
    """(da, db) of y = (a x sa) @ (b x sb).T for FP8 ``a`` and ``b``, in bf16 (f64 for f64 inputs): the gradients of
    a's and b's values; ``dequantized=True``: of a x sa and b x sb (G and H), the gradients a float8 training step
    passes through its casts to the high-precision tensors (see the module)."""
    m, n = a.shape[0], b.shape[0]
    g, h = _scaled_products(dy, a, b, scale_a, scale_b, True, True)
    return _value_grads(g, h, scale_a.reshape(m, 1), scale_b.reshape(n, 1), dequantized)


def _value_grads(g, h, sa, sb, dequantized: bool):
    """(sa x g, sb x h), or (g, h) where ``dequantized``, in bf16 (f64 for f64 products)."""
    torch = _torch()
    out = torch.float64 if g.dtype == torch.float64 else torch.bfloat16
    if dequantized:
        return g.to(out), h.to(out)
    return (g * sa.to(g.dtype)).to(out), (h * sb.to(h.dtype)).to(out)


# ---- scaled_grouped_gemm ---------------------------------------------------------------------------------------

def scaled_grouped_setup_context(ctx, inputs, output) -> None:
    a, b, sa, sb, offs = inputs[:5]
    ctx.save_for_backward(a, b, sa, sb, offs)


def _scaled_grouped_products(dy, a, b, sa, sb, offs, want_g: bool, want_h: bool, out16: bool = False):
    """G = dy @ (b x sb) (M_total x K, per row's group; rows past the last group 0) and H[g] = (dy x sa)[rows g].T @
    a[rows g] (G x N x K) through ptxgen's grouped operators, in bf16 for FP8 operands (f64 on the CPU reference), f32
    out (bf16 with ``out16``: where G and H are the result, H of an expert bank is G x N x K, half the bytes)."""
    torch = _torch()
    m, (groups, n) = a.shape[0], b.shape[:2]
    work = torch.bfloat16 if _is_fp8(a) or _is_fp8(b) else a.dtype
    acc = torch.float64 if work == torch.float64 else torch.float32
    out = None if work == torch.float64 else "bf16" if out16 else "f32"
    g = h = None
    if want_g:
        bs = (b.to(acc) * sb.reshape(groups, n, 1).to(acc)).to(work)
        g = torch.ops.ptxgen.grouped_gemm(_aligned_rows(dy.to(work)), bs.transpose(1, 2), offs, out, True)
    if want_h:
        dys = _aligned_rows((dy.to(acc) * sa.reshape(m, 1).to(acc)).to(work))
        h = torch.ops.ptxgen.grouped_gemm_k(dys.t(), _aligned_rows(a.to(work)).t(), offs, out)
    return g, h


def scaled_grouped_backward(ctx, dy):
    a, b, sa, sb, offs = ctx.saved_tensors
    need = _needs(ctx, 7)
    need_a, need_b = need[0] and not _is_fp8(a), need[1] and not _is_fp8(b)
    m, (groups, n) = a.shape[0], b.shape[:2]
    g, h = _scaled_grouped_products(dy, a, b, sa, sb, offs, need_a or need[2], need_b or need[3])
    da = db = dsa = dsb = None
    if need_a:
        da = (g * sa.reshape(m, 1).to(g.dtype)).to(a.dtype)
    if need_b:
        db = (h * sb.reshape(groups, n, 1).to(h.dtype)).to(b.dtype)
    if need[2]:
        dsa = (a.to(g.dtype) * g).sum(1).reshape(sa.shape).to(sa.dtype)
    if need[3]:
        dsb = (b.to(h.dtype) * h).sum(2).reshape(sb.shape).to(sb.dtype)
    return (da, db, dsa, dsb, None, None, None)[:len(ctx.needs_input_grad)]


def scaled_grouped_input_grads(dy, a, b, scale_a, scale_b, offs, *, dequantized: bool = False):
    """(da, db) of the grouped y = (a x sa) @ (b[g] x sb[g]).T for FP8 ``a`` (M_total x K) and ``b`` (G x N x K), in bf16
    (f64 for f64 inputs): the gradients of a's and b's values, or with ``dequantized=True`` of a x sa and b x sb, what
    a float8 training step passes through its casts to an expert bank's high-precision input and weights; da's rows
    past the last group are 0."""
    m, (groups, n) = a.shape[0], b.shape[:2]
    g, h = _scaled_grouped_products(dy, a, b, scale_a, scale_b, offs, True, True, out16=dequantized)
    return _value_grads(g, h, scale_a.reshape(m, 1), scale_b.reshape(groups, n, 1), dequantized)
