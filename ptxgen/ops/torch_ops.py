"""``torch.ops.ptxgen``: ptxgen's products as torch operators, so that ``torch.compile(fullgraph=True)`` traces
through them (fake implementations give the outputs' shapes, dtypes and strides without running anything) and
autograd differentiates them (``torch.library.register_autograd``; the formulas are in ``ptxgen.ops.opsgrad``).

Registered by :func:`register_torch_ops`: by ``import ptxgen`` when torch is already imported, by the first use
of ``ptxgen.api`` when torch is imported by then, or by calling ``ptxgen.register_torch_ops()``. This module
imports nothing heavy (the implementations load ``ptxgen.api`` at their first call) and never imports torch.

    torch.ops.ptxgen.gemm(a, b, out_dtype=None, bias=None, activation=None) -> Tensor
        act(a @ b.T + bias), as ptxgen.gemm(a, b, out_dtype=..., bias=..., activation=...)
    torch.ops.ptxgen.gemm_aux(a, b, out_dtype=None, bias=None, activation=None, a_pre=None, a_activation=None)
            -> (Tensor y, Tensor z)
        y = act(z), z = a @ b.T + bias written beside y by the same kernel (the chain's ``aux``), so a backward needs
        no recompute; ``a_pre``/``a_activation``: ``a`` is a_activation(a_pre), the previous layer's output, and the
        gradient goes to ``a_pre`` with the derivative fused into the dX GEMM (``gemm_dact``); z is 0 x N without an
        activation
    torch.ops.ptxgen.gemm_dact(a, b, z, activation, out_dtype=None) -> Tensor
        (a @ b.T) x act'(z), as ptxgen.gemm(a, b, dact=activation, aux=z): a backward product (no autograd)
    torch.ops.ptxgen.grouped_gemm(a, b, offs, out_dtype=None, zero_tail=False) -> Tensor
        rows of group g: a[rows g] @ b[g].T, as ptxgen.grouped_gemm (b G x N x K, K- or N-major); ``zero_tail``: the
        rows past the last group are zeros (set by a kernel that reads offs on the GPU, ptxgen.ops.tailzero; the
        product writes the groups' rows), else unspecified
    torch.ops.ptxgen.grouped_gemm_k(a, b, offs, out_dtype=None) -> Tensor
        K-grouped: out[g] = a[:, K range g] @ b[:, K range g].T (a M x K, b N x K, offs the groups' ends along K),
        G x M x N; the weight gradient of an expert bank, as ptxgen.grouped_gemm_k (torch._grouped_mm for what that
        kernel refuses: other dtypes, strides, or a GPU other than sm_90a; docs/training.md).
    torch.ops.ptxgen.float8_grouped_linear(x, w, offs, fp8_backward=False) -> (Tensor y, x_q, s_x, w_q, s_w)
        an expert bank in row-wise float8 (ptxgen.ops.float8): x and w cast to e4m3 with one scale a row, y =
        scaled_grouped_gemm of the casts in x's dtype; the gradient passes the casts unchanged (bf16 products, or with
        fp8_backward row-wise FP8 ones)
    torch.ops.ptxgen.activation_grad(dy, z, activation, bias_dtype) -> (Tensor dz, Tensor dbias)
        dz = dy x act'(z) (M x N, contiguous, dy's type) and dbias = dz summed over the rows in bias_dtype (f32, f16,
        bf16): one pass over dy and z by ptxgen.ops.actgrad's kernels where they take the tensors, else torch's
        activation backward and sum; what the autograd formulas below call for a Linear's bias and activation
    torch.ops.ptxgen.scaled_gemm(a, b, scale_a, scale_b, out_dtype=None, bias=None) -> Tensor
        (a @ b.T) x scale_a x scale_b + bias for FP8 a (M x K) and b (N x K), scale_a M x 1, scale_b 1 x N, as
        ptxgen.scaled_gemm (torch._scaled_mm's row-wise recipe); gradients for the scales, the bias, and for a / b
        where they are not FP8 (ptxgen.ops.opsgrad says why)
    torch.ops.ptxgen.scaled_grouped_gemm(a, b, scale_a, scale_b, offs, out_dtype=None, zero_tail=False) -> Tensor
        rows of group g: (a[rows g] @ b[g].T) x scale_a[rows g] x scale_b[g] for FP8 a (M_total x K) and b (G x N x K),
        scale_a M_total values, scale_b G x N, as ptxgen.scaled_grouped_gemm (torch._scaled_grouped_mm's 2-D x 3-D
        row-wise form: an FP8 expert bank's forward); gradients as scaled_gemm's, the products grouped; ``zero_tail``
        as grouped_gemm's
    torch.ops.ptxgen.scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out_dtype=None) -> Tensor
        K-grouped row-wise FP8, G x M x N: out[g] = (a[:, K range g] @ b[:, K range g].T) x scale_a[g M + row] x
        scale_b[g N + col], as ptxgen.scaled_grouped_gemm's 2-D x 2-D form (a backward product, no autograd)

Functional (no ``out``): each result is a new tensor, M x N with rows padded to 16 bytes (strides (ldd, 1)),
or B x M x N / G x M x N contiguous. Rows of ``grouped_gemm``'s output past offs[-1] are unspecified (as torch's)
unless ``zero_tail``.
Each operator has a CPU implementation too, the plain-torch reference of ``ptxgen.ops.opsref`` (it takes f64, which no
kernel does), so that the autograd formulas can be checked with gradcheck/opcheck on a machine without a GPU.
"""

