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
registers each loaded value feeds, and how the threads that share a row combine their amax. The bridge
``ptxgen.model.bridges.check_fusion`` runs these loads through the independent ``ptxgen.model.layouts.epimodel``.

>>> ch = parse_chain("bias=col:bf16,gelu,residual")
>>> ch.token, ch.name_suffix
('bias=col:bf16,act=gelu_tanh,residual', '_fbcbf16gelutr')
>>> [(l.col, l.targets) for l in wgmma_loads(ch, "bias", warp=0, lane=5, bn=16)]
[(2, ((0, 2), (1, 3))), (10, ((4, 6), (5, 7)))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...isa.epiops import BIAS_DTYPES, E4M3_MAX, Activation, BiasAxis, ScaleMode
from ...isa.ptxref import cite
from ...isa.types import Arch, DType, Epilogue, SpecError
from ..tile.derived import Derived

FLAG = "--fuse"
OPERANDS = ("scale_a", "scale_b", "c", "bias", "residual", "scale")
WGMMA_WARP_ROWS = 16  # warp w of a warpgroup holds rows 16w..16w+15 of the m64nN D fragment
WGMMA_GROUP_COLS = 8  # 4 registers of a thread cover 8 columns: 2 adjacent columns in 2 rows 8 apart
WGMMA_ROW_HALF = 8
WGMMA_GROUP_REGS = 4  # registers 4g, 4g+1 (row r) and 4g+2, 4g+3 (row r + 8) of group g
LANES_PER_ROW = 4  # wgmma: lanes 4r..4r+3 of a warp hold row r (and r + 8)
WARP_LANES = 32


@dataclass(frozen=True)
class ChainSpec:
    """Which optional steps the kernel has (compile time). alpha, beta and the pointers are kernel arguments."""

    alpha: bool = False  # asked for explicitly; every chain takes alpha as an argument
    c: bool = False
    bias: BiasAxis | None = None
    bias_dtype: DType = DType.BF16
    activation: Activation = Activation.NONE
    residual: bool = False
    fp8_scale: ScaleMode | None = None
    c_tma: bool = False  # C read through TMA into the store staging buffers (ptxgen.derive.store.cload); else global loads
    aux: bool = False  # store the pre-activation value (after bias, before the activation) to AUX[r, n]
    dact: Activation = Activation.NONE  # the backward step: y x act'(AUX[r, n]) in the activation's place
    rowscale: bool = False  # step 0: acc x scale_a[r] x scale_b[n] (f32 vectors, M and N long), before alpha

    def __post_init__(self):
        if self.bias is None:
            object.__setattr__(self, "bias_dtype", DType.BF16)  # no bias: its type means nothing
        if not self.c:
            object.__setattr__(self, "c_tma", False)  # no C: how it would be read means nothing

    @property
    def token(self) -> str:
        """The canonical ``--fuse`` value, in chain order."""
        parts = ["rowscale"] if self.rowscale else []
        if self.alpha and not (self.rowscale or self.c or self.bias or self.activation is not Activation.NONE or self.residual or self.fp8_scale
                               or self.dact is not Activation.NONE):
            parts.append("alpha")
        if self.c:
            parts.append("c=tma" if self.c_tma else "c")
        if self.bias is not None:
            parts.append(f"bias={self.bias.value}:{self.bias_dtype.value}")
        if self.aux:
            parts.append("aux")
        if self.activation is not Activation.NONE:
            parts.append(f"act={self.activation.value}")
        if self.dact is not Activation.NONE:
            parts.append(f"dact={self.dact.value}")
        if self.residual:
            parts.append("residual")
        if self.fp8_scale is not None:
            parts.append(f"scale={self.fp8_scale.value}")
        return ",".join(parts)

    @property
    def name_suffix(self) -> str:
        s = "_fq" if self.rowscale else "_f"
        if self.c:
            s += "ct" if self.c_tma else "c"
        if self.bias is not None:
            s += f"b{self.bias.value[0]}{self.bias_dtype.value}"
        if self.aux:
            s += "z"
        s += self.activation.short
        if self.dact is not Activation.NONE:
            s += "d" + self.dact.short
        if self.residual:
            s += "r"
        if self.fp8_scale is not None:
            s += f"s{self.fp8_scale.value[0]}"
        return s if s != "_f" else "_fa"

    def aux_dtype(self, out: DType) -> DType:
        """C's and the residual's element type: the output's, bf16 when the output is FP8."""
        return DType.BF16 if out.bits == 8 else out

    def operands(self) -> tuple[str, ...]:
        """Operands that are read per output element, in chain order."""
        return tuple(n for n, on in (("scale_a", self.rowscale), ("scale_b", self.rowscale), ("c", self.c), ("bias", self.bias is not None), ("aux", self.dact is not Activation.NONE),
                                     ("residual", self.residual), ("scale", self.fp8_scale is not None)) if on)

    def stores(self) -> tuple[str, ...]:
        """Operands written per output element beside D: the pre-activation ``aux``."""
        return ("aux",) if self.aux else ()

    def to_json(self) -> dict:
        return {
            "token": self.token,
            "c": self.c,
            "bias": None if self.bias is None else {"axis": self.bias.value, "dtype": self.bias_dtype.value},
            "activation": self.activation.value,
            "residual": self.residual,
            "fp8_scale": None if self.fp8_scale is None else self.fp8_scale.value,
        } | ({"c_tma": True} if self.c_tma else {}) | ({"aux": True} if self.aux else {}) | (
            {"dact": self.dact.value} if self.dact is not Activation.NONE else {}) | ({"rowscale": True} if self.rowscale else {})


def parse_chain(raw) -> ChainSpec | None:
    """``--fuse`` value -> ChainSpec (None for '' / None / 'none'). Items are comma-separated, in any order:
    ``alpha``, ``c``, ``bias=col|row[:f32|bf16|f16]``, ``aux``, ``act=relu|gelu|gelu_tanh|gelu_erf|silu`` (or the bare
    name), ``dact=relu|gelu|gelu_tanh|gelu_erf|silu`` (or the bare name with a ``d``: ``dgelu``), ``residual``,
    ``scale=tensor|row``, ``rowscale`` (step 0: acc x scale_a[r] x scale_b[n])."""
    if raw is None or isinstance(raw, ChainSpec):
        return raw
    if not isinstance(raw, str):
        raise SpecError(FLAG, raw, "must be a comma-separated list of epilogue steps", _LEGAL)
    text = raw.strip().lower()
    if text in ("", "none"):
        return None
    v: dict = {}
    for item in (t.strip() for t in text.split(",")):
        key, _, arg = item.partition("=")
        if key in ACT_TOKENS:
            key, arg = "act", key
        elif key[:1] == "d" and key[1:] in ACT_TOKENS:
            key, arg = "dact", key[1:]
        name = {"alpha": "alpha", "c": "c", "beta": "c", "bias": "bias", "act": "activation", "residual": "residual",
                "scale": "fp8_scale", "aux": "aux", "dact": "dact",
                "rowscale": "rowscale"}.get(key)
        if name is None or name in v:
            rule = "names a step twice" if name in v else f"has an unknown step {item!r}"
            raise SpecError(FLAG, raw, rule, _LEGAL)
        try:
            if name == "bias":
                axis, _, dt = arg.partition(":")
                v["bias"] = BiasAxis.parse(axis or "col")
                if dt:
                    v["bias_dtype"] = DType(dt)
                    if v["bias_dtype"] not in BIAS_DTYPES:
                        raise ValueError(dt)
            elif name in ("activation", "dact"):
                v[name] = Activation.parse(arg)
                if name == "dact" and v[name] is Activation.NONE:
                    raise ValueError(arg)
            elif name == "fp8_scale":
                v[name] = ScaleMode.parse(arg or "tensor")
            elif name == "c" and arg:
                if arg != "tma":
                    raise ValueError(arg)
                v["c"] = v["c_tma"] = True
            elif arg:
                raise ValueError(arg)
            else:
                v[name] = True
        except ValueError:
            raise SpecError(FLAG, raw, f"step {item!r} has an illegal argument", _LEGAL) from None
    v["alpha"] = True
    return ChainSpec(**v)


ACT_TOKENS = ("relu", "gelu", "gelu_tanh", "gelu_erf", "silu")
_LEGAL = ("rowscale, alpha, c[=tma], bias=col|row[:f32|bf16|f16], aux, act=relu|gelu_tanh|gelu_erf|silu or "
          "dact=relu|gelu_tanh|gelu_erf|silu, residual, scale=tensor|row (comma-separated, each at most once; they run in "
          "that order)")


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


# ------------------------------------------------------------------------------------------------
# Which operand elements each thread loads, and which of its accumulator registers each one feeds
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    """One load of consecutive operand elements by one thread.

    ``row``/``col``: tile-relative (wgmma: relative to the 64-row slab) coordinates of the first element; a column
    vector (bias per column) has no row, a row vector (bias or scale per row) no column, a per-tensor scalar
    neither. Consecutive elements run along the columns. ``targets[k]``: the accumulator registers (fragment
    element indices; tcgen05: registers of the 32x32b load) that element k feeds."""

    operand: str
    row: int | None
    col: int | None
    targets: tuple[tuple[int, ...], ...]

    @property
    def count(self) -> int:
        return len(self.targets)

    def to_json(self) -> list:
        return [self.operand, self.row, self.col, [list(t) for t in self.targets]]


ROWSCALE_AXES = {"scale_a": "r", "scale_b": "c"}  # rowscale: scale_a per row of D (A's rows), scale_b per column


def _axis(chain: ChainSpec, operand: str) -> str:
    """'rc' (a matrix), 'c' (indexed by column), 'r' (by row) or '' (one scalar)."""
    if operand in ("c", "residual", "aux"):
        return "rc"
    if operand == "bias":
        return "c" if chain.bias is BiasAxis.COL else "r"
    if operand in ROWSCALE_AXES:
        return ROWSCALE_AXES[operand]
    if operand == "scale":
        return "r" if chain.fp8_scale is ScaleMode.ROW else ""
    raise ValueError(operand)


def wgmma_loads(chain: ChainSpec, operand: str, warp: int, lane: int, bn: int) -> tuple[Load, ...]:
    """The loads of ``operand`` by ``lane`` of ``warp`` for one m64nBN slab. The thread's registers, per group g of
    8 columns: 4g, 4g+1 = row 16w + lane/4, columns 8g + 2(lane%4) + {0, 1}; 4g+2, 4g+3 = the same columns 8 rows
    down. A pair of columns is one load (4 B for 16-bit, 8 B for f32) that feeds both rows when the operand does not
    depend on the row."""
    axis = _axis(chain, operand)
    row0 = WGMMA_WARP_ROWS * warp + lane // LANES_PER_ROW
    groups = bn // WGMMA_GROUP_COLS
    upper = tuple(i for g in range(groups) for i in (4 * g, 4 * g + 1))
    lower = tuple(i for g in range(groups) for i in (4 * g + 2, 4 * g + 3))
    if axis == "":
        return (Load(operand, None, None, (upper + lower,)),)
    if axis == "r":
        return (Load(operand, row0, None, (upper,)), Load(operand, row0 + WGMMA_ROW_HALF, None, (lower,)))
    loads = []
    for g, (col, targets) in enumerate(wgmma_column_pairs(lane, bn)):
        if axis == "c":
            loads.append(Load(operand, None, col, targets))
        else:
            loads.append(Load(operand, row0, col, ((4 * g,), (4 * g + 1,))))
            loads.append(Load(operand, row0 + WGMMA_ROW_HALF, col, ((4 * g + 2,), (4 * g + 3,))))
    return tuple(loads)


def wgmma_column_pairs(lane: int, bn: int) -> tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]:
    """Per register group g of an m64nBN D fragment, the first of the two adjacent columns ``lane`` holds and the
    registers of each: ((8g + 2(lane%4), ((4g, 4g+2), (4g+1, 4g+3))), ...): column c in registers 4g (row r) and 4g+2
    (row r + 8), column c + 1 in 4g+1 and 4g+3 (used by column operands of the chain and by block FP8's per-column
    B scales, derive.scaled.blockfp8)."""
    return tuple((WGMMA_GROUP_COLS * g + 2 * (lane % LANES_PER_ROW), ((4 * g, 4 * g + 2), (4 * g + 1, 4 * g + 3)))
                 for g in range(bn // WGMMA_GROUP_COLS))


def tmem_row(bm: int, warp: int, lane: int) -> int | None:
    """Row of D that ``lane`` of epilogue warp ``warp`` holds after tcgen05.ld 32x32b (None: a lane with no row).
    M=128: lane 32w + t is row 32w + t; M=64: rows 16w..16w+15 are lanes 32w..32w+15."""
    if bm == 128:
        return 32 * warp + lane
    return 16 * warp + lane if lane < 16 else None


def tmem_loads(chain: ChainSpec, operand: str, bm: int, warp: int, lane: int, col0: int, chunk: int) -> tuple[Load, ...]:
    """The loads of ``operand`` for one ``tcgen05.ld 32x32b.x<chunk>`` at column ``col0``: register j is column col0 + j
    of the thread's row. A column vector or a matrix row is read a column pair at a time (registers 2p, 2p + 1);
    a row vector or a per-tensor scalar is read once per tile and feeds every register."""
    axis = _axis(chain, operand)
    row = tmem_row(bm, warp, lane)
    if row is None:
        return ()
    if axis in ("", "r"):
        return (Load(operand, row if axis else None, None, (tuple(range(chunk)),)),)
    return tuple(Load(operand, None if axis == "c" else row, col0 + j, ((j,), (j + 1,))) for j in range(0, chunk, 2))


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
                         "the same loads as the bias of that axis (fusion.wgmma_loads / tmem_loads)", src))
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
