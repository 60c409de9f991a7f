"""MMA pieces: one wgmma instruction between two operand plans (both in shared memory), or with A in registers.

:func:`wgmma` checks that the two plans fit one instruction (A is an m64 slab, B's N is the instruction's N, the
same K per step, the same element type) and returns a :class:`WgmmaPlan`: the opcode, the accumulator fragment, the
inline-assembly operand lists and, per K step, the two descriptors (as C expressions of the stages' addresses).
The wrapper text comes from the same functions ptxgen's GEMM kernels use (ptxgen.emit.cexpr, ptxgen.isa.idesc).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..emit.cexpr import reg_list, wgmma_fragment_col, wgmma_fragment_row, wgmma_operand_lists
from ..isa.idesc import WgmmaInstr
from ..isa.types import Arch, DType, Major, SpecError
from .operand import OperandPlan

WGMMA_REF = "PTX ISA 9.7.15.5.2 'wgmma.mma_async' (#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async)"
WGMMA_N = tuple(range(8, 257, 8))


@dataclass(frozen=True)
class RegisterA:
    """wgmma's A from registers (P of attention: the S accumulator converted to 16-bit): m64 x K of ``dtype``."""

    dtype: DType

    @property
    def regs(self) -> int:
        """32-bit registers per thread of one m64 x k16 A fragment: 64 x 16 x 2 B / 128 threads / 4 B = 4."""
        return 64 * self.dtype.k_per_mma * self.dtype.bits // 8 // 128 // 4

    def acc_pairs(self, k_step: int) -> tuple[tuple[int, int], ...]:
        """A from an m64 f32 accumulator of the same warpgroup (P = softmax(S) of attention): for K step ``k_step``, the
        accumulator elements (low half, high half) that make each 32-bit A word, in register order. The D fragment
        puts element i at row lane/4 + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 (lane % 4) + (i & 1) of the warp's 16
        rows; the k16 A fragment puts its halves at the same rows and columns of its 16-column slice, so K step j's
        words are D elements 8j .. 8j+7 two by two (FlashAttention-3's convert_layout_acc_Aregs for 16-bit types)."""
        if self.dtype.bits != 16:
            raise SpecError("RegisterA.dtype", self.dtype.value, "the accumulator-to-A reuse is written for 16-bit A", "f16, bf16")
        per = 2 * self.regs
        return tuple((per * k_step + 2 * w, per * k_step + 2 * w + 1) for w in range(self.regs))


@dataclass(frozen=True)
class WgmmaStep:
    k: int
    a_offset_bytes: int | None  # None: A in registers
    b_offset_bytes: int
    a: OperandPlan | None
    b: OperandPlan

    def a_desc(self, stage_addr: str, slab: int = 0) -> str:
        return self.a.desc_expr(stage_addr, self.index_a, slab)

    def b_desc(self, stage_addr: str) -> str:
        return self.b.desc_expr(stage_addr, self.index_b)

    @property
    def index_a(self) -> int:
        return [s.k for s in self.a.k_steps].index(self.k)

    @property
    def index_b(self) -> int:
        return [s.k for s in self.b.k_steps].index(self.k)


@dataclass(frozen=True)
class WgmmaPlan:
    instr: WgmmaInstr
    register_a: bool
    acc_ctype: str
    acc_regs: int
    acc_constraint: str
    a_regs: int  # register A: 32-bit words per thread per K step
    d_list: str
    outputs: str
    a_list: str  # register A: "{%n, ...}"
    op_a_desc: int  # operand index of the A descriptor (or first A register)
    op_b_desc: int
    op_scale_d: int
    immediates: str
    steps: tuple[WgmmaStep, ...]
    slabs: int  # m64 slabs of a shared-memory A (each its own descriptors)

    @property
    def opcode(self) -> str:
        return self.instr.opcode

    @property
    def n(self) -> int:
        return self.instr.n

    @property
    def k(self) -> int:
        return self.instr.k

    @property
    def a_inputs(self) -> str:
        """Register A: the asm input list of the A words."""
        return ", ".join(f'"r"(a[{i}])' for i in range(self.a_regs))

    @staticmethod
    def frag_row(i: str, t: str, lane: str) -> str:
        """C: row of accumulator element ``i`` of warpgroup thread ``t`` (PTX 'wgmma .m64nNk* D fragments')."""
        return wgmma_fragment_row(i, t, lane)

    @staticmethod
    def frag_col(i: str, lane: str) -> str:
        return wgmma_fragment_col(i, lane)

    @property
    def sass_opcode(self) -> str:
        return {"f16": "HGMMA", "tf32": "HGMMA", "f8f6f4": "QGMMA", "i8": "IGMMA"}[self.instr.dtype.kind]


