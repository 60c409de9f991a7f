"""One operand's shared-memory layout and descriptors, derived from the spec.

Each number comes with its formula and reason (:class:`~ptxgen.derive.tile.derived.Derived`).

Cell coordinates. An operand stage is a grid of 16-byte cells, ``rows x cols``, in the operand's own
memory order: for a K-major operand a row is one M (or N) index and a column one 16-byte cell of K;
for an MN-major operand a row is one K index and a column one 16-byte cell of M (or N). Rows group
into atoms of ``atom_rows`` (8; 4 for sw128b32) and columns into atoms of ``row_bytes / 16`` cells.
Atoms are laid out contiguously, either along MN or along K (the atom order). The swizzle is applied
to the byte offset within the stage, which the kernel aligns to the swizzle repeat.

Worked example, the seed post's A (BM=128, BK=32, f16, K-major SW64):

>>> from ptxgen.derive.tile.spec import TileSpec, OperandSpec
>>> from ptxgen.derive.tile.layout import derive
>>> t = derive(TileSpec(128, 128, 32, OperandSpec.parse("kmajor-sw64")))
>>> t.a.sbo_bytes, t.a.lbo_bytes, t.a.layout_type, [s.start_offset_bytes for s in t.a.k_steps]
(512, 16, 4, [0, 32])
>>> t.b.lbo_bytes, t.b.sbo_bytes, t.b.layout_type, t.b.alignment_bytes
(1024, 2048, 2, 1024)
>>> [t.a.store.physical(2, q) for q in range(4)]   # row 2: cells swap pairwise, (q ^ ((r >> 1) & 3))
[144, 128, 176, 160]
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.descriptors import SmemDescriptor, layout_type
from ...isa.ptxref import cite
from ...isa.tensormap import TMA_SWIZZLE_KEY
from ...isa.types import Arch, AtomOrder, DType, Loader, Major, Swizzle
from ..tile.derived import Derived
from .smem_layout import SmemLayout, operand_stage
from ..tile.spec import TileSpec
from .tma import TmaPlan


@dataclass(frozen=True)
class KStep:
    """One MMA along K inside a stage: where its slice starts and the descriptor that reads it."""

    k: int  # first K element of the step
    start_offset_bytes: int  # from the stage base (slab 0)
    descriptor: SmemDescriptor  # for a stage at shared address 0; kernels add the stage address


@dataclass(frozen=True)
class OperandLayout:
    name: str  # "a" or "b"
    major: Major
    swizzle: Swizzle
    order: AtomOrder
    arch: Arch
    dtype: DType
    mn: int  # tile extent along MN
    bk: int
    mma_mn: int  # MN of one MMA instruction (64 for wgmma's A)
    store: SmemLayout  # the operand's one shared-memory layout value
    loader: Loader
    stage_bytes: int
    alignment_bytes: int
    lbo_bytes: int
    sbo_bytes: int
    base_offset: int
    ring_offset_bytes: int  # where the operand's ring starts, from the aligned base (its swizzle phase)
    layout_type: int
    k_steps: tuple[KStep, ...]
    slab_offsets_bytes: tuple[int, ...]  # start of each MMA's MN slab (several only for wgmma's A)
    derivation: tuple[Derived, ...]
    tma: TmaPlan | None = None  # the tensor map and copies (TMA loader), derived from ``store``
    # Bits of shared memory per element: dtype's container, or 8 for kind::mxf8f6f4's padded 6-/4-bit types
    container_bits: int = 0
    unpacked: bool = False  # a kind::mxf8f6f4 6-/4-bit type: 16 elements packed + padding per 16-byte cell

    def __post_init__(self):
        if not self.container_bits:
            object.__setattr__(self, "container_bits", self.dtype.container_bits)

    @property
    def per_cell(self) -> int:
        """Elements in one 16-byte cell of the stage (T of PTX's canonical layouts)."""
        return 128 // self.container_bits

    @property
    def smem_element(self) -> str:
        """What the read model calls one element in shared memory: the type, or '<type>_unpacksmem' for the padded
        form (CUTLASS's float_e2m1/e2m3/e3m2_unpacksmem_t)."""
        return f"{self.dtype.value}_unpacksmem" if self.unpacked else self.dtype.value

    @property
    def atom_rows(self) -> int:
        return self.store.atom_rows

    @property
    def atom_cols(self) -> int:
        return self.store.atom_cols

    @property
    def row_atom_stride_bytes(self) -> int:
        return self.store.row_atom_stride_bytes

    @property
    def col_atom_stride_bytes(self) -> int:
        return self.store.col_atom_stride_bytes

    @property
    def slab_stride_bytes(self) -> int:
        return self.slab_offsets_bytes[1] - self.slab_offsets_bytes[0] if len(self.slab_offsets_bytes) > 1 else 0

    def descriptor(self, k_step: int, slab: int = 0) -> SmemDescriptor:
        s = self.k_steps[k_step]
        return s.descriptor.with_start(s.start_offset_bytes + self.slab_offsets_bytes[slab])

    def to_json(self) -> dict:
        d = {
            "major": self.major.value,
            "swizzle": self.swizzle.value,
            "atom_order": self.order.value,
            "layout_type": self.layout_type,
            "stage_bytes": self.stage_bytes,
            "alignment_bytes": self.alignment_bytes,
            "lbo_bytes": self.lbo_bytes,
            "sbo_bytes": self.sbo_bytes,
            "base_offset": self.base_offset,
            "k_steps": [
                {"k": s.k, "start_offset_bytes": s.start_offset_bytes, "desc_hex": s.descriptor.hex} for s in self.k_steps
            ],
            "cell_offsets": self.store.table(),
            "loader": self.loader.value,
            **({"smem_element": self.smem_element} if self.unpacked else {}),
            "ring_offset_bytes": self.ring_offset_bytes,
        }
        if self.tma is not None:
            d["tma"] = self.tma.to_json()
        if len(self.slab_offsets_bytes) > 1:
            # wgmma: one m64 instruction per 64-row slab; each slab's descriptors are the k_steps' plus this offset
            d["mma_mn"] = self.mma_mn
            d["slab_offsets_bytes"] = list(self.slab_offsets_bytes)
        return d


def base_offset_rule(loader: Loader, swz: Swizzle, ring: int) -> tuple[int, str, str]:
    """(base offset, formula, reason): where the MMA must think the swizzle pattern starts, given where
    the loader anchored it. cp.async stores swizzle the offset within the stage (pattern anchored at the
    stage); TMA keys the XOR on the shared-memory address it writes (``TMA_SWIZZLE_KEY``)."""
    align = swz.repeat_bytes
    if not swz.is_swizzled:
        return 0, "no swizzle -> 0", "the base offset is ignored without swizzling (PTX; confirmed on an H200)"
    if ring % align == 0:
        return (
            0,
            f"the ring starts {ring} B past the aligned base, a multiple of {align} B -> pattern on its boundary -> 0",
            "every stage's swizzle pattern starts on its repeat boundary",
        )
    if loader is Loader.TMA and TMA_SWIZZLE_KEY == "address":
        return (
            0,
            f"the ring starts {ring} B past the aligned base, off the {align} B repeat, but TMA keys its XOR on the "
            "address it writes, (address >> 7), exactly as the MMA does with base offset 0 -> 0",
            "TMA anchors the pattern where the hardware's own address bits put it, not at the stage; the MMA must "
            "read it keyed the same way (TMA_SWIZZLE_KEY = 'address': docs/hardware-layout.md, 'TMA')",
        )
    base_offset = (ring >> 7) & 7
    who = "cp.async stores" if loader is Loader.CP_ASYNC else "TMA copies (TMA_SWIZZLE_KEY = 'destination')"
    return (
        base_offset,
        f"the ring starts {ring} B past the aligned base, off the {align} B repeat: ({ring} >> 7) & 7 = {base_offset}",
        f"the {who} key the XOR on the offset within the stage, i.e. the pattern starts at the stage; the "
        "hardware keys it on (address >> 7) - base offset (measured on an H200), so this value anchors its pattern there too",
    )


@dataclass(frozen=True)
class _Stage:
    """What the derivation lines of one operand's stage share: its geometry and the words that name it."""

    name: str
    MN: str  # "M" or "N"
    k_major: bool
    swz: Swizzle
    order: AtomOrder
    arch: Arch
    cbits: int  # bits one element takes in a stage
    T: int  # elements per 16-byte cell
    esize: int | str  # bytes of one element, as text for the explanations (packed e2m1: "1/2")
    mn: int
    bk: int
    mma_mn: int
    kmma: int
    store: SmemLayout

    @property
    def along_rows(self) -> bool:  # atoms adjacent along the row dimension?
        return (self.order is AtomOrder.MN) == self.k_major

    @property
    def n_row_atoms(self) -> int:
        return self.store.rows // self.store.atom_rows

    @property
    def n_col_atoms(self) -> int:
        return self.store.cols // self.store.atom_cols

    @property
    def row_word(self) -> str:
        return f"{self.MN} row" if self.k_major else "K row"

    @property
    def atom_word(self) -> str:
        return "core matrix" if not self.swz.is_swizzled else f"{self.swz.value} atom"

    @property
    def atoms_word(self) -> str:
        return "core matrices" if not self.swz.is_swizzled else f"{self.swz.value} atoms"

    @property
    def order_word(self) -> str:
        return f"adjacent along {'MN' if self.order is AtomOrder.MN else 'K'}"

    @property
    def desc_ref(self) -> str:
        return cite("smem_desc") if self.arch is Arch.SM100A else cite("wgmma_desc")

    def cell_of(self, k: int, mn_index: int) -> tuple[int, int]:
        return (mn_index, k // self.T) if self.k_major else (k, mn_index // self.T)


def _stage_of(spec: TileSpec, name: str) -> _Stage:
    op = spec.operand(name)
    # Bits one element takes in a stage: its type's container, except kind::mxf8f6f4's 6-/4-bit types, padded 16 to a
    # 16-byte cell (one byte an element: the 8-bit geometry; ptxgen.isa.blockscale).
    cbits = spec.container_bits(name)
    T = 128 // cbits
    mn, bk = spec.mn_extent(name), spec.bk
    return _Stage(name=name, MN="M" if name == "a" else "N", k_major=op.major is Major.K, swz=op.swizzle, order=op.order,
                  arch=spec.arch, cbits=cbits, T=T, esize=cbits // 8 if cbits % 8 == 0 else f"1/{8 // cbits}", mn=mn, bk=bk,
                  mma_mn=spec.mma_mn(name), kmma=spec.k_per_mma, store=operand_stage(op.major, op.swizzle, op.order, mn, bk, T))


def _stage_fields(g: _Stage) -> list[Derived]:
    """layout_type, stage_bytes, alignment_bytes and atoms."""
    swz, R = g.swz, g.store.atom_rows
    lt = layout_type(g.arch, swz)
    stage_bytes = g.mn * g.bk * g.cbits // 8
    align = swz.repeat_bytes
    return [
        Derived(
            "layout_type",
            lt,
            f"{swz.value} -> {g.arch.family} layout type {lt}"
            + (" (tcgen05: none 0, 128B_base32B 1, 128B 2, 64B 4, 32B 6)" if g.arch is Arch.SM100A else " (wgmma: none 0, 128B 1, 64B 2, 32B 3)"),
            "the swizzle that the stores follow, in this instruction family's encoding",
            g.desc_ref,
        ),
        Derived("stage_bytes", stage_bytes, f"{g.mn} x {g.bk} x {g.esize} B = {stage_bytes}",
                f"one stage holds the {g.MN} x K = {g.mn} x {g.bk} tile", cite("canonical")),
        Derived(
            "alignment_bytes",
            align,
            f"{R} rows x {swz.row_bytes} B = {align}" + ("" if swz.is_swizzled else " (one core matrix)"),
            (
                f"the {swz.value} XOR pattern repeats every {align} B and is keyed on shared-memory address bits; a stage "
                "that starts on a repeat boundary has base offset 0 and its stores can swizzle the offset within the stage"
                if swz.is_swizzled
                else "no swizzle; the fields need only 16-B alignment, and 128 B keeps each core matrix whole (CuTe aligns the same)"
            ),
            cite("base_offset"),
        ),
        Derived(
            "atoms",
            f"{g.n_row_atoms} x {g.n_col_atoms}",
            f"{g.store.rows} {g.row_word}s / {R} x {g.store.cols} cells / {g.store.atom_cols} = {g.n_row_atoms} x "
            f"{g.n_col_atoms} {g.atoms_word} of {R} x {swz.row_bytes} B, {g.order_word}",
            f"the stage is tiled by {g.atoms_word}; atom order {g.order.value} puts consecutive ones {g.order_word}",
            cite("canonical"),
        ),
    ]


def _stride_formula(g: _Stage, dim: str, stride: int) -> str:
    """Why the atom stride along ``dim`` ("row" or "col") is ``stride`` bytes."""
    row_dim_word, col_dim_word = (g.MN, "K") if g.k_major else ("K", g.MN)
    one_atom = f"one {g.atom_word} = {g.store.atom_rows} x {g.swz.row_bytes} B = {stride}"
    atom = g.swz.atom_bytes
    if dim == "row":
        if g.along_rows:
            return f"{g.atoms_word} along {row_dim_word} are adjacent: {one_atom}"
        return (f"each band of {g.store.atom_rows} {g.row_word}s first holds its {g.n_col_atoms} {g.atoms_word} along "
                f"{col_dim_word}: {g.n_col_atoms} x {atom} B = {stride}")
    if not g.along_rows:
        return f"{g.atoms_word} along {col_dim_word} are adjacent: {one_atom}"
    return f"the {g.n_row_atoms} {g.atoms_word} along {row_dim_word} come first: {g.n_row_atoms} x {atom} B = {stride}"


def _stride_fields(g: _Stage) -> tuple[Derived, Derived]:
    """LBO and SBO: which atom stride each one is depends on majorness and swizzle (PTX canonical layouts). A stride
    whose mode spans a single group inside one MMA's slice is never used; CuTe writes 0 then."""
    swz, MN, mma_mn, esize = g.swz, g.MN, g.mma_mn, g.esize
    row_stride, col_stride = g.store.row_atom_stride_bytes, g.store.col_atom_stride_bytes
    if g.k_major:
        groups = mma_mn // 8
        sbo = row_stride if groups > 1 else 0
        sbo_f = _stride_formula(g, "row", row_stride) if groups > 1 else f"unused: one MMA spans a single 8-row group ({mma_mn} {MN} rows)"
        sbo_reason = f"distance between consecutive 8-row groups along {MN}"
        if swz.is_swizzled:
            lbo = 16
            lbo_f = (f"unused for swizzled K-major: one MMA reads {g.kmma} x {esize} B = 32 B of K per row, inside one "
                     f"{swz.row_bytes} B atom row; encoded as field 1 = 16 B, as CuTe does")
            lbo_reason = "PTX: the leading byte offset of a swizzled K-major layout is not used (assumed 1)"
        else:
            lbo = col_stride
            lbo_f = _stride_formula(g, "col", col_stride)
            lbo_reason = "distance between the two core matrices, adjacent along K, that one MMA reads"
    elif swz.is_swizzled:
        atoms_per_mma = mma_mn * esize // swz.row_bytes
        lbo = col_stride if atoms_per_mma > 1 else 0
        lbo_f = (
            _stride_formula(g, "col", col_stride)
            if atoms_per_mma > 1
            else f"unused: one MMA's {MN} = {mma_mn} x {esize} B fits in one {swz.row_bytes} B atom row; written 0, as CuTe does"
        )
        lbo_reason = f"distance between consecutive {swz.value} atoms along {MN} ({swz.row_bytes // esize} elements each)"
        sbo = row_stride
        sbo_f = _stride_formula(g, "row", row_stride)
        sbo_reason = f"distance between consecutive groups of {g.store.atom_rows} K rows"
    else:
        cms_per_mma = mma_mn // g.T
        sbo = col_stride if cms_per_mma > 1 else 0
        sbo_f = (
            _stride_formula(g, "col", col_stride)
            if cms_per_mma > 1
            else f"unused: one MMA's {MN} = {mma_mn} elements is a single 16-B core matrix; written 0, as CuTe does"
        )
        sbo_reason = f"distance between consecutive core matrices along {MN} (each 16 B = {g.T} elements of {MN} x 8 K rows)"
        lbo = row_stride
        lbo_f = _stride_formula(g, "row", row_stride)
        lbo_reason = "distance between consecutive groups of 8 K rows"
    return Derived("lbo_bytes", lbo, lbo_f, lbo_reason, cite("lbo")), Derived("sbo_bytes", sbo, sbo_f, sbo_reason, cite("sbo"))


def _k_steps(g: _Stage, lbo: int, sbo: int, base_offset: int) -> tuple[tuple[KStep, ...], list[Derived]]:
    """Each MMA along K of a stage: where its slice starts and its descriptor."""
    steps, D = [], []
    for i in range(g.bk // g.kmma):
        k = i * g.kmma
        r, c = g.cell_of(k, 0)
        start = g.store.linear(r, c)
        desc = SmemDescriptor(g.arch, start, lbo, sbo, g.swz, base_offset=base_offset)
        steps.append(KStep(k, start, desc))
        D.append(
            Derived(
                f"k_step[{i}]",
                f"+{start} B, {desc.hex}",
                f"K {k}..{k + g.kmma - 1} starts at cell (row {r}, col {c}): {g.store.formula(r, c)}",
                "the start field moves by the unswizzled offset; the hardware applies the XOR to the address it forms, "
                "so the other fields stay as they are",
                g.desc_ref,
            )
        )
    return tuple(steps), D


def _slab_fields(g: _Stage) -> tuple[tuple[int, ...], list[Derived]]:
    """wgmma is m64: each 64-row slab of the operand's MN gets its own descriptor start."""
    slabs = tuple(g.store.linear(*g.cell_of(0, j * g.mma_mn)) for j in range(g.mn // g.mma_mn))
    if len(slabs) == 1:
        return slabs, []
    return slabs, [
        Derived(
            "slab_offsets_bytes",
            ", ".join(map(str, slabs)),
            f"{g.MN} {g.mma_mn}·j starts at " + "; ".join(g.store.formula(*g.cell_of(0, j * g.mma_mn)) for j in range(1, len(slabs))),
            f"wgmma is m64: each 64-row slab of {g.MN} gets its own descriptor start",
            cite("wgmma"),
        )
    ]


def derive_operand(spec: TileSpec, name: str) -> OperandLayout:
    g = _stage_of(spec, name)
    D = _stage_fields(g)
    lbo_field, sbo_field = _stride_fields(g)
    D += [lbo_field, sbo_field]
    ring = spec.smem_plan().ring_offset(name)
    base_offset, bo_f, bo_reason = base_offset_rule(spec.loader, g.swz, ring)
    D.append(Derived("base_offset", base_offset, bo_f, bo_reason, cite("base_offset")))
    steps, step_fields = _k_steps(g, lbo_field.value, sbo_field.value, base_offset)
    slabs, slab_fields = _slab_fields(g)
    field = {d.name: d.value for d in D}
    op = spec.operand(name)
    return OperandLayout(
        name=name,
        major=op.major,
        swizzle=g.swz,
        order=op.order,
        arch=g.arch,
        dtype=spec.operand_dtype(name),  # B's own type when A and B differ
        container_bits=g.cbits,
        unpacked=spec.unpacked(name),
        mn=g.mn,
        bk=g.bk,
        mma_mn=g.mma_mn,
        store=g.store,
        loader=spec.loader,
        stage_bytes=field["stage_bytes"],
        alignment_bytes=field["alignment_bytes"],
        lbo_bytes=lbo_field.value,
        sbo_bytes=sbo_field.value,
        base_offset=base_offset,
        ring_offset_bytes=ring,
        layout_type=field["layout_type"],
        k_steps=steps,
        slab_offsets_bytes=slabs,
        derivation=tuple(D + step_fields + slab_fields),
    )
