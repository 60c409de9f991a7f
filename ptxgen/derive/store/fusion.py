"""The fused epilogue chain: what happens to each accumulator element between the MMA and global memory.

The steps run in one fixed order, each optional (``y`` is the f32 value of one output element, row r, column n):

0. ``acc = acc x sa[r] x sb[n]``            rowscale: the dequantization of row-wise FP8 (torch._scaled_mm's recipe):
                                            sa f32, M long (one per row of A), sb f32, N long (one per row of B)
1. ``y = alpha x acc``                      alpha: a kernel argument (f32)
2. ``y += beta x C[r, n]``                  C: M x N, row stride ``ldc``, the output's type (bf16 with FP8 output)
3. ``y += bias[n]`` or ``y += bias[r]``     bias: f32, bf16 or f16, per column (length N) or per row (length M)
3'. ``AUX[r, n] = cvt(y)``                  aux: the pre-activation z stored beside D (M x N, row stride ``ldaux``,
                                            C's type), as cuBLASLt's GELU_AUX epilogue; only with an activation
4. ``y = act(y)``                           relu, gelu (tanh or erf), silu
   or ``y = y x act'(AUX[r, n])``           dact: the backward step (cuBLASLt's DGELU): the saved pre-activation
                                            read at the element's own (row, column); not with an activation
5. ``y += R[r, n]``                         residual: M x N, row stride ``ldr``, C's type
6. output: ``D[r, n] = cvt(y)``; or FP8: ``D[r, n] = e4m3_satfinite(y x s)`` with ``s = scale[0]`` (per tensor) or
   ``scale[r]`` (per row), and ``amax[0]`` / ``amax[r]`` raised to ``max |y|`` (atomicMax; the caller zeroes it).

Every step reads its operand at the coordinates of the output element it changes. What this module derives is the
thread's side of that: for each thread of a wgmma warpgroup (m64nN D fragment) or of a tcgen05 epilogue warp
(``tcgen05.ld 32x32b``: a thread holds one row), which operand elements it loads and which of its accumulator
registers each loaded value feeds (:mod:`ptxgen.derive.store.fusion_loads`), and how the threads that share a row
combine their amax. The bridge
``ptxgen.model.bridges.check_fusion`` runs these loads through the independent ``ptxgen.model.layouts.epimodel``.

>>> from ptxgen.derive.store.chainspec import parse_chain
>>> ch = parse_chain("bias=col:bf16,gelu,residual")
>>> ch.token, ch.name_suffix
('bias=col:bf16,act=gelu_tanh,residual', '_fbcbf16gelutr')
>>> from ptxgen.derive.store.fusion_loads import wgmma_loads
>>> [(l.col, l.targets) for l in wgmma_loads(ch, "bias", warp=0, lane=5, bn=16)]
[(2, ((0, 2), (1, 3))), (10, ((4, 6), (5, 7)))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...isa.epiops import E4M3_MAX, Activation, BiasAxis, ScaleMode
from ...isa.ptxref import cite
from ...isa.types import Arch, DType, Epilogue, SpecError
from ...isa.fragment import LANES_PER_ROW, WARP_LANES, WGMMA_ROW_HALF, WGMMA_WARP_ROWS
from ..tile.derived import Derived
from .chainspec import FLAG, ChainSpec
from .fusion_loads import Load, tmem_loads, tmem_row, wgmma_loads

def check_chain(chain: ChainSpec, arch: Arch, acc: DType, out: DType, epilogue: Epilogue, bm: int, bn: int, pair: bool,
                block_scaled: bool) -> None:
    """The chain's legality rules (raise SpecError naming the flag, the rule and the way out)."""
    if acc is not DType.F32:
        raise SpecError(FLAG, chain.token, f"the epilogue chain works on f32 accumulators, here {acc.value}", "--acc f32")
    if chain.fp8_scale is not None and out is not DType.E4M3:
        raise SpecError(FLAG, chain.token, f"scale= quantizes to e4m3, but --out-dtype is {out.value}", "--out-dtype e4m3")
    if out is DType.E4M3 and chain.fp8_scale is None:
        raise SpecError("--out-dtype", out.value, "FP8 output needs its scale (and writes amax)", "--fuse ...,scale=tensor|row")
    if out not in (DType.F32, DType.F16, DType.BF16, DType.E4M3):
        raise SpecError("--out-dtype", out.value, "a fused epilogue writes f32, f16, bf16 or e4m3", "f32 f16 bf16 e4m3")
    if out is DType.E4M3 and epilogue is Epilogue.TMA and arch is not Arch.SM90A:
        raise SpecError(FLAG, chain.token, "tcgen05 FP8 output goes through the direct epilogue (the TMA-store staging of "
                        "tcgen05 holds 16-bit elements)", "--epilogue direct")
    if pair:
        raise SpecError(FLAG, chain.token, "the CTA pair (--cta-group 2) has no fused epilogue yet", "--cta-group 1")
    if block_scaled:
        raise SpecError(FLAG, chain.token, "block-scaled kinds (--scale) have no fused epilogue yet", "leave out --scale")
    if arch is Arch.SM100A and out is DType.E4M3 and bn % 16:
        raise SpecError("--bn", bn, "tcgen05 FP8 output stores whole 16-byte vectors of a row: 16 columns at a time",
                        "a multiple of 16")
    if arch is Arch.SM100A and bm == 64 and epilogue is Epilogue.TMA:
        raise SpecError(FLAG, chain.token, "tcgen05 M=64 has no TMA-store epilogue", "--epilogue direct")
    check_aux(chain, out)
    if chain.c_tma:
        if chain.rowscale:
            raise SpecError(FLAG, chain.token, "rowscale with C through TMA: the staged-C pass (wgmma_c_chunk) does not "
                            "carry the row and column scales", "--fuse rowscale,c")
        if epilogue is not Epilogue.TMA:
            raise SpecError(FLAG, chain.token, "C through TMA lands in the TMA-store epilogue's staging buffers",
                            "--epilogue tma, or --fuse c")
        if out not in (DType.F16, DType.BF16):
            raise SpecError(FLAG, chain.token, f"C through TMA is staged as 16-bit elements, here {out.value}",
                            "--out-dtype bf16|f16, or --fuse c")


