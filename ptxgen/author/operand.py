"""Operands of any role (Q, K, V, X, W1, ...): one shared-memory layout value each, and what is derived from it.

An :class:`Operand` names a tile of a tensor-core MMA operand: which side of the MMA reads it (``mma_role`` "a": the
M side, read in m64 slabs by wgmma; "b": the N side), its majorness, swizzle, atom order, element type and extent
(``mn`` rows or columns along M/N, ``k`` along the reduction). :meth:`Operand.plan` derives it with the project's
own tile DSL: the same ``derive_operand`` and ``derive_tma`` that ptxgen's GEMM kernels use read one
:class:`~ptxgen.derive.operands.smem_layout.SmemLayout`, so the descriptors per K step and the tensor map come from one value.

>>> v = parse_operand("V:mn-sw128:bf16:128x64")          # V of P.V: N = head dim 128, K = 64 keys, MN-major
>>> p = v.plan()
>>> p.stage_bytes, p.lbo_bytes, p.sbo_bytes, p.layout_type
(16384, 1024, 2048, 1)
>>> [s.start_offset_bytes for s in p.k_steps], p.tma.box
([0, 4096, 8192, 12288], (64, 8))
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..derive.tile.derived import Derived
from ..derive.operands.operand import KStep, OperandLayout, derive_operand
from ..derive.operands.operand_tma import derive_tma
from ..derive.operands.smem_layout import SmemLayout
from ..derive.tile.spec import OperandSpec, TileSpec
from ..emit.cexpr import linear_offset_c_expr, swizzle_c_expr
from ..derive.operands.tma import TmaCopy, TmaPlan
from ..isa.descriptors import SmemDescriptor
from ..isa.types import Arch, AtomOrder, DType, Major, SpecError, Swizzle, parse_enum

ROLES = ("a", "b")
MAJORS = {"k": Major.K, "mn": Major.MN}
TOKEN_FORM = "<name>:<k|mn>-<none|sw32|sw64|sw128|sw128b32>:<dtype>:<MN>x<K>[:a|:b][:sm_90a|:sm_100a]"


@dataclass(frozen=True)
class Operand:
    """One MMA operand tile in shared memory, by name (any role). ``mma_role``: "a" (M side) or "b" (N side)."""

    name: str
    major: Major
    swizzle: Swizzle
    dtype: DType
    mn: int  # extent along M (mma_role a) or N (mma_role b), elements
    k: int  # extent along the reduction dimension, elements
    mma_role: str = "b"
    arch: Arch = Arch.SM90A
    order: AtomOrder | None = None  # atoms adjacent along "mn" or "k"; default: the major dimension

    def __post_init__(self):
        for f, enum in (("major", Major), ("swizzle", Swizzle), ("dtype", DType), ("arch", Arch)):
            if isinstance(getattr(self, f), str):
                object.__setattr__(self, f, parse_enum(enum, getattr(self, f), f"{self.name}.{f}"))
        if isinstance(self.order, str):
            object.__setattr__(self, "order", parse_enum(AtomOrder, self.order, f"{self.name}.order"))
        if self.mma_role not in ROLES:
            raise SpecError(f"{self.name}.mma_role", self.mma_role, "an operand is read as the MMA's A (M side) or B (N side)", "a, b")
        if not self.name.isidentifier():
            raise SpecError("operand name", self.name, "the name becomes a C identifier in the template", "a letter, then letters, digits, _")

    @property
    def token(self) -> str:
        return f"{self.name}:{self.major.value}-{self.swizzle.value}:{self.dtype.value}:{self.mn}x{self.k}:{self.mma_role}:{self.arch.value}"

    def tile_spec(self) -> TileSpec:
        """The one-operand tile the project's derivation reads: this operand as A or B of an MMA whose other side
        has the same K; building it runs every rule the GEMM kernels obey (SpecError names the one broken)."""
        mine = OperandSpec(self.major, self.swizzle, self.order)
        other = OperandSpec(Major.K, _partner_swizzle(self.k * self.dtype.container_bits // 8))
        other_mn = 64 if self.arch is Arch.SM90A else 128
        fields = dict(bk=self.k, dtype=self.dtype, arch=self.arch, stages=1)
        if self.mma_role == "a":
            return TileSpec(bm=self.mn, bn=other_mn, a=mine, b=other, **fields)
        return TileSpec(bm=other_mn, bn=self.mn, a=other, b=mine, **fields)

    def plan(self) -> "OperandPlan":
        try:
            spec = self.tile_spec()
        except SpecError as e:
            mine = "--bm" if self.mma_role == "a" else "--bn"
            field = {mine: "mn", "--bk": "k", "--dtype": "dtype", "--" + self.mma_role: "layout"}.get(e.field, e.field)
            raise SpecError(f"operand {self.name} ({self.token}): {field}", e.value, e.rule, e.legal, e.ref) from None
        layout = derive_operand(spec, self.mma_role)
        assert layout.base_offset == 0 and layout.ring_offset_bytes % layout.alignment_bytes == 0
        return OperandPlan(self, layout, derive_tma(spec, layout))


_BASE_OFFSET = Derived(
    "base_offset", 0, "every ring starts on its operand's swizzle repeat (ptxgen.author.RingPlan) -> 0",
    "the kernel rounds its shared-memory base up to 1024 B and the ring plan puts each operand's stages at multiples of "
    "their alignment, so each stage's swizzle pattern starts on its repeat boundary",
    "PTX ISA 9.7.16.4.1, Table 41 'Starting address of repeating pattern' (#tcgen05-start-addr-swizzle-mode)")


def _partner_swizzle(row_bytes: int) -> Swizzle:
    """A K-major swizzle whose atom row fits ``row_bytes`` (the other side of the one-operand tile; never read)."""
    for s in (Swizzle.SW128, Swizzle.SW64, Swizzle.SW32):
        if row_bytes % s.row_bytes == 0:
            return s
    return Swizzle.NONE


def parse_operand(token: str) -> Operand:
    """``V:mn-sw128:bf16:128x64`` (N 128, K 64, read as B), ``Q:k-sw128:bf16:64x128:a``; see TOKEN_FORM."""
    parts = token.split(":")
    if not 4 <= len(parts) <= 6:
        raise SpecError("--operand", token, "an operand is written " + TOKEN_FORM, "e.g. V:mn-sw128:bf16:128x64")
    name, layout, dtype, shape, *rest = parts
    major, _, swz = layout.partition("-")
    if major not in MAJORS or not swz:
        raise SpecError("--operand", token, f"the layout part {layout!r} is <k|mn>-<swizzle>", "k-sw128, mn-sw64, k-none, ...")
    try:
        mn, k = (int(x) for x in shape.split("x"))
    except ValueError:
        raise SpecError("--operand", token, f"the shape part {shape!r} is <MN>x<K> in elements", "e.g. 128x64") from None
    role, arch = "b", Arch.SM90A
    for r in rest:
        if r in ROLES:
            role = r
        else:
            arch = parse_enum(Arch, r, "--operand arch")
    return Operand(name, MAJORS[major], parse_enum(Swizzle, swz, "--operand swizzle"), parse_enum(DType, dtype, "--operand dtype"),
                   mn, k, role, arch)


@dataclass(frozen=True)
class OperandPlan:
    """Everything derived for one operand: read these, never recompute them in a template.

    ``layout``: the project's OperandLayout (store map, LBO/SBO, base offset, K steps, slabs, derivation);
    ``tma``: its tensor map and the copies that fill one stage (from the same ``layout.store``)."""

    operand: Operand
    layout: OperandLayout
    tma: TmaPlan

    @property
    def name(self) -> str:
        return self.operand.name

    @property
    def store(self) -> SmemLayout:
        return self.layout.store

    @property
    def stage_bytes(self) -> int:
        return self.layout.stage_bytes

    @property
    def alignment_bytes(self) -> int:
        return self.layout.alignment_bytes

    @property
    def lbo_bytes(self) -> int:
        return self.layout.lbo_bytes

    @property
    def sbo_bytes(self) -> int:
        return self.layout.sbo_bytes

    @property
    def base_offset(self) -> int:
        return self.layout.base_offset

    @property
    def layout_type(self) -> int:
        return self.layout.layout_type

    @property
    def k_steps(self) -> tuple[KStep, ...]:
        return self.layout.k_steps

    @property
    def k_per_step(self) -> int:
        return self.k_steps[1].k - self.k_steps[0].k if len(self.k_steps) > 1 else self.operand.k

    @property
    def slab_offsets_bytes(self) -> tuple[int, ...]:
        return self.layout.slab_offsets_bytes

    @property
    def expect_tx_bytes(self) -> int:
        return self.tma.expect_tx_bytes

    def descriptor(self, k_step: int, slab: int = 0) -> SmemDescriptor:
        """The descriptor of K step ``k_step`` (and m64 slab ``slab`` of an A operand) for a stage at address 0."""
        return self.layout.descriptor(k_step, slab)

    @property
    def descriptors(self) -> tuple[int, ...]:
        """Each K step's raw 64-bit descriptor for a stage at shared address 0 (slab 0): a kernel adds
        ``start_field(stage address)`` to it."""
        return tuple(st.descriptor.encode() for st in self.k_steps)

    @property
    def copies(self) -> tuple[TmaCopy, ...]:
        """The TMA copies that fill one stage (``smem_offset_bytes``, ``inner``, ``outer``): ``tma.copies``."""
        return self.tma.copies

    def cell_offset_expr(self, row: str, col: str) -> str:
        """C expression: the byte offset from the stage base of 16-byte cell (``row``, ``col``) of this operand's
        stage (rows: MN indices of a K-major operand, K indices of an MN-major one; cols: 16-byte cells along the
        other dimension), the swizzle applied: where TMA put that cell, so a kernel may also write a tile of its own
        into a stage in the same layout (the attention epilogue stages O in Q's buffer) and read it back."""
        linear = f"({linear_offset_c_expr(self.store, row, col)})"
        return f"({swizzle_c_expr(self.store, linear)})"

    def start_field(self, addr_expr: str) -> str:
        """C expression: the descriptor's start-address field (bits 0-13, address >> 4) of the run-time shared-memory
        byte address ``addr_expr``. A kernel that adds it once per stage to the constant ``descriptor(j).encode()`` of
        each K step (whose start field holds the step's offset) gets ``desc_expr`` without re-adding the address."""
        return SmemDescriptor.start_field_c_expr(self.operand.arch, addr_expr)

    def desc_expr(self, stage_addr: str, k_step: int, slab: int = 0) -> str:
        """C expression: the descriptor of that step for a stage whose shared-memory byte address is ``stage_addr``."""
        d = self.descriptor(k_step, slab)
        return f"({d.with_start(0).hex}ull + {SmemDescriptor.start_field_c_expr(d.arch, f'{stage_addr} + {d.start_address_bytes}u')})"

    def box_x(self, mn0: str, k0: str, copy: TmaCopy) -> str:
        """C expression: the inner (contiguous) coordinate of ``copy``'s box for the tile at (mn0, k0) elements."""
        return f"({k0}) + {copy.inner}" if self.operand.major is Major.K else f"({mn0}) + {copy.inner}"

    def box_y(self, mn0: str, k0: str, copy: TmaCopy) -> str:
        """C expression: the outer (row) coordinate of ``copy``'s box."""
        return f"({mn0}) + {copy.outer}" if self.operand.major is Major.K else f"({k0}) + {copy.outer}"

    @property
    def derivation(self) -> tuple[Derived, ...]:
        """Every derived value with its formula, reason and PTX reference (what ``ptxgen explain --operand`` prints)."""
        own = tuple(_BASE_OFFSET if d.name == "base_offset" else d for d in self.layout.derivation)
        return own + self.tma.derivation

    def with_name(self, name: str) -> "OperandPlan":
        return replace(self, operand=replace(self.operand, name=name))

    def to_json(self) -> dict:
        return {"operand": self.operand.token, **self.layout.to_json(), "tma": {**self.tma.to_json(), "expect_tx_bytes": self.expect_tx_bytes}}