from __future__ import annotations

import sys
import threading

SCHEMA = "gemm(Tensor a, Tensor b, str? out_dtype=None, Tensor? bias=None, str? activation=None) -> Tensor"
AUX_SCHEMA = ("gemm_aux(Tensor a, Tensor b, str? out_dtype=None, Tensor? bias=None, str? activation=None, "
              "Tensor? a_pre=None, str? a_activation=None) -> (Tensor, Tensor)")
DACT_SCHEMA = "gemm_dact(Tensor a, Tensor b, Tensor z, str activation, str? out_dtype=None) -> Tensor"
GROUPED_SCHEMA = "grouped_gemm(Tensor a, Tensor b, Tensor offs, str? out_dtype=None, bool zero_tail=False) -> Tensor"
GROUPED_K_SCHEMA = "grouped_gemm_k(Tensor a, Tensor b, Tensor offs, str? out_dtype=None) -> Tensor"
SCALED_SCHEMA = ("scaled_gemm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, str? out_dtype=None, Tensor? bias=None) "
                 "-> Tensor")
SCALED_GROUPED_SCHEMA = ("scaled_grouped_gemm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor offs, "
                         "str? out_dtype=None, bool zero_tail=False) -> Tensor")
SCALED_GROUPED_K_SCHEMA = ("scaled_grouped_gemm_k(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor offs, "
                           "str? out_dtype=None) -> Tensor")
# a Linear layer's activation backward with its bias gradient (ptxgen.ops.actgrad); no autograd of its own
ACT_GRAD_SCHEMA = "activation_grad(Tensor dy, Tensor z, str activation, str bias_dtype) -> (Tensor, Tensor)"
# ptxgen.attention as an operator (functional: a new output shaped and strided like q)
ATTENTION_SCHEMA = "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor"
_LOCK = threading.Lock()
_STATE: dict = {}

# input dtype name (torch's, without "torch.") -> default output; out_dtype tokens -> torch dtype names.
# float64: the CPU reference only (no kernel takes it; ptxgen.gemm refuses it on the GPU).
_DEFAULT_OUT = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float8_e4m3fn": "bfloat16",
                "float8_e5m2": "bfloat16", "int8": "int32", "uint8": "int32", "float64": "float64"}
_OUT_TOKENS = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "s32": "int32"}
_TOKEN_OF = {name: token for token, name in _OUT_TOKENS.items()}
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