def check_aux(chain: ChainSpec, out: DType) -> None:
    """The rules of the pre-activation steps: ``aux`` stores the value an activation takes, ``dact`` replaces the
    activation (a forward chain and its backward step are two kernels), both in a 16-bit or f32 output's type."""
    if chain.aux and chain.activation is Activation.NONE:
        raise SpecError(FLAG, chain.token, "aux stores the pre-activation value for the backward pass; without an "
                        "activation it is D itself", "add act=..., or leave out aux")
    if chain.dact is not Activation.NONE and chain.activation is not Activation.NONE:
        raise SpecError(FLAG, chain.token, "dact (the backward step, y x act'(aux)) takes the activation's place: a chain has "
                        "one or the other", "leave out act= or dact=")
    if (chain.aux or chain.dact is not Activation.NONE) and out is DType.E4M3:
        raise SpecError(FLAG, chain.token, "the pre-activation (aux) is stored and read in the output's type: a 16-bit or "
                        "f32 output", "--out-dtype bf16|f16|f32")


def chain_params(chain: ChainSpec) -> tuple[tuple[str, str, str], ...]:
    """The kernel parameters the chain adds after ``ldd``: (name, kind, doc), kind as in derive.tile.abi.Param."""
    p = [("alpha", "f32", "y = alpha x acc")]
    if chain.rowscale:
        p += [("SCALE_A", "ptr", "f32 row scales of A, M entries, contiguous: acc x scale_a[r]"),
              ("SCALE_B", "ptr", "f32 row scales of B, N entries, contiguous, 8-byte aligned: acc x scale_b[n]")]
    if chain.c:
        p += [("beta", "f32", "y += beta x C"), ("C", "ptr", "C, M x N row-major, 4-byte aligned rows"),
              ("ldc", "i32", "C's row stride in elements")]
        if chain.c_tma:
            p.append(("tmap_c", "tensormap", "C's tensor map (16-byte aligned base and rows; the tiles that take the "
                      "direct stores read C through C and ldc)"))
    if chain.bias is not None:
        p.append(("BIAS", "ptr", f"bias, {chain.bias_dtype.value}, one per {'column (N)' if chain.bias is BiasAxis.COL else 'row (M)'}"))
    if chain.aux or chain.dact is not Activation.NONE:
        p += [("AUX", "wptr" if chain.aux else "ptr", "the pre-activation z, M x N row-major, 4-byte aligned rows, "
               + ("written: z = the value after bias, before the activation" if chain.aux else "read: y x act'(z)")),
              ("ldaux", "i32", "aux's row stride in elements")]
    if chain.residual:
        p += [("RES", "ptr", "the residual, M x N row-major, 4-byte aligned rows"), ("ldr", "i32", "the residual's row stride in elements")]
    if chain.fp8_scale is not None:
        n = "1" if chain.fp8_scale is ScaleMode.TENSOR else "M"
        p += [("SCALE", "ptr", f"f32 output scale, {n} entries: D = e4m3(y x scale)"),
              ("AMAX", "wptr", f"f32 amax, {n} entries, raised to max |y| (atomicMax; zero it before the call)")]
    return tuple(p)


