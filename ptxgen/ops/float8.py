"""Row-wise float8 training of an expert bank: ``torch.ops.ptxgen.float8_grouped_linear(x, w, offs)``, what
``ptxgen.nn.GroupedLinear(..., fp8="rowwise")`` runs. Dynamic e4m3 casts of the input's rows and of each expert's
weight rows (:func:`rowwise_e4m3`), the forward on ``torch.ops.ptxgen.scaled_grouped_gemm`` (ptxgen's M-grouped
row-wise FP8 kernel), and a backward that passes the gradient through the casts unchanged (torchao's float8 training
does the same) with bf16 products: dx = dy @ (w_q x s_w), dW[g] = dy[rows g].T @ (x_q x s_x)[rows g], by
``ptxgen.ops.opsgrad.scaled_grouped_input_grads(..., dequantized=True)`` (the bf16 N-major grouped and K-grouped
operators). An operator rather than an autograd.Function so that its backward, like every other here, is traced by
AOTAutograd under torch.compile. Imports no torch at module level (as ptxgen.ops.torch_ops).

``fp8_backward=True``: both backward products in row-wise FP8 too (:func:`fp8_backward_grads`; torchao's float8 recipe
casts all three GEMMs of a layer): dx = (dy cast per row) @ (w[g].T cast per row along N) on the M-grouped row-wise FP8
kernel (``scaled_grouped_gemm`` with ``zero_tail``), dW[g] = (dy.T cast per row along the tokens) @ (x.T cast the same
way) over group g's tokens on the K-grouped row-wise FP8 kernel (``scaled_grouped_gemm_k``). dy's and x's rows past the
last group are masked to zero first (an unspecified output's gradient must not set a scale); the K-grouped casts take
one scale a row over all the groups' tokens (each group's slice of scale_a and scale_b repeats it), coarser than a
scale per group and row but with no per-group reduction on the device."""

from __future__ import annotations

import sys

SCHEMA = ("float8_grouped_linear(Tensor x, Tensor w, Tensor offs, bool fp8_backward=False) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor)")
E4M3_MAX = 448.0  # e4m3fn's largest finite value
# the smallest amax a scale is taken from: a row of zeros (or of values below it) gets this scale, not a division by 0
_TINY_AMAX = 1e-12
_TOKENS = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def _torch():
    return sys.modules["torch"]


def rowwise_e4m3(t):
    """(q, scale): ``t`` (any leading dimensions, rows along the last) as e4m3 with one f32 scale a row, the row's
    largest magnitude mapped to 448: ``q x scale[..., None]`` approximates ``t``; scale has ``t``'s shape without its
    last dimension."""
    torch = _torch()
    amax = t.detach().abs().amax(dim=-1).float().clamp_min(_TINY_AMAX)
    scale = amax / E4M3_MAX
    q = (t.detach().float() / scale.unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def _token(x) -> str:
    name = str(x.dtype).removeprefix("torch.")
    if name not in _TOKENS:
        raise TypeError(f"float8_grouped_linear (GroupedLinear(fp8='rowwise')) takes bf16, f16 or f32 inputs, not {name}")
    return _TOKENS[name]


def forward(x, w, offs, fp8_backward=False):
    """(y, x_q, s_x, w_q, s_w): y in x's dtype; the casts are returned so that the backward reads them."""
    xq, sx = rowwise_e4m3(x)
    wq, sw = rowwise_e4m3(w)
    return _torch().ops.ptxgen.scaled_grouped_gemm(xq, wq, sx, sw, offs, _token(x)), xq, sx, wq, sw


def fake(x, w, offs, fp8_backward=False):
    """The outputs' shapes, dtypes and strides (y's from scaled_grouped_gemm's own fake kernel, on the fake casts)."""
    torch = _torch()
    if x.dim() != 2 or w.dim() != 3:
        raise ValueError(f"float8_grouped_linear takes a 2-D x (M_total x in) and a 3-D w (G x out x in), not {x.dim()}-D "
                         f"and {w.dim()}-D")
    e4m3 = torch.float8_e4m3fn
    xq, sx = x.new_empty(x.shape, dtype=e4m3), x.new_empty(x.shape[:1], dtype=torch.float32)
    wq, sw = w.new_empty(w.shape, dtype=e4m3), w.new_empty(w.shape[:2], dtype=torch.float32)
    return torch.ops.ptxgen.scaled_grouped_gemm(xq, wq, sx, sw, offs, _token(x)), xq, sx, wq, sw


def setup_context(ctx, inputs, output) -> None:
    x, w, offs = inputs[:3]
    _, xq, sx, wq, sw = output
    ctx.set_materialize_grads(False)
    ctx.fp8_backward = bool(inputs[3]) if len(inputs) > 3 else False
    if ctx.fp8_backward:  # the high-precision tensors, cast again along the backward products' K
        ctx.save_for_backward(x, w, offs)
    else:
        ctx.save_for_backward(xq, sx, wq, sw, offs)
    ctx.dtypes = (x.dtype, w.dtype)


def backward(ctx, dy, *unused):
    from .opsgrad import scaled_grouped_input_grads

    n_in = len(ctx.needs_input_grad)
    if dy is None:
        return (None,) * n_in
    if ctx.fp8_backward:
        x, w, offs = ctx.saved_tensors
        dx, dw = fp8_backward_grads(dy, x, w, offs)
    else:
        xq, sx, wq, sw, offs = ctx.saved_tensors
        dx, dw = scaled_grouped_input_grads(dy, xq, wq, sx, sw, offs, dequantized=True)
    return (dx.to(ctx.dtypes[0]), dw.to(ctx.dtypes[1]), None, None)[:n_in]


def _groups_rows(dy, offs):
    """dy with its rows past offs[-1] zero (a mask computed on the device: nothing reads offs on the host)."""
    torch = _torch()
    if offs.shape[0] == 0:
        return torch.zeros_like(dy)
    inside = torch.arange(dy.shape[0], device=dy.device) < offs[-1].to(torch.int64)
    return dy * inside[:, None].to(dy.dtype)


def fp8_backward_grads(dy, x, w, offs):
    """(dx, dW) of the float8 bank with both backward products in row-wise FP8 (see the module): dx in dy's row-wise
    e4m3 against w[g].T's, rows past the last group 0; dW through the K-grouped row-wise kernel, an empty group's 0.
    Each in the bf16/f16/f32 dtype of x / w."""
    from .opsgrad import _aligned_rows

    torch = _torch()
    groups = w.shape[0]
    dym, xm = _groups_rows(dy, offs), _groups_rows(x, offs)
    dyq, sdy = rowwise_e4m3(dym)
    wtq, swt = rowwise_e4m3(w.transpose(1, 2))  # G x K x N: w[g].T cast per row along N
    dx = torch.ops.ptxgen.scaled_grouped_gemm(dyq, wtq.contiguous(), sdy, swt.contiguous(), offs, _token(x), True)
    dytq, sdyt = rowwise_e4m3(dym.t())  # N x M_total: one scale a row over every group's tokens
    xtq, sxt = rowwise_e4m3(xm.t())  # K x M_total
    # the K-grouped kernel's tensor maps need 16-byte row pitches; the tokens (its K) are any number
    dw = torch.ops.ptxgen.scaled_grouped_gemm_k(_aligned_rows(dytq), _aligned_rows(xtq), sdyt.repeat(groups),
                                                sxt.repeat(groups), offs, _token(w))
    return dx, dw