def out_dtype_name(in_dtype: str, out_dtype: str | None) -> str:
    """The torch dtype name (no prefix) that ``gemm`` returns for these inputs."""
    if out_dtype is not None:
        if out_dtype not in _OUT_TOKENS:
            raise ValueError(f"out_dtype {out_dtype!r}: one of {', '.join(_OUT_TOKENS)}")
        return _OUT_TOKENS[out_dtype]
    if in_dtype not in _DEFAULT_OUT:
        raise TypeError(f"ptxgen.gemm takes {', '.join(_DEFAULT_OUT)} tensors, not {in_dtype}")
    return _DEFAULT_OUT[in_dtype]


def _out_name(a, out_dtype) -> str:
    return out_dtype_name(str(a.dtype).removeprefix("torch."), out_dtype)


def _padded_ld(n: int, name: str) -> int:
    """The row pitch (elements) of an N-column output of dtype ``name``: 16-byte rows, at least 16 bytes."""
    q = 16 // _ITEMSIZE[name]
    return max(q, -(-n // q) * q)


def _rows(a, m: int, n: int, name: str):
    """An empty M x N tensor with rows padded to 16 bytes, as the kernels allocate it."""
    torch = sys.modules["torch"]
    return a.new_empty_strided((m, n), (_padded_ld(n, name), 1), dtype=getattr(torch, name))


# ---- gemm ------------------------------------------------------------------------------------------------------

def _as_fake(out, fake):
    """``out`` if it has the fake implementation's strides, else a copy that has them: torch.compile plans (and checks)
    the layout the fake gives, and a few kernel paths allocate differently (the swap-AB kernels' rows are N apart)."""
    if out.stride() == fake.stride() or out.numel() == 0:
        return out
    return fake.copy_(out)


def _impl(a, b, out_dtype=None, bias=None, activation=None):
    from ..api import gemm

    if bias is None and activation is None:
        out = gemm(a, b, out_dtype=out_dtype)
    else:
        out = gemm(a, b, out_dtype=out_dtype, bias=bias, activation=activation)
    return out if out.stride() == _fake_stride(a, b, out_dtype) else _as_fake(out, _fake(a, b, out_dtype))


def _cpu(a, b, out_dtype=None, bias=None, activation=None):
    from . import opsref

    return _fake(a, b, out_dtype).copy_(opsref.gemm(a, b, _out_name(a, out_dtype), bias, activation))


def _fake_stride(a, b, out_dtype) -> tuple:
    """The strides :func:`_fake` gives, without allocating."""
    n = b.shape[-2]
    if a.dim() == 3:
        return (a.shape[1] * n, n, 1)
    return (_padded_ld(n, _out_name(a, out_dtype)), 1)


def _fake(a, b, out_dtype=None, bias=None, activation=None):
    name = _out_name(a, out_dtype)
    n = b.shape[-2]
    if a.dim() == 3:
        return a.new_empty((a.shape[0], a.shape[1], n), dtype=getattr(sys.modules["torch"], name))
    return _rows(a, a.shape[0], n, name)


# ---- gemm_aux, gemm_dact (the pre-activation: written by the forward, read by the backward) ----------------------

def _has_act(activation) -> bool:
    from .opsref import canonical_activation

    return canonical_activation(activation) != "none"


def _aux_check(a, b, a_pre) -> None:
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"gemm_aux takes a 2-D a (M x K, rows flattened) and b (N x K), not {a.dim()}-D and {b.dim()}-D")
    if a_pre is not None and tuple(a_pre.shape) != tuple(a.shape):
        raise ValueError(f"gemm_aux: a_pre (the pre-activation of a) has shape {tuple(a_pre.shape)}, a {tuple(a.shape)}")


def _aux_fake(a, b, out_dtype=None, bias=None, activation=None, a_pre=None, a_activation=None):
    _aux_check(a, b, a_pre)
    name = _out_name(a, out_dtype)
    z = _rows(a, a.shape[0], b.shape[0], name) if _has_act(activation) else _rows(a, 0, b.shape[0], name)
    return _fake(a, b, out_dtype), z


def _aux_impl(a, b, out_dtype=None, bias=None, activation=None, a_pre=None, a_activation=None):
    from ..api import gemm

    if not _has_act(activation):  # the plain product, and an empty z (no y allocated here for nothing)
        _aux_check(a, b, a_pre)
        return _impl(a, b, out_dtype, bias, None), _rows(a, 0, b.shape[0], _out_name(a, out_dtype))
    y, z = _aux_fake(a, b, out_dtype, bias, activation, a_pre)
    return gemm(a, b, y, out_dtype=out_dtype, bias=bias, activation=activation, aux=z), z  # y: the kernel's output


def _aux_cpu(a, b, out_dtype=None, bias=None, activation=None, a_pre=None, a_activation=None):
    from . import opsref

    y, z = _aux_fake(a, b, out_dtype, bias, activation, a_pre)
    ry, rz = opsref.gemm_aux(a, b, _out_name(a, out_dtype), bias, activation)
    return y.copy_(ry), z.copy_(rz)


def _dact_impl(a, b, z, activation, out_dtype=None):
    from ..api import gemm

    out = gemm(a, b, out_dtype=out_dtype, dact=activation, aux=z)
    return out if out.stride() == _fake_stride(a, b, out_dtype) else _as_fake(out, _fake(a, b, out_dtype))


def _dact_cpu(a, b, z, activation, out_dtype=None):
    from . import opsref

    return _fake(a, b, out_dtype).copy_(opsref.gemm_dact(a, b, z, activation, _out_name(a, out_dtype)))


def _dact_fake(a, b, z, activation, out_dtype=None):
    return _fake(a, b, out_dtype)


# ---- grouped_gemm, grouped_gemm_k ------------------------------------------------------------------------------

def _zero_tail_then(out, offs, product):
    """``out`` (the fake layout) with its rows past offs[-1] zeroed by a kernel that reads offs on the GPU (one launch, no
    work where every row belongs to a group) and the groups' rows written by ``product(out)``: no fill of the whole
    output first. With no group every row is past the last."""
    if not offs.shape[0]:
        return out.zero_()
    from .tailzero import zero_tail as zero_rows

    zero_rows(sys.modules["torch"], out, offs)
    return product(out)


def _grouped_impl(a, b, offs, out_dtype=None, zero_tail=False):
    from ..grouped import grouped_gemm

    if zero_tail:
        return _zero_tail_then(_grouped_fake(a, b, offs, out_dtype), offs, lambda out: grouped_gemm(a, b, offs, out))
    out = grouped_gemm(a, b, offs, out_dtype=out_dtype)
    if out.stride() == (_padded_ld(b.shape[1], _out_name(a, out_dtype)), 1):
        return out
    return _as_fake(out, _grouped_fake(a, b, offs, out_dtype))


def _grouped_cpu(a, b, offs, out_dtype=None, zero_tail=False):
    from . import opsref

    ref = opsref.grouped_gemm(a, b, offs, _out_name(a, out_dtype), tail=0.0 if zero_tail else float("nan"))
    return _grouped_fake(a, b, offs, out_dtype).copy_(ref)


def _grouped_fake(a, b, offs, out_dtype=None, zero_tail=False):
    return _rows(a, a.shape[0], b.shape[1], _out_name(a, out_dtype))


# The weight gradient of an expert bank (autograd's grouped_gemm_k) runs ptxgen's K-grouped kernel while this is set,
# torch's otherwise. On since 2026-12-06: with the 128 x 256 TMA-store default (kgrouped.DEFAULT_VARIANT) the MoE step
# of tools/bench_training.py ran 1.028x torch eager with it against 1.005x with torch's (the H100,
# runs/2026-12-06-h100-carry-kgrouped run 3); with the earlier ping-pong default it ran 0.932x against 1.020x (run 2):
# that kernel was 0.84-0.90x torch._grouped_mm at the step's weight-gradient shapes (16384 routed tokens).
K_GROUPED_KERNEL = True


def _grouped_k_impl(a, b, offs, out_dtype=None):
    """ptxgen's K-grouped kernel while :data:`K_GROUPED_KERNEL` is set (else torch's, :func:`_torch_grouped_k`):
    (``ptxgen.kgrouped.grouped_gemm_k``, one launch) where it takes the arrays (the rule: bf16/f16 ``a`` and ``b`` of one
    type, each K-major or MN-major with 16-byte aligned rows, int32 ``offs``, an sm_90a GPU), torch's otherwise."""
    if not K_GROUPED_KERNEL:
        return _torch_grouped_k(a, b, offs, out_dtype)
    from ..kgrouped import grouped_gemm_k
    from ..runtime.launch.arrays import ArgumentError, DTypeError
    from ..runtime.launch.gpu import NoGPU
    from ..runtime.launch.launch import ProblemError

    token = _TOKEN_OF.get(_out_name(a, out_dtype))  # ptxgen's spelling of the output type (none: float64)
    try:
        if token is None:
            raise DTypeError(f"no K-grouped kernel writes {_out_name(a, out_dtype)}")
        return grouped_gemm_k(a, b, offs, out_dtype=token)
    except (ArgumentError, DTypeError, ProblemError, NoGPU):
        return _torch_grouped_k(a, b, offs, out_dtype)


def _torch_grouped_k(a, b, offs, out_dtype=None):
    """torch's K-grouped kernel (2-D x 2-D, offsets along K). Its operands are passed with ``a`` column-major and
    ``b.t()`` row-major (copies only where they are not): the one layout in which torch's kernel takes empty groups and
    offsets that are not multiples of 16 bytes (aten/src/ATen/native/cuda/GroupMMCommon.cuh asserts a group size > 0,
    or a 16-byte multiple, for the others)."""
    torch = sys.modules["torch"]
    dt = getattr(torch, _out_name(a, out_dtype))
    if a.shape[0] > 1 and a.stride(0) != 1:
        a = a.t().contiguous().t()
    bt = b.t()
    if bt.shape[1] > 1 and bt.stride(1) != 1:
        bt = bt.contiguous()
    return torch._grouped_mm(a, bt, offs=offs, out_dtype=dt).contiguous()


def _grouped_k_cpu(a, b, offs, out_dtype=None):
    from . import opsref

    return opsref.grouped_gemm_k(a, b, offs, _out_name(a, out_dtype))


def _grouped_k_fake(a, b, offs, out_dtype=None):
    torch = sys.modules["torch"]
    return a.new_empty((offs.shape[0], a.shape[0], b.shape[0]), dtype=getattr(torch, _out_name(a, out_dtype)))


# ---- scaled_gemm -------------------------------------------------------------------------------------------------

def _scaled_impl(a, b, scale_a, scale_b, out_dtype=None, bias=None):
    from ..scaled import scaled_gemm

    out = scaled_gemm(a, b, scale_a, scale_b, out_dtype=out_dtype, bias=bias)
    fake = _scaled_fake(a, b, scale_a, scale_b, out_dtype)
    return out if out.stride() == fake.stride() else _as_fake(out, fake)


def _scaled_cpu(a, b, scale_a, scale_b, out_dtype=None, bias=None):
    from . import opsref

    return _scaled_fake(a, b, scale_a, scale_b, out_dtype).copy_(
        opsref.scaled_gemm(a, b, scale_a, scale_b, _out_name(a, out_dtype), bias))


def _scaled_fake(a, b, scale_a, scale_b, out_dtype=None, bias=None):
    return _rows(a, a.shape[0], b.shape[0], _out_name(a, out_dtype))


def _scaled_grouped_check(a, b, scale_a, scale_b, offs) -> None:
    """The operator's one form (2-D a, 3-D b, one offset and one row of scale_b per group): ValueError otherwise, in
    the fake kernel too, so torch.compile reports it while tracing."""
    if a.dim() != 2 or b.dim() != 3:
        raise ValueError(f"scaled_grouped_gemm takes a 2-D a (M_total x K) and a 3-D b (G x N x K), not {a.dim()}-D and "
                         f"{b.dim()}-D (ptxgen.scaled_grouped_gemm has the other forms, forward only)")
    g, n = b.shape[:2]
    if offs.dim() != 1 or offs.shape[0] != g:
        raise ValueError(f"scaled_grouped_gemm: offs has shape {tuple(offs.shape)}; b has {g} groups")
    if scale_a.numel() != a.shape[0] or scale_b.numel() != g * n:
        raise ValueError(f"scaled_grouped_gemm: scale_a must hold {a.shape[0]} values (one a row), scale_b {g} x {n} "
                         f"(one a group's column); they hold {scale_a.numel()} and {scale_b.numel()}")


def _scaled_grouped_impl(a, b, scale_a, scale_b, offs, out_dtype=None, zero_tail=False):
    from ..grouped import scaled_grouped_gemm

    _scaled_grouped_check(a, b, scale_a, scale_b, offs)
    if zero_tail:
        return _zero_tail_then(_scaled_grouped_fake(a, b, scale_a, scale_b, offs, out_dtype), offs,
                               lambda out: scaled_grouped_gemm(a, b, scale_a, scale_b, offs, out))
    out = scaled_grouped_gemm(a, b, scale_a, scale_b, offs, out_dtype=_TOKEN_OF[_out_name(a, out_dtype)])
    if out.stride() == (_padded_ld(b.shape[1], _out_name(a, out_dtype)), 1):
        return out
    return _as_fake(out, _scaled_grouped_fake(a, b, scale_a, scale_b, offs, out_dtype))


def _scaled_grouped_cpu(a, b, scale_a, scale_b, offs, out_dtype=None, zero_tail=False):
    from . import opsref

    return _scaled_grouped_fake(a, b, scale_a, scale_b, offs, out_dtype).copy_(opsref.scaled_grouped_gemm(
        a, b, scale_a, scale_b, offs, _out_name(a, out_dtype), tail=0.0 if zero_tail else float("nan")))


def _scaled_grouped_fake(a, b, scale_a, scale_b, offs, out_dtype=None, zero_tail=False):
    _scaled_grouped_check(a, b, scale_a, scale_b, offs)
    return _rows(a, a.shape[0], b.shape[1], _out_name(a, out_dtype))


def _scaled_grouped_k_impl(a, b, scale_a, scale_b, offs, out_dtype=None):
    from ..kgrouped import scaled_grouped_gemm_k

    out = scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, out_dtype=_TOKEN_OF[_out_name(a, out_dtype)])
    return _as_fake(out, _scaled_grouped_k_fake(a, b, scale_a, scale_b, offs, out_dtype))