@dataclass(frozen=True)
class AmaxPlan:
    """How the threads combine max |y| before the atomicMax: butterfly shuffles (``shfl.sync.bfly`` with each mask),
    then the writer lanes raise amax at ``row`` (or amax[0] per tensor)."""

    per_row: bool
    xor_masks: tuple[int, ...]
    writer_lanes: tuple[int, ...]

    def written_rows(self, family: str, bm: int, warp: int, lane: int) -> tuple[int, ...]:
        """Rows (slab-relative on wgmma) whose amax ``lane`` writes; per tensor: (0,) for a writer."""
        if lane not in self.writer_lanes:
            return ()
        if not self.per_row:
            return (0,)
        if family == "wgmma":
            r = WGMMA_WARP_ROWS * warp + lane // LANES_PER_ROW
            return (r, r + WGMMA_ROW_HALF)
        row = tmem_row(bm, warp, lane)
        return () if row is None else (row,)


def amax_plan(chain: ChainSpec, arch: Arch, bm: int) -> AmaxPlan | None:
    if chain.fp8_scale is None:
        return None
    if chain.fp8_scale is ScaleMode.TENSOR:
        return AmaxPlan(False, (16, 8, 4, 2, 1), (0,))
    if arch is Arch.SM90A:  # lanes 4r..4r+3 share rows r and r + 8: two butterfly steps inside the quad
        return AmaxPlan(True, (2, 1), tuple(range(0, WARP_LANES, LANES_PER_ROW)))
    lanes = tuple(range(WARP_LANES)) if bm == 128 else tuple(range(16))
    return AmaxPlan(True, (), lanes)  # a thread holds its whole row


@dataclass(frozen=True)
class ChainPlan:
    chain: ChainSpec
    arch: Arch
    bm: int
    bn: int
    out: DType
    aux: DType
    amax: AmaxPlan | None
    derivation: tuple[Derived, ...] = field(default=())

    @property
    def family(self) -> str:
        return "wgmma" if self.arch is Arch.SM90A else "tcgen05"

    def loads(self, operand: str, warp: int, lane: int, col0: int = 0, chunk: int = 32) -> tuple[Load, ...]:
        if self.arch is Arch.SM90A:
            return wgmma_loads(self.chain, operand, warp, lane, self.bn)
        return tmem_loads(self.chain, operand, self.bm, warp, lane, col0, chunk)

    def stores(self, operand: str, warp: int, lane: int, col0: int = 0, chunk: int = 32) -> tuple[Load, ...]:
        """The thread's stores of ``operand`` (``aux``): the same records as a matrix operand's loads, read the other
        way: element k of a record is written from the register ``targets[k]`` names (a matrix element has one)."""
        return self.loads(operand, warp, lane, col0, chunk)

    def to_json(self) -> dict:
        return {**self.chain.to_json(), "aux_dtype": self.aux.value, "out_dtype": self.out.value,
                "amax": None if self.amax is None else {"per_row": self.amax.per_row, "xor_masks": list(self.amax.xor_masks)}}

    def explain_lines(self) -> list[str]:
        lines = [f"epilogue chain ({self.chain.token}), per output element y at row r, column n, in this order:"]
        for i, step in enumerate(steps_text(self.chain, self.out, self.aux), 1):
            lines.append(f"  {i}. {step}")
        return lines


def step_names(chain: ChainSpec) -> tuple[str, ...]:
    """The chain's steps in the order the kernel runs them (the template's chain_pair), as data for the L1 model."""
    on = (("rowscale", chain.rowscale), ("alpha", True), ("c", chain.c), ("bias", chain.bias is not None),
          ("act", chain.activation is not Activation.NONE), ("dact", chain.dact is not Activation.NONE),
          ("residual", chain.residual), ("scale", chain.fp8_scale is not None))
    return tuple(name for name, here in on if here)


