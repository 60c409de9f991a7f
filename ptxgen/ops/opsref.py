"""CPU reference implementations of the ``torch.ops.ptxgen`` operators (registered for CPU tensors only).

They exist so that the operators' autograd formulas (``ptxgen.ops.opsgrad``) can be checked on a machine with no GPU:
``torch.autograd.gradcheck`` in float64 and ``torch.library.opcheck`` run the formulas through these, and a GPU run
swaps in ptxgen's kernels under the same formulas. They are written from the operators' documented meaning with
plain torch arithmetic (f32 accumulation for 16-bit inputs, f64 for f64) and share no code with the kernels; the
operators copy their values into the layout the fake implementations give (ptxgen.ops.torch_ops).

CPU only: the GPU never runs these (a CUDA tensor goes to ptxgen's kernels). f64 inputs are accepted here, where no
kernel takes them, so that gradcheck can run in double precision.
"""

from __future__ import annotations

import sys

from ..isa.epiops import Activation


def activation(z, name: str | None):
    """The epilogue's activation, as torch computes it (ptxgen.isa.epiops names; None or "none": identity)."""
    F = sys.modules["torch"].nn.functional
    name = canonical_activation(name)
    if name == "none":
        return z
    if name == "relu":
        return F.relu(z)
    if name == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    if name == "gelu_erf":
        return F.gelu(z)
    if name == "silu":
        return F.silu(z)
    raise AssertionError(name)  # canonical_activation admits no other


def canonical_activation(name: str | None) -> str:
    """The canonical activation name (ptxgen.isa.epiops.Activation.parse, its aliases included); ValueError naming the
    legal ones for any other."""
    try:
        return Activation.parse(name or "none").value
    except ValueError:
        raise ValueError(f"activation {name!r}: one of {', '.join(a.value for a in Activation)} (or gelu, silu's alias "
                         "swish)") from None