def _scaled_grouped_k_cpu(a, b, scale_a, scale_b, offs, out_dtype=None):
    from . import opsref

    return opsref.scaled_grouped_gemm_k(a, b, scale_a, scale_b, offs, _out_name(a, out_dtype))


def _scaled_grouped_k_fake(a, b, scale_a, scale_b, offs, out_dtype=None):
    return _grouped_k_fake(a, b, offs, out_dtype)


def _bias_dtype(token: str):
    """The torch dtype of a bias gradient named ``token`` (f32, f16, bf16)."""
    if token not in ("f32", "f16", "bf16"):
        raise ValueError(f"bias_dtype {token!r}: one of f32, f16, bf16")
    return getattr(sys.modules["torch"], _OUT_TOKENS[token])


def _act_grad_cpu(dy, z, activation, bias_dtype):
    from .opsgrad import column_sum
    from .opsref import activation_backward

    dz = activation_backward(dy, z, activation).contiguous()
    return dz, column_sum(dz, _bias_dtype(bias_dtype))




def _act_grad_impl(dy, z, activation, bias_dtype):
    from . import actgrad
    from .opsref import canonical_activation

    torch = sys.modules["torch"]
    act, bdt = canonical_activation(activation), _bias_dtype(bias_dtype)
    if actgrad.ENABLED and actgrad.eligible(dy, z, act, bdt):
        return actgrad.activation_grad(torch, dy, z, act, bdt)
    return _act_grad_cpu(dy, z, act, bias_dtype)