def steps_text(chain: ChainSpec, out: DType, aux: DType) -> list[str]:
    s = ["acc = acc x scale_a[r] x scale_b[n]  (f32 vectors, M and N long; rows and columns past M, N never read)"] if chain.rowscale else []
    s.append("y = alpha x acc  (alpha: f32 argument)")
    if chain.c:
        s.append(f"y += beta x C[r, n]  (beta: f32 argument; C: {aux.value}, M x N, row stride ldc"
                 + (", read through TMA into the store staging)" if chain.c_tma else ")"))
    if chain.bias is not None:
        idx = "n" if chain.bias is BiasAxis.COL else "r"
        s.append(f"y += bias[{idx}]  ({chain.bias_dtype.value}, one per {'column' if idx == 'n' else 'row'})")
    if chain.aux:
        s.append(f"aux[r, n] = {aux.value}(y)  (the pre-activation z, M x N, row stride ldaux; round to nearest even)")
    if chain.activation is not Activation.NONE:
        s.append(f"y = {chain.activation.value}(y) = {chain.activation.formula}")
    if chain.dact is not Activation.NONE:
        s.append(f"y = y x {chain.dact.value}'(aux[r, n]) = y x ({chain.dact.derivative})  (z = aux[r, n]: {aux.value}, "
                 "M x N, row stride ldaux)")
    if chain.residual:
        s.append(f"y += R[r, n]  (residual: {aux.value}, M x N, row stride ldr)")
    if chain.fp8_scale is not None:
        idx = "0" if chain.fp8_scale is ScaleMode.TENSOR else "r"
        s.append(f"D[r, n] = e4m3 satfinite(y x scale[{idx}]) (|q| <= {E4M3_MAX:g}); amax[{idx}] = max(amax[{idx}], |y|) "
                 "(atomicMax on the f32 bits; amax must start at 0)")
    else:
        s.append(f"D[r, n] = {out.value}(y)  (round to nearest even)")
    return s


def plan_chain(chain: ChainSpec, arch: Arch, bm: int, bn: int, out: DType, epilogue: Epilogue) -> ChainPlan:
    aux = chain.aux_dtype(out)
    amax = amax_plan(chain, arch, bm)
    wg = arch is Arch.SM90A
    D = [Derived("chain", chain.token, " -> ".join(steps_text(chain, out, aux)), "fixed order: rowscale, alpha, C, bias, "
                 "activation, residual, output (as cuBLASLt's and CUTLASS's linear-combination epilogues)", "ptxgen.derive.store.fusion")]
    where = ("the wgmma D fragment: per 8 columns a thread holds 2 adjacent columns in 2 rows 8 apart" if wg
             else "tcgen05.ld 32x32b: a thread holds one row, register j = column c0 + j")
    src = cite("wgmma") if wg else cite("tmem_layout")
    if chain.rowscale:
        D.append(Derived("rowscale_loads", "2 per slab + 8 B per 8 columns" if wg else "1 per tile + 8 B per register pair",
                         f"scale_a[m0 + row] as a row bias is read, scale_b[n0 + col] as an f32 column bias; {where}",
                         "the same loads as the bias of that axis (fusion_loads.wgmma_loads / tmem_loads)", src))
    if chain.bias is BiasAxis.COL:
        vec = (f"{2 * chain.bias_dtype.bytes} B (2 columns) per 8 columns, feeding both rows" if wg
               else f"{2 * chain.bias_dtype.bytes} B (2 columns) per register pair")
        D.append(Derived("bias_loads", vec, f"bias[n0 + col]; {where}", "one load per column pair a thread holds", src))
    elif chain.bias is BiasAxis.ROW:
        D.append(Derived("bias_loads", "2 per slab" if wg else "1 per tile", f"bias[m0 + row]; {where}",
                         "the thread's rows: lane/4 and lane/4 + 8 of its warp's 16" if wg else "the thread's row", src))
    for name, on in (("c_loads", chain.c), ("aux_loads", chain.dact is not Activation.NONE), ("aux_stores", chain.aux),
                     ("residual_loads", chain.residual)):
        if on:
            D.append(Derived(name, f"{2 * aux.bytes} B per element pair",
                             f"({aux.value}) at the output element's own (row, column); {where}",
                             "the same coordinates as D, so the same fragment map", src))
    if amax is not None:
        D.append(Derived("amax", "per row" if amax.per_row else "per tensor",
                         f"max |y| over the thread's elements, then shfl.sync.bfly.b32 with masks {list(amax.xor_masks)}; "
                         f"{len(amax.writer_lanes)} writer lane(s) a warp; "
                         "atomicMax on the f32 bits (non-negative floats order like their bits)",
                         "lanes 4r..4r+3 share a row in the wgmma fragment" if wg and amax.per_row else
                         "a thread holds its whole row" if amax.per_row else "every element of the tensor",
                         "PTX ISA 'shfl.sync', 'red/atom .max'"))
    return ChainPlan(chain, arch, bm, bn, out, aux, amax, tuple(D))