def _acc_dtype(torch, dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def gemm(a, b, out_dtype_name: str, bias=None, act: str | None = None):
    """``act(a @ b.T + bias)`` cast to ``out_dtype_name``; a M x K (or B x M x K), b N x K (or B x N x K)."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    z = torch.matmul(a.to(acc), b.to(acc).transpose(-1, -2))
    if bias is not None:
        z = z + bias.to(acc)
    return activation(z, act).to(getattr(torch, out_dtype_name))


def gemm_aux(a, b, out_dtype_name: str, bias=None, act: str | None = None):
    """``(act(z), z)`` with ``z = a @ b.T + bias``, both cast to ``out_dtype_name`` (the activation applied to the
    unrounded z, as the kernel's chain applies it before its output rounding); ``z`` is 0 x N without an activation."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    z = torch.matmul(a.to(acc), b.to(acc).transpose(-1, -2))
    if bias is not None:
        z = z + bias.to(acc)
    dt = getattr(torch, out_dtype_name)
    pre = z.to(dt) if canonical_activation(act) != "none" else z.new_empty((0, z.shape[-1]), dtype=dt)
    return activation(z, act).to(dt), pre


def activation_backward(dy, z, name: str):
    """dy x act'(z), element-wise (torch's own backward functions; relu: dy where z > 0)."""
    aten = sys.modules["torch"].ops.aten
    name = canonical_activation(name)
    if name == "none":
        return dy
    if name == "relu":
        return aten.threshold_backward(dy, z, 0)
    if name == "silu":
        return aten.silu_backward(dy, z)
    return aten.gelu_backward(dy, z, approximate="tanh" if name == "gelu_tanh" else "none")


def gemm_dact(a, b, z, act: str, out_dtype_name: str):
    """``(a @ b.T) x act'(z)``, cast to ``out_dtype_name``: the backward step of the chain (``dact``)."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    prod = torch.matmul(a.to(acc), b.to(acc).transpose(-1, -2))
    return activation_backward(prod, z.to(acc), act).to(getattr(torch, out_dtype_name))


def group_bounds(offs, m_total: int) -> list[tuple[int, int]]:
    """Each group's rows [start, end) from the cumulative ends ``offs``, clamped as the kernels clamp them (a decreasing
    or too large offset gives an empty or shortened group)."""
    bounds, start = [], 0
    for end in offs.tolist():
        end = min(max(end, start), m_total)
        bounds.append((start, end))
        start = end
    return bounds


def grouped_gemm(a, b, offs, out_dtype_name: str, tail: float = float("nan")):
    """Rows of group g: ``a[rows g] @ b[g].T``; a M_total x K, b G x N x K. Rows past the last group hold ``tail``:
    NaN by default, since the kernels leave them unwritten (unspecified), and NaN makes a formula that reads them show
    it; 0 for the operator's ``zero_tail``."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    out = a.new_empty((a.shape[0], b.shape[1]), dtype=getattr(torch, out_dtype_name))
    out.fill_(tail if out.is_floating_point() else 0)
    for g, (s, e) in enumerate(group_bounds(offs, a.shape[0])):
        if e > s:
            out[s:e] = (a[s:e].to(acc) @ b[g].to(acc).T).to(out.dtype)
    return out


def grouped_gemm_k(a, b, offs, out_dtype_name: str):
    """K-grouped: ``out[g] = a[:, Kg] @ b[:, Kg].T`` for a M x K_total, b N x K_total, ``offs`` the cumulative ends of
    the groups along K; out G x M x N contiguous, zero for an empty group."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    out = a.new_zeros((offs.shape[0], a.shape[0], b.shape[0]), dtype=getattr(torch, out_dtype_name))
    for g, (s, e) in enumerate(group_bounds(offs, a.shape[1])):
        if e > s:
            out[g] = (a[:, s:e].to(acc) @ b[:, s:e].to(acc).T).to(out.dtype)
    return out


def scaled_gemm(a, b, scale_a, scale_b, out_dtype_name: str, bias=None):
    """``(a x scale_a) @ (b x scale_b).T + bias`` in f64 (f32 for narrower inputs), cast once to ``out_dtype_name``:
    torch._scaled_mm's row-wise recipe (a M x K, b N x K, scale_a M x 1 or M, scale_b 1 x N or N)."""
    torch = sys.modules["torch"]
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    m, n = a.shape[0], b.shape[0]
    y = torch.matmul(a.to(acc), b.to(acc).t()) * scale_a.reshape(m, 1).to(acc) * scale_b.reshape(1, n).to(acc)
    if bias is not None:
        y = y + bias.to(acc)
    return y.to(getattr(torch, out_dtype_name))


def scaled_grouped_gemm(a, b, scale_a, scale_b, offs, out_dtype_name: str, tail: float = float("nan")):
    """Rows of group g: ``(a[rows g] x scale_a[rows g]) @ (b[g] x scale_b[g]).T``, in f64 (f32 for narrower inputs),
    cast once to ``out_dtype_name``: torch._scaled_grouped_mm's 2-D x 3-D row-wise form (a M_total x K, b G x N x K,
    scale_a M_total values, scale_b G x N). Rows past the last group hold ``tail`` (NaN: unwritten by the kernels; 0 for
    the operator's ``zero_tail``)."""
    torch = sys.modules["torch"]
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    m, (g_count, n) = a.shape[0], b.shape[:2]
    sa, sb = scale_a.reshape(m, 1).to(acc), scale_b.reshape(g_count, n).to(acc)
    out = a.new_empty((m, n), dtype=getattr(torch, out_dtype_name)).fill_(tail)
    for g, (s, e) in enumerate(group_bounds(offs, m)):
        if e > s:
            out[s:e] = ((a[s:e].to(acc) @ b[g].to(acc).T) * sa[s:e] * sb[g]).to(out.dtype)
    return out


def scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out_dtype_name: str):
    """K-grouped row-wise: ``out[g] = (a[:, Kg] @ b[:, Kg].T) x scale_a[g M + row] x scale_b[g N + col]`` (a M x K_total,
    b N x K_total, scale_a G M values, scale_b G N), G x M x N contiguous, in f64 (f32 for narrower inputs), zero for an
    empty group: torch._scaled_grouped_mm's 2-D x 2-D form."""
    torch = sys.modules["torch"]
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    m, n, groups = a.shape[0], b.shape[0], offs.shape[0]
    sa, sb = scale_a.reshape(groups, m).to(acc), scale_b.reshape(groups, n).to(acc)
    out = a.new_zeros((groups, m, n), dtype=getattr(torch, out_dtype_name))
    for g, (s, e) in enumerate(group_bounds(offs, a.shape[1])):
        if e > s:
            out[g] = ((a[:, s:e].to(acc) @ b[:, s:e].to(acc).T) * sa[g][:, None] * sb[g][None, :]).to(out.dtype)
    return out