def _act_grad_fake(dy, z, activation, bias_dtype):
    return dy.new_empty(dy.shape), dy.new_empty((dy.shape[-1],), dtype=_bias_dtype(bias_dtype))


def _attention_impl(q, k, v, causal=False, scale=None):
    from ..attention.launch import attention

    return attention(q, k, v, causal=causal, scale=scale)


def _attention_fake(q, k, v, causal=False, scale=None):
    return sys.modules["torch"].empty_like(q)


def register_torch_ops(only_if_imported: bool = False) -> bool:
    """Define ``torch.ops.ptxgen.gemm``, ``gemm_aux``, ``gemm_dact``, ``grouped_gemm``, ``grouped_gemm_k``, ``scaled_gemm``,
    ``scaled_grouped_gemm``, ``scaled_grouped_gemm_k``, ``float8_grouped_linear`` (with
    their autograd formulas) and ``activation_grad``
    (once per process). ``only_if_imported``: do nothing unless torch is already imported. True when the operators
    are (now) registered."""
    if _STATE.get("done"):
        return True
    torch = sys.modules.get("torch")
    if torch is None:
        if only_if_imported:
            return False
        import torch
    with _LOCK:
        if _STATE.get("done"):
            return True
        from . import opsgrad

        lib = torch.library.Library("ptxgen", "DEF")
        for name, schema, impl, cpu, fake in (
                ("gemm", SCHEMA, _impl, _cpu, _fake),
                ("gemm_aux", AUX_SCHEMA, _aux_impl, _aux_cpu, _aux_fake),
                ("gemm_dact", DACT_SCHEMA, _dact_impl, _dact_cpu, _dact_fake),
                ("grouped_gemm", GROUPED_SCHEMA, _grouped_impl, _grouped_cpu, _grouped_fake),
                ("grouped_gemm_k", GROUPED_K_SCHEMA, _grouped_k_impl, _grouped_k_cpu, _grouped_k_fake),
                ("scaled_gemm", SCALED_SCHEMA, _scaled_impl, _scaled_cpu, _scaled_fake),
                ("scaled_grouped_gemm", SCALED_GROUPED_SCHEMA, _scaled_grouped_impl, _scaled_grouped_cpu,
                 _scaled_grouped_fake),
                ("scaled_grouped_gemm_k", SCALED_GROUPED_K_SCHEMA, _scaled_grouped_k_impl, _scaled_grouped_k_cpu,
                 _scaled_grouped_k_fake),
                ("activation_grad", ACT_GRAD_SCHEMA, _act_grad_impl, _act_grad_cpu, _act_grad_fake)):
            lib.define(schema)
            lib.impl(name, impl, "CUDA")
            lib.impl(name, cpu, "CPU")
            torch.library.register_fake(f"ptxgen::{name}", fake, lib=lib)
        torch.library.register_autograd("ptxgen::gemm", opsgrad.gemm_backward, setup_context=opsgrad.gemm_setup_context,
                                        lib=lib)
        torch.library.register_autograd("ptxgen::gemm_aux", opsgrad.aux_backward, setup_context=opsgrad.aux_setup_context,
                                        lib=lib)
        torch.library.register_autograd("ptxgen::grouped_gemm", opsgrad.grouped_backward,
                                        setup_context=opsgrad.grouped_setup_context, lib=lib)
        torch.library.register_autograd("ptxgen::scaled_gemm", opsgrad.scaled_backward,
                                        setup_context=opsgrad.scaled_setup_context, lib=lib)
        torch.library.register_autograd("ptxgen::scaled_grouped_gemm", opsgrad.scaled_grouped_backward,
                                        setup_context=opsgrad.scaled_grouped_setup_context, lib=lib)
        from . import float8

        lib.define(float8.SCHEMA)
        for device in ("CUDA", "CPU"):
            lib.impl("float8_grouped_linear", float8.forward, device)
        torch.library.register_fake("ptxgen::float8_grouped_linear", float8.fake, lib=lib)
        torch.library.register_autograd("ptxgen::float8_grouped_linear", float8.backward,
                                        setup_context=float8.setup_context, lib=lib)
        lib.define(ATTENTION_SCHEMA)
        lib.impl("attention", _attention_impl, "CUDA")
        torch.library.register_fake("ptxgen::attention", _attention_fake, lib=lib)
        _STATE["lib"] = lib  # the registration lives as long as the Library object
        _STATE["done"] = True
    return True
