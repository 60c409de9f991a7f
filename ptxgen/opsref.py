"""CPU reference implementations of the ``torch.ops.ptxgen`` operators (registered for CPU tensors only).

They exist so that the operators' autograd formulas (``ptxgen.opsgrad``) can be checked on a machine with no GPU:
``torch.autograd.gradcheck`` in float64 and ``torch.library.opcheck`` run the formulas through these, and a GPU run
swaps in ptxgen's kernels under the same formulas. They are written from the operators' documented meaning with
plain torch arithmetic (f32 accumulation for 16-bit inputs, f64 for f64), share no code with the kernels, and return
the same shapes and strides as the operators' fake implementations (rows padded to 16 bytes, as the kernels write).

CPU only: the GPU never runs these (a CUDA tensor goes to ptxgen's kernels). f64 inputs are accepted here, where no
kernel takes them, so that gradcheck can run in double precision.
"""

from __future__ import annotations

import sys

_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


def padded_ld(n: int, dtype_name: str) -> int:
    """The row pitch (elements) of an output with ``n`` columns as ptxgen's kernels allocate it: rows start 16 bytes
    apart at least, a multiple of 16 bytes."""
    q = 16 // _ITEMSIZE[dtype_name]
    return max(q, -(-n // q) * q)


def new_rows(like, m: int, n: int, dtype):
    """An empty M x N tensor of ``dtype`` on ``like``'s device with rows padded as :func:`padded_ld` says."""
    ldd = padded_ld(n, str(dtype).removeprefix("torch."))
    return like.new_empty_strided((m, n), (ldd, 1), dtype=dtype)


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
    raise ValueError(f"activation {name!r}: one of none, relu, gelu_tanh, gelu_erf, silu")


def canonical_activation(name: str | None) -> str:
    """The canonical activation name (the aliases ptxgen.isa.epiops.Activation.parse takes)."""
    t = (name or "none").lower()
    return {"gelu": "gelu_tanh", "gelu_approx": "gelu_tanh", "gelu_exact": "gelu_erf", "swish": "silu", "": "none"}.get(t, t)


def _acc_dtype(torch, dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def gemm(a, b, out_dtype_name: str, bias=None, act: str | None = None):
    """``act(a @ b.T + bias)`` cast to ``out_dtype_name``; a M x K (or B x M x K), b N x K (or B x N x K)."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    z = torch.matmul(a.to(acc), b.to(acc).transpose(-1, -2))
    if bias is not None:
        z = z + bias.to(acc)
    y = activation(z, act).to(getattr(torch, out_dtype_name))
    if a.dim() == 3:
        return y.contiguous()
    out = new_rows(a, y.shape[0], y.shape[1], y.dtype)
    out.copy_(y)
    return out


def group_bounds(offs, m_total: int) -> list[tuple[int, int]]:
    """Each group's rows [start, end) from the cumulative ends ``offs``, clamped as the kernels clamp them (a decreasing
    or too large offset gives an empty or shortened group)."""
    bounds, start = [], 0
    for end in offs.tolist():
        end = min(max(end, start), m_total)
        bounds.append((start, end))
        start = end
    return bounds


def grouped_gemm(a, b, offs, out_dtype_name: str):
    """Rows of group g: ``a[rows g] @ b[g].T``; a M_total x K, b G x N x K. Rows past the last offset are NaN here:
    the kernels leave them unwritten (unspecified), and NaN makes a formula that reads them show it."""
    torch = sys.modules["torch"]
    acc = _acc_dtype(torch, a.dtype)
    out = new_rows(a, a.shape[0], b.shape[1], getattr(torch, out_dtype_name))
    out.fill_(float("nan") if out.is_floating_point() else 0)
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
