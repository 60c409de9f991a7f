"""The fused epilogue chain, rendered: what templates/epilogue_chain.cuh.j2 receives (numbers and C expressions)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...derive.store.cload import PHASES, CLoadPlan
from ...derive.store.epilogue import StorePlan
from ...derive.store.fusion import ChainPlan, chain_params, steps_text
from ...isa.fragment import LANES_PER_ROW, WGMMA_GROUP_COLS, WGMMA_GROUP_REGS, WGMMA_ROW_HALF
from ...isa.epiops import GELU_TANH_K0, GELU_TANH_K1, INV_SQRT2, INV_SQRT_2PI, Activation, BiasAxis, ScaleMode
from ...isa.types import DType
from .fragment import WgmmaFragmentView, wgmma_fragment_view

FULL_WARP_MASK = "0xffffffffu"


def gelu_tanh_sigmoid_c_expr(y: str = "y") -> str:
    """gelu_tanh as y sigmoid(2u) = y / (1 + 2^(-2 u log2 e)), u = k0 (y + k1 y^3): two MUFU ops (EX2, RCP) instead of
    TANH, each with |relative error| ~ 2^-22 instead of tanh.approx's ~ 2^-11. Not the shipped form: tools/exp_fused.py
    measures it against the TANH form (``fused_sigmoid``)."""
    c0 = -2.0 * math.log2(math.e) * GELU_TANH_K0
    return f"{y} * rcp_approx(1.f + ex2_approx({y} * fmaf({c0 * GELU_TANH_K1!r}f, {y} * {y}, {c0!r}f)))"


def activation_c_expr(act: Activation, y: str = "y") -> str:
    return {
        Activation.NONE: y,
        Activation.RELU: f"fmaxf({y}, 0.f)",
        # tanh.approx.f32 (one MUFU op, |error| ~ 2^-11): well inside a 16-bit output's rounding. Written as
        # h + h t with h = y / 2 and t = tanh(y (k0 + k0 k1 y^2)): FMUL, FFMA, FMUL, MUFU, FMUL, FFMA per element
        # (the textbook form 0.5 y (1 + tanh(k0 (y + k1 y^3))) compiled to 8 FP32 ops and the MUFU).
        Activation.GELU_TANH: f"fmaf(0.5f * {y}, tanh_approx({y} * fmaf({GELU_TANH_K0 * GELU_TANH_K1!r}f, {y} * {y}, {GELU_TANH_K0!r}f)), 0.5f * {y})",
        Activation.GELU_ERF: f"0.5f * {y} * (1.f + erff({y} * {INV_SQRT2!r}f))",
        Activation.SILU: f"__fdividef({y}, 1.f + __expf(-{y}))",
    }[act]


def dact_c_body(act: Activation, z: str = "z") -> str:
    """The body of ``chain_dact(float z)``: act'(z), the backward step's factor (fusion's ``dact``; the formulas in
    ptxgen.isa.epiops.Activation.derivative). gelu_tanh through e = exp(2u) = 2^(2u log2 e), s = 1 / (1 + e) =
    (1 - tanh u) / 2, so that 0.5 (1 + tanh u) = 1 - s = e s and 1 - tanh^2 u = 4 s (1 - s) keep their accuracy where
    tanh saturates: 1 - s where s is small (z >= 0; e may be inf there), e s where s is near 1 (z < 0: 1 - s would
    cancel, 10% off at z = -4.6 in f32). gelu_erf's Phi(z) as erfc(-z / sqrt 2) / 2 (0.5 (1 + erf) cancels for z << 0).
    EX2 and RCP saturate to inf and 0, never NaN."""
    l2e2 = 2.0 * math.log2(math.e)
    if act is Activation.RELU:
        return f"return {z} > 0.f ? 1.f : 0.f;"
    if act is Activation.GELU_TANH:
        return (f"const float e = ex2_approx({z} * fmaf({l2e2 * GELU_TANH_K0 * GELU_TANH_K1!r}f, {z} * {z}, {l2e2 * GELU_TANH_K0!r}f));"
                f"  // exp(2u), u = k0 (z + k1 z^3)\n"
                f"  const float s = rcp_approx(1.f + e);  // (1 - tanh u) / 2\n"
                f"  const float q = {z} < 0.f ? e * s : 1.f - s;  // (1 + tanh u) / 2 without cancellation\n"
                f"  return fmaf(2.f * {z} * s * q, fmaf({3.0 * GELU_TANH_K0 * GELU_TANH_K1!r}f, {z} * {z}, {GELU_TANH_K0!r}f), q);")
    if act is Activation.GELU_ERF:
        return (f"return fmaf({z} * {INV_SQRT_2PI!r}f, __expf(-0.5f * {z} * {z}), 0.5f * erfcf(-{z} * {INV_SQRT2!r}f));")
    if act is Activation.SILU:
        return f"const float s = rcp_approx(1.f + __expf(-{z}));  // sigmoid(z)\n  return s * fmaf({z}, 1.f - s, 1.f);"
    raise ValueError(f"no derivative step for {act.value}")


@dataclass(frozen=True)
class ChainView:
    token: str
    steps_doc: str
    act_expr: str
    act: bool
    c: bool
    bias_col: bool
    bias_row: bool
    residual: bool
    fp8: bool
    scale_row: bool
    scale_tensor: bool
    aux_bytes: int
    aux_bf16: str  # "true" / "false"
    bias_bytes: int
    bias_bf16: str
    args_init: str  # C: the ChainArgs initializer from the kernel's parameters
    full_mask: str
    xor_masks: tuple[int, ...]
    writer_cond: str  # C: this lane raises amax
    frag: WgmmaFragmentView  # wgmma: a thread's two rows and its registers' column pairs
    tile_cols: int  # wgmma: columns of a slab (the tile's BN): a thread's columns lie in n0 .. n0 + tile_cols - 1
    col_groups: int  # wgmma: 8-column groups of a slab (a thread's column-bias pairs)
    bias_prefetch: str  # wgmma: when the column-bias pairs are loaded: "start" (before the tile's main loop), "late"
    # (after its last MMAs are issued, before the wait), "after" (after the main loop, the batched loads of
    # runs/2026-12-01-fusedperf); tools/exp_fused.py measures the three; "inline" (rowscale chains: each pair loaded
    # where it is used, in batches of rowscale_batch groups between compiler fences)
    bias_pair_ctype: str  # C type of one raw column-bias pair as loaded: a 4-byte word of two 16-bit values, or float2
    c_tma: bool = False  # C through TMA (ptxgen.derive.store.cload): chain_pair takes C's pair as an argument
    aux_store: bool = False  # store the pre-activation z to aux (fusion's ``aux``)
    dact: bool = False  # the backward step y x act'(aux) (fusion's ``dact``)
    dact_body: str = ""  # C: the body of chain_dact(float z)
    rowscale: bool = False  # step 0 (fusion's ``rowscale``): acc x scale_a[row] x scale_b[col]
    rowscale_batch: int = 8  # wgmma, rowscale chains: 8-column groups whose scale_b (and column-bias) pairs are loaded
    # between two compiler fences (volatile loads): 128 x 256 tiles spilled with all 32 groups' pairs in flight (NVRTC 13.5)
    rowscale_pass: bool = False  # wgmma: the scales applied in a pass of their own before the chain loop, the column
    # bias prefetched as without rowscale (f32 outputs: the one-loop form spilled on 128 x 256 tiles, this one did not)

    @property
    def aux_any(self) -> bool:
        """The kernel takes the pre-activation tensor (AUX, ldaux): written by ``aux``, read by ``dact``."""
        return self.aux_store or self.dact


def chain_view(plan: ChainPlan | None, c_offset: str = "") -> ChainView | None:
    """``c_offset``: the C of a byte offset added to C (a K-grouped kernel's out[g] reads C[g]); "" for none."""
    if plan is None:
        return None
    ch = plan.chain
    names = {n for n, _, _ in chain_params(ch)}
    c_init = f"C + {c_offset}" if c_offset else "C"
    fields = (("alpha", "1.f"), ("beta", "0.f"), (c_init, "nullptr"), ("ldc", "0"), ("BIAS", "nullptr"), ("RES", "nullptr"),
              ("ldr", "0"), ("SCALE", "nullptr"), ("AMAX", "nullptr"))
    dact = ch.dact is not Activation.NONE
    if ch.aux or dact:  # ChainArgs has these two fields only then (kernels without them render as before)
        fields += (("AUX", "nullptr"), ("ldaux", "0"))
    if ch.rowscale:  # and these two only with rowscale
        fields += (("reinterpret_cast<const float*>(SCALE_A)", ""), ("reinterpret_cast<const float*>(SCALE_B)", ""))
    init = ", ".join(n if n.split(" ")[0] in names or not d else d for n, d in fields)
    a = plan.amax
    if a is None:
        writer = "false"
    elif not a.per_row:
        writer = f"lane == {a.writer_lanes[0]}"
    elif plan.family == "wgmma":
        writer = f"lane % {LANES_PER_ROW} == 0"
    else:
        writer = "chain_active"
    return ChainView(
        token=ch.token,
        steps_doc="; ".join(steps_text(ch, plan.out, plan.aux)),
        act_expr=activation_c_expr(ch.activation),
        act=ch.activation is not Activation.NONE,
        c=ch.c,
        bias_col=ch.bias is BiasAxis.COL,
        bias_row=ch.bias is BiasAxis.ROW,
        residual=ch.residual,
        fp8=ch.fp8_scale is not None,
        scale_row=ch.fp8_scale is ScaleMode.ROW,
        scale_tensor=ch.fp8_scale is ScaleMode.TENSOR,
        aux_bytes=plan.aux.bytes,
        aux_bf16="true" if plan.aux is DType.BF16 else "false",
        bias_bytes=ch.bias_dtype.bytes,
        bias_bf16="true" if ch.bias_dtype is DType.BF16 else "false",
        args_init="{" + init + "}",
        full_mask=FULL_WARP_MASK,
        xor_masks=() if a is None else a.xor_masks,
        writer_cond=writer,
        frag=wgmma_fragment_view(),
        tile_cols=plan.bn,
        col_groups=plan.bn // WGMMA_GROUP_COLS,
        bias_prefetch="inline" if ch.rowscale else "late",
        bias_pair_ctype="float2" if ch.bias_dtype.bytes == 4 else "unsigned",
        c_tma=ch.c_tma,
        aux_store=ch.aux,
        dact=dact,
        dact_body=dact_c_body(ch.dact) if dact else "",
        rowscale=ch.rowscale,
        rowscale_pass=ch.rowscale and plan.out is DType.F32,
    )


@dataclass(frozen=True)
class CPairView:
    """One C pair an ldmatrix register holds: register ``reg`` of the call, fragment elements ``first``, ``first`` + 1
    (chunk-relative), in the thread's row ``row`` (``row_lo`` or ``row_lo + 8``) whose row bias is ``row_bias``."""

    reg: int
    first: int
    row: str
    row_bias: str


@dataclass(frozen=True)
class CLoadView:
    """C through TMA (ptxgen.derive.store.cload), rendered: per chunk, one TMA load into the store's buffer, then per stmatrix
    call one ldmatrix at the same address whose registers hold the C pairs of ``calls[j]``."""

    barrier_offset: int  # the first c_full mbarrier (one per consumer warpgroup, 8 B apart)
    expect_bytes: int
    col_expr: str  # C: the box's column offset from n0 for chunk c
    parity_expr: str  # C: the phase this warpgroup waits for (its TMA-path chunks so far, mod 2)
    calls: tuple[tuple[CPairView, ...], ...]  # wgmma
    reader: str = "ldmatrix"  # derive.store.cload.CLoadPlan.reader: ldmatrix (wgmma) or ld.shared.v4 (tcgen05)
    cells: int = 0  # tcgen05: 16-byte cells of the thread's row per chunk (ld.shared.v4 at the store's row_cell_expr)
    words: int = 0  # tcgen05: 32-bit words of C per thread per chunk (two 16-bit elements each)
    word_expr: str = ""  # tcgen05: C: the word holding C at register i of TMEM load h of the chunk (i even)


def c_load_view(plan: CLoadPlan | None, store: StorePlan | None, barrier_offset: int, tmem_chunk: int = 0) -> CLoadView | None:
    if plan is None:
        return None
    parity = f"static_cast<unsigned>(store_chunk) % {PHASES}u"
    if store.writer != "stmatrix":  # tcgen05: register i of load h is column h x chunk + i of the chunk, 2 per word
        return CLoadView(barrier_offset, plan.expect_tx_bytes, plan.col_c_expr("c"), parity, (), plan.reader,
                         store.staging.cols, store.chunk_cols // 2, plan.row_word_c_expr(f"h * {tmem_chunk} + i"))
    calls = []
    for j in range(store.stmatrix_per_chunk):
        pairs = []
        for q in range(4):
            i0, _ = store.fragment_elements(j, q)
            lower = (i0 % WGMMA_GROUP_REGS) >= WGMMA_GROUP_REGS // 2  # elements 2, 3 of a group: 8 rows down
            pairs.append(CPairView(q, i0, f"row_lo + {WGMMA_ROW_HALF}" if lower else "row_lo", "rb_hi" if lower else "rb_lo"))
        calls.append(tuple(pairs))
    return CLoadView(barrier_offset, plan.expect_tx_bytes, plan.col_c_expr("c"), parity, tuple(calls), plan.reader)