def wgmma(a: OperandPlan | RegisterA, b: OperandPlan, acc: DType | str = DType.F32) -> WgmmaPlan:
    acc = DType(acc) if isinstance(acc, str) else acc
    reg = isinstance(a, RegisterA)
    ob = b.operand
    if ob.arch is not Arch.SM90A or (not reg and a.operand.arch is not Arch.SM90A):
        raise SpecError(f"{ob.name}.arch", ob.arch.value, "wgmma is the sm_90a instruction (tcgen05 for sm_100a)", "sm_90a", WGMMA_REF)
    if ob.mma_role != "b":
        raise SpecError(f"{ob.name}.mma_role", ob.mma_role, "wgmma's second operand is B (the N side)", "b", WGMMA_REF)
    if ob.mn not in WGMMA_N:
        raise SpecError(f"{ob.name}.mn", ob.mn, "wgmma N is 8..256 in steps of 8", "8, 16, ..., 256", WGMMA_REF)
    a_dtype = a.dtype if reg else a.operand.dtype
    if a_dtype is not ob.dtype:
        raise SpecError(f"{ob.name}.dtype", ob.dtype.value, "this piece multiplies A and B of one type", a_dtype.value, WGMMA_REF)
    if not reg:
        oa = a.operand
        if oa.mma_role != "a" or oa.mn % 64:
            raise SpecError(f"{oa.name}.mn", oa.mn, "wgmma's A is read in m64 slabs: mma_role 'a' and M a multiple of 64",
                            "64, 128, ...", WGMMA_REF)
        if oa.k != ob.k:
            raise SpecError(f"{oa.name}.k", oa.k, f"A and B share K per stage ({ob.name} has {ob.k})", str(ob.k), WGMMA_REF)
    if reg and ob.major is not Major.K and a_dtype not in (DType.F16, DType.BF16):
        raise SpecError(f"{ob.name}.major", ob.major.value, "only .f16/.bf16 wgmma reads B MN-major", "k", WGMMA_REF)
    instr = WgmmaInstr(ob.mn, a_dtype, acc, Major.K if reg else a.operand.major, ob.major)
    acc_regs = 64 * ob.mn * (acc.bits // 8) // 4 // 128
    constraint = "+f" if acc is DType.F32 else "+r"
    d_list, outputs = wgmma_operand_lists(acc_regs, constraint)
    a_regs = RegisterA(a_dtype).regs if reg else 0
    imm = ", 1, 1" if not a_dtype.is_integer else ""
    if instr.has_transpose:  # register A has no imm-trans-a (PTX wgmma.mma_async)
        imm += f", {instr.imm_trans_b}" if reg else f", {instr.imm_trans_a}, {instr.imm_trans_b}"
    steps = tuple(WgmmaStep(s.k, None if reg else a.k_steps[i].start_offset_bytes, s.start_offset_bytes, None if reg else a, b)
                  for i, s in enumerate(b.k_steps))
    op_b = acc_regs + (a_regs if reg else 1)
    return WgmmaPlan(instr, reg, {DType.F32: "float", DType.S32: "int", DType.F16: "unsigned"}[acc], acc_regs, constraint, a_regs,
                     d_list, outputs, reg_list(a_regs, acc_regs) if reg else "", acc_regs, op_b, op_b + 1, imm, steps,
                     1 if reg else len(a.slab_offsets_bytes))


# ---- tcgen05 (sm_100a) ---------------------------------------------------------------------------------------
TCGEN05_REF = "PTX ISA 9.7.16.10 'tcgen05.mma' (#tcgen05-mma-instructions-mma)"
TMEM_REF = "PTX ISA 9.7.16.7 'Tensor Memory allocation' (#tcgen05-memory-alloc-manage-instructions)"
TMEM_COLUMNS = 512
_TCGEN05_SASS = {"f16": "UTCHMMA", "tf32": "UTCHMMA", "f8f6f4": "UTCQMMA", "i8": "UTCIMMA"}


@dataclass(frozen=True)
class TmemA:
    """tcgen05's A from tensor memory (P of a Blackwell attention): M x K of ``dtype``, K-major, at a TMEM address."""

    dtype: DType


@dataclass(frozen=True)
class Tcgen05Step:
    k: int
    a: OperandPlan | None  # None: A in TMEM
    b: OperandPlan

    def a_desc(self, stage_addr: str) -> str:
        return self.a.desc_expr(stage_addr, [s.k for s in self.a.k_steps].index(self.k))

    def b_desc(self, stage_addr: str) -> str:
        return self.b.desc_expr(stage_addr, [s.k for s in self.b.k_steps].index(self.k))


@dataclass(frozen=True)
class Tcgen05Plan:
    """One tcgen05.mma.cta_group::1: its kind, the instruction descriptor (with its fields), the accumulator's TMEM
    columns, the K steps' descriptors (A from shared memory) and the SASS opcode."""

    kind: str
    m: int
    n: int
    idesc_hex: str
    idesc_fields: tuple[tuple[str, int], ...]
    tmem_a: bool
    acc_columns: int  # 32-bit TMEM columns of the M x N f32 accumulator (M = 128: one lane a row)
    steps: tuple[Tcgen05Step, ...]
    cta_group: int = 1

    @property
    def sass_opcode(self) -> str:
        return _TCGEN05_SASS[self.kind]


def tcgen05(a: OperandPlan | TmemA, b: OperandPlan, acc: DType | str = DType.F32) -> Tcgen05Plan:
    from ..isa.idesc import InstrDescriptor

    acc = DType(acc) if isinstance(acc, str) else acc
    in_tmem = isinstance(a, TmemA)
    ob = b.operand
    if ob.arch is not Arch.SM100A or (not in_tmem and a.operand.arch is not Arch.SM100A):
        raise SpecError(f"{ob.name}.arch", ob.arch.value, "tcgen05 is the sm_100a instruction (wgmma for sm_90a)", "sm_100a", TCGEN05_REF)
    if ob.mma_role != "b":
        raise SpecError(f"{ob.name}.mma_role", ob.mma_role, "tcgen05's second operand is B (the N side)", "b", TCGEN05_REF)
    a_dtype = a.dtype if in_tmem else a.operand.dtype
    if a_dtype is not ob.dtype:
        raise SpecError(f"{ob.name}.dtype", ob.dtype.value, "this piece multiplies A and B of one type", a_dtype.value, TCGEN05_REF)
    if in_tmem:
        m = 128
    else:
        oa = a.operand
        if oa.mma_role != "a" or oa.mn not in (64, 128):
            raise SpecError(f"{oa.name}.mn", oa.mn, "tcgen05.mma.cta_group::1 M is 64 or 128 (mma_role 'a')", "64, 128", TCGEN05_REF)
        if oa.k != ob.k:
            raise SpecError(f"{oa.name}.k", oa.k, f"A and B share K per stage ({ob.name} has {ob.k})", str(ob.k), TCGEN05_REF)
        m = oa.mn
    d = InstrDescriptor(kind=a_dtype.kind, m=m, n=ob.mn, a_dtype=a_dtype.value, b_dtype=ob.dtype.value, d_dtype=acc.value,
                        a_major=Major.K if in_tmem else a.operand.major, b_major=ob.major)
    fields = tuple((k, v) for k, v in InstrDescriptor.TABLE.decode(d.encode()).items() if not k.startswith("reserved"))
    steps = tuple(Tcgen05Step(s.k, None if in_tmem else a, b) for s in b.k_steps)
    return Tcgen05Plan(a_dtype.kind, m, ob.mn, d.hex, fields, in_tmem, ob.mn * acc.bits // 32, steps)


@dataclass(frozen=True)
class TmemPlan:
    """Columns a CTA allocates (tcgen05.alloc: a power of two, 32 to 512) for the regions it needs, each region's first
    column (``columns``: name -> first column)."""

    alloc_columns: int
    columns: tuple[tuple[str, int], ...]

    def column(self, name: str) -> int:
        return dict(self.columns)[name]

    @staticmethod
    def address(tmem_base: str, lane: str, column: str) -> str:
        """C: the TMEM address of (lane, column) from the allocation's base address (lane in bits 16 and up)."""
        return f"({tmem_base} + {TmemPlan.lane_offset(lane)} + static_cast<unsigned>({column}))"

    @staticmethod
    def lane_offset(lane: str) -> str:
        """C: what lane ``lane`` adds to a TMEM address (the lane in bits 16 and up), e.g. a warp's first lane 32 w."""
        from ..isa.descriptors import tmem_lane_c_expr

        return tmem_lane_c_expr(lane)


def tmem_plan(**regions: int) -> TmemPlan:
    """``tmem_plan(S=128, O=128)``: the regions laid out in order and the allocation that holds them."""
    at, cols = 0, []
    for name, n in regions.items():
        cols.append((name, at))
        at += n
    alloc = 32
    while alloc < at:
        alloc *= 2
    if alloc > TMEM_COLUMNS:
        raise SpecError("tmem columns", at, f"tensor memory has {TMEM_COLUMNS} 32-bit columns per CTA", f"<= {TMEM_COLUMNS}", TMEM_REF)
    return TmemPlan(alloc, tuple(cols))


@dataclass(frozen=True)
class TmemLoad:
    """tcgen05.ld.32x32b.x``chunk``: each thread of a warp reads ``chunk`` consecutive columns of its lane (the fields the
    tmem_ld_fn piece reads); the tcgen05.st of the same shape writes them (tmem_st_fn)."""

    chunk: int

    @property
    def tmem_ld_regs(self) -> str:
        return reg_list(self.chunk)

    @property
    def tmem_ld_outputs(self) -> str:
        return ", ".join(f'"=r"(r[{i}])' for i in range(self.chunk))

    @property
    def tied(self) -> str:
        """The wait's operand list: every loaded register, read and written, so none is used before the wait."""
        return ", ".join(f'"+r"(r[{i}])' for i in range(self.chunk))

    @property
    def tmem_st_regs(self) -> str:
        """The store's register list (operand 0 is the TMEM address)."""
        return reg_list(self.chunk, 1)

    @property
    def tmem_st_inputs(self) -> str:
        return ", ".join(f'"r"(r[{i}])' for i in range(self.chunk))
